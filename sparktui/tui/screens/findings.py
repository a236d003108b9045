"""The findings panel: severity, title, node, evidence, advice.  Enter jumps to the log line."""

from __future__ import annotations

from typing import Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

from ...logs.redact import redact
from ...logs.sanitize import safe
from ...model import Finding
from ..widgets.findings_strip import SEVERITY_STYLE


def detail(f: Finding) -> Content:
    parts: list[Content] = [
        Content.assemble((f.severity.upper() + " ", SEVERITY_STYLE.get(f.severity, "") + " bold"), (safe(f.title), "bold")),
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
    BINDINGS = [Binding("escape,f,q", "close", "Close", id="findings-close")]

    def __init__(self, findings: Sequence[Finding]) -> None:
        super().__init__()
        self.findings = list(findings)

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog findings"):
            yield Static(f"Findings ({len(self.findings)}) — Enter: jump to the log line, Esc: close",
                         classes="dialog-title")
            table: DataTable = DataTable(cursor_type="row", classes="findings-table")
            yield table
            with VerticalScroll(classes="finding-detail"):
                yield Static(id="finding-detail")

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns("SEV", "TITLE", "NODE", "SOURCE:LINE")
        for i, f in enumerate(self.findings):
            where = f"{f.source}:{f.line}" if f.line else f.source
            table.add_row(Text(f.severity), Text(f.title), Text(f.node), Text(where), key=str(i))
        if self.findings:
            self._show(0)
        else:
            self.query_one("#finding-detail", Static).update("No findings yet: the diagnoser reports here.")
        table.focus()

    def _show(self, i: int) -> None:
        if 0 <= i < len(self.findings):
            self.query_one("#finding-detail", Static).update(detail(self.findings[i]))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show(event.cursor_row)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.dismiss(self.findings[event.cursor_row])

    def action_close(self) -> None:
        self.dismiss(None)
