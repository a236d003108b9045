"""A virtualised log viewer: renders only the viewport, reading slices of ``engine.logs``.

Modelled on toolong's LogLines: the widget never holds the log, it asks the store for the rows on
screen.  It follows the tail until the user scrolls up (then counts "N new lines"), filters by
regex incrementally (a budget of lines per step, so a big store never blocks the loop), wraps
and shows timestamps on demand.  Lines are ``rich.text.Text(line)``: never markup.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from typing import TYPE_CHECKING

from rich.segment import Segment
from rich.text import Text
from textual.cache import LRUCache
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ..format import stamp

if TYPE_CHECKING:
    from ...logs.store import LogSeries, LogStore

SCAN_BUDGET = 40_000  # lines the filter examines per step before yielding to the loop
MAX_RENDER = 4_000  # characters of one line rendered (a 10 MB line stays a line)
TS_WIDTH = 13
LINE_CACHE = 4_096  # rendered rows kept: a frame re-renders only rows it has not drawn before


def compile_filter(pattern: str) -> "re.Pattern[str] | str":
    """The filter's regex (smart case: all-lowercase means case-insensitive), or why it is bad."""
    flags = 0 if any(c.isupper() for c in pattern) else re.IGNORECASE
    try:
        return re.compile(pattern, flags)
    except (re.error, RecursionError, OverflowError) as exc:
        return f"bad regex: {exc}"


class LogLines(ScrollView, can_focus=True):
    COMPONENT_CLASSES = {"loglines--timestamp", "loglines--match", "loglines--mark", "loglines--more",
                         "loglines--pending"}

    follow: reactive[bool] = reactive(True)
    wrap: reactive[bool] = reactive(False)
    show_timestamps: reactive[bool] = reactive(False)

    class FollowChanged(Message):
        def __init__(self, lines: "LogLines") -> None:
            super().__init__()
            self.lines = lines

    class OlderWanted(Message):
        """The user went up past the first line held in memory (or Home) while the session file
        has older ones: ``seq`` is the line to show there (1 for Home)."""

        def __init__(self, lines: "LogLines", seq: int) -> None:
            super().__init__()
            self.lines = lines
            self.seq = seq

    class FilterDone(Message):
        def __init__(self, lines: "LogLines", matches: int) -> None:
            super().__init__()
            self.lines = lines
            self.matches = matches

    def __init__(self, store: "LogStore", node: str, source: str | None = None, *,
                 id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.store = store
        self.node = node
        self.source = source
        self._seen_total = 0
        self._max_len = 0
        self._rx: re.Pattern[str] | None = None
        self._matches: list[int] = []
        self._scanned = 0
        self._scan_scheduled = False
        self.scanning = False
        self._filter_gen = 0
        self._rows_at_detach = 0
        self.pending = 0
        self._programmatic = False
        self._mark: int | None = None
        self._frame_key: tuple | None = None
        self._frame: list[Strip] = []
        # a rendered row by everything it depends on (Textual's Log, toolong): an appended batch renders
        # only its new rows, scrolling reuses the rest
        self._row_cache: LRUCache[tuple, list[Strip]] = LRUCache(LINE_CACHE)
        self._plain_view: tuple | None = None
        self._plain_ts = None
        self._tail_top = 0

    # ------------------------------------------------------------------ data
    def series(self) -> "LogSeries | None":
        return self.store.find(self.node, self.source) if self.source else None

    @property
    def filter_pattern(self) -> str | None:
        return self._rx.pattern if self._rx else None

    @property
    def row_count(self) -> int:
        s = self.series()
        if s is None:
            return 0
        if self._rx is not None:
            return len(self._matches)
        return s.total - s.base

    @property
    def total_lines(self) -> int:
        s = self.series()
        return s.total if s else 0

    def _row_line(self, row: int) -> int | None:
        """Global 0-based line number shown at ``row``."""
        s = self.series()
        if s is None or row < 0:
            return None
        if self._rx is not None:
            return self._matches[row] if row < len(self._matches) else None
        n = s.base + row
        return n if n < s.total else None

    def set_source(self, source: str | None) -> None:
        if source == self.source:
            return
        self.source = source
        self._seen_total = 0
        self._max_len = 0
        self._mark = None
        self.pending = 0
        self._restart_scan()
        self.follow = True
        self.refresh_data()

    def refresh_data(self) -> None:
        """Pick up new lines from the store (cheap when nothing changed)."""
        s = self.series()
        if s is not None and s.total != self._seen_total:
            new = s.total - self._seen_total
            tail = s.texts[-min(new, len(s.texts), 5000):] if new > 0 else []
            if tail:
                self._max_len = max(self._max_len, min(MAX_RENDER, max(len(t) for t in tail)))
            self._seen_total = s.total
        if self._rx is not None:
            self._scan()
        self._apply_size()

    def shown_texts(self) -> list[str]:
        """Every line the view holds now (the filtered set when a filter is on)."""
        s = self.series()
        if s is None:
            return []
        if self._rx is None:
            return s.window()[1]
        return [t for t in (s.get(n) for n in self._matches) if t is not None]

    # ------------------------------------------------------------------ filter
    def set_filter(self, pattern: str | None) -> str | None:
        """Apply a regex (smart case: all-lowercase means case-insensitive).  Returns an error
        message for an invalid pattern, leaving the current filter in place."""
        if not pattern:
            if self._rx is not None:
                self._rx = None
                self._restart_scan()
                self._after_view_change()
            return None
        rx = compile_filter(pattern)
        if isinstance(rx, str):
            return rx
        self._rx = rx
        self._restart_scan()
        self._scan()
        self._after_view_change()
        return None

    def _restart_scan(self) -> None:
        s = self.series()
        self._matches = []
        self._scanned = s.base if s else 0
        self._filter_gen += 1
        self.scanning = self._rx is not None

    def _scan(self) -> None:
        s = self.series()
        rx = self._rx
        if s is None or rx is None:
            self.scanning = False
            return
        if self._matches and self._matches[0] < s.base:  # lines trimmed from the store
            del self._matches[:bisect_left(self._matches, s.base)]
        start = max(self._scanned, s.base)
        stop = min(s.total, start + SCAN_BUDGET)
        search = rx.search
        self._matches.extend(n for n, _, text in s.slice(start, stop) if search(text))
        self._scanned = stop
        if stop < s.total:
            self.scanning = True
            if not self._scan_scheduled:
                self._scan_scheduled = True
                self.call_later(self._continue_scan)
        elif self.scanning:
            self.scanning = False
            self.post_message(self.FilterDone(self, len(self._matches)))

    def _continue_scan(self) -> None:
        self._scan_scheduled = False
        if self._rx is None:
            return
        self._scan()
        self._apply_size()

    # ------------------------------------------------------------------ follow / detach
    def watch_follow(self, follow: bool) -> None:
        if follow:
            self.pending = 0
            self._scroll_tail()
        else:
            self._rows_at_detach = self.row_count
        self.post_message(self.FollowChanged(self))

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        # the user moved up (wheel, keys, scrollbar); a clamp after shrinking stays at the bottom
        if self.follow and not self._programmatic and new_value < old_value and new_value < self.max_scroll_y:
            self.follow = False

    def watch_wrap(self) -> None:
        self._after_view_change()

    def watch_show_timestamps(self) -> None:
        self._after_view_change()

    def _after_view_change(self) -> None:
        self._frame_key = None
        self._apply_size()
        if not self.follow:
            self._rows_at_detach = self.row_count
            self.pending = 0

    def _scroll_tail(self) -> None:
        self._programmatic = True
        try:
            self.scroll_to(y=self.max_scroll_y, animate=False, force=True)
        finally:
            self._programmatic = False

    def action_scroll_end(self) -> None:
        self.follow = True
        self._scroll_tail()

    def action_scroll_home(self) -> None:
        if self._older_hidden():
            self.post_message(self.OlderWanted(self, 1))
            return
        self.follow = False
        super().action_scroll_home()

    # up past the top: the session file has what the store no longer holds
    def action_scroll_up(self) -> None:
        if not self._past_top():
            super().action_scroll_up()

    def action_page_up(self) -> None:
        if not self._past_top():
            super().action_page_up()

    def _on_mouse_scroll_up(self, event) -> None:
        # Textual calls each class's handler in turn: Widget's scrolls unless this one prevents it
        if not (event.ctrl or event.shift) and self._past_top():
            event.prevent_default()
            event.stop()

    def _older_hidden(self) -> bool:
        """Lines of this source that the store does not hold (trimmed, or skipped under a flood)."""
        s = self.series()
        return s is not None and (s.base > 0 or s.skipped > 0)

    def _past_top(self) -> bool:
        """At the first row already and older lines exist only in the file: ask for them."""
        if self.scroll_y > 0 or not self._older_hidden():
            return False
        s = self.series()
        assert s is not None
        first = s.seqs[0] if s.seqs else s.last_seq + 1  # all skipped: the file has up to the last
        if first <= 1:
            return False
        self.post_message(self.OlderWanted(self, first - 1))
        return True

    def jump_to_line(self, seq: int) -> bool:
        """Show line number ``seq`` (a finding's line: LogLine.seq), marked, detached; False when
        the store does not hold it (trimmed, or skipped under a flood: the session file has it)."""
        s = self.series()
        pos = s.position_of(seq) if s is not None else None
        if pos is None:
            return False
        self.jump_to(pos)
        return True

    def jump_to(self, lineno: int) -> None:
        """Show position ``lineno`` (0-based, in the store), marked, detached."""
        s = self.series()
        if s is None:
            return
        if self._rx is not None:
            self.set_filter(None)
        self._mark = lineno
        self.follow = False
        self._apply_size()
        row = lineno - s.base
        self._programmatic = True
        try:
            self.scroll_to(y=max(0, row - self.scrollable_content_region.height // 2), animate=False, force=True)
        finally:
            self._programmatic = False
        self.refresh()

    # ------------------------------------------------------------------ layout
    def _apply_size(self) -> None:
        rows = self.row_count
        region = self.scrollable_content_region
        width, height = region.width, max(region.height, 1)
        prefix = TS_WIDTH if self.show_timestamps else 0
        if self.wrap:
            self._tail_top = self._compute_tail_top(rows, max(width, 1), height)
            virtual = Size(max(width, 1), self._tail_top + height if rows else 0)
        else:
            virtual = Size(self._max_len + prefix + 1, rows)
        self._programmatic = True
        try:
            if virtual != self.virtual_size:
                # it grows with every appended batch, and assigning it asks for a layout pass that
                # re-renders the whole screen (90 of them in 20 key presses under a flood); only a
                # scrollbar coming or going changes the layout, and _scroll_update's own reactives
                # ask for that pass then
                self.set_reactive(LogLines.virtual_size, virtual)
                self._scroll_update(virtual)
        finally:
            self._programmatic = False
        if self.follow:
            self._scroll_tail()
        else:
            self.pending = max(0, rows - self._rows_at_detach)
        self.refresh()

    def on_resize(self) -> None:
        self._frame_key = None
        self._apply_size()

    def _compute_tail_top(self, rows: int, width: int, height: int) -> int:
        used = 0
        row = rows
        while row > 0 and used < height:
            row -= 1
            used += len(self._wrapped(row, width))
        return row

    # ------------------------------------------------------------------ rendering
    def _text(self, row: int) -> Text | None:
        n = self._row_line(row)
        if n is None:
            return None
        s = self.series()
        assert s is not None
        raw = s.get(n)
        if raw is None:
            return None
        return self._styled(raw, n, s.stamp(n) if self.show_timestamps else None)

    def _styled(self, raw: str, n: int, ts: float | None, cut: int = 0) -> Text:
        """Line ``n`` as shown: cut to MAX_RENDER (``cut``: what the reader already left out of
        ``raw``, counted as characters), tabs, filter matches, timestamp, mark."""
        more = len(raw) - MAX_RENDER + cut
        line = Text(raw[:MAX_RENDER] if len(raw) > MAX_RENDER else raw, end="", no_wrap=not self.wrap)
        if "\t" in raw:
            line.expand_tabs(4)
        if self._rx is not None:
            line.highlight_regex(self._rx, self.get_component_rich_style("loglines--match", partial=True))
        if more > 0:
            line.append(f" … {more} more characters", self.get_component_rich_style("loglines--more", partial=True))
        if self.show_timestamps:
            line = Text.assemble((stamp(ts) + " ", self.get_component_rich_style("loglines--timestamp", partial=True)), line,
                                 end="", no_wrap=not self.wrap)
        if n == self._mark:
            line.stylize(self.get_component_rich_style("loglines--mark", partial=True))
        return line

    def _view(self) -> tuple:
        """What every row's look depends on besides its own line (one per frame: rich_style walks
        the ancestors)."""
        return (id(self.series()), self.wrap, self._filter_gen, self.show_timestamps, self.app.theme,
                self.rich_style)

    def _wrapped(self, row: int, width: int, view: tuple | None = None) -> list[Strip]:
        """The finished strips of one row, wrapped to ``width`` (cached)."""
        view = view or self._view()
        style = view[-1]
        n = self._row_line(row)
        key = (n, width, 0, n == self._mark, view) if n is not None else None
        if key is not None:
            hit = self._row_cache.get(key)
            if hit is not None:
                return hit
        text = self._text(row)
        if text is None:
            return [Strip.blank(width).apply_style(style)]
        console = self.app.console
        out = [Strip(list(part.render(console, end=""))).extend_cell_length(width).apply_style(style)
               for part in text.wrap(console, width)] or [Strip.blank(width).apply_style(style)]
        self._row_cache[key] = out
        return out

    def _row_strip(self, row: int, width: int, x: int, view: tuple) -> Strip:
        """The finished strip of one unwrapped row, scrolled to ``x`` (cached)."""
        style = view[-1]
        n = self._row_line(row)
        if n is None:
            return Strip.blank(width).apply_style(style)
        key = (n, width, x, n == self._mark, view)
        hit = self._row_cache.get(key)
        if hit is not None:
            return hit[0]
        strip = self._plain_row(row, width, x, view)
        if strip is None:
            text = self._text(row)
            if text is None:
                return Strip.blank(width).apply_style(style)
            strip = Strip(list(text.render(self.app.console, end=""))).crop(x, x + width)
            strip = strip.extend_cell_length(width).apply_style(style)
        self._row_cache[key] = [strip]
        return strip

    def _plain_row(self, row: int, width: int, x: int, view: tuple) -> Strip | None:
        """The common row (short printable ASCII, no filter, not the mark) cut and padded as plain
        strings: a third of Text.render's cost, and a flood repaints every row on screen 10 times a
        second.  None: the general path (``_styled``) draws it; both draw the same cells."""
        n = self._row_line(row)
        if n is None or self._rx is not None or n == self._mark:
            return None
        s = self.series()
        raw = s.get(n) if s is not None else None
        if raw is None or len(raw) > MAX_RENDER or not (raw.isascii() and raw.isprintable()):
            return None
        style = view[-1]
        if self._plain_view is not view:  # the timestamp's style, once per frame (it walks the ancestors)
            self._plain_view = view
            self._plain_ts = style + self.get_component_rich_style("loglines--timestamp", partial=True)
        segments = []
        if self.show_timestamps:
            ts = (stamp(s.stamp(n)) + " ")[x:x + width]
            if ts:
                segments.append(Segment(ts, self._plain_ts))
            x = max(0, x - TS_WIDTH)
            width -= len(ts)
        if width > 0:
            body = raw[x:x + width]
            segments.append(Segment(body + " " * (width - len(body)), style))
        return Strip(segments, sum(len(seg.text) for seg in segments))

    def _build_frame(self, width: int, height: int) -> list[Strip]:
        view = self._view()
        style = view[-1]
        top = int(self.scroll_y)
        rows = self.row_count
        strips: list[Strip] = []
        if self.wrap:
            if self.follow:  # bottom-anchored so the newest line is whole
                row = rows
                while row > 0 and len(strips) < height:
                    row -= 1
                    strips[:0] = self._wrapped(row, width, view)
                strips = strips[-height:]
            else:
                row = top
                while row < rows and len(strips) < height:
                    strips.extend(self._wrapped(row, width, view))
                    row += 1
                strips = strips[:height]
        else:
            x = int(self.scroll_x)
            return [self._row_strip(top + y, width, x, view) for y in range(height)]
        return [s if s.cell_length == width else s.extend_cell_length(width).apply_style(style) for s in strips]

    def _data_key(self, s: "LogSeries | None") -> tuple:
        """What the frame's rows were read from: a change renders the frame again."""
        return (s.version if s else -1, s.total if s else 0)

    def render_line(self, y: int) -> Strip:
        region = self.scrollable_content_region
        width, height = region.width, region.height
        s = self.series()
        key = (int(self.scroll_x), int(self.scroll_y), width, height, *self._data_key(s), len(self._matches),
               self._filter_gen, self.wrap, self.show_timestamps, self.follow, self._mark, self.source, self.app.theme)
        if key != self._frame_key:
            self._frame = self._build_frame(width, height)
            self._frame_key = key
        if y < len(self._frame):
            return self._frame[y]
        return Strip([Segment(" " * width, self.rich_style)], width)
