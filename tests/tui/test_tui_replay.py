"""`sparktui replay`: a recorded session comes back as the same state and logs."""

from __future__ import annotations

import pytest
from conftest import screen_text, wait_for

from sparktui.commands.replay import load_session
from sparktui.timefmt import parse
from sparktui.config import demo_config
from sparktui.engine import Engine
from sparktui.model import Finding, FindingRaised
from sparktui.session import Session
from sparktui.sim import DEMO_EPOCH, SimCluster
from sparktui.tui.app import SparkApp


def test_parse_stamp_handles_docker_nanoseconds():
    assert parse("2026-04-08T23:13:20.123456789Z") == DEMO_EPOCH + 0.123456
    assert parse("not-a-time") is None


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


# ------------------------------------------------------------------ scrubbing (play head, findings, speed)

def _scrub_session(tmp_path):
    """A session of 120 s of the demo with two findings at +40 s and +80 s."""
    config = demo_config()
    session = Session.create(config.cluster.name, meta={"config": config.path, "nodes": ["spark1", "spark2"]},
                             root=tmp_path)
    live = Engine(config, [], session=session)
    live.process(SimCluster(config).events_until(120))
    live.process([
        FindingRaised(Finding("cuda_oom", "error", "first finding", "spark1/vllm_qwen35", 3, node="spark1",
                              ts=DEMO_EPOCH + 40), ts=DEMO_EPOCH + 40),
        FindingRaised(Finding("engine_dead", "error", "second finding", "spark1/vllm_qwen35", 9, node="spark1",
                              ts=DEMO_EPOCH + 80), ts=DEMO_EPOCH + 80),
    ])
    session.close()
    return session.path


def _titles(app) -> list[str]:
    return [f.title for f in app.engine.state.findings]


def test_player_moves_forward_and_rebuilds_going_back(tmp_path):
    from sparktui.commands.replay import make_player

    _, p = make_player(_scrub_session(tmp_path))
    tl = p.timeline
    assert [f.title for f in tl.findings] == ["first finding", "second finding"]
    p.seek(DEMO_EPOCH + 50)
    assert [f.title for f in p.engine.state.findings] == ["first finding"]
    first_engine = p.engine
    lines_at_50 = sum(len(s.texts) for s in p.engine.logs._series.values())
    p.seek(tl.end)
    assert len(p.engine.state.findings) == 2 and p.engine is first_engine  # forward: same engine, more events
    assert sum(len(s.texts) for s in p.engine.logs._series.values()) > lines_at_50
    p.seek(DEMO_EPOCH + 50)
    assert p.engine is not first_engine and [f.title for f in p.engine.state.findings] == ["first finding"]
    assert sum(len(s.texts) for s in p.engine.logs._series.values()) == lines_at_50
    # speed: one wall second at x10 moves ten session seconds
    p.set_speed(10)
    p.tick(100.0)
    p.tick(101.0)
    assert abs(p.now - (DEMO_EPOCH + 60)) < 1e-6


def test_parse_when():
    from sparktui.replay_player import parse_when

    s, e = 1000.0, 2000.0
    assert parse_when("+90", s, e, 1500) == 1090
    assert parse_when("+1m30s", s, e, 1500) == 1090
    assert parse_when("-30s", s, e, 1500) == 1470
    assert parse_when("end", s, e, 1500) == e
    with pytest.raises(ValueError):
        parse_when("yesterday", s, e, 1500)


async def test_replay_keys_step_findings_jump_and_pause(tmp_path):
    from sparktui.commands.replay import make_player
    from sparktui.tui.replay import JumpModal, ReplayApp

    path = _scrub_session(tmp_path)
    _, player = make_player(path, speed=1.0)
    player.paused = True  # held at the start: every move below comes from a key
    app = ReplayApp(player, name=path.name)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        assert _titles(app) == [] and "paused" in screen_text(app) and "finding 0/2" in screen_text(app)

        await pilot.press("right_square_bracket")
        await wait_for(pilot, lambda: _titles(app) == ["first finding"], "first finding shown")
        assert player.now == DEMO_EPOCH + 40
        await wait_for(pilot, lambda: "finding 1/2" in screen_text(app) and "first finding" in screen_text(app),
                       "status and strip show the first finding")

        await pilot.press("right_square_bracket")
        await wait_for(pilot, lambda: len(_titles(app)) == 2, "second finding")
        await pilot.press("left_square_bracket")  # back: the engine is rebuilt up to the first finding
        await wait_for(pilot, lambda: _titles(app) == ["first finding"], "back to the first finding")
        await wait_for(pilot, lambda: "second finding" not in screen_text(app) and "finding 1/2" in screen_text(app),
                       "the screen shows the rebuilt state")

        await pilot.press("J")
        await wait_for(pilot, lambda: isinstance(app.screen, JumpModal), "jump input open")
        await pilot.press(*"+90", "enter")
        await wait_for(pilot, lambda: player.now == player.timeline.start + 90, "jumped to +90 s")
        assert len(_titles(app)) == 2 and not isinstance(app.screen, JumpModal)

        await pilot.press("J")
        await wait_for(pilot, lambda: isinstance(app.screen, JumpModal), "jump input open")
        await pilot.press(*"nonsense", "enter")
        await wait_for(pilot, lambda: not isinstance(app.screen, JumpModal), "input closed")
        assert player.now == player.timeline.start + 90  # a bad time moves nothing

        await pilot.press("greater_than_sign", "greater_than_sign")
        assert player.speed == 4.0
        await pilot.press("less_than_sign")
        assert player.speed == 2.0

        # play: at x2000 the rest of the session passes within a few ticks and stops at the end
        player.set_speed(2000)
        await pilot.press("space")
        assert not player.paused or player.at_end  # a loaded machine can play it all within the press
        await wait_for(pilot, lambda: player.at_end and player.paused, "played to the end", rounds=2000)
        await wait_for(pilot, lambda: "paused" in screen_text(app), "status says paused at the end")


def test_cli_replay_refuses_bad_speed_and_at(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    path = _scrub_session(tmp_path)
    for argv, msg in ((["--speed", "0"], "--speed must be a number > 0"), (["--speed", "fast"], "--speed"),
                      (["--at", "someday"], "--at: not a time")):
        r = subprocess.run([sys.executable, "-m", "sparktui", "replay", str(path), *argv], capture_output=True,
                           text=True, cwd=root, timeout=60)
        assert r.returncode == 2 and msg in r.stderr and r.stderr.count("\n") == 1, r.stderr
