"""Cluster state in the live engine (issue 29 item 2): a container of the running cluster that exits
raises half_cluster / worker_died at once, from the events the engine already receives, with the
assessment `sparktui status` uses."""

from __future__ import annotations

from sparktui.config import demo_config
from sparktui.diagnosis import Diagnoser
from sparktui.diagnosis.cluster_watch import ClusterWatch
from sparktui.diagnosis.stall import StallDetector
from sparktui.engine import Engine
from sparktui.model import ContainerChanged, ContainerInfo, ContainersSnapshot, ContainerState


def info(node: str, rank: int, state=ContainerState.RUNNING, code=None, launch="L1", t=100.0) -> ContainerInfo:
    labels = {"sparktui.cluster": "tiny_vllm", "sparktui.node": node, "sparktui.rank": str(rank),
              "sparktui.launch": launch, "sparktui.nnodes": "2"}
    return ContainerInfo(id=f"{node}{launch}" * 4, name="tiny_vllm", image="vllm-cpu", state=state, exit_code=code,
                         status=f"Exited ({code})" if code is not None else "Up 1 minute", started_at=t,
                         labels=tuple(sorted(labels.items())))


def engine() -> Engine:
    from dataclasses import replace

    cfg = demo_config()  # the config names the cluster the watch judges (as `status` judges it)
    return Engine(replace(cfg, cluster=replace(cfg.cluster, name="tiny_vllm")),
                  processors=[Diagnoser(), StallDetector(), ClusterWatch()])


def test_worker_container_killed_raises_half_cluster_and_worker_died_ranked_first():
    eng = engine()
    eng.process([ContainersSnapshot("spark1", (info("spark1", 0),)), ContainersSnapshot("spark2", (info("spark2", 1),))])
    assert eng.state.findings == ()
    eng.process([ContainerChanged("spark2", info("spark2", 1, ContainerState.EXITED, 137))])
    ids = [f.id for f in eng.state.findings]
    assert "half_cluster" in ids and "worker_died" in ids
    ranked = eng.ranked_findings()
    assert ranked[0].id in ("half_cluster", "worker_died") and ranked[0].id != "suspected_hang"
    died = next(f for f in eng.state.findings if f.id == "worker_died")
    assert "137" in died.title and died.node == "spark2"


def test_a_launch_still_creating_its_containers_is_not_half():
    eng = engine()
    eng.process([ContainerChanged("spark1", info("spark1", 0))])  # the worker's is not made yet
    assert eng.state.findings == ()
    eng.process([ContainerChanged("spark2", info("spark2", 1))])
    assert eng.state.findings == ()


def test_containers_created_but_not_yet_started_are_a_launch_not_a_half_cluster():
    """Seen on the real-vLLM bed: the head's container "created" a moment before it started was
    taken for an exited one (half_cluster, "running on no node; spark1 created") during a launch."""
    eng = engine()
    eng.process([ContainerChanged("spark1", info("spark1", 0, ContainerState.CREATED))])
    eng.process([ContainerChanged("spark2", info("spark2", 1, ContainerState.CREATED))])
    eng.process([ContainerChanged("spark2", info("spark2", 1))])  # one started, the head not yet
    assert eng.state.findings == ()
    eng.process([ContainerChanged("spark1", info("spark1", 0))])
    assert eng.state.findings == ()
    # a listing made while spark2's container was still "created", arriving after its start event
    eng.process([ContainersSnapshot("spark2", (info("spark2", 1, ContainerState.CREATED),))])
    assert eng.state.findings == ()
    eng.process([ContainerChanged("spark2", info("spark2", 1, ContainerState.EXITED, 137))])
    assert {"half_cluster", "worker_died"} <= {f.id for f in eng.state.findings}  # a real death still is


def test_a_relaunch_is_watched_afresh():
    eng = engine()
    eng.process([ContainerChanged("spark1", info("spark1", 0)), ContainerChanged("spark2", info("spark2", 1))])
    eng.process([ContainerChanged("spark2", info("spark2", 1, ContainerState.EXITED, 137))])
    n = len(eng.state.findings)
    eng.process([ContainerChanged("spark1", info("spark1", 0, launch="L2", t=200.0)),
                 ContainerChanged("spark2", info("spark2", 1, launch="L2", t=200.0))])
    assert len(eng.state.findings) == n  # whole again: nothing new


def test_the_head_serving_line_turns_red_with_the_reason_when_the_worker_exits():
    import asyncio

    from sparktui.model import ServingSample
    from sparktui.tui.app import SparkApp
    from sparktui.tui.widgets.serving_stats import ServingStats

    eng = engine()
    eng.process([ContainerChanged("spark1", info("spark1", 0)), ContainerChanged("spark2", info("spark2", 1)),
                 ServingSample("spark1", up=True, running=0.0, waiting=0.0, requests_total=3.0)])
    app = SparkApp(eng, nodes=None, live=False)

    async def go():
        async with app.run_test(size=(180, 50)) as pilot:
            await pilot.pause()
            line = app.screen.query(ServingStats).first()
            assert line.has_class("-up") and not line.has_class("-broken")
            eng.process([ContainerChanged("spark2", info("spark2", 1, ContainerState.EXITED, 137))])
            app.screen.refresh_state()
            await pilot.pause()
            assert line.has_class("-broken")
            assert "spark2 exited (137)" in str(line.render())

    asyncio.run(go())


def _log(node: str, name: str, path):
    from sparktui.model import LogBatch, LogLine

    text = path.read_text(errors="replace").splitlines()
    return LogBatch(node, name, tuple(LogLine(node, name, t, seq=i + 1) for i, t in enumerate(text)))


def test_a_rank_that_exited_on_its_own_error_is_named_by_its_log_before_the_half_cluster():
    """The wrong-gloo-interface drill: Docker's die event (exit 1) came before the rank's last lines, and
    half_cluster was ranked first until the cause arrived.  A rank that exited on its own said why: the
    half waits for its log's error finding (real capture: NCCL found no socket interface)."""
    from pathlib import Path

    fix = Path(__file__).parent.parent / "fixtures" / "nccl-2gpu" / "bad_ifname.rank0.log"
    eng = engine()
    eng.process([ContainersSnapshot("spark1", (info("spark1", 0),)), ContainersSnapshot("spark2", (info("spark2", 1),))])
    eng.process([ContainerChanged("spark1", info("spark1", 0, ContainerState.EXITED, 1))])
    assert eng.ranked_findings() == []  # nothing ranked yet: the cause is on its way
    eng.process([_log("spark1", "tiny_vllm", fix)])
    ranked = [f.id for f in eng.ranked_findings()]
    assert ranked and ranked[0] in ("wrong_network_interface", "nccl_network_error"), ranked
    assert "half_cluster" in ranked and ranked.index("half_cluster") > 0, ranked


def test_a_silent_own_exit_is_raised_after_the_hold_and_a_kill_at_once():
    import time

    from sparktui.diagnosis import cluster_watch

    watch = ClusterWatch()
    t0 = time.time()
    list(watch.feed(ContainersSnapshot("spark1", (info("spark1", 0),), ts=t0)))
    list(watch.feed(ContainersSnapshot("spark2", (info("spark2", 1),), ts=t0)))
    assert list(watch.feed(ContainerChanged("spark2", info("spark2", 1, ContainerState.EXITED, 1), ts=t0 + 1))) == []
    assert watch.tick(t0 + 2) == []
    late = watch.tick(t0 + 1 + cluster_watch.HOLD_S)  # no words came: the state alone is said
    assert {e.finding.id for e in late} == {"half_cluster", "worker_died"}
    killed = ClusterWatch()
    list(killed.feed(ContainersSnapshot("spark1", (info("spark1", 0, launch="L2"),), ts=t0)))
    list(killed.feed(ContainersSnapshot("spark2", (info("spark2", 1, launch="L2"),), ts=t0)))
    now = killed.feed(ContainerChanged("spark2", info("spark2", 1, ContainerState.EXITED, 137, launch="L2"), ts=t0 + 1))
    assert {e.finding.id for e in now} == {"half_cluster", "worker_died"}


def _engine_dead(ts: float):
    """The head's log said its engine died (made by the one finding factory, on the head's source)."""
    from sparktui.diagnosis.catalogue import finding
    from sparktui.model import FindingRaised

    return FindingRaised(finding("engine_dead", source="spark1/tiny_vllm", node="spark1", title="EngineCore died"),
                         ts=ts)


def test_a_dead_engine_while_every_container_runs_is_half_after_the_hold_so_its_cause_can_come_first():
    """The drill wrong-gloo-interface: the head's engine_dead came before the rank's own words named
    the interface, and half_cluster was ranked first.  It is held as an own exit is; a cluster whose
    launch removed its containers meanwhile is not called half at all."""
    import time

    from sparktui.diagnosis import cluster_watch

    t0 = time.time()
    watch = ClusterWatch()
    list(watch.feed(ContainersSnapshot("spark1", (info("spark1", 0),), ts=t0)))
    list(watch.feed(ContainersSnapshot("spark2", (info("spark2", 1),), ts=t0)))
    assert list(watch.feed(_engine_dead(t0 + 1))) == []
    assert watch.tick(t0 + 2) == []
    late = watch.tick(t0 + 1 + cluster_watch.HOLD_S)
    assert [e.finding.id for e in late] == ["half_cluster"]
    assert "engine is dead while" in late[0].finding.title
    assert watch.tick(t0 + 20) == []  # said once

    gone = ClusterWatch()  # the failed launch removed its containers within the hold: nothing to say
    list(gone.feed(ContainersSnapshot("spark1", (info("spark1", 0, launch="L3"),), ts=t0)))
    list(gone.feed(ContainersSnapshot("spark2", (info("spark2", 1, launch="L3"),), ts=t0)))
    list(gone.feed(_engine_dead(t0 + 1)))
    list(gone.feed(ContainersSnapshot("spark1", (), ts=t0 + 2)))
    list(gone.feed(ContainersSnapshot("spark2", (), ts=t0 + 2)))
    said = [e.finding.title for e in gone.tick(t0 + 1 + cluster_watch.HOLD_S)]
    assert not any("engine is dead while" in t for t in said), said


def test_another_clusters_container_exiting_says_nothing_about_the_configs_cluster():
    """The drill dockerd-restart, twice in full runs: a container of an earlier cluster (another name)
    came back on spark2 when its daemon restarted, exited, and its half_cluster was ranked first over
    the healthy cluster being watched.  The engine judges the config's cluster, as `status` does."""
    from dataclasses import replace

    def other(node: str, rank: int, state=ContainerState.RUNNING, code=None) -> ContainerInfo:
        c = info(node, rank, state, code, launch="OLD")
        labels = tuple((k, "old_cluster" if k == "sparktui.cluster" else v) for k, v in c.labels)
        return replace(c, id=f"old{node}" * 4, name="old_cluster", labels=labels)

    eng = engine()
    eng.process([ContainersSnapshot("spark1", (info("spark1", 0),)),
                 ContainersSnapshot("spark2", (info("spark2", 1), other("spark2", 1)))])
    eng.process([ContainerChanged("spark2", other("spark2", 1, ContainerState.EXITED, 0))])
    assert eng.state.findings == ()
    eng.process([ContainerChanged("spark2", info("spark2", 1, ContainerState.EXITED, 137))])
    assert {f.id for f in eng.state.findings} >= {"half_cluster", "worker_died"}  # its own cluster: said
    unscoped = ClusterWatch()  # without a config (a bare watch) every labelled cluster is judged
    list(unscoped.feed(ContainersSnapshot("spark2", (other("spark2", 1),))))
    said = list(unscoped.feed(ContainerChanged("spark2", other("spark2", 1, ContainerState.EXITED, 0))))
    assert "half_cluster" in {e.finding.id for e in said}


def test_a_half_cluster_whose_containers_are_all_removed_resolves_and_leaves_the_ranking():
    """The drills kv-too-big and unknown-architecture: the failed launch removed its containers, which
    resolved the rank's own cause ("container removed"), and half_cluster, about no container, stayed
    first in the ranking over nothing."""
    eng = engine()
    eng.process([ContainersSnapshot("spark1", (info("spark1", 0),)), ContainersSnapshot("spark2", (info("spark2", 1),))])
    eng.process([ContainerChanged("spark2", info("spark2", 1, ContainerState.EXITED, 137))])
    assert eng.ranked_findings()[0].id in ("half_cluster", "worker_died")
    eng.process([ContainerChanged("spark2", info("spark2", 1, ContainerState.REMOVED, 137))])
    assert {f.id for f in eng.ranked_findings()} & {"half_cluster", "worker_died"}, "spark1's container is still there"
    eng.process([ContainersSnapshot("spark1", ())])  # the head removed too: the launch is gone
    assert not {f.id for f in eng.ranked_findings()} & {"half_cluster", "worker_died"}
    states = {k: s.state for k, s in eng.state.finding_states.items()}
    resolved = [f for f in eng.state.findings if f.id in ("half_cluster", "worker_died")]
    assert resolved and all(states.get(f.key) == "resolved" for f in resolved)
    assert {eng.state.finding_states[f.key].reason for f in resolved} == {"cluster removed"}


def test_an_exited_cluster_left_in_place_stays_active():
    """The healthy counterpart: exited containers that nobody removed are still a broken cluster."""
    eng = engine()
    eng.process([ContainersSnapshot("spark1", (info("spark1", 0),)), ContainersSnapshot("spark2", (info("spark2", 1),))])
    eng.process([ContainerChanged("spark2", info("spark2", 1, ContainerState.EXITED, 137))])
    eng.process([ContainerChanged("spark1", info("spark1", 0, ContainerState.EXITED, 137))])
    eng.process([ContainersSnapshot("spark1", (info("spark1", 0, ContainerState.EXITED, 137),))])
    assert {f.id for f in eng.ranked_findings()} & {"half_cluster", "worker_died"}
    assert not eng.state.finding_states
