"""The timeline: actions, findings, state changes and notes of this session and of the other
operators on the cluster (read from the head node), oldest first, following the newest.

Rows come from ``engine.state`` only (``timeline_rows`` is pure); the app calls ``refresh_state``
after each engine batch.  ``N`` (app-wide) adds a note through ``NoteModal``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen, Screen
from textual.widgets import DataTable, Footer, Input, Static

from ...logs.sanitize import safe
from ...model import FAIL, TIMELINE_STATUSES

if TYPE_CHECKING:
    from ...state import ClusterState
    from ..app import SparkApp

NOTE_CHARS = 500
# row kind / outcome -> theme variable of its colour
STYLE_VAR = {"note": "accent", "finding": "warning", FAIL: "error", "warn": "warning", "ok": "success",
             "cancelled": "warning", "change": "secondary"}


@dataclass(frozen=True)
class Row:
    ts: float
    who: str
    kind: str  # action | finding | change | note
    node: str
    text: str
    tone: str = ""  # key of STYLE_VAR


def timeline_rows(state: "ClusterState", me: str) -> list[Row]:
    """Every timeline row of ``state``, oldest first.  ``me``: this operator (``user@host``)."""
    rows: list[Row] = []
    for a in state.actions:
        if a.status in TIMELINE_STATUSES:
            text = f"{a.action}/{a.step}: {a.status}" + (f" — {a.message}" if a.message else "")
            rows.append(Row(a.ts, me, "action", a.node, text, a.status))
    for f in state.findings:
        rows.append(Row(f.ts, "diagnoser", "finding", f.node, f"[{f.severity}] {f.title} ({f.id})", "finding"))
        st = state.finding_status(f)
        if st is not None:  # its end (or who owns it) is a row of its own, at its time
            who = st.operator if st.state == "acknowledged" else "sparktui"
            why = f" — {st.reason}" if st.reason else ""
            rows.append(Row(st.ts, who or me, "finding", f.node, f"{st.state}: {f.title} ({f.id}){why}", "change"))
    for c in state.changes:
        rows.append(Row(c.ts, "", "change", c.node, c.text, "change"))
    for n in state.notes:
        rows.append(Row(n.ts, n.author or me, "note", "", n.text, "note"))
    for e in state.timeline:  # the other operators', from the head's shared timeline
        if e.kind == "note":
            rows.append(Row(e.ts, e.operator, "note", e.node, e.message, "note"))
        elif e.kind == "ack":
            continue  # applied to its finding: the finding's "acknowledged" row says it
        else:
            text = f"{e.action}/{e.step}: {e.status}" + (f" — {e.message}" if e.message else "")
            rows.append(Row(e.ts, e.operator, "action", e.node, text, e.status))
    rows.sort(key=lambda r: r.ts)  # stable: same-second rows keep their kind's order
    return rows


class TimelineScreen(Screen[None]):
    BINDINGS = [
        Binding("escape,q,L", "close", "Close", id="timeline-close"),
        # priority: the table's own End scrolls sideways; here it means "follow the newest" as in the log
        Binding("end,G", "follow", "Follow", id="timeline-follow", priority=True),
    ]
    app: "SparkApp"

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[Row] = []
        self.follow = True
        self._key: tuple = ()
        self._ready = False  # composed and mounted: the app may refresh a screen pushed a moment ago

    def compose(self) -> ComposeResult:
        with Vertical(classes="timeline"):
            yield Static(id="timeline-title", classes="timeline-title")
            yield DataTable(cursor_type="row", zebra_stripes=False, id="timeline-table")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns("TIME", "WHO", "KIND", "NODE", "WHAT")
        self._ready = True
        self.refresh_state()
        table.focus()

    def refresh_state(self) -> None:
        if not self._ready:  # an engine batch between push_screen and mount: on_mount fills it
            return
        st = self.app.engine.state
        # rebuilt only when something it shows changed (the tuples are replaced, never mutated)
        key = (st.actions, st.findings, st.changes, st.notes, st.timeline)
        if len(key) != len(self._key) or any(a is not b for a, b in zip(key, self._key)):
            self._key = key
            self.rows = timeline_rows(st, self.app.operator)
            self._fill()
        self._title()

    def _fill(self) -> None:
        table = self.query_one(DataTable)
        keep = table.cursor_row
        table.clear()
        colours = self.app.get_css_variables()  # the theme's, so every theme colours rows its way
        for r in self.rows:
            style = colours.get(STYLE_VAR.get(r.tone, ""), "")
            # node and operator data are text, never markup; controls shown as symbols
            table.add_row(Text(time.strftime("%H:%M:%S", time.localtime(r.ts))), Text(safe(r.who)[:32]),
                          Text(r.kind, style=style), Text(safe(r.node)[:20]), Text(safe(r.text)[:400]))
        if self.rows:
            table.move_cursor(row=len(self.rows) - 1 if self.follow else min(keep, len(self.rows) - 1),
                              animate=False)

    def _title(self) -> None:
        others = {r.who for r in self.rows if r.kind in ("action", "note") and r.who != self.app.operator}
        mode = "FOLLOW" if self.follow else "DETACHED (End: follow)"
        parts = [("Timeline", "bold $accent"), (f"  {len(self.rows)} entries", "$text-muted")]
        if others:
            parts.append((f"  · other operators: {', '.join(sorted(safe(o) for o in others))}", "$text-muted"))
        parts.append((f"  {mode}", "bold" if self.follow else "$warning"))
        self.query_one("#timeline-title", Static).update(Content.assemble(*parts))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        # moving up detaches; reaching the last row follows again (as the log view does).  A
        # highlight posted while the table was being refilled is stale: the cursor has moved on
        if event.cursor_row != event.data_table.cursor_row:
            return
        follow = event.cursor_row >= len(self.rows) - 1
        if follow != self.follow:
            self.follow = follow
            self._title()

    def action_follow(self) -> None:
        self.follow = True
        if self.rows:
            self.query_one(DataTable).move_cursor(row=len(self.rows) - 1, animate=False)
        self._title()

    def action_close(self) -> None:
        self.dismiss(None)


class NoteModal(ModalScreen["str | None"]):
    """One line of text for the timeline; Enter adds it, Esc drops it."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="note-cancel")]

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog note"):
            yield Static("Add a note to the timeline (Enter: add, Esc: cancel)", classes="dialog-title")
            yield Input(placeholder="what happened, what you did, what you think", max_length=NOTE_CHARS,
                        id="note-input")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        text = event.value.strip()
        self.dismiss(text or None)

    def action_cancel(self) -> None:
        self.dismiss(None)
