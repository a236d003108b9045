"""Pilot tests: `N` adds a timestamped note from anywhere, `L` shows the timeline (actions,
findings, state changes, notes; this operator's and the others' from the shared timeline),
following the newest row."""

from __future__ import annotations

from contextlib import asynccontextmanager

from conftest import build_app, screen_text, wait_for

from sparktui.model import ActionEvent, Finding, FindingRaised, TimelineEntry
from sparktui.sim import DEMO_EPOCH
from sparktui.tui.screens.timeline import NoteModal, TimelineScreen


async def _note(pilot, app, text: str) -> None:
    await pilot.press("N")
    await wait_for(pilot, lambda: isinstance(app.screen, NoteModal), "the note box")
    for ch in text:
        await pilot.press(ch if ch != " " else "space")
    await pilot.press("enter")
    await wait_for(pilot, lambda: not isinstance(app.screen, NoteModal), "the note box to close")


@asynccontextmanager
async def _on_main_screen(t: float, size: tuple[int, int]):
    """(app, pilot) of the demo at ``t`` seconds, once its main screen is up."""
    app = build_app(t=t)
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "MainScreen", "the main screen")
        yield app, pilot


async def _open_timeline(pilot, app) -> None:
    await pilot.press("L")
    await wait_for(pilot, lambda: isinstance(app.screen, TimelineScreen), "the timeline")


async def test_note_key_adds_a_timestamped_note_from_the_main_screen_and_the_timeline():
    async with _on_main_screen(30, (140, 40)) as (app, pilot):
        await _note(pilot, app, "restarted rank 1")
        notes = app.engine.state.notes
        assert [n.text for n in notes] == ["restarted rank 1"]
        assert notes[0].author == app.operator and "@" in app.operator and notes[0].ts > 0
        # from any screen: over the timeline too, where the note shows up at once; Esc drops one unsaid
        await _open_timeline(pilot, app)
        await _note(pilot, app, "second")
        assert isinstance(app.screen, TimelineScreen)
        await wait_for(pilot, lambda: "second" in screen_text(app), "the note on the timeline")
        await pilot.press("N")
        await wait_for(pilot, lambda: isinstance(app.screen, NoteModal), "the note box")
        await pilot.press("x", "escape")
        await wait_for(pilot, lambda: isinstance(app.screen, TimelineScreen), "back on the timeline")
        assert [n.text for n in app.engine.state.notes] == ["restarted rank 1", "second"]


async def test_timeline_screen_lists_every_kind_and_follows_the_newest():
    async with _on_main_screen(120, (160, 45)) as (app, pilot):
        await _note(pilot, app, "first note")
        app.engine.process([ActionEvent("doctor", "ssh", "ok", "spark1 reachable", node="spark1",
                                        ts=DEMO_EPOCH + 121),
                            FindingRaised(Finding("cuda_oom", "error", "CUDA out of memory", node="spark2",
                                                  ts=DEMO_EPOCH + 100))])
        await _open_timeline(pilot, app)
        screen: TimelineScreen = app.screen  # type: ignore[assignment]
        kinds = {r.kind for r in screen.rows}
        assert {"action", "finding", "change", "note"} <= kinds, kinds
        assert any(r.kind == "change" and "container" in r.text for r in screen.rows)
        assert [r.ts for r in screen.rows] == sorted(r.ts for r in screen.rows)  # newest last
        text = screen_text(app)
        assert "doctor/ssh: ok" in text and "first note" in text and "FOLLOW" in text
        # another operator's note arrives from the head: shown at once, the cursor follows it
        app.engine.process([TimelineEntry(kind="note", operator="bo@desk", session="s-b",
                                          message="bo: stopped the old container", ts=2e9)])
        app.refresh_now()
        await wait_for(pilot, lambda: "bo: stopped the old container" in screen_text(app), "the other's note")
        table = screen.query_one("#timeline-table")
        assert table.cursor_row == len(screen.rows) - 1
        assert "other operators: bo@desk" in screen_text(app)
        # moving up detaches: a new row does not pull the cursor; End follows again
        await pilot.press("up", "up")
        await wait_for(pilot, lambda: not screen.follow, "detached")
        row = table.cursor_row
        app.engine.process([TimelineEntry(kind="action", operator="bo@desk", session="s-b", action="launch",
                                          step="start", status="fail", message="port in use", ts=2e9 + 1)])
        app.refresh_now()
        await wait_for(pilot, lambda: "launch/start: fail" in screen_text(app), "the other's action")
        assert table.cursor_row == row and "DETACHED" in screen_text(app)
        await pilot.press("end")
        await wait_for(pilot, lambda: screen.follow and table.cursor_row == len(screen.rows) - 1, "following")
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, TimelineScreen), "closed")


async def test_timeline_text_from_another_operator_is_data_not_markup():
    async with _on_main_screen(10, (140, 40)) as (app, pilot):
        app.engine.process([TimelineEntry(kind="note", operator="[bold]eve[/]@x", session="s",
                                          message="[red]not markup[/red]", ts=2e9)])
        await _open_timeline(pilot, app)
        text = screen_text(app)
        assert "[red]not markup[/red]" in text and "[bold]eve[/]@x" in text


async def test_an_engine_batch_between_opening_the_timeline_and_its_mount_is_not_a_crash():
    # CI saw it: `L` pushed the screen, an engine batch repainted before the screen was composed,
    # and the table it fills did not exist yet (NoMatches: the TUI exited 1)
    async with _on_main_screen(30, (140, 40)) as (app, pilot):
        app.action_timeline()
        assert isinstance(app.screen, TimelineScreen)
        app.refresh_now()  # the same tick: not composed yet
        await wait_for(pilot, lambda: "Timeline" in screen_text(app), "the timeline, filled on mount")
        assert app.screen.rows and app.return_code is None
