"""Pilot tests of the log view: filter, follow/detach, container switch, literal text."""

from __future__ import annotations

import re

from conftest import screen_text, wait_for

from sparktui.model import ContainerChanged, ContainerInfo, ContainerState, LogBatch, LogLine
from sparktui.tui.widgets.log_lines import SCAN_BUDGET


def _lines(app):
    return app.screen.active_pane.log_view.lines


def _append(app, node: str, source: str, texts: list[str]) -> None:
    series = app.engine.logs.find(node, source)
    start = series.total if series else 0
    batch = LogBatch(node, source, tuple(LogLine(node, source, t, seq=start + i + 1) for i, t in enumerate(texts)))
    app.engine.process([batch])
    app.refresh_now()


def _visible_rows(lines) -> list[str]:
    return [lines.series().get(lines._row_line(r)) for r in range(lines.row_count)]


async def test_filter_narrows_lines_and_bad_regex_is_an_inline_error(make_app):
    app = make_app(t=200)
    async with app.run_test(size=(160, 48)) as pilot:
        app.refresh_now()
        lines = _lines(app)
        total = lines.row_count
        assert total > 100
        await pilot.press("slash", *"Capturing CUDA")
        await wait_for(pilot, lambda: lines.filter_pattern == "Capturing CUDA" and not lines.scanning, "filter")
        rows = _visible_rows(lines)
        assert 0 < len(rows) < total
        assert all("Capturing CUDA" in r for r in rows)
        assert f"{len(rows):,} matches" in screen_text(app)
        await pilot.press("enter")  # keeps the filter, closes the box
        assert not app.screen.active_pane.log_view.filtering
        # a bad regex: inline error, the app keeps running, the previous filter stays
        await pilot.press("slash", "end", "left_square_bracket")
        view = app.screen.active_pane.log_view
        await wait_for(pilot, lambda: view.filter_error is not None, "regex error")
        assert "bad regex" in screen_text(app)
        assert lines.filter_pattern == "Capturing CUDA"
        assert app.is_running
        # Esc closes the box; Esc again clears the filter
        await pilot.press("escape")
        await pilot.press("escape")
        await wait_for(pilot, lambda: lines.filter_pattern is None, "filter cleared")
        assert lines.row_count == total


async def test_filter_over_a_large_store_is_incremental(make_app):
    app = make_app(t=30)
    async with app.run_test(size=(120, 40)) as pilot:
        app.refresh_now()
        _append(app, "spark1", "vllm_qwen35", [f"line {i} {'needle' if i % 1000 == 0 else 'hay'}" for i in range(3 * SCAN_BUDGET)])
        lines = _lines(app)
        assert lines.set_filter("needle") is None
        assert lines.scanning  # the first step stopped at its budget instead of blocking
        await wait_for(pilot, lambda: not lines.scanning, "scan done")
        assert lines.row_count == 3 * SCAN_BUDGET // 1000 + sum(
            1 for t in app.engine.logs.find("spark1", "vllm_qwen35").texts[:-3 * SCAN_BUDGET] if "needle" in t)


async def test_scroll_up_detaches_counts_new_lines_and_end_reattaches(make_app):
    app = make_app(t=120)
    async with app.run_test(size=(160, 48)) as pilot:
        app.refresh_now()
        await pilot.pause()
        lines = _lines(app)
        assert lines.follow and lines.scroll_y == lines.max_scroll_y > 0
        lines.focus()
        await pilot.press("pageup")
        await wait_for(pilot, lambda: not lines.follow, "detach")
        assert "DETACHED" in screen_text(app)
        y = lines.scroll_y
        _append(app, "spark1", "vllm_qwen35", [f"new line {i}" for i in range(7)])
        await pilot.pause()
        assert lines.pending == 7
        assert lines.scroll_y == y  # the view stays where the reader is
        assert "7 new lines" in screen_text(app)
        await pilot.press("end")
        await wait_for(pilot, lambda: lines.follow, "re-attach")
        await pilot.pause()
        assert lines.scroll_y == lines.max_scroll_y
        assert "new lines" not in screen_text(app)
        _append(app, "spark1", "vllm_qwen35", ["the newest line"])
        await pilot.pause()
        assert "the newest line" in screen_text(app)


async def test_wrap_and_timestamps_toggle(make_app):
    app = make_app(t=120)
    async with app.run_test(size=(100, 40)) as pilot:
        app.refresh_now()
        long = "L" * 150 + " tail-of-the-long-line"
        _append(app, "spark1", "vllm_qwen35", [long])
        await pilot.pause()
        assert "tail-of-the-long-line" not in screen_text(app)
        await pilot.press("w")
        await pilot.pause()
        assert _lines(app).wrap
        assert "tail-of-the-long-line" in screen_text(app)
        await pilot.press("t")
        await pilot.pause()
        assert re.search(r"\d\d:\d\d:\d\d\.\d\d\d ", screen_text(app))


async def test_container_switch_by_key_and_by_table(make_app):
    app = make_app(t=60)
    async with app.run_test(size=(160, 48)) as pilot:
        app.refresh_now()
        pane = app.screen.active_pane
        assert pane.log_view.source == "vllm_qwen35"
        _append(app, "spark1", "open-webui", ["webui: listening on 0.0.0.0:8080"])
        sources = pane.sources()
        assert {"vllm_qwen35", "open-webui"} <= set(sources)
        seen = []
        for _ in sources:  # `c` cycles through every source and comes back
            await pilot.press("c")
            await pilot.pause()
            seen.append(pane.log_view.source)
            if seen[-1] == "open-webui":
                assert "webui: listening" in screen_text(app)
        assert sorted(seen) == sorted(sources) and seen[-1] == "vllm_qwen35"
        # the table: Enter on a row shows that container's log
        table = pane.query_one("DataTable")
        table.focus()
        names = [str(k.value) for k in table.rows]
        table.move_cursor(row=names.index("open-webui"))
        later = app.clock() + 5
        app.clock = lambda: later  # ages change: the table refills, the cursor stays put
        app.refresh_now()
        await pilot.pause()
        assert table.cursor_row == names.index("open-webui")
        await pilot.press("enter")
        await wait_for(pilot, lambda: pane.log_view.source == "open-webui", "source from table")


async def test_markup_and_ansi_in_log_text_and_names_show_literally(make_app):
    app = make_app(t=30)
    async with app.run_test(size=(160, 48)) as pilot:
        app.refresh_now()
        _append(app, "spark1", "vllm_qwen35", ["[bold red]not markup[/] \x1b[31mred\x1b[0m [link=x]y[/link]"])
        evil = ContainerInfo(id="f" * 64, name="[blink]evil[/blink]", image="img:[b]x[/b]", state=ContainerState.RUNNING,
                             started_at=app.clock() - 5)
        app.engine.process([ContainerChanged("spark1", evil)])
        app.refresh_now()
        await pilot.pause()
        text = screen_text(app)
        assert "[bold red]not markup[/] red [link=x]y[/link]" in text
        assert "\x1b" not in text
        assert "[blink]evil[/blink]" in text
        assert "img:[b]x[/b]" in text


async def test_save_writes_the_filtered_view_to_a_file(make_app, tmp_path, monkeypatch):
    monkeypatch.setenv("SPARKTUI_STATE_DIR", str(tmp_path))
    app = make_app(t=120)
    async with app.run_test(size=(160, 48)) as pilot:
        app.refresh_now()
        lines = _lines(app)
        lines.set_filter("Capturing CUDA")
        await wait_for(pilot, lambda: not lines.scanning, "filter")
        await pilot.press("s")
        await app.workers.wait_for_complete()
        files = list((tmp_path / "exports").glob("spark1-vllm_qwen35-*.log"))
        assert len(files) == 1
        saved = files[0].read_text().splitlines()
        assert saved == _visible_rows(lines) and saved


async def test_an_appended_batch_renders_only_its_new_rows(make_app):
    """Rows are cached by what they depend on (Textual's Log, toolong): while following, a batch of 3
    renders 3 rows, not the viewport; wrap, a filter or the theme render afresh."""
    app = make_app(t=120)
    async with app.run_test(size=(160, 48)) as pilot:
        app.refresh_now()
        await pilot.pause()
        lines = _lines(app)
        assert lines.follow
        rendered: list[int] = []
        real, plain = lines._text, lines._plain_row  # a row is rendered by one of the two
        lines._text = lambda row: (rendered.append(row), real(row))[1]
        lines._plain_row = lambda row, *rest: (rendered.append(row), plain(row, *rest))[1]
        _append(app, "spark1", "vllm_qwen35", ["cache a", "cache b", "cache c"])
        await pilot.pause()
        assert "cache c" in screen_text(app)
        assert len(set(rendered)) == 3, rendered
        assert {lines._row_line(r) for r in rendered} == {lines.total_lines - 3, lines.total_lines - 2,
                                                         lines.total_lines - 1}
        rendered.clear()
        await pilot.press("w")  # wrap changes every row: every line on screen renders again
        await pilot.pause()
        shown = sum(len(lines._wrapped(r, lines.scrollable_content_region.width)) for r in set(rendered))
        assert shown >= lines.scrollable_content_region.height, (shown, sorted(set(rendered)))


async def test_a_flood_dropped_to_its_tail_is_said_on_the_pane_and_a_finding_still_jumps_to_its_line(make_app):
    """The engine drops a source that is too far behind to its tail; the pane says how many lines
    it skipped and that the session file has them; a finding's line number finds its row."""
    app = make_app(t=60)
    eng = app.engine
    async with app.run_test(size=(200, 48)) as pilot:
        app.refresh_now()
        lines = _lines(app)
        series = eng.logs.find("spark1", "vllm_qwen35")
        first = series.last_seq + 1
        eng.SKIP_ABOVE = 500
        for k in range(10):  # 2000 lines queued before the pump runs
            eng.emit(LogBatch("spark1", "vllm_qwen35", tuple(
                LogLine("spark1", "vllm_qwen35", f"flood {first + k * 200 + i}", seq=first + k * 200 + i)
                for i in range(200))))
        while eng._pending:
            eng.drain()
        app.refresh_now()
        await pilot.pause()
        assert series.skipped == 1600  # each batch with more than 500 lines queued behind it, itself included
        assert "dropping to the tail: 1,600 skipped, kept in the session file" in screen_text(app)
        assert f"{first + 1999:,} lines" in screen_text(app)  # the last line's number, as in the file
        assert lines.jump_to_line(first + 1700)
        await pilot.pause()
        assert lines._mark is not None and series.get(lines._mark) == f"flood {first + 1700}"
        assert not lines.jump_to_line(first + 10)  # skipped: the session file has it, the view does not
