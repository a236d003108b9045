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
    """Counts the rows the view renders (each a Text built, wrapped and styled)."""

    def __init__(self, lines) -> None:
        self.rows: list[int] = []
        self.lines = lines
        real = lines._text
        lines._text = lambda row: (self.rows.append(row), real(row))[1]

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
