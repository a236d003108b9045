"""The Load test screen (key ``T``, registry entry "load-test").

A form (concurrency, requests, duration), Start (button, or Enter in a field); a worker runs
``LoadTestAction`` -- the same runner as the CLI -- and posts messages: progress coalesces
(``can_replace``) so a fast server cannot flood the queue.  Then the percentile table and the
latency plot (plotext rendered to text; the same function the CLI prints).  Esc stops a running
test (what finished is still shown), else goes back.  Widgets do no IO.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Button, DataTable, Footer, Input, Label, ProgressBar, Static
from textual.worker import Worker, WorkerState

from ..actions.load_stats import PERCENTILES, latency_plot, table_cells
from ..actions.load_test import LoadProgress, LoadSpec
from .messages import ActionDone, ActionProgress
from .screens.action import RunsActions

if TYPE_CHECKING:
    from ..actions.registry import ActionEntry
    from .screens.action import ContextFactory
    from ..model import ActionEvent


class LoadProgressed(Message):
    """Runner progress; only the newest one waiting in the queue matters."""

    def __init__(self, progress: LoadProgress) -> None:
        super().__init__()
        self.progress = progress

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, LoadProgressed)


class LoadTestScreen(RunsActions, Screen[None]):
    BINDINGS = [Binding("escape", "back", "Back (stops a running test)", id="load-test-back")]

    def __init__(self, entry: "ActionEntry", action_cls: type, make_context: "ContextFactory | None" = None) -> None:
        super().__init__()
        self._make_context = make_context
        self.entry = entry
        self.action_cls = action_cls
        self.action_obj = None
        self.result = None  # ActionResult of the last run
        self._worker: Worker | None = None

    def compose(self) -> ComposeResult:
        with Vertical(classes="load-test"):
            yield Static(Content.assemble((self.entry.title, "bold"),
                                          ("   Enter: start   Esc: stop / back", "$text-muted")), classes="action-title")
            with Horizontal(classes="load-form"):
                yield Label("concurrency")
                yield Input("8", id="lt-concurrency", type="integer", classes="load-field")
                yield Label("requests")
                yield Input("32", id="lt-requests", type="integer", classes="load-field")
                yield Label("duration s")
                yield Input("", id="lt-duration", type="number", placeholder="none", classes="load-field")
                yield Button("Start", id="lt-start", variant="primary")
            yield ProgressBar(total=100, show_eta=False, id="lt-progress")
            yield Static(Content.styled("not started", "$text-muted"), id="lt-status")
            with VerticalScroll(classes="load-results"):
                yield DataTable(id="lt-table", cursor_type="row", show_cursor=False)
                yield Static("", id="lt-plot")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(DataTable).add_columns("ms", "mean", "median", *(f"p{int(p)}" for p in PERCENTILES))
        self.query_one("#lt-concurrency", Input).focus()

    # ------------------------------------------------------------------ form
    def _spec(self) -> LoadSpec:
        def value(wid: str, kind: type):
            text = self.query_one(wid, Input).value.strip()
            if not text:
                return None
            try:
                return kind(text)
            except ValueError:
                return text  # LoadSpec.validate names it

        conc = value("#lt-concurrency", int)
        spec = LoadSpec(concurrency=8 if conc is None else conc, requests=value("#lt-requests", int),
                        duration=value("#lt-duration", float))
        spec.validate()
        return spec

    @on(Button.Pressed, "#lt-start")
    @on(Input.Submitted)
    def start(self) -> None:
        if self._worker is not None and self._worker.is_running:
            return
        try:
            spec = self._spec()
        except ValueError as exc:
            self._status(Content.styled(str(exc).replace("--", ""), "$error"))
            return
        self.query_one(ProgressBar).update(total=100, progress=0)
        self._status(Content.styled("starting…", "$text-muted"))
        self.query_one("#lt-start", Button).disabled = True
        self._worker = self.run_load(spec)

    def _status(self, content: Content) -> None:
        self.query_one("#lt-status", Static).update(content)

    # ------------------------------------------------------------------ worker (the IO)
    @work(exclusive=True, exit_on_error=False, group="load-test", description="load test")
    async def run_load(self, spec: LoadSpec) -> None:
        ctx = self.make_context(emit=self._emit, confirm=self._confirm)
        self.action_obj = self.action_cls(spec, on_progress=lambda p: self.post_message(LoadProgressed(p)))
        result = await self.action_obj.run(ctx)
        self.post_message(ActionDone(result))

    def _emit(self, event: "ActionEvent") -> None:
        self.post_message(ActionProgress(event))
        engine = getattr(self.app, "engine", None)
        if engine is not None:
            engine.emit(event)  # the session records the load test like any action

    async def _confirm(self, title: str, detail: str) -> bool:
        return False  # a load test never asks: it changes nothing

    # ------------------------------------------------------------------ messages
    def on_action_progress(self, message: ActionProgress) -> None:
        ev = message.event
        if ev.step == "target" and ev.status in ("ok", "warn") and ev.message:
            self._status(Content.styled(ev.message, "$warning" if ev.status == "warn" else "$text-muted"))

    def on_load_progressed(self, message: LoadProgressed) -> None:
        p = message.progress
        self.query_one(ProgressBar).update(total=100, progress=round(p.fraction * 100, 1))
        total = f"/{p.total}" if p.total else ""
        errors = ", ".join(f"{k} {v}" for k, v in p.errors.items())
        self._status(Content.assemble(f"{p.done}{total} done   {p.in_flight} in flight   {p.elapsed:.1f} s",
                                      (f"   {p.failed} failed: {errors}" if p.failed else "", "$error")))

    def on_action_done(self, message: ActionDone) -> None:
        self.result = message.result
        self.query_one("#lt-start", Button).disabled = False
        load = getattr(self.action_obj, "result", None)
        r = self.result
        if load is None:  # no run (the target step failed)
            self._status(Content.styled(f"FAILED  {getattr(r, 'summary', '')}", "$error"))
            return
        s = load.summary
        self.query_one(ProgressBar).update(total=100, progress=100)
        tone = "$success" if s["failed"] == 0 and s["completed"] else "$error"
        head = f"{s['completed']} completed, {s['failed']} failed" + (f", {s['cancelled']} stopped" if s["cancelled"] else "")
        errors = "   " + ", ".join(f"{k} {v}" for k, v in s["errors"].items()) if s["errors"] else ""
        self._status(Content.assemble((head, tone + " bold"),
                                      f"   {s['duration']:.1f} s   {s['request_throughput']:.2f} req/s   "
                                      f"{s['output_throughput']:.1f} tok/s", (errors, "$error")))
        table = self.query_one(DataTable)
        table.clear()
        for name, cells in table_cells(s):
            table.add_row(name, *cells, key=name)
        plot = self.query_one("#lt-plot", Static)
        width = max(40, (plot.size.width or self.size.width) - 2)
        plot.update(Text.from_ansi(latency_plot(load.records, width, 16)))

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.worker is not self._worker:
            return
        if event.state is WorkerState.ERROR:
            err = event.worker.error
            self.query_one("#lt-start", Button).disabled = False
            self._status(Content.styled(f"failed: {type(err).__name__}: {err}", "$error"))

    def action_back(self) -> None:
        if self._worker is not None and self._worker.is_running and self.action_obj is not None:
            self.action_obj.stop()  # the runner returns what finished; the worker ends by itself
            return
        self.dismiss(None)
