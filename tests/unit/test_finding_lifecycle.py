"""A finding's lifecycle in the engine (issue 29 item 3): real event sequences through the engine's
own processors (the diagnoser raises from a log line, the lifecycle ends it), the state, the
session file and the report read back from it."""

from __future__ import annotations

from sparktui.actions.shared_timeline import parse_record, record_line
from sparktui.commands.report import build_report
from sparktui.config import demo_config
from sparktui.engine import Engine
from sparktui.model import (
    ActionEvent, ContainerChanged, ContainerInfo, ContainersSnapshot, ContainerState, LogBatch, LogLine, TimelineEntry,
)
from sparktui.session import Session
from sparktui.tui.boot import default_processors

OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 74.16 GiB. GPU 0 has a total capacity of 44.40 GiB of which 29.89 GiB is free."
T0 = 1_800_000_000.0


def _ctr(cid: str, name: str = "vllm_node", state=ContainerState.RUNNING, **kw) -> ContainerInfo:
    return ContainerInfo(id=cid * 8, name=name, image="vllm-node", state=state, **kw)


def _engine(tmp_path=None) -> Engine:
    session = Session.create("demo", root=tmp_path) if tmp_path is not None else None
    return Engine(demo_config(), processors=default_processors(), session=session)


def _oom(engine: Engine, node: str = "spark2", name: str = "vllm_node", seq: int = 7):
    """The container starts and logs a CUDA OOM: the diagnoser raises cuda_oom about it."""
    engine.process([LogBatch(node, name, (LogLine(node, name, "INFO starting", seq=seq - 1, ts=T0),
                                          LogLine(node, name, OOM, seq=seq, ts=T0 + 1)), ts=T0 + 1)])
    f = next(f for f in engine.state.findings if f.id == "cuda_oom")
    assert engine.ranked_findings()[0].id == "cuda_oom"  # active: ranked
    return f


def test_removed_container_resolves_its_findings_and_the_session_keeps_it(tmp_path):
    engine = _engine(tmp_path)
    other = _ctr("b", name="other")
    engine.process([ContainersSnapshot("spark2", (_ctr("a"), other), ts=T0)])
    f = _oom(engine)
    engine.process([ContainerChanged("spark2", _ctr("a", state=ContainerState.EXITED, exit_code=1), ts=T0 + 2)])
    assert engine.state.finding_status(f) is None  # exited is not gone: the failure is still the answer
    assert engine.ranked_findings()[0].id == "cuda_oom"

    engine.process([ContainerChanged("spark2", _ctr("b", name="other", state=ContainerState.REMOVED), ts=T0 + 3)])
    assert engine.state.finding_status(f) is None  # another container's removal ends nothing of it

    engine.process([ContainerChanged("spark2", _ctr("a", state=ContainerState.REMOVED), ts=T0 + 4)])
    st = engine.state.finding_status(f)
    assert st is not None and st.state == "resolved" and st.reason == "container removed" and st.ts == T0 + 4
    assert all(x.id != "cuda_oom" for x in engine.ranked_findings())  # out of the ranking ...
    assert f in engine.all_findings()  # ... still listed

    engine.session.close()
    report = build_report(engine.session.path)
    assert "CUDA out of memory (`cuda_oom`) — RESOLVED" in report or "— RESOLVED" in report
    assert "- state: resolved at" in report and "(container removed)" in report
    assert "1 resolved, 0 acknowledged" in report


def test_a_replacing_container_and_a_raise_after_resolution():
    engine = _engine()
    engine.process([ContainersSnapshot("spark2", (_ctr("a"),), ts=T0)])
    f = _oom(engine)
    # the same name, another id (a relaunch replaced it): the old run's finding ends
    engine.process([ContainersSnapshot("spark2", (_ctr("c"),), ts=T0 + 5)])
    assert engine.state.finding_status(f).reason == "container replaced"
    assert engine.ranked_findings() == []
    # the new run fails the same way at the same line: the finding is active again (the diagnoser
    # reads the new container's log afresh)
    engine.process([LogBatch("spark2", "vllm_node", (LogLine("spark2", "vllm_node", OOM, seq=7, ts=T0 + 9),), ts=T0 + 9)])
    assert engine.state.finding_status(f) is None and engine.ranked_findings()[0].id == "cuda_oom"


def test_launch_ready_resolves_the_previous_runs_findings_not_the_new_ones():
    engine = _engine()
    engine.process([ContainersSnapshot("spark2", (_ctr("a"),), ts=T0)])
    old = _oom(engine)
    # the launch's events carry the time they happen (after the finding was raised, at its own time)
    engine.process([
        ContainerChanged("spark2", _ctr("a", state=ContainerState.EXITED, exit_code=1), ts=T0 + 2),
        ActionEvent("launch", "preflight", "started"),
        ContainerChanged("spark2", _ctr("d"), ts=T0 + 20),  # a new container under the same name
    ])
    # a finding of the new run, raised during the launch
    engine.process([LogBatch("spark2", "vllm_node", (LogLine("spark2", "vllm_node", OOM, seq=40, ts=T0 + 21),), ts=T0 + 21)])
    new = next(f for f in engine.state.findings if f.id == "cuda_oom" and f.line == 40)
    assert engine.state.finding_status(new) is None
    engine.process([ActionEvent("launch", "ready", "ok")])
    assert engine.state.finding_status(old).state == "resolved"
    assert engine.state.finding_status(new) is None  # this run's: still active


def test_another_operators_launch_ready_read_from_the_timeline_resolves_too():
    engine = _engine()
    engine.process([ContainersSnapshot("spark2", (_ctr("a"),), ts=T0)])
    f = _oom(engine)
    engine.process([ContainerChanged("spark2", _ctr("a", state=ContainerState.EXITED, exit_code=1), ts=T0 + 2)])
    for step, status in (("preflight", "started"), ("ready", "ok")):
        engine.process([TimelineEntry(kind="action", operator="bob@h2", session="s2", action="launch", step=step,
                                      status=status)])
    st = engine.state.finding_status(f)
    assert st.state == "resolved" and st.reason == "relaunched, ready"


def test_a_launch_that_attaches_to_the_running_containers_resolves_none_of_theirs():
    engine = _engine()
    engine.process([ContainersSnapshot("spark2", (_ctr("a"),), ts=T0)])
    f = _oom(engine)
    engine.process([ActionEvent("launch", "preflight", "started"), ActionEvent("launch", "ready", "ok")])
    assert engine.state.finding_status(f) is None


def test_stop_resolves_the_nodes_live_findings():
    from sparktui.model import Finding, FindingRaised

    engine = _engine()
    half = Finding(id="half_cluster", severity="error", title="Half a cluster", source="cluster", node="", ts=T0)
    engine.process([FindingRaised(half)])
    assert engine.ranked_findings()[0].id == "half_cluster"
    engine.process([ActionEvent("stop", "stop", "started", node="spark1", ts=T0 + 5),
                    ActionEvent("stop", "stop", "ok", node="spark1", ts=T0 + 6)])
    assert engine.state.finding_status(half).reason == "stopped"
    assert engine.ranked_findings() == []


def test_doctor_check_that_passes_again_resolves_its_finding():
    from sparktui.actions.checks import fail, ok
    from sparktui.model import FindingRaised

    engine = _engine()
    bad = fail("ports", "port 8000 is taken on spark1 (python3 pid 77)", node="spark1", finding="port_in_use")
    other = fail("clocks", "clocks differ by 9 s", finding="clock_skew")
    # run 1, as doctor emits it: a row per check, then the findings the face raises at its end
    engine.process([ActionEvent("doctor", "ports", "fail", bad.title, node="spark1", key="ports", ts=T0),
                    ActionEvent("doctor", "clocks", "fail", other.title, ts=T0),
                    FindingRaised(bad.to_finding()), FindingRaised(other.to_finding())])
    f_bad, f_other = bad.to_finding(), other.to_finding()
    assert engine.state.finding_status(f_bad) is None
    # run 2: the port is free now; the clocks still differ
    engine.process([ActionEvent("doctor", "ports", "ok", "port 8000 free on spark1", node="spark1", key="ports", ts=T0 + 60),
                    ActionEvent("doctor", "clocks", "fail", other.title, ts=T0 + 60)])
    assert engine.state.finding_status(f_bad).reason == "check passes"
    assert engine.state.finding_status(f_other) is None


def test_an_acknowledgement_read_from_the_shared_timeline_applies(tmp_path):
    engine = _engine(tmp_path)
    engine.process([ContainersSnapshot("spark2", (_ctr("a"),), ts=T0)])
    f = _oom(engine)
    # what the other operator's face wrote on the head, as this face's reader turns it into an entry
    line = record_line(ts=T0 + 3, operator="bob@h2", session="s2", kind="ack", step=f.id, node=f.node, message=f.key)
    entry = parse_record(line)
    assert entry is not None and entry.kind == "ack"
    engine.process([entry])
    st = engine.state.finding_status(f)
    assert st is not None and st.state == "acknowledged" and st.operator == "bob@h2"
    assert engine.ranked_findings() == [] and engine.all_findings()[0] == f
    # an acknowledged finding still resolves when its condition ends; who acknowledged it is kept
    engine.process([ContainerChanged("spark2", _ctr("a", state=ContainerState.REMOVED), ts=T0 + 9)])
    st = engine.state.finding_status(f)
    assert st.state == "resolved" and st.operator == "bob@h2"

    engine.session.close()
    events = [e["type"] for e in engine.session.read_events()]
    assert "FindingAcknowledged" in events and "FindingResolved" in events  # recorded: a replay shows them


def test_report_marks_acknowledged_and_keeps_active_first(tmp_path):
    from sparktui.model import FindingAcknowledged

    engine = _engine(tmp_path)
    engine.process([ContainersSnapshot("spark2", (_ctr("a"),), ts=T0)])
    f = _oom(engine)
    engine.process([FindingAcknowledged(f.key, operator="ann@h1", ts=T0 + 4)])
    engine.session.close()
    report = build_report(engine.session.path)
    assert "— ACKNOWLEDGED" in report and "by ann@h1" in report
    assert "0 resolved, 1 acknowledged" in report
    assert f"finding {f.id}: {f.title} acknowledged by ann@h1" in report  # its timeline row


def test_replaying_the_recorded_events_gives_the_same_states(tmp_path):
    from sparktui.session_read import from_jsonable

    engine = _engine(tmp_path)
    engine.process([ContainersSnapshot("spark2", (_ctr("a"),), ts=T0)])
    f = _oom(engine)
    engine.process([ContainerChanged("spark2", _ctr("a", state=ContainerState.REMOVED), ts=T0 + 4)])
    engine.session.close()
    replay = Engine(demo_config(), [])  # replay's engine: no processors, the recorded events only
    replay.process([from_jsonable(e) for e in engine.session.read_events()])
    st = replay.state.finding_status(f)
    assert st is not None and st == engine.state.finding_status(f)
