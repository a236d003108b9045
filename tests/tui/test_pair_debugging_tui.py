"""Pair debugging in the TUI (issue 32 item 4), headless: the lock line on every screen, "wait for the
lock" instead of a CLI flag, toasts for the other operators, every refused key saying why.  The lock is
the real one (its script in a real shell on a LocalNode, in a throwaway $HOME)."""

from __future__ import annotations

import time

import pytest
from textual.worker import WorkerCancelled

from sparktui.actions.base import ActionContext
from sparktui.actions.lock import ClusterLock
from sparktui.config import parse_config
from sparktui.engine import Engine
from sparktui.identity import ENV
from sparktui.model import Note, TimelineEntry
from sparktui.nodes.local import LocalNode
from sparktui.tui.app import SparkApp
from sparktui.tui.load_test import LoadTestScreen
from sparktui.tui.screens.action import ActionScreen
from sparktui.tui.screens.confirm import ConfirmModal
from sparktui.tui.screens.timeline import TimelineScreen

from pilot_helpers import screen_text, wait_for

CLUSTER = "vllm_pair"
CFG = f'[cluster]\nname = "{CLUSTER}"\n[[node]]\nname = "spark1"\nbackend = "local"\n'


@pytest.fixture
def local_app(tmp_path, monkeypatch):
    """An app on a one-node cluster whose node is this machine (the lock lives in its $HOME)."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("SPARKTUI_LOCK_ROOT", raising=False)
    monkeypatch.setenv(ENV, "alice")
    config = parse_config(CFG)
    node = LocalNode(config.nodes[0])
    app = SparkApp(Engine(config, []), nodes=lambda: {"spark1": node}, live=False)
    app.lock_poll_s = 3600  # the tests poll by hand: no timer races them
    return app, config, node


async def bob_takes(config, node, monkeypatch, action: str = "launch") -> ClusterLock:
    monkeypatch.setenv(ENV, "bob")
    lock = ClusterLock(node, CLUSTER)
    await lock.acquire(ActionContext(config, {}), action)
    monkeypatch.setenv(ENV, "alice")
    return lock


async def until(pilot, cond, what: str, seconds: float = 10.0) -> None:
    """Wait for a worker's real IO (a shell on this machine) to show; bounded."""
    deadline = time.monotonic() + seconds
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await pilot.pause(0.02)


async def poll_lock(app, pilot) -> None:
    app._start_lock_poll()
    # the poll started at mount may still be running, or start after this one and replace it (an
    # exclusive group): waiting on a worker cancelled meanwhile raises (CI runs 11 and 31, under
    # load), so wait until the group has a poll that completed and none running
    polls = [w for w in app.workers if w.group == "lock-poll"]  # ours is registered already
    while polls:  # a poll cancelled by a newer one: wait for the newer one
        for worker in polls:
            try:
                await worker.wait()
            except WorkerCancelled:
                pass
        polls = [w for w in app.workers if w.group == "lock-poll" and not w.is_finished]
    await pilot.pause()


async def refused_wipe(app, pilot) -> ActionScreen:
    """The sample mutating action opened while bob holds the lock: its screen, once refused."""
    app.open_action("wipe-test")
    await wait_for(pilot, lambda: isinstance(app.screen, ActionScreen), "action screen")
    screen = app.screen
    await until(pilot, lambda: screen.result is not None, "the refusal")
    return screen


def notes(app) -> list[str]:
    return [f"{n.title}|{n.message}" for n in app._notifications]


async def test_every_screen_shows_who_holds_the_lock_and_for_what(local_app, monkeypatch):
    app, config, node = local_app
    bob = await bob_takes(config, node, monkeypatch)
    async with app.run_test(size=(120, 30)) as pilot:
        await poll_lock(app, pilot)
        await until(pilot, lambda: "lock: bob — launch, " in screen_text(app), "the lock line on the main screen")
        app.push_screen(TimelineScreen())
        await wait_for(pilot, lambda: isinstance(app.screen, TimelineScreen), "timeline")
        await until(pilot, lambda: "lock: bob — launch" in screen_text(app), "the lock line on the timeline")
        await bob.release()
        await poll_lock(app, pilot)
        await until(pilot, lambda: "lock: free" in screen_text(app), "the lock line after bob is done")
        row = screen_text(app).splitlines()[0]
        assert row.rstrip().endswith("lock: free")  # top right, over the title row: no layout moved


async def test_a_refused_action_offers_to_wait_for_the_lock_and_runs_once_it_is_free(local_app, monkeypatch,
                                                                                   sample_actions):
    import tui_sample_actions as sa

    sa.WipeAction.wiped.clear()
    app, config, node = local_app
    bob = await bob_takes(config, node, monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await refused_wipe(app, pilot)
        assert screen.result.data["refused"] == "lock" and "launch held by bob" in screen.result.summary
        assert "w: wait for the lock" in screen.result.summary and "--wait" not in screen.result.summary
        await wait_for(pilot, lambda: bool(screen.query("#lock-wait")), "the wait button")
        await pilot.pause()
        assert "Wait for the lock [w]" in screen_text(app)

        await pilot.press("w")
        await until(pilot, lambda: any(e.status == "progress" and "waiting: launch held by bob" in e.message
                                       for e in screen.events), "the queued action to say whom it waits for")
        assert screen.result is None and not sa.WipeAction.wiped
        await bob.release()
        await until(pilot, lambda: isinstance(app.screen, ConfirmModal), "the question once the lock is free")
        # the question is open: the lock is not held meanwhile (someone may walk away from it)
        assert await ClusterLock(node, CLUSTER).show() is None
        await pilot.press("y")
        await until(pilot, lambda: screen.result is not None, "the wipe")
        assert screen.result.ok and sa.WipeAction.wiped == [True]


async def test_waiting_for_the_lock_can_be_cancelled(local_app, monkeypatch, sample_actions):
    app, config, node = local_app
    bob = await bob_takes(config, node, monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        await refused_wipe(app, pilot)
        screen = app.screen
        await pilot.press("w")
        await until(pilot, lambda: any("waiting:" in e.message for e in screen.events), "waiting")
        await pilot.press("escape")
        await until(pilot, lambda: "cancelled" in screen_text(app), "the wait cancelled")
        assert (await ClusterLock(node, CLUSTER).show()).token == bob.token  # bob's lock untouched
        await bob.release()


@pytest.mark.parametrize("key, why", [("T", "load-test refused: read-only mode (--read-only): it puts load"),
                                      ("d", "doctor refused: read-only mode (--read-only): it starts probe containers"),
                                      ("l", "launch refused: read-only mode (--read-only) forbids changing")])
async def test_read_only_refuses_keys_and_says_why(make_app, key, why):
    app = make_app(t=30, read_only=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press(key)
        await wait_for(pilot, lambda: any(why in n for n in notes(app)), f"the reason for {key}")
        assert not isinstance(app.screen, (ActionScreen, LoadTestScreen))


async def test_another_operators_note_and_action_toast_and_ones_own_do_not(make_app):
    app = make_app(t=30)
    async with app.run_test(size=(120, 40)) as pilot:
        now = app.clock()
        app.engine.process([
            TimelineEntry("note", "bob@desk", "s-b", "restarting rank 1, hands off", ts=now),
            TimelineEntry("action", "bob@desk", "s-b", "docker run ...", action="launch", step="start",
                          status="started", ts=now),
            TimelineEntry("action", "bob@desk", "s-b", "2 containers", action="launch", step="start",
                          status="ok", ts=now),  # the same run: one toast is enough
            TimelineEntry("note", "carol@vm", "s-c", "from an hour ago", ts=now - 3600),  # the backlog at start
        ])
        app.refresh_now()
        await pilot.pause()
        got = notes(app)
        assert "note from bob@desk|restarting rank 1, hands off" in got
        assert sum(n.startswith("bob@desk|launch start") for n in got) == 1
        assert not any("from an hour ago" in n for n in got)
        before = len(got)
        app.add_note("my own note")  # one's own: into the session, no "note from"
        app.engine.process([Note("me again", author=app.operator)])
        app.refresh_now()
        await pilot.pause()
        assert [n for n in notes(app)[before:] if n.startswith("note from")] == []


async def test_escape_on_the_question_puts_the_decline_on_the_shared_timeline(tmp_path, monkeypatch, sample_actions):
    import json

    from sparktui.actions.shared_timeline import TimelineWriter

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("SPARKTUI_LOCK_ROOT", raising=False)
    monkeypatch.setenv(ENV, "alice")
    config = parse_config(CFG)
    node = LocalNode(config.nodes[0])
    writer = TimelineWriter(node, CLUSTER, session="s-alice")
    app = SparkApp(Engine(config, []), nodes=lambda: {"spark1": node}, live=False, timeline=writer)
    async with app.run_test(size=(120, 40)) as pilot:
        app.open_action("wipe-test")
        await until(pilot, lambda: isinstance(app.screen, ConfirmModal), "the question")
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, ActionScreen) and app.screen.result is not None, "the end")
        assert await writer.flush(timeout=20), writer.last_error
    recs = [json.loads(x) for x in (tmp_path / ".local/state/sparktui/clusters" / CLUSTER / "timeline.jsonl")
            .read_text().splitlines()]
    declined = [r for r in recs if r["step"] == "confirm" and r["status"] == "cancelled"]
    assert [r["message"].split(":")[0] for r in declined] == ["alice declined wipe-test"], recs
