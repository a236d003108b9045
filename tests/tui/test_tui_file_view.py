"""Pilot tests of the session file view (issue 13, item 3): the store holds a window of 1000 lines,
the session file every line; going up past the window (or Home, or `o`) shows the file by line
number, a finding whose line was trimmed opens it there, End comes back to the live tail."""

from __future__ import annotations

import re
from pathlib import Path

from conftest import screen_text, wait_for

from sparktui.config import demo_config
from sparktui.engine import Engine
from sparktui.logs.store import LogStore
from sparktui.model import Finding, LogBatch, LogLine
from sparktui.session import Session
from sparktui.timefmt import format_ns
from sparktui.tui.app import SparkApp

NODE, SRC = "spark1", "vllm_qwen35"
N = 5000
T0 = 1_780_000_000.0
SERVE = (Path(__file__).resolve().parents[1] / "fixtures" / "vllm-cpu" / "serve.log").read_text().splitlines()


def _text(seq: int) -> str:
    return f"L{seq:05d} {SERVE[seq % len(SERVE)][:60]}"


def _app(tmp_path: Path) -> SparkApp:
    config = demo_config()
    engine = Engine(config, [], session=Session.create("t", root=tmp_path), log_store=LogStore(1000))
    for first in range(1, N + 1, 500):  # through the engine: the store trims, the session keeps all
        engine.process([LogBatch(NODE, SRC, tuple(
            LogLine(NODE, SRC, _text(s), T0 + s, s, format_ns(T0 + s)) for s in range(first, first + 500)))])
    return SparkApp(engine, live=False, clock=lambda: T0 + N)


async def _started(pilot, app: SparkApp):
    app.refresh_now()
    await pilot.pause()
    return app.screen.active_pane.log_view, app.engine.logs.find(NODE, SRC)


async def _shown(pilot, view, seq: int) -> None:
    f = view.file_lines
    await wait_for(pilot, lambda: view.in_file and f.known and f._line(seq) is not None, f"line {seq} read")
    await pilot.pause()


async def test_up_past_the_window_home_and_the_key_show_the_file_by_line_number_and_end_returns(tmp_path):
    app = _app(tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        view, series = await _started(pilot, app)
        live, f = view.lines, view.file_lines
        assert series.base > 0 and len(series.texts) <= 1100  # the window: the oldest lines are on disk only
        first_held = series.seqs[0]
        assert _text(first_held) in live.series().get(series.base)

        # up at the first held row: the file view, ending on the line just before the window
        live.focus()
        live.scroll_to(y=0, animate=False, force=True)
        await pilot.pause()
        await pilot.press("up")
        await _shown(pilot, view, first_held - 1)
        rows = screen_text(app)
        assert _text(first_held - 1) in rows and _text(first_held) not in rows
        assert re.search(r"session file · line [\d,]+ of 5,000", rows)
        assert f.top_line + f.scrollable_content_region.height - 1 == first_held - 1

        # a line in the middle: its page is read when the view gets there (a placeholder meanwhile)
        assert f._line(2500) is None and f._text(2499).plain == "… line 2,500"
        f.scroll_to(y=2499, animate=False, force=True)
        await _shown(pilot, view, 2500)
        rows = screen_text(app)
        assert "session file · line 2,500 of 5,000" in rows
        top_row = next(r for r in rows.split("\n") if _text(2500) in r)
        assert top_row.split("│")[1].strip().startswith(_text(2500))  # the first row of the pane's log

        # Home: line 1, numbered as the file numbers it
        await pilot.press("home")
        await _shown(pilot, view, 1)
        rows = screen_text(app)
        assert _text(1) in rows and "session file · line 1 of 5,000" in rows
        assert rows.index(_text(1)) < rows.index(_text(2))

        # timestamps come from the file as the live view shows them
        await pilot.press("t")
        await pilot.pause()
        assert re.search(r"\d\d:\d\d:\d\d\.000 L00001 ", screen_text(app))
        await pilot.press("t")

        # End: the live view, following the tail again
        await pilot.press("end")
        await wait_for(pilot, lambda: not view.in_file and live.follow, "back to live")
        await pilot.pause()
        rows = screen_text(app)
        assert _text(N) in rows and "session file" not in rows and "FOLLOW" in rows

        # the key: the file at the live view's top line, and the key again comes back
        await pilot.press("o")
        await wait_for(pilot, lambda: view.in_file and f.known, "file view by key")
        assert f.top_line == series.seqs[int(live.scroll_y)]
        await pilot.press("o")
        await wait_for(pilot, lambda: not view.in_file, "live by key")


async def test_a_finding_whose_line_was_trimmed_opens_the_file_at_its_line_marked(tmp_path):
    app = _app(tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        view, series = await _started(pilot, app)
        f = view.file_lines
        finding = Finding("cuda_oom", "error", "CUDA out of memory", source=f"{NODE}/{SRC}", line=1234, node=NODE)
        assert series.position_of(1234) is None  # trimmed from the store
        app.screen.jump_to_finding(finding)
        await _shown(pilot, view, 1234)
        assert f._mark == 1233
        rows = screen_text(app)
        assert _text(1234) in rows and "no longer held" not in rows
        assert "lost lines" not in rows  # nothing was lost: the numbers hold
        assert f.top_line <= 1234 < f.top_line + f.scrollable_content_region.height
        # a finding whose line is held goes back to the live view, its row marked there
        held = series.seqs[-10]
        app.screen.jump_to_finding(Finding("x", "warning", "held", source=f"{NODE}/{SRC}", line=held, node=NODE))
        await pilot.pause()
        assert not view.in_file and series.get(view.lines._mark) == _text(held)
        # lines lost for the source: the file's numbers after the loss are off, and the title says so
        series.note_gap(lost=7)
        app.screen.jump_to_finding(finding)
        await _shown(pilot, view, 1234)
        assert "off by ≤7 after lost lines" in screen_text(app)


async def test_without_a_session_file_the_view_says_so_and_stays_live(make_app):
    app = make_app(t=60)  # no session recorded
    async with app.run_test(size=(160, 48)) as pilot:
        app.refresh_now()
        await pilot.press("o")
        await pilot.pause()
        view = app.screen.active_pane.log_view
        assert not view.in_file
        assert any("no session file" in str(n.message) for n in app._notifications)


async def test_a_missing_session_file_is_said_in_the_title(tmp_path):
    app = _app(tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        app.refresh_now()
        app.engine.session.close()
        app.engine.session.log_path(NODE, SRC).unlink()
        await pilot.press("o")
        view = app.screen.active_pane.log_view
        await wait_for(pilot, lambda: view.in_file and view.file_lines.known, "answer")
        await pilot.pause()
        assert "session file: No such file or directory" in screen_text(app)
