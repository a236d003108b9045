"""The Fabric screen (key ``F``, registry entry "fabric").

Start (Enter, or the button; "Quick" skips all_reduce_perf) runs ``FabricAction`` -- the CLI's check --
in a worker.  Its events come back as messages: a progress bar per step (path, iperf3,
all_reduce_perf, verdict) with the step's line; then the verdict (its state a CSS class), the causes
with their fixes, and busbw by size beside the expected curve (plotext text, the CLI's function).
Esc cancels a running check, else goes back.  Widgets do no IO.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.screen import Screen
from textual.widgets import Button, Footer, Label, ProgressBar, Static
from textual.worker import Worker, WorkerState

from ..fabric.check import STEPS, FabricOptions
from ..fabric.parse import PerfRow
from ..fabric.plot import busbw_plot
from .messages import ActionDone, ActionProgress
from .screens.action import STATUS_STYLE, RunsActions

if TYPE_CHECKING:
    from ..actions.registry import ActionEntry
    from ..model import ActionEvent
    from .screens.action import ContextFactory

VERDICT_CLASSES = ("-ok", "-warn", "-fail", "-skip")


class FabricScreen(RunsActions, Screen[None]):
    BINDINGS = [Binding("escape", "back", "Back (cancels a running check)", id="fabric-back"),
                Binding("enter", "start", "Start the check", id="fabric-start", show=False)]

    def __init__(self, entry: "ActionEntry", action_cls: type, make_context: "ContextFactory | None" = None) -> None:
        super().__init__()
        self._make_context = make_context
        self.entry = entry
        self.action_cls = action_cls
        self.result = None  # ActionResult of the last run
        self._worker: Worker | None = None

    def compose(self) -> ComposeResult:
        with Vertical(classes="fabric"):
            yield Static(Content.assemble((self.entry.title, "bold"),
                                          ("   Enter: start   Esc: cancel / back", "$text-muted")), classes="action-title")
            with Horizontal(classes="fabric-form"):
                yield Button("Start", id="fb-start", variant="primary")
                yield Button("Quick (no all_reduce_perf)", id="fb-quick")
            for step in STEPS:
                with Horizontal(classes="fabric-step"):
                    yield Label(step, classes="fabric-step-name")
                    yield ProgressBar(total=100, show_eta=False, id=f"fb-bar-{step}")
                    yield Static(Content.styled("waiting", "$text-muted"), id=f"fb-msg-{step}", classes="fabric-step-msg")
            with VerticalScroll(classes="fabric-results"):
                yield Static("", id="fb-verdict")
                yield Static("", id="fb-causes")
                yield Static("", id="fb-plot")
                yield Static("", id="fb-path")
        yield Footer()

    # ------------------------------------------------------------------ start
    @on(Button.Pressed, "#fb-start")
    def action_start(self) -> None:
        self._start(quick=False)

    @on(Button.Pressed, "#fb-quick")
    def start_quick(self) -> None:
        self._start(quick=True)

    def _start(self, quick: bool) -> None:
        if self._worker is not None and self._worker.is_running:
            return
        for step in STEPS:
            self.query_one(f"#fb-bar-{step}", ProgressBar).update(total=100, progress=0)
            self._step_msg(step, Content.styled("waiting", "$text-muted"))
        for wid in ("#fb-verdict", "#fb-causes", "#fb-plot", "#fb-path"):
            self.query_one(wid, Static).update("")
        self.query_one("#fb-verdict").remove_class(*VERDICT_CLASSES)
        for b in self.query(Button):
            b.disabled = True
        self._worker = self.run_check(FabricOptions(quick=quick))

    def _step_msg(self, step: str, content: Content) -> None:
        if step in STEPS:
            self.query_one(f"#fb-msg-{step}", Static).update(content)

    # ------------------------------------------------------------------ worker (the IO)
    @work(exclusive=True, exit_on_error=False, group="fabric", description="fabric check")
    async def run_check(self, options: FabricOptions) -> None:
        ctx = self.make_context(emit=self._emit, confirm=self._confirm)
        result = await self.action_cls(options).run(ctx)
        self.post_message(ActionDone(result))

    def _emit(self, event: "ActionEvent") -> None:
        self.post_message(ActionProgress(event))
        engine = getattr(self.app, "engine", None)
        if engine is not None:
            engine.emit(event)  # the session records the check like any action

    async def _confirm(self, title: str, detail: str) -> bool:
        return False  # the check changes nothing: it never asks

    # ------------------------------------------------------------------ messages
    def on_action_progress(self, message: ActionProgress) -> None:
        ev = message.event
        if ev.step not in STEPS:
            if ev.status == "fail":  # refused (read-only) or the action failed before a step
                self.query_one("#fb-verdict", Static).update(Content.styled(ev.message, "$error"))
            return
        bar = self.query_one(f"#fb-bar-{ev.step}", ProgressBar)
        if ev.status == "progress" and ev.progress is not None:
            bar.update(total=100, progress=round(ev.progress * 100, 1))
        elif ev.status in ("ok", "warn", "fail", "skip", "cancelled"):
            bar.update(total=100, progress=100)
        if ev.message or ev.status != "progress":
            self._step_msg(ev.step, Content.styled(ev.message or ev.status, STATUS_STYLE.get(ev.status, "$text")))

    def on_action_done(self, message: ActionDone) -> None:
        self.result = message.result
        for b in self.query(Button):
            b.disabled = False
        for rec in getattr(message.result, "steps", ()):  # each step's last word, whatever events were shown
            if rec.name in STEPS:
                self.query_one(f"#fb-bar-{rec.name}", ProgressBar).update(total=100, progress=100)
                self._step_msg(rec.name, Content.styled(rec.message or rec.status,
                                                        STATUS_STYLE.get(rec.status, "$text")))
        self.show_report(getattr(message.result, "data", {}) or {})

    def show_report(self, data: dict) -> None:
        """The verdict, causes, plot and per-node path of a report (FabricReport.to_json())."""
        v = data.get("verdict")
        verdict = self.query_one("#fb-verdict", Static)
        if not v:
            return
        verdict.remove_class(*VERDICT_CLASSES)
        verdict.add_class(f"-{v['status']}")
        verdict.update(Content.assemble((v["status"].upper(), "bold"), "  ", v["title"]))
        parts: list = []
        for e in v["failures"] + v["causes"]:
            parts += [(e["title"], "bold"), "\n"]
            parts += [(f"  | {ev}\n", "$text-muted") for ev in e["evidence"][:3]]
            parts += [("  fix: ", "$accent"), e["fix"], "\n"]
        self.query_one("#fb-causes", Static).update(Content.assemble(*parts) if parts else "")
        perf = data.get("all_reduce_perf") or {}
        plot = self.query_one("#fb-plot", Static)
        if perf.get("rows"):
            width = max(40, min(self.size.width - 4, 140))
            text = busbw_plot([PerfRow(**r) for r in perf["rows"]], data["line_rate_gbps"], width, 14, color=False)
            plot.update(Content(text))
        else:
            plot.update(Content.styled(f"all_reduce_perf: {data.get('all_reduce_perf_note') or 'not run'}", "$text-muted"))
        lines = []
        for n in data.get("nodes", []):
            rdma = n["rdma_note"] or ", ".join(f"{p['device']} {p['state']}" for p in n["rdma"])
            lines.append(f"{n['name']}: {n['fabric_ip']} on {n['interface'] or '?'} MTU {n['mtu']}  "
                         f"NCCL_SOCKET_IFNAME={n['nccl_socket_ifname'] or '(unset)'}  {rdma}")
        for p in data.get("iperf3", []):
            lines.append(f"iperf3 {p['client']} -> {p['server']}: " + (p["error"] or f"{p['gbps']:.2f} Gb/s"))
        self.query_one("#fb-path", Static).update(Content("\n".join(lines)))

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.worker is not self._worker:
            return
        if event.state in (WorkerState.ERROR, WorkerState.CANCELLED):
            for b in self.query(Button):
                b.disabled = False
        if event.state is WorkerState.ERROR:
            err = event.worker.error
            self.query_one("#fb-verdict", Static).update(Content.styled(f"failed: {type(err).__name__}: {err}", "$error"))

    def action_back(self) -> None:
        if self._worker is not None and self._worker.is_running:
            self._worker.cancel()  # the action's steps end as cancelled; the iperf3 server exits with -1
            return
        self.dismiss(None)
