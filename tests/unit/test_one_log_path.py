"""One log path (issue 28, item 1): a recorded real launch read once, by one engine, and every face
tells the same story.  The launch action reads its containers through ``ctx.watch`` (no log pump,
no Diagnoser of its own); the findings strip is ``engine.ranked_findings()``; the session records
every finding; ``status --json`` analyses the head's whole log with the same processors.  They name
the same findings on the same lines.

The recording: tests/fixtures/vllm-cpu/mp_worker_killed_*.log, a real vLLM multi-node run on the
test bed whose rank 2 was killed while serving (the head and the rank-1 survivor fail, the head's
engine dies).  Its head log is line for line the head container's; rank 1's is the worker's.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
from test_launch_plan import cfg

from sparktui.actions.base import ActionContext
from sparktui.actions.cluster_plan import plan_cluster
from sparktui.actions.launch import LaunchAction
from sparktui.actions.tap import Tap
from sparktui.commands.status import cluster_doc
from sparktui.diagnosis.processors import FACTORY, default_processors
from sparktui.engine import Engine
from sparktui.model import ActionEvent, ContainerChanged, ContainerInfo, LogBatch, LogEnded, LogLine
from sparktui.probes.cluster import ClusterContainer, ClusterView, assess, head_engine_dead, log_errors
from sparktui.session import Session

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "vllm-cpu"


def _lines(name: str) -> list[str]:
    return (FIX / name).read_text(encoding="utf-8").split("\n")[:-1]


class Recorded:
    """The recording as the engine's Docker follower emits it: the container started, its lines in
    batches numbered from 1, the worker's log ending with its exit."""

    node_name = "recording"

    def __init__(self, plan, logs: dict[str, list[str]]) -> None:
        self.plan, self.logs = plan, logs

    async def run(self, emit) -> None:
        for np in self.plan.nodes:
            emit(ContainerChanged(np.node, ContainerInfo(f"id-{np.node}", np.container, np.image)))
        for np in self.plan.nodes:
            lines = self.logs[np.node]
            for i in range(0, len(lines), 64):
                emit(LogBatch(np.node, np.container, tuple(LogLine(np.node, np.container, t, seq=i + k + 1)
                                                           for k, t in enumerate(lines[i:i + 64]))))
                await asyncio.sleep(0)  # several batches, as a follower sends them
        emit(LogEnded("spark2", self.plan.name, "exited", 1, "id-spark2"))
        await asyncio.Event().wait()


def _marks(fs) -> set[tuple[str, str, int | None]]:
    return {(f.id, f.source, f.line) for f in fs}


@pytest.mark.parametrize("offload", [False, True], ids=["cli-engine", "tui-engine-with-its-worker"])
async def test_launch_strip_status_and_session_name_the_same_findings_on_the_same_lines(tmp_path, offload):
    config = cfg('executor = "mp"')
    plan = plan_cluster(config, launch_id="recorded")
    logs = {"spark1": _lines("mp_worker_killed_head.log"), "spark2": _lines("mp_worker_killed_rank1.log")}
    session = Session.create(config.cluster.name, root=tmp_path)
    # the CLI's small engine analyses in its own process; the TUI's in a worker process (the end of
    # input goes there and its answer comes back)
    engine = Engine(config, [Recorded(plan, logs)], processors=[] if offload else default_processors(),
                    session=session, processor_factory=FACTORY, offload=offload)
    said: list[ActionEvent] = []
    ctx = ActionContext(config, {}, emit=said.append)
    ctx.action_name = "launch"
    ctx.tap = Tap(engine)
    watch = ctx.watch([(np.node, np.container) for np in plan.nodes])  # before anything is emitted
    await engine.start()
    try:
        result = await LaunchAction(timeout=60)._watch(ctx, plan, [], time.monotonic(), attached=False, watch=watch)
    finally:
        watch.close()
        await engine.stop()

    head = f"spark1/{plan.name}"
    # the launch: the killed peer is the root cause on the head's line 178, the dead engine follows
    assert result.data["outcome"] == "exited"
    launch = [f for f in result.findings if f.source.startswith(("spark1/", "spark2/"))]
    assert [(f.id, f.source, f.line) for f in launch] == [("worker_died", head, 178), ("engine_dead", head, 249)]
    assert result.summary.startswith("worker_died:")
    # what the launch screen shows: a finding row per id and node, milestones from the same events
    assert {(e.key, e.node) for e in said if e.step == "finding"} >= {("worker_died", "spark1"),
                                                                      ("engine_dead", "spark1")}
    for np in plan.nodes:
        reached = {m.id for m in engine.state.nodes[np.node].milestones.values()}
        assert set(result.data["nodes"][np.node]["milestones"]) == reached, np.node

    # the findings strip: the same findings, same lines
    assert _marks(launch) <= _marks(engine.ranked_findings())

    # the session: every finding recorded as raised, same lines (the session file's line numbers)
    events = [json.loads(x) for x in (session.path / "events.jsonl").read_text().splitlines()]
    recorded = {(d["finding"]["id"], d["finding"]["source"], d["finding"]["line"])
                for d in events if d["type"] == "FindingRaised"}
    assert _marks(launch) <= recorded
    answers = [d for d in events if d["type"] == "InputEnded" and d["done"]]  # the engine answered the end of input
    assert _marks(launch) <= {(f["id"], f["source"], f["line"]) for f in answers[0]["findings"]}
    assert (session.logs_dir / "spark1" / f"{plan.name}.log").read_text().splitlines()[177] == logs["spark1"][177]

    # status --json: the head's whole log through the same processors, the half cluster beside it
    view = ClusterView(plan.name, {
        "spark1": [ClusterContainer("spark1", plan.name, "id-spark1", "running", "Up 5 minutes", plan.head.image, "",
                                    dict(plan.head.labels))],
        "spark2": [ClusterContainer("spark2", plan.name, "id-spark2", "exited", "Exited (1) 1 minute ago",
                                    plan.head.image, "", dict(plan.nodes[1].labels))]})
    doc = cluster_doc(view, head_engine_dead(assess(view, ["spark1", "spark2"]), plan.name,
                                             log_errors("spark1", plan.name, logs["spark1"])))
    status = {(f["id"], f["source"], f["line"]) for f in doc["findings"]}
    assert _marks(launch) <= status


async def test_a_face_whose_engine_follows_no_container_lends_its_action_a_small_one_for_the_run():
    """A TUI built without live collectors: the first watch starts an engine of the action's own
    (the CLI's kind), the last close stops it."""
    config = cfg('executor = "mp"')
    plan = plan_cluster(config, launch_id="recorded")
    made: list[Engine] = []

    def make():
        made.append(Engine(config, [Recorded(plan, {"spark1": _lines("mp_worker_killed_head.log"),
                                                    "spark2": _lines("mp_worker_killed_rank1.log")})],
                           processors=default_processors()))
        return made[-1], None

    tap = Tap(make=make)
    watch = tap.watch([(np.node, np.container) for np in plan.nodes])
    assert len(made) == 1
    while not isinstance(await watch.next(10), LogEnded):  # the worker's end comes after every line
        pass
    _, ranked = await watch.finish()
    head = f"spark1/{plan.name}"
    assert [(f.id, f.line) for f in ranked if f.severity == "error" and f.source == head] == [
        ("worker_died", 178), ("engine_dead", 249)]
    watch.close()
    await tap._stopping
    assert tap.engine is None and not made[0].started
