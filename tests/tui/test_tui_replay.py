"""`sparktui replay`: a recorded session comes back as the same state and logs."""

from __future__ import annotations

from conftest import screen_text

from sparktui.commands.replay import load_session, parse_stamp
from sparktui.config import demo_config
from sparktui.engine import Engine
from sparktui.model import Finding, FindingRaised
from sparktui.session import Session
from sparktui.sim import DEMO_EPOCH, SimCluster
from sparktui.tui.app import SparkApp


def test_parse_stamp_handles_docker_nanoseconds():
    assert parse_stamp("2026-04-08T23:13:20.123456789Z") == DEMO_EPOCH + 0.123456
    assert parse_stamp("not-a-time") is None


async def test_session_replays_into_the_same_screen(tmp_path):
    config = demo_config()
    session = Session.create(config.cluster.name, meta={"config": config.path, "nodes": ["spark1", "spark2"]},
                             root=tmp_path)
    live = Engine(config, [], session=session)
    live.process(SimCluster(config).events_until(90))
    live.process([FindingRaised(Finding("cuda_oom", "error", "CUDA out of memory [b]x[/b]", "spark1/vllm_qwen35", 3,
                                        node="spark1", ts=DEMO_EPOCH + 80))])
    session.close()

    meta, events = load_session(session.path)
    replayed = Engine(config, [])
    replayed.process(events)
    for name in ("spark1", "spark2"):
        a, b = live.state.nodes[name], replayed.state.nodes[name]
        assert dict(a.containers) == dict(b.containers)
        assert a.memory == b.memory
        assert live.logs.find(name, "vllm_qwen35").texts == replayed.logs.find(name, "vllm_qwen35").texts
    assert [f.title for f in replayed.state.findings] == ["CUDA out of memory [b]x[/b]"]

    app = SparkApp(replayed, live=False, read_only=True, clock=lambda: DEMO_EPOCH + 90)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        text = screen_text(app)
        assert "spark1" in text and "running" in text and "CUDA out of memory [b]x[/b]" in text
