"""The log panel of a node pane: title bar, filter box, virtual lines, "N new lines" pill."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.content import Content
from textual.widgets import Input, Static

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
    def __init__(self, store: "LogStore", node: str, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.store = store
        self.node = node
        self.filter_error: str | None = None

    def compose(self) -> ComposeResult:
        yield Static(classes="log-title")
        yield Input(placeholder="regex filter (Enter keeps it, Esc clears)", classes="log-filter")
        yield Static(classes="log-filter-error")
        yield LogLines(self.store, self.node, classes="log-lines")
        yield Static(classes="log-pill")

    @property
    def lines(self) -> LogLines:
        return self.query_one(LogLines)

    @property
    def source(self) -> str | None:
        return self.lines.source

    # ------------------------------------------------------------------ commands
    def set_source(self, source: str | None) -> None:
        self.lines.set_source(source)
        self.update_chrome()

    def open_filter(self) -> None:
        self.add_class("-filtering")
        box = self.query_one(Input)
        box.value = self.lines.filter_pattern or ""
        box.focus()

    def close_filter(self, *, clear: bool) -> None:
        """Esc: close the box; a second Esc (box closed) clears the filter."""
        if clear:
            self.lines.set_filter(None)
            self._set_error(None)
        self.remove_class("-filtering")
        self.lines.focus()
        self.update_chrome()

    @property
    def filtering(self) -> bool:
        return self.has_class("-filtering")

    def refresh_data(self) -> None:
        self.lines.refresh_data()
        self.update_chrome()

    # ------------------------------------------------------------------ events
    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        self._set_error(self.lines.set_filter(event.value))
        self.update_chrome()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        error = self.lines.set_filter(event.value)
        self._set_error(error)
        if error is None:
            self.remove_class("-filtering")
            self.lines.focus()
        self.update_chrome()

    def on_log_lines_follow_changed(self, event: LogLines.FollowChanged) -> None:
        event.stop()
        self.update_chrome()

    def on_log_lines_filter_done(self, event: LogLines.FilterDone) -> None:
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
