"""The session file of a pane's source, shown like the live log (issue 13: the store keeps a window,
the session file is the source of truth).

Row ``r`` is line ``r + 1`` of the file, which is line number ``r + 1`` of the source (``LogLine.seq``)
as long as nothing was lost.  The widget does no IO: it asks for pages of ``PAGE`` lines around
the viewport (``Wanted``, read by the pane's worker through ``logs.archive``) and renders what it
is given (``Read``); a row whose page has not come yet is a dim placeholder for that moment.
The look (wrap, timestamps, marks, theme, the row cache) is LogLines'; a filter only highlights here
(narrowing would scan a file of up to 1 GiB).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text
from textual.message import Message
from textual.reactive import reactive
from textual.strip import Strip

from .log_lines import LogLines, compile_filter

if TYPE_CHECKING:
    from ...logs.archive import ArchivedLine
    from ...logs.store import LogSeries

PAGE = 256  # lines read at once
PAGES_KEPT = 24  # pages held (a line is kept to 16 KiB at most: a few MB in the worst case)
POLL_S = 1.0  # how often the file's length is read again while it is shown (it grows)


class FileLines(LogLines):
    follow: reactive[bool] = reactive(False)  # a file view never follows: End goes back to the live one

    class Wanted(Message):
        """Read these pages of ``path`` (none: only how many lines it has now) and post ``Read`` back."""

        def __init__(self, lines: "FileLines", path: Path, pages: tuple[int, ...]) -> None:
            super().__init__()
            self.lines = lines
            self.path = path
            self.pages = pages
            self.page = PAGE

    class Read(Message, bubble=False):
        """What a worker read: the file's line count now, and the pages asked for."""

        def __init__(self, path: Path, count: int, capped: bool, error: str | None,
                     asked: tuple[int, ...], pages: "dict[int, list[ArchivedLine]]") -> None:
            super().__init__()
            self.path, self.asked, self.pages = path, asked, pages  # what was asked, what came
            self.count, self.capped, self.error = count, capped, error  # the file as it is now

    class Leave(Message):
        """Back to the live view (End)."""

    class Moved(Message):
        """The top line changed: the title says where the view is."""

    def __init__(self, store, node: str, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(store, node, id=id, classes=classes)
        self.path: Path | None = None
        self.count = 0
        self.known = False  # the file's length has come back once
        self.capped = False
        self.error: str | None = None
        self._pages: OrderedDict[int, list[ArchivedLine]] = OrderedDict()
        self._asked: set[int] = set()
        self._polling = False
        self._polled = 0.0
        self._gen = 0
        self._goto: tuple[int, str] | None = None

    # ------------------------------------------------------------------ the caller's
    def open(self, source: str, path: Path, seq: int, where: str = "middle", mark: bool = False) -> None:
        """Show ``path`` (the session file of ``source``) at line ``seq``: at the view's ``where``
        (top, middle, bottom) once its length is known; ``mark`` marks that row."""
        self.source = source
        self.path = path
        self.count, self.known, self.capped, self.error = 0, False, False, None
        self._pages.clear()
        self._asked.clear()
        self._polling = False
        self._gen += 1
        self._goto = (max(seq, 1), where)
        self._mark = max(seq, 1) - 1 if mark else None
        self._programmatic = True
        try:
            self.scroll_to(0, 0, animate=False, force=True)
        finally:
            self._programmatic = False
        self._apply_size()
        p = (max(seq, 1) - 1) // PAGE
        self._ask([q for q in (p - 1, p, p + 1) if q >= 0], force=True)

    @property
    def top_line(self) -> int:
        """The file's line at the top of the view (1-based; 0 when empty)."""
        return min(int(self.scroll_y) + 1, self.count)

    def series(self) -> "LogSeries | None":
        return None  # the rows come from the file, never the store

    @property
    def row_count(self) -> int:
        return self.count

    @property
    def total_lines(self) -> int:
        return self.count

    def _row_line(self, row: int) -> int | None:
        return row if 0 <= row < self.count else None

    def set_source(self, source: str | None) -> None:  # a file view is opened, not switched
        self.source = source

    def refresh_data(self) -> None:
        """On the app's refresh: read the file's length again now and then (it grows)."""
        now = time.monotonic()
        if self.path is not None and self.known and not self._polling and now - self._polled >= POLL_S:
            self._polled = now
            self._polling = True
            self.call_later(self._want, self.path, ())

    def set_filter(self, pattern: str | None) -> str | None:
        """Highlight the filter's matches (the live view narrows; a file of 1 GiB is not scanned)."""
        rx = compile_filter(pattern) if pattern else None
        if isinstance(rx, str):
            return rx
        self._rx = rx
        self._filter_gen += 1
        self.refresh()
        return None

    def _restart_scan(self) -> None:
        self._filter_gen += 1

    def _scan(self) -> None:
        self.scanning = False

    def _older_hidden(self) -> bool:
        return False  # the file has them all: Home and up are plain scrolling here

    def action_scroll_end(self) -> None:
        self.post_message(self.Leave())

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if int(old_value) != int(new_value):
            self.post_message(self.Moved())

    # ------------------------------------------------------------------ pages
    def _ask(self, pages: list[int], force: bool = False) -> None:
        if self.path is None:
            return
        last = (self.count - 1) // PAGE if self.known else None
        want = tuple(p for p in pages if p not in self._pages and p not in self._asked
                     and (force or (last is not None and 0 <= p <= last)))
        if want:
            self._asked.update(want)
            self.call_later(self._want, self.path, want)

    def _want(self, path: Path, pages: tuple[int, ...]) -> None:
        # made here, not in the caller's handler: a message remembers the pump that made it, and
        # one made while the LogView handles a message would never bubble past the LogView
        self.post_message(self.Wanted(self, path, pages))

    def on_file_lines_read(self, msg: "FileLines.Read") -> None:
        if msg.path != self.path:
            return  # an answer for a file no longer shown
        self._asked.difference_update(msg.asked)
        if not msg.asked:
            self._polling = False
        grew = msg.count != self.count
        self.count, self.capped, self.error, self.known = msg.count, msg.capped, msg.error, True
        for p, got in msg.pages.items():
            self._pages[p] = got
            self._pages.move_to_end(p)
        while len(self._pages) > PAGES_KEPT:
            self._pages.popitem(last=False)
        if msg.pages or grew:
            self._gen += 1
        self._apply_size()
        if self._goto is not None:
            self._go(*self._goto)
            self._goto = None
        self.post_message(self.Moved())
        self.refresh()

    def _go(self, seq: int, where: str) -> None:
        row = min(seq - 1, max(self.count - 1, 0))
        height = max(self.scrollable_content_region.height, 1)
        y = {"top": row, "bottom": row - height + 1}.get(where, row - height // 2)
        self._programmatic = True
        try:
            self.scroll_to(y=max(0, y), animate=False, force=True)
        finally:
            self._programmatic = False

    def _line(self, seq: int) -> "ArchivedLine | None":
        p = (seq - 1) // PAGE
        got = self._pages.get(p)
        if got is None:
            return None
        i = seq - 1 - p * PAGE
        return got[i] if i < len(got) else None

    # ------------------------------------------------------------------ rendering
    def _build_frame(self, width: int, height: int) -> list[Strip]:
        if self.known and self.count:
            top = int(self.scroll_y)
            first, last = top // PAGE, min(top + height, self.count - 1) // PAGE
            self._ask(list(range(first - 1, last + 2)))  # the viewport's pages and one either side
        return super()._build_frame(width, height)

    def _text(self, row: int) -> Text | None:
        if not 0 <= row < self.count:
            return None
        line = self._line(row + 1)
        if line is None:  # its page is on its way: a placeholder for that moment
            return Text(f"… line {row + 1:,}", style=self.get_component_rich_style("loglines--pending", partial=True),
                        end="", no_wrap=not self.wrap)
        return self._styled(line.text, row, line.ts if self.show_timestamps else None, line.more)

    def _view(self) -> tuple:
        # the page generation: a row drawn as a placeholder is drawn again once its page is here
        return (("file", self.path), self.wrap, self._filter_gen, self.show_timestamps, self.app.theme,
                self._gen, self.rich_style)

    def _data_key(self, s) -> tuple:
        return (self._gen, self.count)
