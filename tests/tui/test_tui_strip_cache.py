"""The log view's row cache (issue 13 item 1): a frame built again over the same look renders no
row, scrolling renders only the rows it brings in, and each thing a row's look depends on (wrap,
timestamps, the filter, the theme, the width) renders every visible row afresh."""

from __future__ import annotations

from conftest import screen_text

from sparktui.model import LogBatch, LogLine

NODE, SRC = "spark1", "vllm_qwen35"


def _lines(app):
    return app.screen.active_pane.log_view.lines


def _append(app, texts: list[str]) -> None:
    series = app.engine.logs.find(NODE, SRC)
    start = series.last_seq if series else 0
    app.engine.process([LogBatch(NODE, SRC, tuple(LogLine(NODE, SRC, t, seq=start + i + 1)
                                                     for i, t in enumerate(texts)))])
    app.refresh_now()


class Renders:
    """Counts the rows the view renders (each a Text built, wrapped and styled, or a plain row drawn)."""

    def __init__(self, lines) -> None:
        self.rows: list[int] = []
        self.lines = lines
        real, plain = lines._text, lines._plain_row
        lines._text = lambda row: (self.rows.append(row), real(row))[1]
        lines._plain_row = lambda row, *rest: (self.rows.append(row), plain(row, *rest))[1]

    async def after(self, pilot, change=None) -> set[int]:
        """The rows rendered by ``change`` (None: the same frame built again)."""
        self.rows.clear()
        if change is not None:
            await change()
        self.lines._frame_key = None  # build the frame again even where nothing it keys on moved
        self.lines.refresh()
        await pilot.pause()
        await pilot.pause()
        return set(self.rows)


async def _on_screen(pilot, count: Renders) -> set[int]:
    """The rows of the viewport: what a frame renders with the cache emptied."""
    count.lines._row_cache.clear()
    return await count.after(pilot)


async def test_each_thing_a_row_depends_on_renders_the_rows_again_and_nothing_else_does(make_app):
    app = make_app(t=120)
    async with app.run_test(size=(140, 40)) as pilot:
        app.refresh_now()
        _append(app, [f"INFO cache row {i} " + "x" * (i % 90) for i in range(400)])
        await pilot.pause()
        lines = _lines(app)
        count = Renders(lines)

        assert not await count.after(pilot)  # the same look: every row from the cache

        async def press(key):
            await pilot.press(key)

        async def scroll_up():
            lines.scroll_to(y=lines.scroll_y - 5, animate=False)

        brought_in = await count.after(pilot, scroll_up)  # scrolling renders only the rows it brings in
        assert 1 <= len(brought_in) <= 5, sorted(brought_in)
        await pilot.press("end")

        for what, change in (("timestamps", lambda: press("t")), ("wrap", lambda: press("w")),
                             ("wrap off", lambda: press("w"))):
            rows = await count.after(pilot, change)
            assert rows and rows == await _on_screen(pilot, count), what  # every visible row, no other
            assert not await count.after(pilot), what  # and the new look is cached in its turn

        async def filter_all():
            assert lines.set_filter("cache row") is None

        rows = await count.after(pilot, filter_all)
        assert rows and rows == await _on_screen(pilot, count), "filter"
        assert not await count.after(pilot)

        async def other_theme():
            app.theme = next(name for name in app.available_themes if name != app.theme and name.startswith("sparktui"))

        rows = await count.after(pilot, other_theme)
        assert rows and rows == await _on_screen(pilot, count), "theme"
        assert not await count.after(pilot)

        async def narrower():
            await pilot.resize_terminal(100, 40)

        rows = await count.after(pilot, narrower)
        assert rows and rows == await _on_screen(pilot, count), "width"
        assert "INFO cache row 399" in screen_text(app)


def _cells(strip) -> list[tuple[str, object]]:
    return [(ch, seg.style) for seg in strip for ch in seg.text]


async def test_a_plain_row_draws_the_same_cells_as_the_general_path(make_app):
    """The common row is drawn without Text.render (the cost of a flood's repaints); at every scroll
    offset, with and without timestamps, its cells and styles are the general path's."""
    from textual.strip import Strip

    app = make_app(t=120)
    async with app.run_test(size=(100, 30)) as pilot:
        app.refresh_now()
        series = app.engine.logs.find(NODE, SRC)
        start = series.last_seq if series else 0
        texts = ["INFO 12-01 ready " + "y" * i for i in range(0, 120, 7)] + ["", "tab\there", "caf\u00e9 unicode"]
        app.engine.process([LogBatch(NODE, SRC, tuple(LogLine(NODE, SRC, t, ts=1764600000.25 + i, seq=start + i + 1)
                                                         for i, t in enumerate(texts)))])
        app.refresh_now()
        await pilot.pause()
        lines = _lines(app)
        width = lines.scrollable_content_region.width
        for stamps in (False, True):
            lines.show_timestamps = stamps
            await pilot.pause()
            view = lines._view()
            plain_rows = 0
            for row in range(lines.row_count):
                text = lines._text(row)
                for x in (0, 5, 13, 20, 60):
                    plain = lines._plain_row(row, width, x, view)
                    if plain is None:
                        continue
                    plain_rows += 1
                    general = Strip(list(text.render(app.console, end=""))).crop(x, x + width)
                    general = general.extend_cell_length(width).apply_style(view[-1])
                    assert _cells(plain) == _cells(general), (row, x, stamps)
                    assert plain.cell_length == width
            assert plain_rows >= 5 * (len(texts) - 2), stamps  # every ASCII row took the plain path
            tab_row = next(r for r in range(lines.row_count) if "\t" in (lines.series().get(lines._row_line(r)) or ""))
            assert lines._plain_row(tab_row, width, 0, view) is None  # tabs and non-ASCII: the general path
