"""The findings panel: severity, title, node, state, evidence, advice.  Enter jumps to the log line;
``a`` acknowledges the selected finding (shared with the other operators).  Resolved and
acknowledged findings stay listed after the active ones, dimmed, with when and why."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import DataTable, Footer, Static

from ...logs.redact import redact
from ...logs.sanitize import safe
from ...model import Finding
from .. import keymap
from ..widgets.findings_strip import SEVERITY_STYLE

if TYPE_CHECKING:
    from ...state import FindingStatus


def state_text(st: "FindingStatus | None") -> str:
    """"" for an active finding; else e.g. "resolved 12:03 relaunched, ready", "acknowledged 12:05 by bob@h"."""
    if st is None:
        return ""
    when = time.strftime("%H:%M", time.localtime(st.ts))
    if st.state == "resolved":
        return f"resolved {when} {st.reason}".rstrip()
    return f"acknowledged {when}" + (f" by {st.operator}" if st.operator else "")


def detail(f: Finding, st: "FindingStatus | None" = None) -> Content:
    parts: list[Content] = [
        Content.assemble((f.severity.upper() + " ", SEVERITY_STYLE.get(f.severity, "") + " bold"), (safe(f.title), "bold"),
                         ("   " + safe(state_text(st)), "$text-muted italic") if st else ""),
        Content.assemble(("id ", "$text-muted"), f.id, ("   source ", "$text-muted"), safe(f.source) or "-",
                         ("   line ", "$text-muted"), str(f.line) if f.line else "-"),
    ]
    if f.explanation:
        parts += [Content(""), Content(f.explanation)]
    if f.evidence:
        parts += [Content(""), Content.styled("Evidence", "bold $accent")]
        # evidence quotes log lines: shown as they are stored (no escapes), secrets masked
        parts += [Content.styled("  " + redact(safe(ln))[:400], "$text-muted") for ln in f.evidence[:20]]
    if f.advice:
        parts += [Content(""), Content.styled("Advice", "bold $accent"), Content(f.advice)]
    return Content("\n").join(parts)


class FindingsScreen(ModalScreen["Finding | None"]):
    BINDINGS = [Binding("escape,f,q", "close", "Close", id="findings-close"), *keymap.bindings("findings")]
    binding_scope = "findings"  # the palette offers this scope's registry entries here only

    def __init__(self, findings: Sequence[Finding]) -> None:
        super().__init__()
        self.findings = list(findings)

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog findings"):
            yield Static(f"Findings ({len(self.findings)}) — Enter: jump to the log line, a: acknowledge, Esc: close",
                         classes="dialog-title")
            table: DataTable = DataTable(cursor_type="row", classes="findings-table")
            yield table
            with VerticalScroll(classes="finding-detail"):
                yield Static(id="finding-detail")
        yield Footer()

    def status(self, f: Finding) -> "FindingStatus | None":
        engine = getattr(self.app, "engine", None)
        return engine.state.finding_status(f) if engine is not None else None

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns("SEV", "TITLE", "NODE", "SOURCE:LINE", "STATE")
        for i, f in enumerate(self.findings):
            table.add_row(*self._cells(f, self.status(f)), key=str(i))
        if self.findings:
            self._show(0)
        else:
            self.query_one("#finding-detail", Static).update("No findings yet: the diagnoser reports here.")
        table.focus()

    def _cells(self, f: Finding, st: "FindingStatus | None") -> tuple[Text, ...]:
        where = f"{f.source}:{f.line}" if f.line else f.source
        # a closed finding's row is dimmed: the theme's muted text colour
        style = self.app.get_css_variables().get("text-muted", "") if st is not None else ""
        return tuple(Text(x, style=style) for x in (f.severity, f.title, f.node, where, state_text(st)))

    def _show(self, i: int) -> None:
        if 0 <= i < len(self.findings):
            f = self.findings[i]
            st = self.status(f)
            box = self.query_one("#finding-detail", Static)
            box.update(detail(f, st))
            # the state as a class: styles dim a closed finding's detail
            box.set_class(st is not None and st.state == "resolved", "-resolved")
            box.set_class(st is not None and st.state == "acknowledged", "-acknowledged")

    def action_acknowledge(self) -> None:
        table = self.query_one(DataTable)
        i = table.cursor_row
        if not 0 <= i < len(self.findings):
            return
        f = self.findings[i]
        st = self.status(f)
        if st is not None:
            self.notify(f"already {st.state}", timeout=2)
            return
        st = self.app.acknowledge(f)  # type: ignore[attr-defined]
        for col, cell in zip(table.columns, self._cells(f, st)):
            table.update_cell(str(i), col, cell, update_width=True)
        self._show(i)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show(event.cursor_row)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.dismiss(self.findings[event.cursor_row])

    def action_close(self) -> None:
        self.dismiss(None)
