"""Runs any ``sparktui.actions.base.Action`` and shows its steps as they happen, then the result.

The action runs in an exclusive worker (IO stays out of widgets); its ActionEvents arrive as
messages, and are also emitted into the engine so the session records them.  Confirmations go
through the one ConfirmModal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.screen import Screen
from textual.widgets import Button, DataTable, Footer, Log, Static
from textual.worker import Worker, WorkerState

from ...logs.redact import redact
from ...logs.sanitize import clean_text, safe
from ...model import FAIL, ActionEvent, FindingRaised
from ..messages import ActionDone, ActionProgress
from .confirm import ConfirmModal
from .findings import detail as finding_detail

if TYPE_CHECKING:
    from ...actions.base import Action, ActionContext, ActionResult, ConfirmFn
    from ...actions.registry import ActionEntry
    from ...model import Emit


class ContextFactory(Protocol):
    """Makes the context an action runs in (the app's ``make_action_context``): nodes, config, timeline."""

    def __call__(self, *, emit: "Emit", confirm: "ConfirmFn") -> "ActionContext": ...


class RunsActions:
    """A screen that runs an action: the app hands its context factory down when it opens the screen
    (attributes down); a screen pushed by hand, as tests do, falls back to the app's own."""

    _make_context: ContextFactory | None = None

    def make_context(self, *, emit: "Emit", confirm: "ConfirmFn") -> "ActionContext":
        factory = self._make_context or self.app.make_action_context  # type: ignore[attr-defined]
        return factory(emit=emit, confirm=confirm)

STATUS_STYLE = {"ok": "$success", "warn": "$warning", FAIL: "$error", "cancelled": "$warning",
                "started": "$primary", "progress": "$primary", "info": "$text-muted", "skip": "$text-muted"}


class ActionScreen(RunsActions, Screen[None]):
    BINDINGS = [Binding("escape", "back", "Back (cancels a running action)", id="action-back"),
                Binding("w", "wait_lock", "Wait for the lock", id="action-wait-lock")]

    def __init__(self, entry: "ActionEntry", action_cls: "type[Action]",
                 make_context: ContextFactory | None = None) -> None:
        super().__init__()
        self.entry = entry
        self.action_cls = action_cls
        self._make_context = make_context
        self.result: "ActionResult | None" = None
        self.events: list[ActionEvent] = []
        self._worker: Worker | None = None
        self._lock_wait = False  # the next run queues behind the lock's holder (the CLI's --wait)

    def compose(self) -> ComposeResult:
        with Vertical(classes="action-screen"):
            yield Static(Content.assemble((self.entry.title, "bold"), ("   Esc: back / cancel", "$text-muted")),
                         classes="action-title")
            table: DataTable = DataTable(cursor_type="row", classes="action-steps")
            yield table
            yield Log(classes="action-log", max_lines=2000)
            with VerticalScroll(classes="action-result"):
                yield Static(Content.styled("running…", "$text-muted"), id="action-summary")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(DataTable).add_columns("STEP", "STATUS", "NODE", "MESSAGE")
        self._worker = self.run_action()

    @work(exclusive=True, exit_on_error=False, group="action", description="guided action")
    async def run_action(self) -> None:
        ctx = self.make_context(emit=self._emit, confirm=self._confirm)
        ctx.lock_wait = ctx.lock_wait or self._lock_wait
        result = await self.action_cls().run(ctx)
        self.post_message(ActionDone(result))

    def _emit(self, event: ActionEvent) -> None:
        self.post_message(ActionProgress(event))
        engine = getattr(self.app, "engine", None)
        if engine is not None:
            engine.emit(event)

    async def _confirm(self, title: str, detail: str, full: str = "") -> bool:
        return bool(await self.app.push_screen_wait(ConfirmModal(title, detail, full)))

    # ------------------------------------------------------------------ messages
    def on_action_progress(self, message: ActionProgress) -> None:
        self.events.append(message.event)
        self.show_event(message.event)

    def row_key(self, ev) -> str:
        """The table row an event lands in: by default one row per node and step (and detail key, such
        as a doctor check), updated in place."""
        return f"{ev.node}/{ev.step}" + (f"/{ev.key}" if ev.key else "")

    def show_event(self, ev) -> None:
        table = self.query_one(DataTable)
        var = STATUS_STYLE.get(ev.status, "")
        style = self.app.get_css_variables().get(var[1:], "") if var else ""
        status = ev.status + (f" {ev.progress * 100:.0f}%" if ev.progress is not None else "")
        message = redact(safe(ev.message.replace("\n", " ")))  # messages quote node output and commands
        cells = (Text(ev.step), Text(status, style=style), Text(ev.node), Text(message[:self._message_width(table)]))
        key = self.row_key(ev)
        if key in table.rows:
            # update_width: a row first shown as "started" must widen its columns for the outcome
            for col, cell in zip(table.columns, cells):
                table.update_cell(key, col, cell, update_width=True)
        else:
            table.add_row(*cells, key=key)
        if ev.message:
            self.query_one(Log).write_line(f"{ev.step} [{ev.status}] {ev.node + ': ' if ev.node else ''}{redact(clean_text(ev.message))}")

    def _message_width(self, table: DataTable) -> int:
        """What MESSAGE can show without running off the screen (the whole text is in the log below)."""
        width = table.size.width or self.app.size.width - 2
        others = sum(c.get_render_width(table) for c in list(table.columns.values())[:3])
        return max(20, min(200, width - others - 2 * table.cell_padding - 1))

    def on_action_done(self, message: ActionDone) -> None:
        self.result = message.result  # type: ignore[assignment]
        self._raise_findings()
        self._show_result()
        if self.lock_refused:  # another operator holds the cluster lock: offer to queue behind them
            self.query_one(".action-result", VerticalScroll).mount(
                Button(Content("Wait for the lock [w]"), id="lock-wait", variant="primary"))
            self.refresh_bindings()

    # ------------------------------------------------------------------ queue behind the lock
    @property
    def lock_refused(self) -> bool:
        r = self.result
        return r is not None and (r.data or {}).get("refused") == "lock"  # result is None while it runs

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "wait_lock":
            return self.lock_refused
        return True

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "lock-wait":
            event.stop()
            self.action_wait_lock()

    def action_wait_lock(self) -> None:
        """Run the action again, waiting for the holder to finish (Esc stops waiting); the whole action
        runs again, so what it shows and asks is of the cluster as the holder left it."""
        if not self.lock_refused:
            return
        for button in self.query("#lock-wait"):
            button.remove()
        self.result = None
        self._lock_wait = True
        self.query_one("#action-summary", Static).update(
            Content.styled("waiting for the cluster lock…   Esc: stop waiting", "$warning"))
        self._rerun()
        self._worker = self.run_action()
        self.refresh_bindings()

    def _rerun(self) -> None:
        """A screen that shows more than the steps resets it here before the action runs again."""

    def _raise_findings(self) -> None:
        """Findings only the action knows (doctor's checks read no log the diagnoser sees) join the
        cluster's: the findings strip, the panel, the session and its report."""
        engine = getattr(self.app, "engine", None)
        if engine is None or self.result is None or not getattr(self.action_cls, "raises_findings", False):
            return
        for f in self.result.findings:
            engine.emit(FindingRaised(f))

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.worker is not self._worker:
            return
        if event.state is WorkerState.ERROR:
            err = event.worker.error
            self.query_one("#action-summary", Static).update(
                Content.styled(f"failed: {type(err).__name__}: {err}", "$error"))
        elif event.state is WorkerState.CANCELLED and self.result is None:
            self.query_one("#action-summary", Static).update(Content.styled("cancelled (cleanup ran)", "$warning"))

    def _show_result(self) -> None:
        r = self.result
        if r is None:
            return
        head = Content.assemble(("PASSED  " if r.ok else "FAILED  ", ("$success" if r.ok else "$error") + " bold"), r.summary)
        parts = [head]
        for f in r.findings:
            parts += [Content(""), finding_detail(f)]
        self.query_one("#action-summary", Static).update(Content("\n").join(parts))

    def action_back(self) -> None:
        if self._worker is not None and self._worker.is_running:
            self._worker.cancel()
            return
        self.dismiss(None)
