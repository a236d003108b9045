"""`sparktui sessions`: recorded sessions newest first, with what each holds."""

from __future__ import annotations

import json
import time

from sparktui.commands.sessions import list_sessions, render
from sparktui.config import demo_config
from sparktui.engine import Engine
from sparktui.model import Finding, FindingRaised, LogBatch, LogLine, Note
from sparktui.session import Session, sessions_dir

from cli_helpers import sparktui_cli


def _finding(i: int) -> FindingRaised:
    return FindingRaised(Finding("cuda_oom", "error", f"CUDA out of memory {i}", source="spark1/vllm", line=i,
                                 evidence=("torch.OutOfMemoryError",), advice="lower it", node="spark1"), ts=1000.0 + i)


def _record(cluster: str, kind: str, findings: int, started: float) -> Session:
    s = Session.create(cluster, meta={"kind": kind, "cluster": cluster, "nodes": ["spark1", "spark2"]})
    meta = json.loads((s.path / "meta.json").read_text())
    meta["started"] = started  # sessions recorded at known times (the order under test)
    (s.path / "meta.json").write_text(json.dumps(meta))
    eng = Engine(demo_config(), session=s)
    eng.process([LogBatch("spark1", "vllm", tuple(LogLine("spark1", "vllm", f"line {i}", seq=i + 1)
                                                  for i in range(50))),
                 *[_finding(i) for i in range(findings)],
                 Note("checked the cable", author="ana", ts=started + 90)])
    s.close()
    return s


def test_newest_first_with_counts_kind_cluster_and_size():
    old = _record("alpha", "tui", 2, time.time() - 7200)
    new = _record("beta", "demo", 0, time.time() - 600)
    rows = list_sessions(sessions_dir())
    assert [r.name for r in rows] == [new.path.name, old.path.name]
    a = rows[1]
    assert (a.cluster, a.kind) == ("alpha", "tui")
    assert a.findings == 2 and rows[0].findings == 0
    on_disk = sum(f.stat().st_size for f in old.path.rglob("*") if f.is_file())
    assert a.size_bytes == on_disk and a.size_bytes > 0
    # the Note at started+90 is the last event, but the files were written now: duration covers both
    assert a.duration_s is not None and a.duration_s >= 7000


def test_unreadable_session_is_listed_not_fatal():
    good = _record("alpha", "tui", 1, time.time() - 100)
    bad = sessions_dir() / "20260101-000000-broken"
    bad.mkdir()
    (bad / "meta.json").write_text("[1, 2]")
    rows = list_sessions(sessions_dir())
    by = {r.name: r for r in rows}
    assert by[good.path.name].findings == 1
    assert by[bad.name].error and "expected an object" in by[bad.name].error
    assert by[bad.name].cluster == "broken" and by[bad.name].started is not None
    text = render(rows, sessions_dir())
    assert "unreadable" in text and f"{bad.name}: " in text


def test_cli_text_and_json():
    s = _record("gamma", "tui", 3, time.time() - 30)
    r = sparktui_cli("sessions")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["NAME", "STARTED", "CLUSTER", "KIND", "DURATION", "SIZE", "FINDINGS"]
    assert lines[1].startswith(s.path.name) and lines[1].split()[-1] == "3"
    j = sparktui_cli("sessions", "--json")
    data = json.loads(j.stdout)
    assert data["dir"] == str(sessions_dir())
    row = data["sessions"][0]
    assert row["name"] == s.path.name and row["findings"] == 3 and row["kind"] == "tui" and row["cluster"] == "gamma"


def test_cli_empty_and_config_session_dir(tmp_path):
    r = sparktui_cli("sessions")
    assert r.returncode == 0 and "no sessions recorded" in r.stdout
    # a config's session_dir is where its sessions are listed from
    cfg = tmp_path / "c.toml"
    sd = tmp_path / "elsewhere"
    cfg.write_text(f'session_dir = "{sd}"\n[[node]]\nname = "a"\nbackend = "local"\n')
    Session.create("delta", meta={"kind": "tui"}, root=sd).close()
    j = json.loads(sparktui_cli("sessions", "--json", "--config", str(cfg)).stdout)
    assert j["dir"] == str(sd) and [x["cluster"] for x in j["sessions"]] == ["delta"]
    bad = sparktui_cli("sessions", "--config", str(tmp_path / "nope.toml"))
    assert bad.returncode == 2 and "file not found" in bad.stderr
