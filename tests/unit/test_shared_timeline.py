"""The shared timeline on a real node (LocalNode: real sh, dd, tail, in a throwaway HOME): two
writers interleave whole lines, the reader sees only new lines and only other operators' records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sparktui.actions.base import Action, ActionContext, ActionResult
from sparktui.actions.shared_timeline import (
    ATOMIC_BYTES,
    TimelineSource,
    TimelineWriter,
    attach,
    parse_record,
    record_line,
)
from sparktui.config import NodeConfig, demo_config
from sparktui.engine import Engine
from sparktui.model import ActionEvent, Note, TimelineEntry
from sparktui.nodes.local import LocalNode
from sparktui.session import Session
from sparktui.state import ClusterState, reduce

CLUSTER = "vllm_node"


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    # the "head node" is this machine: its $HOME is where the cluster's directory goes
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("SPARKTUI_LOCK_ROOT", raising=False)
    (tmp_path / "home").mkdir()
    return tmp_path / "home"


def timeline_file(home: Path) -> Path:
    return home / ".local/state/sparktui/clusters" / CLUSTER / "timeline.jsonl"


def node() -> LocalNode:
    return LocalNode(NodeConfig("spark1", backend="local"))


async def settle(*writers: TimelineWriter) -> None:
    for w in writers:
        assert await w.flush(timeout=20), w.last_error


async def test_two_writers_interleave_whole_lines_in_one_file(home):
    a = TimelineWriter(node(), CLUSTER, session="s-a", operator="ana@laptop")
    b = TimelineWriter(node(), CLUSTER, session="s-b", operator="bo@desk")
    long = "x" * 900  # several records per batch: batches of different writers race on the file
    for i in range(60):
        a.action(ActionEvent("doctor", f"step{i}", "ok", f"{long} a{i}", node="spark1"))
        b.note(Note(f"{long} b{i}"))
    await settle(a, b)
    lines = timeline_file(home).read_bytes().split(b"\n")
    assert lines[-1] == b""  # ends on a whole line
    recs = [json.loads(x) for x in lines[:-1]]  # every line is one whole record: nothing torn
    assert len(recs) == 120
    mine = [r["message"].split()[-1] for r in recs if r["operator"] == "ana@laptop"]
    theirs = [r["message"].split()[-1] for r in recs if r["operator"] == "bo@desk"]
    assert mine == [f"a{i}" for i in range(60)] and theirs == [f"b{i}" for i in range(60)]  # each in order
    assert {r["kind"] for r in recs} == {"action", "note"}
    assert timeline_file(home).stat().st_mode & 0o077 == 0  # the operators' record: owner only
    assert a.written == 60 and b.written == 60


async def test_writer_keeps_only_step_outcomes_and_redacts(home):
    w = TimelineWriter(node(), CLUSTER, session="s-a", operator="ana@laptop")
    w.action(ActionEvent("launch", "weights", "progress", "40%"))  # chatter: not on the shared timeline
    w.action(ActionEvent("launch", "start", "started", "docker run -e HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz12\x1b[2J"))
    await settle(w)
    recs = [json.loads(x) for x in timeline_file(home).read_text().splitlines()]
    assert [(r["step"], r["status"]) for r in recs] == [("start", "started")]
    assert "hf_abcdefghijklmnopqrstuvwxyz12" not in recs[0]["message"]
    assert "\x1b" not in timeline_file(home).read_text()
    assert recs[0]["ts"].endswith("Z") and "T" in recs[0]["ts"]  # RFC 3339


def test_a_record_line_stays_under_one_atomic_write():
    line = record_line(ts=1.0, operator="a@b", session="s", kind="note", message="é" * 5000)
    assert len(line) < ATOMIC_BYTES and line.endswith(b"\n") and line.count(b"\n") == 1
    assert parse_record(line[:-1]).message.startswith("é")


def test_an_older_operators_failed_step_reads_as_fail():
    line = record_line(ts=1.0, operator="a@b", session="s", kind="action", action="stop", step="remove", status="failed")
    assert parse_record(line[:-1]).status == "fail"


async def test_reader_sees_only_new_lines_of_other_operators(home):
    me = TimelineWriter(node(), CLUSTER, session="s-me", operator="ana@laptop")
    other = TimelineWriter(node(), CLUSTER, session="s-other", operator="bo@desk")
    other.note(Note("before the watcher came"))
    await settle(other)
    src = TimelineSource(node(), CLUSTER, own=(me.operator, me.session))
    first = await src.poll()
    assert [e.message for e in first] == ["before the watcher came"]  # the recent past, once
    assert await src.poll() == []  # nothing new: nothing again
    me.note(Note("my own note"))
    other.action(ActionEvent("stop", "containers", "ok", "stopped 2", node="spark2"))
    other.note(Note("restarted both ranks", author="bo@desk"))
    await settle(me, other)
    new = await src.poll()
    assert [(e.kind, e.operator, e.message) for e in new] == [
        ("action", "bo@desk", "stopped 2"), ("note", "bo@desk", "restarted both ranks")]
    assert new[0].action == "stop" and new[0].step == "containers" and new[0].node == "spark2"
    assert all(isinstance(e, TimelineEntry) for e in new)
    assert await src.poll() == []


async def test_reader_leaves_a_half_written_line_and_skips_junk(home):
    f = timeline_file(home)
    f.parent.mkdir(parents=True)
    good = record_line(ts=2.0, operator="bo@desk", session="x", kind="note", message="whole")
    f.write_bytes(b"not json\n" + b'{"kind":"note"}\n' + good + good[:20])  # the last is being written
    src = TimelineSource(node(), CLUSTER, own=("ana@laptop", "s"))
    src.offset = 0
    assert [e.message for e in await src.poll()] == ["whole"]
    with f.open("ab") as fh:
        fh.write(good[20:])
    assert [e.message for e in await src.poll()] == ["whole"]  # the completed line, once
    f.write_bytes(good)  # recreated, shorter than what was read: read again from its start
    assert [e.message for e in await src.poll()] == ["whole"]


async def test_reader_first_read_starts_at_a_line_inside_the_backlog(home):
    f = timeline_file(home)
    f.parent.mkdir(parents=True)
    f.write_bytes(b"".join(record_line(ts=3.0 + i, operator="bo@desk", session="x", kind="note", message=f"n{i}")
                           for i in range(50)))
    src = TimelineSource(node(), CLUSTER, own=("ana@laptop", "s"), backlog=500)
    got = [e.message for e in await src.poll()]
    assert got and got[-1] == "n49" and "n0" not in got  # the tail only, from a whole line on
    assert got == [f"n{i}" for i in range(50 - len(got), 50)]


async def test_a_missing_timeline_is_empty_and_an_action_context_feeds_the_writer(home):
    config = demo_config()
    engine = Engine(config, [], session=Session.create(CLUSTER, root=home / "sessions"))
    head = node()
    writer = attach(engine, head, operator="ana@laptop")
    src = engine.sources[-1]
    assert isinstance(src, TimelineSource) and await src.poll() == []

    class Echo(Action):
        name = "echo"

        async def execute(self, ctx: ActionContext) -> ActionResult:
            async with ctx.step("say", node="spark1"):
                pass
            return ActionResult(self.name, True, "done")

    ctx = ActionContext(config, {"spark1": head})
    ctx.timeline = writer
    assert (await Echo().run(ctx)).ok
    await settle(writer)
    other = TimelineSource(node(), config.cluster.name, own=("bo@desk", "s-b"))
    got = await other.poll()
    assert [(e.action, e.step, e.status, e.node, e.session) for e in got] == [
        ("echo", "say", "started", "spark1", engine.session.path.name),
        ("echo", "say", "ok", "spark1", engine.session.path.name)]
    assert await src.poll() == []  # the writer's own records are not "others'"
    engine.session.close()


def test_state_keeps_others_entries_bounded():
    st = ClusterState.initial(["spark1"])
    for i in range(600):
        st = reduce(st, TimelineEntry(kind="note", operator="bo@desk", session="x", message=str(i), ts=float(i)))
    assert len(st.timeline) == 500 and st.timeline[-1].message == "599"

