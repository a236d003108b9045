"""Issue 32 item 5: the demo does not lie.  The actions that need a Docker Engine on real nodes are shown
but not offered (a one-line notice, nothing runs, no finding); the SERVE line's `done` counts the requests
the demo's log shows served."""

from __future__ import annotations

import argparse
import re

import pytest

from sparktui.actions import registry
from sparktui.commands.report import build_report
from sparktui.config import demo_config
from sparktui.engine import Engine
from sparktui.probes import metrics
from sparktui.session import Session
from sparktui.sim import DEMO_EPOCH, SimCluster
from sparktui.tui.app import SparkApp
from sparktui.tui.screens.help import help_content
from sparktui.tui.screens.main import MainScreen

from conftest import build_app, screen_text, wait_for

NOT_IN_DEMO = {"d": "doctor", "v": "validate", "b": "build-image", "p": "push-image", "l": "launch", "x": "stop"}


def _notices(app) -> list[str]:
    return [n.message for n in app._notifications]


def test_the_registry_marks_exactly_the_docker_actions_not_in_the_demo():
    assert {e.key: e.name for e in registry.BUILT_IN if not e.in_demo} == NOT_IN_DEMO


async def test_each_docker_action_key_in_the_demo_says_why_and_starts_nothing():
    app = build_app(demo=True)
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.pause()
        before_findings = app.engine.ranked_findings()
        strip = app.screen.query_one("#findings-strip").render()
        for key, name in NOT_IN_DEMO.items():
            await pilot.press(key)
            await wait_for(pilot, lambda: any(m.startswith(f"{name}: not in the demo") for m in _notices(app)),
                           f"the notice of {key}")
            assert isinstance(app.screen, MainScreen), f"{key} opened {type(app.screen).__name__}"
        await pilot.pause()
        assert app.engine.state.actions == ()  # no ActionEvent reached the engine
        assert app.engine.ranked_findings() == before_findings
        assert app.screen.query_one("#findings-strip").render() == strip
        notice = next(m for m in _notices(app) if m.startswith("launch:"))
        assert "it needs Docker on real nodes" in notice and "\n" not in notice


async def test_the_palette_lists_them_marked_and_choosing_one_says_why():
    app = build_app(demo=True)
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.pause()
        from sparktui.tui.palette import SparkCommands

        titles = {t: a for t, _h, a in SparkCommands(app.screen)._commands()}
        assert "action: Doctor: preflight checks (not in the demo)" in titles
        assert "action: Test prompt through the API" in titles  # what the sim can play stays offered
        await app.run_action(titles["action: Launch the cluster (not in the demo)"], app.screen)
        await wait_for(pilot, lambda: any(m.startswith("launch: not in the demo") for m in _notices(app)),
                       "the palette's notice")
        assert isinstance(app.screen, MainScreen) and app.engine.state.actions == ()


async def test_help_and_footer_mark_them_in_the_demo_only():
    text = help_content(False, node_count=2, demo=True).plain
    for name in ("Doctor: preflight checks", "Launch the cluster", "Stop the cluster on every node"):
        line = next(ln for ln in text.splitlines() if name in ln)
        assert "(not in the demo" in line
    assert "(not in the demo" not in next(ln for ln in text.splitlines() if "Test prompt" in ln)
    assert "not in the demo" not in help_content(False, node_count=2).plain
    app = build_app(demo=True)
    async with app.run_test(size=(200, 50)) as pilot:
        # the footer paints after the first refresh: on a loaded machine a pause is not enough
        await wait_for(pilot, lambda: "P Prompt" in screen_text(app).splitlines()[-1], "the footer's keys")
        footer = screen_text(app).splitlines()[-1]
        assert "d Doctor" in footer and "P Prompt" in footer  # shown (dimmed), not hidden
        assert app.screen.check_action("guided", ("doctor",)) is None  # Textual's "disabled": dimmed
        assert app.screen.check_action("guided", ("prompt",)) is True


async def test_the_report_of_a_demo_session_has_nothing_from_those_keys(tmp_path):
    config = demo_config()
    sim = SimCluster(config, "healthy", 1.0)
    session = Session.create(config.cluster.name, meta={"kind": "demo", "nodes": [n.name for n in config.nodes]},
                             root=tmp_path)
    engine = Engine(config, [], session=session)
    engine.process(sim.events_until(60.0))
    app = SparkApp(engine, nodes=lambda: {n.name: sim.node(n.name) for n in config.nodes}, live=False,
                   clock=lambda: DEMO_EPOCH + 60.0, demo=True)
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.pause()
        for key, name in NOT_IN_DEMO.items():
            await pilot.press(key)
            await wait_for(pilot, lambda: any(m.startswith(f"{name}: not in the demo") for m in _notices(app)),
                           f"the notice of {key}")
    session.close()
    report = build_report(session.path)
    for word in ("ray_worker_missing", "systemctl start docker", "no Docker Engine", "doctor", "launch"):
        assert word not in report, word


def test_sparktui_demo_builds_the_app_as_the_demo(monkeypatch, tmp_path):
    """The path `sparktui demo` takes hands the app demo=True (the keys above are refused there)."""
    from sparktui.commands import demo

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    seen = {}

    def run(self, **kw):
        seen["demo"] = self.demo
        return 0

    monkeypatch.setattr(SparkApp, "run", run)
    assert demo.run(argparse.Namespace(scenario="healthy", speed=None)) == 0
    assert seen == {"demo": True}


@pytest.mark.parametrize("t", [90.0, 200.0])
async def test_the_serve_line_counts_the_requests_the_demo_log_shows_served(t):
    """`done` is vLLM's request_success from the demo's API server, which counts the requests its log
    shows answered 200 (the scripted ones and any a prompt sends)."""
    app = build_app(t=t)
    sim, config = app.sim, app.engine.config
    head = config.head.name
    _, texts = app.engine.logs.series(head, config.cluster.name).window()
    shown = sum(1 for ln in texts if '"POST /v1/chat/completions' in ln and '" 200 OK' in ln)
    assert shown > 0
    sim.pin_clock(t)
    node = sim.node(head)
    host, port = await node.local_port(config.cluster.serve_host, config.cluster.serve_port)
    try:
        snap = await metrics.scrape(f"http://{host}:{port}")
    finally:
        await node.close()
    app.engine.process([metrics.serving_sample(head, snap, None)])
    # the gauges too: the log's last `Engine 000: ... Running: N reqs, ... GPU KV cache usage: X%` line
    last = next(ln for ln in reversed(texts) if "Running: " in ln)
    running = int(re.search(r"Running: (\d+) reqs", last).group(1))
    kv = float(re.search(r"GPU KV cache usage: ([\d.]+)%", last).group(1))
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.pause()
        text = screen_text(app)
        assert f"done {shown} " in text
        m = re.search(r"SERVE ● run (\d+)\s+wait \d+\s+KV (\d+)%", text)
        assert m, text
        assert int(m.group(1)) == running and abs(int(m.group(2)) - kv) <= 0.51



async def test_a_prompt_to_the_demo_api_joins_its_log_and_its_done_count():
    """A request the demo's API answers (a prompt, a load test) is logged like the scripted ones, so
    `done` and the log still agree after the user sends one."""
    import asyncio

    from sparktui.model import LogBatch
    from sparktui.probes.serving import chat

    config = demo_config()
    head, container = config.head.name, config.cluster.name
    sim = SimCluster(config, "healthy", 1.0)
    scripted = {ln.text for ev in SimCluster(config, "healthy", 1.0).events_until(200.0)
                if isinstance(ev, LogBatch) for ln in ev.lines}
    sim.pin_clock(120.0)
    lines: list[str] = []
    mine = asyncio.Event()

    def emit(ev) -> None:
        if isinstance(ev, LogBatch) and ev.node == head and ev.source == container:
            lines.extend(ln.text for ln in ev.lines)
            if any('"POST ' in ln.text and ln.text not in scripted for ln in ev.lines):
                mine.set()

    source = next(s for s in sim.sources() if s.node_name == head)
    task = asyncio.create_task(source.run(emit))
    node = sim.node(head)
    try:
        host, port = await node.local_port(config.cluster.serve_host, config.cluster.serve_port)
        base = f"http://{host}:{port}"
        answer = await chat(base, config.cluster.served_model, "hello demo", max_tokens=64)
        assert answer.content or answer.reasoning
        await asyncio.wait_for(mine.wait(), 10)
        snap = await metrics.scrape(base)
    finally:
        task.cancel()
        await node.close()
    served = [ln for ln in lines if '"POST /v1/chat/completions' in ln and '" 200 OK' in ln]
    assert [ln for ln in served if ln not in scripted][0].startswith("(APIServer pid=1) INFO:")
    assert snap.request_success == len(served)
