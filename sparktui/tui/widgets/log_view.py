"""The log panel of a node pane: title bar, filter box, virtual lines, "N new lines" pill.

Two views of one source: the live one (``LogLines``, what the store holds, following the tail) and
the session file (``FileLines``, every line the file kept, by line number), opened by going up past
the first line held, Home, the "older lines" key or a finding whose line is no longer held; End
(or the same key) comes back to the live view."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.content import Content
from textual.widgets import Input, Static

from .file_lines import FileLines
from .log_lines import LogLines

if TYPE_CHECKING:
    from ...logs.store import LogSeries, LogStore


def gap_notes(series: "LogSeries") -> list[tuple[str, str]]:
    """What this view does not show, said plainly (engine.py: a flood drops a source to its tail)."""
    out = []
    if series.skipped:
        out.append((f"  dropping to the tail: {series.skipped:,} skipped, kept in the session file", "$warning"))
    if series.lost:
        out.append((f"  {series.lost:,} lost (reader too far behind)", "$error"))
    if series.unsaved:
        out.append((f"  session file full: {series.unsaved:,} not on disk", "$warning"))
    return out


class LogView(Vertical):
    def __init__(self, store: "LogStore", node: str, *, log_file: "Callable[[str], Path | None] | None" = None,
                 id: str | None = None) -> None:
        """``log_file(source)``: the session file of a source, or None (no session is recorded)."""
        super().__init__(id=id)
        self.store = store
        self.node = node
        self.log_file = log_file
        self.filter_error: str | None = None
        self._live = LogLines(self.store, self.node, classes="log-lines")
        self._file = FileLines(self.store, self.node, classes="log-lines file-lines")

    def compose(self) -> ComposeResult:
        yield Static(classes="log-title")
        yield Input(placeholder="regex filter (Enter keeps it, Esc clears)", classes="log-filter")
        yield Static(classes="log-filter-error")
        yield self._live
        yield self._file
        yield Static(classes="log-pill")

    @property
    def lines(self) -> LogLines:
        """The live view (what the store holds)."""
        return self._live

    @property
    def file_lines(self) -> FileLines:
        return self._file

    @property
    def in_file(self) -> bool:
        """The session file is shown instead of the live view."""
        return self.has_class("-file")

    @property
    def shown(self) -> LogLines:
        return self._file if self.in_file else self._live

    @property
    def source(self) -> str | None:
        return self.lines.source

    # ------------------------------------------------------------------ commands
    def set_source(self, source: str | None) -> None:
        if self.in_file and source != self.source:
            self.close_file(follow=False)
        self.lines.set_source(source)
        self.update_chrome()

    # ------------------------------------------------------------------ the session file view
    def open_file(self, seq: int, where: str = "middle", mark: bool = False) -> str | None:
        """Show the session file at line ``seq``; why not, when it cannot be."""
        source = self.source
        path = self.log_file(source) if self.log_file is not None and source else None
        if path is None:
            return "no session file is recorded for this log"
        f = self._file
        f.wrap, f.show_timestamps = self._live.wrap, self._live.show_timestamps
        f.set_filter(self._live.filter_pattern)
        self.add_class("-file")
        f.open(source, path, seq, where, mark)
        f.focus()
        self.update_chrome()
        return None

    def close_file(self, follow: bool = True) -> None:
        """Back to the live view, following the tail."""
        if not self.in_file:
            return
        self.remove_class("-file")
        self._live.focus()
        if follow:
            self._live.action_scroll_end()
        self.update_chrome()

    def toggle_file(self) -> str | None:
        """The "older lines" key: the file at the line the live view shows on top, or back."""
        if self.in_file:
            self.close_file()
            return None
        return self.open_file(self._live_top_seq(), where="top")

    def _live_top_seq(self) -> int:
        series = self._live.series()
        pos = self._live._row_line(int(self._live.scroll_y))
        if series is None or pos is None:
            return 1
        with series.lock:
            i = pos - series.base
            return series.seqs[i] if 0 <= i < len(series.seqs) else 1

    def follow_tail(self) -> None:
        if self.in_file:
            self.close_file()
        else:
            self._live.action_scroll_end()

    def to_top(self) -> None:
        self.shown.action_scroll_home()

    def toggle_wrap(self) -> None:
        self._live.wrap = self._file.wrap = not self._live.wrap
        self.update_chrome()

    def toggle_timestamps(self) -> None:
        self._live.show_timestamps = self._file.show_timestamps = not self._live.show_timestamps
        self.update_chrome()

    def _set_filter(self, pattern: str | None) -> str | None:
        error = self._live.set_filter(pattern)
        if error is None:
            self._file.set_filter(pattern)
        return error

    def open_filter(self) -> None:
        self.add_class("-filtering")
        box = self.query_one(Input)
        box.value = self.lines.filter_pattern or ""
        box.focus()

    def close_filter(self, *, clear: bool) -> None:
        """Esc: close the box; a second Esc (box closed) clears the filter."""
        if clear:
            self._set_filter(None)
            self._set_error(None)
        self.remove_class("-filtering")
        self.shown.focus()
        self.update_chrome()

    @property
    def filtering(self) -> bool:
        return self.has_class("-filtering")

    def refresh_data(self) -> None:
        self.lines.refresh_data()
        if self.in_file:
            self._file.refresh_data()
        self.update_chrome()

    # ------------------------------------------------------------------ events
    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        self._set_error(self._set_filter(event.value))
        self.update_chrome()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        error = self._set_filter(event.value)
        self._set_error(error)
        if error is None:
            self.remove_class("-filtering")
            self.shown.focus()
        self.update_chrome()

    def on_log_lines_follow_changed(self, event: LogLines.FollowChanged) -> None:
        event.stop()
        self.update_chrome()

    def on_log_lines_filter_done(self, event: LogLines.FilterDone) -> None:
        self.update_chrome()

    def on_log_lines_older_wanted(self, event: LogLines.OlderWanted) -> None:
        event.stop()
        why = self.open_file(event.seq, where="top" if event.seq <= 1 else "bottom")
        if why is not None:
            self.notify(f"older lines of {self.source}: {why}", severity="information")

    def on_file_lines_leave(self, event: FileLines.Leave) -> None:
        event.stop()
        self.close_file()

    def on_file_lines_moved(self, event: FileLines.Moved) -> None:
        event.stop()
        self.update_chrome()

    def on_click(self, event) -> None:
        if event.widget is not None and event.widget.has_class("log-pill"):
            self.lines.action_scroll_end()

    # ------------------------------------------------------------------ chrome
    def _set_error(self, error: str | None) -> None:
        self.filter_error = error
        self.set_class(error is not None, "-error")
        self.query_one(".log-filter-error", Static).update(Content(error or ""))

    def update_chrome(self) -> None:
        if self.in_file:
            self._file_chrome()
            return
        lines = self.lines
        self.set_class(not lines.follow, "-detached")
        parts: list[str | tuple[str, str]] = []
        parts.append((lines.source or "no log", "bold"))
        series = lines.series()
        parts.append(f"  {series.last_seq if series else 0:,} lines")  # the last line's number, as in the session file
        if lines.filter_pattern is not None:
            state = " scanning…" if lines.scanning else ""
            parts.append(("  /" + lines.filter_pattern + "/ ", "$accent"))
            parts.append(f"{lines.row_count:,} match{'es' if lines.row_count != 1 else ''}{state}")
        parts.append(("  FOLLOW" if lines.follow else "  DETACHED", "$success" if lines.follow else "$warning"))
        if lines.wrap:
            parts.append("  wrap")
        if lines.show_timestamps:
            parts.append("  ts")
        if series is not None:  # last: the one part that can outgrow a half-width pane
            parts.extend(gap_notes(series))
        # one fixed-height row that changes on every batch: no layout pass (that repaints the whole screen)
        self.query_one(".log-title", Static).update(Content.assemble(*parts), layout=False)
        pill = self.query_one(".log-pill", Static)
        pill.set_class(lines.pending > 0 and not lines.follow, "-visible")
        pill.update(Content(f" ▼ {lines.pending:,} new lines  (End to follow) "), layout=False)

    def _file_chrome(self) -> None:
        f = self._file
        self.set_class(False, "-detached")  # no "new lines" pill: End goes back to the live view
        parts: list[str | tuple[str, str]] = [(f.source or "no log", "bold")]
        if f.error and not f.count:
            parts.append((f"  session file: {f.error}", "$error"))
        elif not f.known:
            parts.append(("  session file · reading…", "$accent"))
        else:
            parts.append((f"  session file · line {f.top_line:,} of {f.count:,}", "$accent"))
            if f.capped:
                parts.append(("  (it reached its cap: later lines are not in it)", "$warning"))
        series = self._live.series()
        if series is not None and series.lost:  # a lost line was never written: numbers shift after it
            parts.append((f"  off by ≤{series.lost:,} after lost lines", "$warning"))  # short: a half pane
        if f.filter_pattern is not None:
            parts.append(("  /" + f.filter_pattern + "/ highlighted", "$accent"))
        if f.wrap:
            parts.append("  wrap")
        if f.show_timestamps:
            parts.append("  ts")
        parts.append(("  End: live", "$text-muted"))
        self.query_one(".log-title", Static).update(Content.assemble(*parts), layout=False)
