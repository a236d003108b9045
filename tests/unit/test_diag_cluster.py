"""Multi-node failures: a lost peer rank (real vLLM mp logs), the state findings a launcher raises
(half cluster, stale container) and SGLang's cross-node init hang (SGLANG_HOST_IP unset)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from sparktui.cli import main
from sparktui.commands.diagnose import analyse
from sparktui.config import demo_config
from sparktui.diagnosis import Diagnoser
from sparktui.diagnosis.catalogue import CatalogueError, default_catalogue, entry, finding, parse_catalogue
from sparktui.diagnosis.stall import StallDetector
from sparktui.engine import Engine
from sparktui.model import Finding, FindingRaised, LogBatch, LogLine

FIX = Path(__file__).resolve().parents[1] / "fixtures"
HEAD = FIX / "vllm-cpu" / "mp_worker_killed_head.log"
RANK1 = FIX / "vllm-cpu" / "mp_worker_killed_rank1.log"
SG = FIX / "sglang-2node"


def ids(dg, severity: str | None = None) -> list[str]:
    return [f.id for f in dg.findings if severity is None or f.severity == severity]


# --------------------------------------------------------------------------- a peer rank was killed


def test_recordings_are_docker_logs_without_the_timestamp_and_without_host_paths():
    for p in (HEAD, RANK1):
        text = p.read_text(encoding="utf-8")
        assert not re.search(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z ", text, re.M), p
        # paths inside the container (site-packages, the model, the stdlib), the pytorch CI build
        # path gloo's message carries, the API server's routes; nothing of the recording machine
        paths = set(re.findall(r"(?<![\w.:/-])(/[\w.-]+(?:/[\w.-]+)+)", text))
        allowed = ("/opt/vllm/site/", "/models/tiny", "/usr/lib/python3", "/__w/pytorch/", "/v1/", "/docs/",
                   "/inference/v1")
        assert {x for x in paths if not x.startswith(allowed)} == set(), p


def test_head_of_a_cluster_whose_rank_was_killed_names_the_lost_peer_before_the_dead_engine():
    dg = analyse([str(HEAD)])
    errors = ids(dg, "error")
    assert errors == ["worker_died", "engine_dead"]
    lost = dg.findings[0]
    assert lost.id == "worker_died" and lost.line == 178
    assert any("Connection closed by peer" in e for e in lost.evidence)
    assert "sparktui stop" in lost.advice and "sparktui status" in lost.advice
    # the API server stopping itself after the engine died is not a requested stop of the engine
    assert next(f for f in dg.findings if f.id == "engine_dead").severity == "error"
    assert "unhandled_exception" not in ids(dg)


def test_cli_json_on_the_head_log(capsys):
    rc = main(["diagnose", str(HEAD), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 1
    assert [f["id"] for f in doc["findings"]] == ["worker_died", "engine_dead", "shutdown_requested"]
    assert [f["severity"] for f in doc["findings"]] == ["error", "error", "info"]


def test_headless_survivor_reports_only_what_it_printed():
    dg = analyse([str(RANK1)])
    assert ids(dg, "error") == ["worker_died"]
    assert not {"engine_dead", "suspected_hang", "nccl_init_hang", "unhandled_exception"} & set(ids(dg))


def test_head_and_survivor_together_root_cause_first():
    dg = analyse([str(HEAD), str(RANK1)])
    got = ids(dg, "error")
    assert got[0] == "worker_died" and "engine_dead" in got
    assert got.index("engine_dead") > max(i for i, x in enumerate(got) if x == "worker_died")


@pytest.mark.parametrize("line", [
    "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [100.106.32.178]:22676",
    "[rank1]: [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [172.19.2.2]:33177",
    "RuntimeError: [/var/tmp/portage/sci-libs/gloo-2023.07.15-r1/work/gloo-c6f3a5bcf568dafc9a8ae482e8cc900633dd6db1/gloo/transport/tcp/pair.cc:525] Read error [127.0.0.1]:55523: Connection reset by peer",
])
def test_gloo_peer_loss_lines_are_worker_died(line):
    assert default_catalogue().match(line).id == "worker_died"


def test_nccl_and_ray_peer_loss_keep_their_own_ids():
    cat = default_catalogue()
    assert cat.match("[0] misc/socket.cc:71 NCCL WARN socketProgress: Connection closed by remote peer 10.10.1.3<36138>").id \
        == "nccl_network_error"
    assert cat.match("RuntimeError: RayWorkerProc rank=[2] died unexpectedly").id == "ray_worker_missing"


def test_peer_closing_after_a_requested_stop_is_info():
    dg = Diagnoser()
    dg.feed_lines("x", [
        "(APIServer pid=8629) INFO 11-30 23:06:16 [launcher.py:254] [shutdown] API server: shutdown triggered",
        "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [10.0.0.2]:22676",
    ])
    dg.finish()
    died = next(f for f in dg.findings if f.id == "worker_died")
    assert died.severity == "info"


def test_a_lost_peer_explains_the_engine_death_and_timeouts():
    cat = default_catalogue()
    for fid in ("engine_dead", "rpc_timeout", "nccl_watchdog_timeout"):
        assert "worker_died" in cat[fid].caused_by, fid
    assert "half_cluster" in cat["worker_died"].caused_by and "host_oom_killed" in cat["worker_died"].caused_by


# --------------------------------------------------------------------------- state findings (data only)


@pytest.mark.parametrize("fid, needles", [
    ("half_cluster", ("sparktui stop", "sparktui launch", "last lines")),
    ("stale_container", ("sparktui launch --replace", "sparktui stop")),
])
def test_state_findings_are_catalogue_data(fid, needles):
    e = entry(fid)
    assert e.raised_by == "state" and e.derived and e.severity == "error"
    assert not e.patterns and not e.prefilter and not e.examples
    assert len(e.explanation) > 60 and all(n in e.advice for n in needles)
    assert all(fid not in [x.id for x in ents] for ents in default_catalogue().by_literal.values())


def test_catalogue_builds_the_finding_code_raises_from_state():
    f = finding("half_cluster", source="spark2/vllm", node="spark2", evidence=("spark3: vllm exited (137)",))
    assert isinstance(f, Finding)
    e = entry("half_cluster")
    assert (f.id, f.severity, f.title, f.advice, f.explanation) == (e.id, e.severity, e.title, e.advice, e.explanation)
    assert f.node == "spark2" and f.evidence == ("spark3: vllm exited (137)",)
    titled = default_catalogue().finding("stale_container", title="Container vllm exists on spark2 (image old)")
    assert titled.title.startswith("Container vllm") and titled.advice == entry("stale_container").advice
    with pytest.raises(KeyError, match="no_such_id"):
        entry("no_such_id")


def test_the_diagnoser_never_raises_state_findings_from_lines():
    lines = []
    for fid in ("half_cluster", "stale_container"):
        e = entry(fid)
        lines += [e.title, e.explanation, e.advice, fid]
    dg = Diagnoser()
    dg.feed_lines("x", lines, "n")
    dg.finish()
    assert not {"half_cluster", "stale_container"} & set(ids(dg))


BASE = '''
[[finding]]
id = "a_thing"
severity = "error"
title = "A"
explanation = "because"
advice = "do this"
patterns = ['boom']
prefilter = ["boom"]
'''


def test_loader_accepts_state_entries_without_patterns():
    cat = parse_catalogue(BASE + '[[finding]]\nid = "s"\nseverity = "warning"\ntitle = "S"\nexplanation = "x"\n'
                                 'advice = "y"\nraised_by = "state"\ncaused_by = ["a_thing"]\n')
    assert cat["s"].raised_by == "state" and cat["s"].derived and cat.match("boom").id == "a_thing"
    assert cat["a_thing"].raised_by == "line" and not cat["a_thing"].derived


@pytest.mark.parametrize("extra, needle", [
    ('raised_by = "state"\npatterns = [\'zap\']\nprefilter = ["zap"]\n', "no patterns"),
    ('raised_by = "sometimes"\n', "raised_by"),
    ('raised_by = "line"\nderived = true\n', "contradicts"),
    ('raised_by = "line"\n', "needs patterns"),
])
def test_loader_refuses_inconsistent_raised_by(extra, needle):
    with pytest.raises(CatalogueError, match=needle):
        parse_catalogue(BASE + '[[finding]]\nid = "s"\nseverity = "error"\ntitle = "S"\nexplanation = "x"\n'
                               'advice = "y"\n' + extra, "cat.toml")


# --------------------------------------------------------------------------- SGLang multi-node init hang


def lines_of(name: str) -> list[str]:
    return (SG / name).read_text(encoding="utf-8").splitlines()


def test_sglang_ranks_stopping_after_custom_allreduce_name_sglang_host_ip():
    dg = analyse([str(SG / "hang.node0.log"), str(SG / "hang.node1.log")])
    got = ids(dg)
    assert got[:2] == ["sglang_host_ip_missing", "sglang_host_ip_missing"]
    assert set(got) == {"sglang_host_ip_missing", "suspected_hang"}
    f = dg.findings[0]
    assert f.line == 4 and "spans across nodes" in f.evidence[0]
    assert "SGLANG_HOST_IP" in f.advice and "GLOO_SOCKET_IFNAME" in f.advice and "TP_SOCKET_IFNAME" in f.advice
    assert "MessageQueue" in f.explanation


def test_sglang_init_that_ends_is_healthy():
    dg = analyse([str(SG / "healthy.node0.log")])
    assert dg.findings == []
    assert {"weights_loaded", "kv_cache"} <= {m.id for m in dg.milestones()}


@pytest.mark.parametrize("after, raised", [
    ([], True),
    (["", "   "], True),  # blank lines do not count as progress
    (["[2026-03-03 11:06:08 TP0] Init torch distributed ends. mem usage=0.35 GB"], False),
    (["[2026-03-03 11:06:08 TP0] Load weight begin. avail mem=22.84 GB"], False),  # later progress
    (["[2026-03-03 11:06:08 TP0] something else the process printed"], False),  # not right after it
])
def test_sglang_cause_only_when_the_log_stops_right_after_the_line(after, raised):
    dg = Diagnoser()
    dg.feed_lines("node0", lines_of("hang.node0.log") + after)
    dg.finish()
    assert ("sglang_host_ip_missing" in ids(dg)) is raised


def test_story_spelling_and_phase_are_required():
    story = ["[2026-02-27 17:00:00 TP0] Init torch distributed begin.",
             "[2026-02-27 17:00:01 TP0] CustomAllreduce is disabled because this process group spans across nodes."]
    dg = Diagnoser()
    dg.feed_lines("s", story)
    dg.finish()
    assert ids(dg)[0] == "sglang_host_ip_missing"
    # vLLM prints the same warning; outside SGLang's distributed init it names nothing
    vllm = ["(Worker_TP0 pid=96) WARNING 03-27 10:01:00 [custom_all_reduce.py:92] Custom allreduce is disabled "
            "because this process group spans across nodes."]
    dg = Diagnoser()
    dg.feed_lines("v", vllm)
    dg.finish()
    assert "sglang_host_ip_missing" not in ids(dg)


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def _batch(node: str, lines: list[str]) -> LogBatch:
    return LogBatch(node, "sglang", tuple(LogLine(node, "sglang", t, seq=i + 1) for i, t in enumerate(lines)))


@pytest.mark.parametrize("healthy", [False, True])
def test_live_stall_alarm_names_the_sglang_cause(healthy):
    clock = Clock()
    det = StallDetector(clock=clock)
    eng = Engine(demo_config(), processors=[Diagnoser(), det])
    node0, node1 = ("healthy.node0.log", "healthy.node0.log") if healthy else ("hang.node0.log", "hang.node1.log")
    eng.process([_batch("spark1", lines_of(node0)), _batch("spark2", lines_of(node1))])
    assert "sglang_host_ip_missing" not in [f.id for f in eng.state.findings]  # nothing before the alarm
    clock.t += 60
    out = eng.process(list(det.tick(clock.t)))
    raised = [e.finding for e in out if isinstance(e, FindingRaised)]
    causes = [f for f in raised if f.id == "sglang_host_ip_missing"]
    if healthy:
        assert causes == []
    else:
        assert {f.node for f in causes} == {"spark1", "spark2"}
        assert all(f.source.endswith("/sglang") and f.line == 4 for f in causes)
        # a second alarm does not repeat them
        clock.t += 60
        det.feed(LogLine("spark1", "sglang", "progress"))
        clock.t += 60
        again = eng.process(list(det.tick(clock.t)))
        assert not [e for e in again if isinstance(e, FindingRaised) and e.finding.id == "sglang_host_ip_missing"]
