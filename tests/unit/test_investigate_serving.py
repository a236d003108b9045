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
