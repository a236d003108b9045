"""The Investigate screen on the demo's nccl-hang: key i, evidence rows as they arrive, then the verdict."""

from __future__ import annotations

import asyncio

from sparktui.config import demo_config
from sparktui.engine import Engine
from sparktui.sim import DEMO_EPOCH, SimCluster
from sparktui.tui.screens import investigate as inv_screen
from sparktui.tui.app import SparkApp


def hung_app(t: float = 40.0) -> SparkApp:
    config = demo_config()
    sim = SimCluster(config, "nccl-hang", 1.0)
    engine = Engine(config, [])
    engine.process(sim.events_until(t))
    sim.live_scene()
    sim._mono0 -= t  # the nodes' probes answer as of t simulated seconds in
    nodes = lambda: {n.name: sim.node(n.name) for n in config.nodes}  # noqa: E731
    return SparkApp(engine, nodes=nodes, live=False, clock=lambda: DEMO_EPOCH + t)


async def test_key_i_investigates_and_shows_the_verdict_per_node(monkeypatch):
    monkeypatch.setattr(inv_screen, "SIM_INTERVAL", 1.0)
    app = hung_app()
    async with app.run_test(size=(180, 50)) as pilot:
        await pilot.press("i")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, inv_screen.InvestigateScreen)
        await asyncio.wait_for(screen._worker.wait(), 30)
        await pilot.pause()
        v = screen.action_obj.verdict
        assert v.rule == "R3" and "nccl_init_hang" in v.finding_ids and "spark2/rank 1" in v.title
        # one row per evidence item, from both nodes, in arrival order
        nodes = {e.node for e in screen.events if e.node}
        assert nodes == {"spark1", "spark2"}
        assert any(e.message.startswith("RAS: 1 communicator") for e in screen.events)
        assert any(e.message.startswith("py-spy rank 1") for e in screen.events if e.node == "spark2")
        # verdict columns, one per node
        cols = list(screen.query(".verdict-node"))
        assert len(cols) == 2
        assert "Init START without COMPLETE" in str(cols[1].render())
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, inv_screen.InvestigateScreen)
