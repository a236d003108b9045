"""The Launch screen: one row per node climbing the startup milestones, above the generic step table.

Built like the generic ActionScreen (the registry entry "launch" names it: key ``l``): the action
runs in the screen's exclusive worker, its ActionEvents arrive as messages, the one confirm goes
through ConfirmModal.  This module never imports the launch action; it only renders its events:

- ``preflight`` / ``plan`` / ``ray`` land in the step table and the log;
- ``start`` (per node) and ``milestone`` (per node, ``key`` = a ``MILESTONE_ORDER`` id) move the
  node's row: the ladder of marks, a ProgressBar over the ladder (weights_loading's fraction
  interpolated) and the node's latest message;
- ``finding`` lands on its node's row (and in the log); an error finding marks the row failed;
- ``ready`` ok makes the head ready, and with it every worker (only the head serves);
- the result turns the title into ``READY — <url>`` or ``FAILED — <summary>``.

Row state is a CSS class (``-pending``, ``-running``, ``-ready``, ``-fail``).  A milestone
event re-renders only its own row, and only the parts of it that changed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.widgets import DataTable, Footer, Log, ProgressBar, Static
from textual.worker import Worker, WorkerState

from ..logs.redact import redact
from ..logs.sanitize import clean_text, safe
from ..model import FAIL, MILESTONE_ORDER, ActionEvent
from .messages import ActionDone
from .screens.action import STATUS_STYLE, ActionScreen
from .screens.findings import detail as finding_detail

if TYPE_CHECKING:
    from ..actions.base import ActionResult

# compact ladder labels, in MILESTONE_ORDER
LABELS = {
    "container_started": "container",
    "ray_joined": "ray",
    "arch_resolved": "arch",
    "nccl_ready": "nccl",
    "weights_loading": "weights",
    "weights_loaded": "loaded",
    "kv_cache": "kv",
    "cuda_graphs": "graphs",
    "api_ready": "api",
    "first_prompt": "prompt",
}
# marks: the glyph tells the state on its own (256 colours, monochrome, a screen reader of the text)
DONE, SKIPPED, CURRENT, STUCK, PENDING = "✓", "–", "▸", "✗", "·"
STATE_GLYPH = {"pending": "○", "running": "◐", "ready": "●", FAIL: "✗"}
STATES = ("pending", "running", "ready", FAIL)
# what the title says while the action runs, by the step of the latest event
PHASES = {"preflight": "checking the nodes…", "plan": "waiting for your answer…", "start": "starting containers…",
          "ray": "forming the Ray cluster…", "milestone": "starting vLLM…", "finding": "starting vLLM…",
          "ready": "waiting for the API…"}
BONUS = "first_prompt"  # after api_ready: shown, but not needed for the bar to be full


@dataclass
class NodeTrack:
    """What the screen knows about one node's launch (no Textual, no IO)."""

    name: str
    role: str = ""
    order: tuple[str, ...] = MILESTONE_ORDER
    reached: dict[str, float | None] = field(default_factory=dict)  # milestone -> progress
    last: str = ""  # the furthest milestone reached
    started: bool = False
    message: str = ""
    findings: dict[str, tuple[str, str]] = field(default_factory=dict)  # id -> (status, title)
    failed: str = ""  # why it failed (a finding, a failed start, the API never answering)
    hard_failed: bool = False  # its own step failed: nothing later makes it ready
    ready: bool = False

    @property
    def state(self) -> str:
        if self.ready and not self.hard_failed:
            return "ready"
        if self.failed:
            return FAIL
        if self.started or self.reached:
            return "running"
        return "pending"

    def reach(self, key: str, progress: float | None) -> None:
        if key not in self.order and key in MILESTONE_ORDER:  # e.g. a ray_joined the executor did not promise
            self.order = tuple(k for k in MILESTONE_ORDER if k in self.order or k == key)
        self.reached[key] = progress
        if key in self.order and (not self.last or self.order.index(key) >= self.order.index(self.last)):
            self.last = key
        if key == "api_ready":
            self.ready = True

    def _weights_fraction(self) -> float | None:
        p = self.reached.get("weights_loading")
        return p if self.last == "weights_loading" and p is not None and p < 1 else None

    def current(self) -> int | None:
        """Index in ``order`` of the milestone being waited for (None: ready, or not started)."""
        if self.state == "ready":
            return None
        if not self.last:
            return 0 if self.started or self.failed else None
        i = self.order.index(self.last)
        if self._weights_fraction() is not None:
            return i
        return i + 1 if i + 1 < len(self.order) and self.order[i + 1] != BONUS else None

    def progress(self) -> tuple[float, int]:
        """(value, total) for the bar: the ladder up to api_ready, weights_loading interpolated."""
        core = [k for k in self.order if k != BONUS]
        total = len(core)
        if self.state == "ready":
            return float(total), total
        if not self.last:
            return 0.0, total
        i = self.order.index(self.last)
        frac = self._weights_fraction()
        return (i + frac if frac is not None else float(min(i + 1, total))), total

    def ladder(self) -> Content:
        cur = self.current()
        last_i = self.order.index(self.last) if self.last else -1
        ready = self.state == "ready"
        parts: list[tuple[str, str]] = []
        for i, key in enumerate(self.order):
            label = LABELS.get(key, key)
            if i == cur:
                frac = self.reached.get(key) if key == "weights_loading" else None
                pct = f" {frac * 100:.0f}%" if frac is not None else ""
                if self.state == FAIL:
                    parts.append((f"{STUCK}{label}{pct}", "$error bold"))
                else:
                    parts.append((f"{CURRENT}{label}{pct}", "$accent bold"))
            elif key in self.reached:
                parts.append((DONE, "$success"))
                parts.append((label, ""))
            elif i < last_i or (ready and key != BONUS):
                parts.append((f"{SKIPPED}{label}", "$text-muted"))  # not seen (passed, or not this node's)
            else:
                parts.append((f"{PENDING}{label}", "$text-muted"))
            parts.append((" ", ""))
        return Content.assemble(*parts[:-1])

    def title(self) -> Content:
        return Content.assemble((STATE_GLYPH[self.state] + " ", ""), (self.name, "bold"),
                                (f" {self.role}" if self.role else "", "$text-muted"))

    def finding_line(self) -> Content:
        parts: list[tuple[str, str]] = []
        for fid, (status, title) in self.findings.items():
            tone = "$error" if status in ("warn", FAIL) else "$text-muted"
            parts += [("⚠ " if status in ("warn", FAIL) else "ℹ ", tone), (fid, tone + " bold"), (f"  {title}   ", tone)]
        return Content.assemble(*parts)


class LaunchNodeRow(Vertical):
    """One node: state glyph, name and role, progress bar, latest message; the ladder; findings.

    Renders a NodeTrack; never does IO.  ``show`` touches only the parts that changed.
    """

    def __init__(self, track: NodeTrack) -> None:
        super().__init__(classes="launch-node -pending")
        self.track = track
        self._seen: dict[str, object] = {}

    def compose(self) -> ComposeResult:
        with Horizontal(classes="launch-node-line"):
            yield Static(classes="launch-node-name")
            yield ProgressBar(total=len(MILESTONE_ORDER), show_eta=False, show_percentage=False)
            yield Static(classes="launch-node-message")
        yield Static(classes="launch-node-ladder")
        yield Static(classes="launch-node-findings")

    def on_mount(self) -> None:
        self.show()

    def _changed(self, part: str, value: object) -> bool:
        if self._seen.get(part, object()) == value:
            return False
        self._seen[part] = value
        return True

    def show(self) -> None:
        t = self.track
        state = t.state
        if self._changed("state", state):
            for s in STATES:
                self.set_class(s == state, f"-{s}")
        if self._changed("name", (state, t.role)):
            self.query_one(".launch-node-name", Static).update(t.title(), layout=False)
        value, total = t.progress()
        if self._changed("bar", (value, total)):
            self.query_one(ProgressBar).update(total=total, progress=value)
        if self._changed("message", t.message):
            self.query_one(".launch-node-message", Static).update(Content(redact(safe(t.message))[:300]), layout=False)
        if self._changed("ladder", (state, t.order, tuple(t.reached.items()), t.last, t.started)):
            self.query_one(".launch-node-ladder", Static).update(t.ladder(), layout=False)
        if self._changed("findings", tuple(t.findings.items())):
            self.set_class(bool(t.findings), "-findings")
            self.query_one(".launch-node-findings", Static).update(t.finding_line())


class LaunchScreen(ActionScreen):
    """Key ``l`` (registry entry "launch")."""

    BINDINGS = [Binding("escape", "back", "Back / stop watching", id="action-back")]

    def __init__(self, entry, action_cls, make_context=None) -> None:
        super().__init__(entry, action_cls, make_context)
        self.tracks: dict[str, NodeTrack] = {}
        self.rows: dict[str, LaunchNodeRow] = {}
        self.head: str = ""
        self.executor: str = ""
        self.outcome: str = "running"  # running / ready / fail / detached
        self.url: str = ""
        self._styles: dict[tuple[str, str], str] = {}
        self._last_milestone: dict[str, str] = {}
        self._failure = ""
        self._phase = "starting…"

    # ------------------------------------------------------------------ layout
    def _known_nodes(self) -> list[tuple[str, str]]:
        """(name, role) from the app's config, head first; empty when there is none."""
        config = getattr(getattr(self.app, "engine", None), "config", None)
        nodes = getattr(config, "nodes", None) or ()
        self.executor = getattr(getattr(config, "cluster", None), "executor", "") or ""
        out = [(n.name, getattr(n, "role", "") or "") for n in nodes]
        out.sort(key=lambda nr: nr[1] != "head")  # stable: head first, then config order
        if out:
            self.head = next((n for n, r in out if r == "head"), out[0][0])
        return out

    def _order(self) -> tuple[str, ...]:
        if self.executor == "mp":  # vLLM's own multi-node executor: no Ray to join
            return tuple(k for k in MILESTONE_ORDER if k != "ray_joined")
        return MILESTONE_ORDER

    def compose(self) -> ComposeResult:
        for name, role in self._known_nodes():
            self.tracks[name] = NodeTrack(name, role, self._order())
        with Vertical(classes="action-screen launch-screen"):
            yield Static(self._title(), id="launch-title", classes="action-title -running")
            with VerticalScroll(classes="launch-nodes", can_focus=False):
                for track in self.tracks.values():
                    row = LaunchNodeRow(track)
                    self.rows[track.name] = row
                    yield row
            yield DataTable(cursor_type="row", classes="action-steps")
            yield Log(classes="action-log", max_lines=2000)
            with VerticalScroll(classes="action-result"):
                yield Static(Content.styled("running…", "$text-muted"), id="action-summary")
        yield Footer()

    def _title(self) -> Content:
        n = len(self.tracks)
        info = " · ".join(x for x in (f"{n} node{'s' if n != 1 else ''}" if n else "",
                                      f"{self.executor} executor" if self.executor else "") if x)
        parts: list[tuple[str, str]] = [(self.entry.title, "bold")]
        if info:
            parts.append((f"  ·  {info}", "$text-muted"))
        if self.outcome == "running":
            parts += [("   Esc: stop watching   ", "$text-muted"), (self._phase, "$primary bold")]
        elif self.outcome == "ready":
            parts += [("   ", ""), (f"READY — {self.url}" if self.url else "READY", "$success bold")]
        elif self.outcome == FAIL:
            summary = self.result.summary if self.result is not None else self._failure
            parts += [("   ", ""), (f"FAILED — {summary}", "$error bold")]
        else:
            parts += [("   ", ""), ("DETACHED — the containers keep running", "$warning bold")]
        return Content.assemble(*parts)

    def _set_outcome(self, outcome: str) -> None:
        self.outcome = outcome
        title = self.query_one("#launch-title", Static)
        for s in ("running", "ready", FAIL, "detached"):
            title.set_class(s == outcome, f"-{s}")
        title.update(self._title())

    # ------------------------------------------------------------------ events -> rows
    def row_key(self, ev) -> str:
        if ev.step == "finding":
            return f"{ev.node}/finding/{ev.key}"
        return f"{ev.node}/{ev.step}"  # a node's milestones (keyed by id) update its one row

    def _track(self, name: str) -> NodeTrack:
        track = self.tracks.get(name)
        if track is None:  # a node the config did not name: a row as soon as an event names it
            track = self.tracks[name] = NodeTrack(name, "head" if name == self.head else "", self._order())
            row = self.rows[name] = LaunchNodeRow(track)
            self.query_one(".launch-nodes", VerticalScroll).mount(row)
            self.query_one("#launch-title", Static).update(self._title())
        return track

    def _head_track(self, ev: ActionEvent) -> NodeTrack | None:
        name = self.head or ev.node or next(iter(self.tracks), "")
        if not name:
            return None
        if not self.head:
            self.head = name
        track = self._track(name)
        track.role = track.role or "head"
        return track

    def _head_ready(self) -> None:
        """Only the head serves: when it is ready, so is every worker still standing."""
        for name, t in self.tracks.items():
            if name != self.head and not t.hard_failed and not t.ready:
                t.ready = True
                t.message = f"ready: the head {self.head} serves"
                self._show_row(name)

    def _show_row(self, name: str) -> None:
        row = self.rows.get(name)
        if row is not None and row.is_mounted:
            row.show()

    def _node_event(self, ev: ActionEvent) -> None:
        """Fold one event into its node's track; re-render that row only."""
        changed: set[str] = set()
        if ev.step == "milestone" and ev.node:
            t = self._track(ev.node)
            if ev.key:
                t.reach(ev.key, ev.progress)
            t.message = ev.message or t.message
            changed.add(t.name)
            if ev.key == "api_ready":
                if not self.head:
                    self.head = t.name
                    t.role = t.role or "head"
                if t.name == self.head:
                    self._head_ready()
        elif ev.step == "finding" and ev.node:
            t = self._track(ev.node)
            t.findings[ev.key or ev.message] = (ev.status, ev.message)
            if ev.status in ("warn", FAIL) and not t.failed:
                t.failed = ev.message or ev.key
            changed.add(t.name)
        elif ev.step in ("preflight", "start") and ev.node:
            t = self._track(ev.node)
            if ev.step == "start":
                t.started = True
            if ev.message:
                t.message = f"{ev.step}: {ev.message}"
            if ev.status == FAIL:
                t.failed, t.hard_failed = ev.message or f"{ev.step} failed", True
            changed.add(t.name)
        elif ev.step == "ready":
            t = self._head_track(ev)
            if t is not None:
                if ev.message:
                    t.message = ev.message
                if ev.status == "ok":
                    t.ready = True
                    self.url = self.url or _url_in(ev.message)
                    self._head_ready()
                elif ev.status == FAIL and not t.ready:
                    t.failed = ev.message or "the API never answered"
                changed.add(t.name)
        for name in changed:
            self._show_row(name)

    def show_event(self, ev) -> None:
        self._node_event(ev)
        phase = PHASES.get(ev.step, self._phase)
        if phase != self._phase and self.outcome == "running":
            self._phase = phase
            self.query_one("#launch-title", Static).update(self._title())
        self._table_event(ev)
        # the log gets transitions, not every shard of a weights load
        if ev.step == "milestone":
            if self._last_milestone.get(ev.node) == ev.key:
                return
            self._last_milestone[ev.node] = ev.key
        if ev.message:
            self.query_one(Log).write_line(f"{ev.step} [{ev.status}] {ev.node + ': ' if ev.node else ''}{redact(clean_text(ev.message))}")

    def _style(self, status: str) -> str:
        var = STATUS_STYLE.get(status, "")
        if not var:
            return ""
        key = (str(self.app.theme), var)
        if key not in self._styles:  # resolving the theme's variables per event is not free
            self._styles[key] = self.app.get_css_variables().get(var[1:], "")
        return self._styles[key]

    def _table_event(self, ev: ActionEvent) -> None:
        table = self.query_one(DataTable)
        status = ev.status + (f" {ev.progress * 100:.0f}%" if ev.progress is not None else "")
        cells = (Text(ev.step), Text(status, style=self._style(ev.status)), Text(ev.node),
                 Text(redact(safe(ev.message))[:200]))  # messages quote node output and commands
        key = self.row_key(ev)
        if key in table.rows:
            for col, cell in zip(table.columns, cells):
                table.update_cell(key, col, cell)
        else:
            follow = table.cursor_row >= table.row_count - 1  # the cursor on the last row: keep up
            table.add_row(*cells, key=key)
            if follow:
                table.move_cursor(row=table.row_count - 1, animate=False)

    def _rerun(self) -> None:  # queued behind the cluster lock: running again
        self._phase = "waiting for the cluster lock…"
        self._set_outcome("running")

    # ------------------------------------------------------------------ the end
    def on_action_done(self, message: ActionDone) -> None:
        super().on_action_done(message)
        r: "ActionResult | None" = self.result
        if r is None:
            return
        data = r.data or {}
        if r.ok:
            self.url = str(data.get("base_url") or self.url)
            head = self._head_track(ActionEvent(action="launch", step="ready", status="ok"))
            if head is not None and not head.ready:
                head.ready = True
                self._show_row(head.name)
                self._head_ready()
            self._set_outcome("ready")
        else:
            self._set_outcome(FAIL)

    def _show_result(self) -> None:
        r = self.result
        if r is None:
            return
        tone = "$success" if r.ok else "$error"
        parts = [Content.assemble(("READY  " if r.ok else "FAILED  ", tone + " bold"), r.summary)]
        version = (r.data or {}).get("vllm_version")
        if r.ok and version:
            parts.append(Content.styled(f"vLLM {version}", "$text-muted"))
        for f in r.findings:
            parts += [Content(""), finding_detail(f)]
        self.query_one("#action-summary", Static).update(Content("\n").join(parts))

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        super().on_worker_state_changed(event)
        if event.worker is not self._worker or self.result is not None:
            return
        if event.state is WorkerState.ERROR:
            err = event.worker.error
            self._failure = f"{type(err).__name__}: {err}"
            self._set_outcome(FAIL)
        elif event.state is WorkerState.CANCELLED:
            self.query_one("#action-summary", Static).update(
                Content.styled("stopped watching; the containers keep running (the Stop action removes them)",
                               "$warning"))
            self._set_outcome("detached")


def _url_in(message: str) -> str:
    for word in message.split():
        if word.startswith(("http://", "https://")):
            return word.rstrip(".,;")
    return ""
