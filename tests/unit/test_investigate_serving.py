"""investigate on a serving cluster (issue 29 item 1): the head's /metrics decides before the hang rules."""

from __future__ import annotations

import asyncio

from sparktui.config import demo_config
from sparktui.diagnosis.evidence import Evidence, NodeEvidence
from sparktui.diagnosis.verdict import decide
from sparktui.engine import Engine
from sparktui.sim import DEMO_EPOCH, SimCluster
from sparktui.tui.app import SparkApp
from sparktui.tui.screens import investigate as inv_screen


def _ev(serving):
    return Evidence(nodes=[NodeEvidence(node="spark1"), NodeEvidence(node="spark2")], serving=serving)


def test_idle_server_answering_is_healthy_exit_0():
    v = decide(_ev([{"t": 0, "node": "spark1", "up": True, "running": 0.0, "waiting": 0.0, "finished": 6.0, "tokens": 50.0},
                    {"t": 25, "node": "spark1", "up": True, "running": 0.0, "waiting": 0.0, "finished": 6.0, "tokens": 50.0}]))
    assert v.state == "healthy" and not v.problem and v.exit_code == 0
    assert any("/metrics answered" in line for line in v.evidence["spark1"])


def test_queued_requests_with_frozen_counters_are_not_called_healthy():
    v = decide(_ev([{"t": 0, "node": "spark1", "up": True, "running": 1.0, "waiting": 0.0, "finished": 6.0, "tokens": 50.0},
                    {"t": 25, "node": "spark1", "up": True, "running": 1.0, "waiting": 0.0, "finished": 6.0, "tokens": 50.0}]))
    assert v.state != "healthy"


def test_demo_healthy_scenario_investigates_healthy(monkeypatch):
    monkeypatch.setattr(inv_screen, "SIM_INTERVAL", 1.0)
    config, t = demo_config(), 90.0
    sim = SimCluster(config, "healthy", 1.0)
    engine = Engine(config, [])
    engine.process(sim.events_until(t))
    sim.live_scene()
    sim._mono0 -= t
    app = SparkApp(engine, nodes=lambda: {n.name: sim.node(n.name) for n in config.nodes}, live=False,
                   clock=lambda: DEMO_EPOCH + t)

    async def go():
        async with app.run_test(size=(180, 50)) as pilot:
            await pilot.press("i")
            await pilot.pause()
            await asyncio.wait_for(app.screen._worker.wait(), 30)
            return app.screen.action_obj.verdict

    v = asyncio.run(go())
    assert v.state == "healthy" and not v.problem, (v.rule, v.title)


# the cluster's containers as `docker ps -a` gives them (ClusterContainer.to_json), statuses in Docker's words
def _ctr(node, rank, state, status, launch="L1"):
    code = int(status.split("(")[1].split(")")[0]) if status.startswith("Exited (") else None
    return {"node": node, "name": "tiny_vllm", "id": f"{rank}" * 12, "state": state, "status": status,
            "image": "vllm-cpu:bed", "launch": launch, "rank": rank, "exit_code": code}


_IDLE = [{"t": 0, "node": "spark1", "up": True, "running": 0.0, "waiting": 0.0, "finished": 6.0, "tokens": 50.0},
         {"t": 25, "node": "spark1", "up": True, "running": 0.0, "waiting": 0.0, "finished": 6.0, "tokens": 50.0}]


def _with_cluster(*rows, serving=_IDLE):
    ev = _ev(serving)
    ev.cluster = {"name": "tiny_vllm", "containers": list(rows)}
    return ev


def test_a_killed_workers_container_is_a_dead_peer_though_the_head_still_answers_idle():
    """The worker-killed drill: the head's /metrics answers with nothing queued (no request has hit the
    dead rank yet), but rank 1's container exited 137: not healthy."""
    v = decide(_with_cluster(_ctr("spark1", 0, "running", "Up 4 minutes"),
                             _ctr("spark2", 1, "exited", "Exited (137) 6 seconds ago")))
    assert v.problem and v.exit_code == 1 and v.rule == "R1", (v.rule, v.title)
    assert v.finding_ids[:2] == ["worker_died", "half_cluster"]
    assert "rank 1 on spark2" in v.title
    assert any("exited (137)" in line for line in v.evidence["spark2"])


def test_the_head_killed_is_a_dead_peer_too():
    v = decide(_with_cluster(_ctr("spark1", 0, "exited", "Exited (137) 2 seconds ago"),
                             _ctr("spark2", 1, "running", "Up 4 minutes"), serving=[]))
    assert v.problem and v.finding_ids[0] == "worker_died" and "rank 0 on spark1" in v.title


def test_healthy_counterparts_a_whole_cluster_a_clean_stop_and_a_launch_under_way_are_not_deaths():
    whole = decide(_with_cluster(_ctr("spark1", 0, "running", "Up 4 minutes"), _ctr("spark2", 1, "running", "Up 4 minutes")))
    assert whole.state == "healthy" and not whole.problem
    # `docker stop` of every rank: exit 0 everywhere is a stopped cluster, not a death
    stopped = decide(_with_cluster(_ctr("spark1", 0, "exited", "Exited (0) 1 minute ago"),
                                   _ctr("spark2", 1, "exited", "Exited (0) 1 minute ago"), serving=[]))
    assert not stopped.problem and stopped.rule != "R1", (stopped.rule, stopped.title)
    # the head runs, the worker's container is made and not started yet: a launch under way
    starting = decide(_with_cluster(_ctr("spark1", 0, "running", "Up 2 seconds"), _ctr("spark2", 1, "created", "Created")))
    assert starting.rule != "R1" and not starting.problem, (starting.rule, starting.title)
    # an old launch's exited container beside a running launch is stale, not this launch's dead rank
    old = decide(_with_cluster(_ctr("spark1", 0, "running", "Up 4 minutes", launch="L2"),
                               _ctr("spark2", 1, "running", "Up 4 minutes", launch="L2"),
                               _ctr("spark2", 1, "exited", "Exited (137) 2 hours ago", launch="L1")))
    assert old.state == "healthy", (old.rule, old.title)


def test_the_cluster_rows_survive_a_bundle(tmp_path):
    from sparktui.diagnosis.evidence import read_bundle, write_bundle

    ev = _with_cluster(_ctr("spark1", 0, "running", "Up 4 minutes"), _ctr("spark2", 1, "exited", "Exited (137) 6 seconds ago"))
    write_bundle(ev, tmp_path / "b")
    [(_, back)] = read_bundle(tmp_path / "b")
    assert back.cluster == ev.cluster and back.serving == ev.serving
    assert decide(back).finding_ids[:2] == ["worker_died", "half_cluster"]
