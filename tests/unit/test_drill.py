"""scripts/drill (issue 29 item 4) without a bed: the table, the measuring of recorded runs (the
engine's ranked-first history, the CLIs' answers), the budgets and the CLI's --list / --help / errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

from drill_lib import table as drills  # noqa: E402
from drill_lib.measure import (DrillResult, Outcome, RankRecorder, Sample, bench_rows, budgets,  # noqa: E402
                               evaluate, healthy_plan, judge_answer, judge_investigate)
from drill_lib.measure import table as render  # noqa: E402

DEAD = ("worker_died", "half_cluster")


def s(t, id=None, severity="error", key=None):
    return Sample(t, id, severity if id else "", f"{id} title", key or (f"k-{id}-{t}" if id else ""))


# ------------------------------------------------------------------ the table

def test_the_table_has_every_drill_of_the_issue_with_known_faults_and_channels():
    from drill_lib.run import FAULTS

    names = [d.name for d in drills.DRILLS]
    for need in ("healthy-10min", "worker-killed", "worker-killed-under-load", "head-killed", "wrong-gloo-interface",
                 "port-taken", "kv-too-big", "unknown-architecture", "stale-container", "node-unreachable",
                 "dockerd-restart", "disk-full"):
        assert need in names
    assert len(set(names)) == len(names)
    for d in drills.DRILLS:
        assert d.fault in FAULTS, d.name
        assert d.must and set(d.must) <= set(drills.CHANNELS), d.name
        assert d.budget_s <= drills.BUDGET_S
        assert ("investigate" in d.must) <= (d.investigate is not None), d.name


def test_drill_expected_ids_are_real_finding_ids():
    from sparktui.diagnosis.catalogue import default_catalogue

    ids = set(default_catalogue().entries) | {"image_push_failed"}  # an action's own id (actions/push.py)
    for d in drills.DRILLS:
        assert set(d.expected) <= ids, (d.name, set(d.expected) - ids)


def test_select_all_and_names_keep_the_table_order_and_refuse_unknown_names():
    assert drills.select([]) == list(drills.DRILLS) == drills.select(["all"])
    assert [d.name for d in drills.select(["disk-full", "worker-killed"])] == ["worker-killed", "disk-full"]
    with pytest.raises(KeyError, match="no drill 'nope'"):
        drills.select(["nope"])


# ------------------------------------------------------------------ the engine's ranked-first history

def test_the_right_finding_first_after_the_fault_is_timed_from_the_fault():
    o = evaluate([s(0), s(5, "torch_arch_warning", "warning"), s(12.5, "half_cluster")], 10.0, DEAD, 5.0)
    assert o.ok and o.got == "half_cluster" and o.seconds == pytest.approx(2.5) and o.false_alarms == []


def test_a_hang_ranked_first_before_the_death_is_a_false_alarm():
    o = evaluate([s(0), s(11, "suspected_hang", "warning"), s(13, "worker_died")], 10.0, DEAD, 5.0)
    assert not o.ok and o.got == "worker_died" and o.false_alarms == ["suspected_hang"]
    assert "suspected_hang" in o.why


def test_a_cry_wolf_during_start_up_counts_against_a_later_fault():
    o = evaluate([s(1, "suspected_hang", "warning"), s(3), s(21, "worker_died")], 20.0, DEAD, 5.0)
    assert not o.ok and o.false_alarms == ["suspected_hang"]


def test_too_late_or_never_says_why_in_one_line():
    late = evaluate([s(0), s(17, "half_cluster")], 10.0, DEAD, 5.0)
    assert not late.ok and late.seconds == pytest.approx(7) and "budget 5 s" in late.why
    never = evaluate([s(0), s(12, "engine_dead")], 10.0, DEAD, 5.0)
    assert not never.ok and never.got == "engine_dead" and "never ranked worker_died/half_cluster" in never.why
    assert "\n" not in never.why and never.false_alarms == ["engine_dead"]


def test_healthy_wants_no_alarm_ranked_first_and_no_error_raised_at_all():
    assert evaluate([s(0), s(3, "torch_arch_warning", "warning"), s(9)], 0, (), 60).ok
    hang = evaluate([s(0), s(40, "suspected_hang", "warning")], 0, (), 60)
    assert not hang.ok and hang.false_alarms == ["suspected_hang"] and "cried wolf" in hang.why
    # an error raised but never ranked first (something worse was) still fails a healthy drill
    buried = evaluate([s(0)], 0, (), 60, errors=[s(30, "engine_dead", key="e1")])
    assert not buried.ok and buried.false_alarms == ["engine_dead"]


def test_the_recorder_on_a_real_engine_records_the_cluster_watch_ranked_first():
    from sparktui.config import demo_config
    from sparktui.engine import Engine
    from sparktui.model import ContainerChanged, ContainerInfo, ContainersSnapshot, ContainerState
    from sparktui.tui.boot import default_processors

    def info(node, rank, state=ContainerState.RUNNING, code=None):
        labels = {"sparktui.cluster": "tiny_vllm", "sparktui.node": node, "sparktui.rank": str(rank),
                  "sparktui.launch": "L1", "sparktui.nnodes": "2"}
        return ContainerInfo(id=f"{node}L1" * 4, name="tiny_vllm", image="vllm-cpu", state=state, exit_code=code,
                             status=f"Exited ({code})" if code is not None else "Up 1 minute", started_at=100.0,
                             labels=tuple(sorted(labels.items())))

    from dataclasses import replace

    clock = iter([1.0, 2.0, 3.0, 4.0])
    cfg = demo_config()  # the config names the watched cluster
    eng = Engine(replace(cfg, cluster=replace(cfg.cluster, name="tiny_vllm")), processors=default_processors())
    rec = RankRecorder(eng, clock=lambda: next(clock))
    eng.process([ContainersSnapshot("spark1", (info("spark1", 0),)), ContainersSnapshot("spark2", (info("spark2", 1),))])
    eng.process([ContainerChanged("spark2", info("spark2", 1, ContainerState.EXITED, 137))])
    assert [x.id for x in rec.samples] == [None, rec.samples[-1].id] and rec.samples[-1].id in DEAD
    assert {e.id for e in rec.errors} >= {"half_cluster", "worker_died"}
    o = evaluate(rec.samples, 1.5, DEAD, 5.0, rec.errors)
    assert o.ok and o.seconds == pytest.approx(0.5)


# ------------------------------------------------------------------ the CLIs' answers

def test_status_launch_and_push_answers():
    fs = [{"id": "stale_container", "severity": "error"}, {"id": "half_cluster", "severity": "error"}]
    assert judge_answer("action", fs, ("stale_container",), 4.0, 60).ok
    wrong = judge_answer("status", fs, DEAD, 4.0, 60)
    assert not wrong.ok and wrong.got == "stale_container" and "expected worker_died/half_cluster" in wrong.why
    assert not judge_answer("status", fs[:1], ("stale_container",), 75.0, 60).ok  # over budget
    assert judge_answer("status", [{"id": "torch_arch_warning", "severity": "warning"}], (), None, 60).ok
    assert not judge_answer("status", fs, (), None, 60).ok


def test_investigate_healthy_wants_exit_0_and_a_healthy_verdict():
    assert judge_investigate(0, {"state": "healthy", "rule": "healthy_serving", "problem": False}, "healthy", (), None).ok
    stalled = judge_investigate(1, {"state": "hung", "rule": "unknown", "problem": True,
                                    "title": "Stalled, cause not determined"}, "healthy", (), None)
    assert not stalled.ok and "investigate exit 1" in stalled.why and "Stalled" in stalled.why
    dead = judge_investigate(1, {"state": "dead", "rule": "R1", "problem": True, "finding_ids": ["worker_died"]},
                             "problem", DEAD, 9.0)
    assert dead.ok and dead.got == "worker_died"


# ------------------------------------------------------------------ the report and the budgets

def _result(name, expected, seconds, ok=True, alarms=()):
    o = Outcome("engine", got=expected[0] if expected else None, seconds=seconds, ok=ok, false_alarms=list(alarms),
                why="" if ok else "ranked suspected_hang first")
    return DrillResult(name, expected, {"engine": o}, must=("engine",))


def test_budgets_median_max_and_healthy_false_alarms():
    rs = [_result("a", DEAD, 2.0), _result("b", DEAD, 40.0), _result("c", DEAD, 10.0), _result("h", (), None)]
    b = budgets(rs, 30, 60)
    assert b["ok"] and b["median_s"] == 10.0 and b["max_s"] == 40.0 and b["right"] == 4
    assert not budgets(rs + [_result("d", DEAD, 61.0)], 30, 60)["ok"]
    crying = _result("h2", (), None, ok=False, alarms=["suspected_hang"])
    assert budgets(rs + [crying], 30, 60)["healthy_false_alarms"] == 1


def test_the_table_and_bench_rows_say_why_a_drill_failed_in_one_line():
    rs = [_result("worker-killed", DEAD, 2.0), _result("head-killed", DEAD, 3.0, ok=False, alarms=["suspected_hang"]),
          DrillResult("disk-full", ("image_push_failed",), must=("action",), error="testbed up failed: no dockerd")]
    text = render(rs)
    lines = text.splitlines()
    assert lines[0].split()[:2] == ["drill", "expected"] and len(lines) == 4
    assert lines[2].startswith("head-killed") and "suspected_hang" in lines[2] and "FAIL: engine: ranked" in lines[2]
    assert lines[3].endswith("FAIL: testbed up failed: no dockerd")
    rows = bench_rows(rs, 30, 60)
    assert all(set(r) >= {"what", "value", "unit", "budget", "ok"} for r in rows)
    assert [r["ok"] for r in rows[:3]] == [True, False, False]
    assert rows[3]["what"] == "drills right" and rows[3]["value"] == 1
    assert json.loads(json.dumps([r.to_json() for r in rs]))[2]["why"] == "testbed up failed: no dockerd"


def test_the_healthy_plan_mixes_load_prompts_and_idle_for_the_minutes_asked():
    for minutes in (0.75, 3, 10):
        plan = healthy_plan(minutes)
        timed = sum(x for k, x in plan if k != "prompt")
        assert timed == pytest.approx(minutes * 60, abs=1)
        kinds = [k for k, _ in plan]
        assert {"load", "prompt", "idle"} <= set(kinds) and kinds[-1] == "idle"
        # every idle stretch of a full cycle is far past the old 10 s silence timer
        assert max(x for k, x in plan if k == "idle") > 20


# ------------------------------------------------------------------ the CLI without a bed

def _drill(*args):
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "drill"), *args], capture_output=True, text=True,
                          timeout=60)


def test_list_help_and_a_wrong_name_need_no_bed():
    r = _drill("--list")
    assert r.returncode == 0 and len(r.stdout.splitlines()) == len(drills.DRILLS)
    assert r.stdout.splitlines()[1].startswith("worker-killed") and "worker_died/half_cluster" in r.stdout
    listed = json.loads(_drill("--list", "--json").stdout)
    assert [d["name"] for d in listed] == [d.name for d in drills.DRILLS]
    h = _drill("--help")
    assert h.returncode == 0 and "--minutes" in h.stdout and "sparktui-testbed" in h.stdout
    bad = _drill("nope")
    assert bad.returncode == 2 and bad.stderr.startswith("scripts/drill: no drill 'nope'") and bad.stderr.count("\n") == 1


def test_the_ci_bed_and_non_loopback_networks_are_refused():
    from drill_lib.run import DrillBed

    with pytest.raises(ValueError, match="CI's bed"):
        DrillBed(Path("/tmp/sparktui-testbed"), "127.78.1", keep=True)
    with pytest.raises(ValueError, match="loopback"):
        DrillBed(Path("/tmp/drill-x"), "10.0.0", keep=True)
    assert DrillBed(Path("/tmp/drill-x"), "127.78.1", keep=False).env["SPARKTUI_TESTBED_NET"] == "127.78.1"


def test_a_drill_config_is_the_beds_cut_to_two_nodes_with_its_faults_env(tmp_path):
    """The bed's cluster.toml in its real shape (scripts/testbed + the real-vllm scenario's keys)."""
    from drill_lib.run import DrillBed
    from sparktui.actions.cluster_plan import pinned_env, plan_cluster
    from sparktui.config import load_config

    nodes = "".join(f'''
[[node]]
name = "spark{i}"
backend = "ssh"
host = "127.78.9.{i + 1}"
port = 22
user = "root"
fabric_ip = "127.78.9.{i + 1}"
fabric_if = "lo"
role = "{'head' if i == 1 else 'worker'}"
''' for i in (1, 2, 3))
    (tmp_path / "cluster.toml").write_text(
        '[cluster]\nname = "tiny_vllm"\nimage = "vllm-cpu"\ntensor_parallel = 3\nexecutor = "mp"\n'
        '[cluster.env]\nVLLM_CPU_KVCACHE_SPACE = "1"\n[cluster.add_architectures]\nNewArch = ["m", "C"]\n' + nodes)
    bed = DrillBed(tmp_path, "127.78.9", keep=True)
    cfg = bed.write_config(tmp_path / "d.toml", "drill_x", {"spark2": {"GLOO_SOCKET_IFNAME": "ifb0"}},
                           serve_port=18000, env={"EXTRA": "1"})
    c = load_config(cfg)
    assert [n.name for n in c.nodes] == ["spark1", "spark2"] and c.cluster.tensor_parallel == 2
    assert c.cluster.name == "drill_x" and c.cluster.serve_port == 18000
    assert dict(c.cluster.env) == {"VLLM_CPU_KVCACHE_SPACE": "1", "EXTRA": "1"}
    spark2 = c.nodes[1]
    assert dict(spark2.env) == {"GLOO_SOCKET_IFNAME": "ifb0"} and dict(c.nodes[0].env) == {}
    # the bed pins every rank to lo; the node's own env wins in the launch plan
    assert pinned_env(c, spark2, "127.78.9.3", "127.78.9.2")["GLOO_SOCKET_IFNAME"] == "lo"
    plans = plan_cluster(c).nodes
    assert [dict(p.env)["GLOO_SOCKET_IFNAME"] for p in plans] == ["lo", "ifb0"]


def test_the_wrong_interface_is_one_that_exists_without_an_ipv4_address():
    from drill_lib.run import pick_unaddressed

    links = ("1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536\n2: ifb0: <BROADCAST,NOARP> mtu 1500\n"
             "3: eth0@if7: <BROADCAST,UP> mtu 1500\n")
    addrs = "1: lo    inet 127.0.0.1/8 scope host lo\n3: eth0    inet 10.1.2.3/24 brd 10.1.2.255 scope global eth0\n"
    assert pick_unaddressed(links, addrs) == "ifb0"
    assert pick_unaddressed(links.replace("ifb0", "lo"), addrs) is None


def test_bench_runs_the_drills_only_when_named():
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_drill", ROOT / "scripts" / "bench_drill.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    rows = mod.main([])  # `scripts/bench` with no names runs every bench: not an hour of beds
    assert len(rows) == 1 and "skipped" in rows[0]["what"] and rows[0]["ok"] is None


def test_the_table_shows_the_engines_false_alarms_when_a_cli_gives_the_verdict():
    act = Outcome("action", got="kv_cache_oom", seconds=31.0, ok=True)
    eng = Outcome("engine", got="kv_cache_oom", seconds=33.0, ok=True, false_alarms=["engine_dead"])
    r = DrillResult("kv-too-big", ("kv_cache_oom",), {"action": act, "engine": eng}, must=("action",))
    row = render([r]).splitlines()[1].split()
    assert row[:5] == ["kv-too-big", "kv_cache_oom", "kv_cache_oom", "31.0", "engine_dead"] and row[5] == "ok"
