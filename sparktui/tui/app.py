"""The Textual face: a thin layer over the engine.

The engine's pump runs in the app's event loop (its analysis in a worker process: engine.py).  Each
processed batch calls a subscriber that posts ONE coalescing ``EngineUpdated`` message; the app
repaints from ``engine.state`` / ``engine.logs`` at most once per ``MIN_REFRESH`` however fast lines
arrive (docs/architecture.md, "Refresh rate").  Widgets never do IO.
"""

from __future__ import annotations

import gc
import os
import sys
import time
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

from textual import events
from textual.app import App, SystemCommand
from textual.geometry import Size
from textual.screen import ModalScreen

from ..actions import registry
from ..actions.shared_timeline import operator_id
from . import keymap
from .action_screens import screen_for
from .format import duration
from .messages import EngineUpdated, LockPolled, OpenAction
from .palette import SYSTEM_GROUP, SparkCommands
from .screens.help import HelpScreen
from .screens.main import MainScreen
from .screens.timeline import NoteModal, TimelineScreen
from .terminal_safe import TerminalSafe
from .themes import DEFAULT_THEME, load_themes
from .widgets.lock_indicator import LockIndicator

if TYPE_CHECKING:
    from ..actions.base import ActionContext, ConfirmFn
    from ..model import Emit, Finding
    from ..engine import Engine
    from ..state import FindingStatus
    from ..nodes.base import Node

MIN_REFRESH = 0.1  # seconds between repaints from engine updates (10 Hz): frames cost ~30 ms at 200x50
TTY_CHECK = 5.0
# young collections every 50k allocations (not 700) and full ones 10x rarer: a flood allocates a
# LogLine per line, and each full pass walks everything the app holds (see _settle_gc)
GC_THRESHOLD = (50_000, 20, 100)
SIZE_CHECK = 1.0  # seconds between looks at the tty's size (a SIGWINCH can be lost: see _check_size)
LOCK_POLL_S = 5.0  # seconds between two looks at the cluster lock (one small script on the head)
TOAST_MAX_AGE = 120.0  # another operator's record older than this (the backlog read at start) is not toasted
TOAST_RUN_S = 60.0  # one toast per other operator's action run: its first record, then only a failure
TOASTS_AT_ONCE = 3  # more arriving together become one "+N more" toast


class SparkApp(App[int]):
    CSS_PATH = "app.tcss"
    TITLE = "sparktui"
    BINDINGS = keymap.bindings("app")
    COMMANDS = App.COMMANDS | {SparkCommands}

    def __init__(
        self,
        engine: "Engine",
        *,
        nodes: "Callable[[], Mapping[str, Node]] | None" = None,
        read_only: bool = False,
        theme: str | None = None,
        clock: Callable[[], float] = time.time,
        live: bool = True,
        subtitle: str = "",
        exit_after_first_paint: bool = False,
        timeline: Any = None,
        demo: bool = False,
    ) -> None:
        super().__init__()
        self.engine = engine
        self._nodes_factory = nodes
        self._action_nodes: Mapping[str, Node] | None = None
        self.read_only = read_only
        # `sparktui demo`: the guided actions the registry marks in_demo=False are shown but not offered
        self.demo = demo
        self.theme_name = theme or DEFAULT_THEME
        self.clock = clock
        self.live = live
        self.subtitle_text = subtitle
        self.exit_after_first_paint = exit_after_first_paint
        self.first_paint_at: float | None = None
        self._unsubscribe: Callable[[], None] | None = None
        self._refresh_pending = False
        self._last_refresh = 0.0
        self.refreshes = 0
        self._host_keys_asked: set[tuple[str, str]] = set()
        self.broken_actions: dict[str, str] = {}  # guided actions whose module fails to import
        self._asking_host_key = False
        self._terminal_safe = TerminalSafe()
        self._gc_frozen = False
        # the cluster's shared timeline on the head (actions/shared_timeline.TimelineWriter), live TUI only
        self.shared_timeline = timeline
        self.operator = timeline.operator if timeline is not None else operator_id()
        # the cluster lock as last polled: (line, held, mine) for the LockIndicator of every screen
        self.lock_view: tuple[str, bool, bool] = ("", False, False)
        self.lock_poll_s = LOCK_POLL_S
        self._lock: Any = None  # the ClusterLock polled (None: nothing to share, e.g. sim nodes)
        self._last_timeline_entry: Any = None
        self._toasted_runs: dict[tuple[str, str, str], float] = {}

    def get_theme_variable_defaults(self) -> dict[str, str]:
        # a user's theme without it still parses; the shipped themes each set a readable one
        return {**super().get_theme_variable_defaults(), "state-stopped": "#8B949E"}

    def get_system_commands(self, screen) -> Iterable[SystemCommand]:
        """Textual's own palette entries (theme, keys, screenshot, ...) under a group of their own, so
        they read apart from sparktui's view:/node:/action: ones; its Quit is sparktui's "view: Quit"."""
        for cmd in super().get_system_commands(screen):
            if cmd.title != "Quit":
                yield cmd._replace(title=f"{SYSTEM_GROUP}: {cmd.title}")

    def get_line_filters(self):
        # every strip passes TerminalSafe last: no control character from node data reaches the tty
        return [*super().get_line_filters(), self._terminal_safe]

    # ------------------------------------------------------------------ lifecycle
    async def on_mount(self) -> None:
        for theme in load_themes().values():
            self.register_theme(theme)
        self.theme = self.theme_name if self.theme_name in self.available_themes else DEFAULT_THEME
        user_keys = keymap.user_keymap()
        if user_keys:
            self.set_keymap(user_keys)
        self._unsubscribe = self.engine.subscribe(self._on_batch)
        self.screen_change_signal.subscribe(self, self._add_lock_indicator)
        await self.push_screen(MainScreen())
        self._last_timeline_entry = self.engine.state.timeline[-1] if self.engine.state.timeline else None
        self.call_after_refresh(self._start_lock_poll)
        self.call_after_refresh(self._verify_actions)
        self.call_after_refresh(self._settle_gc)
        if self.live:
            await self.engine.start()
            self.set_interval(1.0, self._tick)
            if not self.is_headless:
                self.set_interval(TTY_CHECK, self._check_terminal)
                self.set_interval(SIZE_CHECK, self._check_size)

    def _settle_gc(self) -> None:
        """What start-up built (modules, catalogue, widgets, styles) lives as long as the app: freeze
        it out of the collector's full passes, and make those rarer.  Under a flood a full pass
        over everything took up to 189 ms (13 in 40 key presses): the key-press p99."""
        if self._gc_frozen or not self.is_running:
            return
        self._gc_frozen = True
        gc.freeze()  # O(1); no collect() first: a full pass here cost ~120 ms right after the first paint
        self._gc_threshold = gc.get_threshold()
        gc.set_threshold(*GC_THRESHOLD)

    async def on_unmount(self) -> None:
        if self._gc_frozen:  # what it froze is collectable again (several apps in one process: tests)
            self._gc_frozen = False
            gc.unfreeze()
            gc.set_threshold(*self._gc_threshold)
        if self._unsubscribe:
            self._unsubscribe()
        if self.shared_timeline is not None:  # a note typed just before quitting still reaches the head
            await self.shared_timeline.flush(timeout=3.0)
            await self.shared_timeline.close()
        if self.live:
            await self.engine.stop()
        if self._action_nodes:
            for node in self._action_nodes.values():
                try:
                    await node.close()
                except Exception:
                    pass

    def _check_size(self) -> None:
        # Under tmux, when a second client attaches, the window takes two sizes in quick succession
        # (80x24, then 80x23 for the client's status line) and the app kept the first in 2 of 6 runs:
        # doubled rows, no footer.  The tty knows the size; resize from here when a signal went missing
        try:
            cols, rows = os.get_terminal_size(sys.__stdout__.fileno())  # the ioctl, not $COLUMNS/$LINES
        except (AttributeError, ValueError, OSError):
            return
        if cols > 0 and rows > 0 and (cols, rows) != tuple(self.size):
            size = Size(cols, rows)
            self.post_message(events.Resize(size, size))

    def _check_terminal(self) -> None:
        # dolphie's guard: a vanished tmux client leaves stdin dead; exit instead of spinning
        try:
            alive = sys.stdin is not None and sys.stdin.isatty()
        except (ValueError, OSError):
            alive = False
        if not alive:
            self.exit(0)

    # ------------------------------------------------------------------ engine -> screen
    def _on_batch(self, events: list[Any]) -> None:
        if not self._refresh_pending:
            self._refresh_pending = True
            self.post_message(EngineUpdated())

    def on_engine_updated(self, message: EngineUpdated) -> None:
        wait = self._last_refresh + MIN_REFRESH - time.monotonic()
        if wait > 0:
            self.set_timer(wait, self._do_refresh)
        else:
            self._do_refresh()

    def _do_refresh(self) -> None:
        self._refresh_pending = False
        self._last_refresh = time.monotonic()
        self.refresh_now()

    def refresh_now(self) -> None:
        """Repaint every pane from the engine (tests call this after ``engine.process``)."""
        screen = self._main_screen()
        if screen is None:
            return
        screen.refresh_state()
        if isinstance(self.screen, TimelineScreen):
            self.screen.refresh_state()
        self._toast_others()
        self.refreshes += 1
        self._check_host_keys()
        if self.exit_after_first_paint and self.first_paint_at is None and self._populated():
            self.first_paint_at = -1.0
            self.call_after_refresh(self._first_paint_done)

    # ------------------------------------------------------------------ pair debugging: the lock, the others
    def _add_lock_indicator(self, screen) -> None:
        """Every full screen gets the lock line (a modal shows the one of the screen under it)."""
        if not isinstance(screen, ModalScreen) and not screen.query(LockIndicator):
            screen.mount(LockIndicator())

    def _start_lock_poll(self) -> None:
        if self._nodes_factory is None or not self.is_running:
            return
        if self._lock is None:
            from ..actions.lock import ClusterLock

            self._lock = ClusterLock.for_nodes(self.engine.config, self._node_handles())
            if self._lock is None:  # the demo: no lock to share, no line to show
                return
        self.run_worker(self._read_lock(), group="lock-poll", exclusive=True, exit_on_error=False,
                        description="read the cluster lock")

    async def _read_lock(self) -> None:
        try:
            holder = await self._lock.show()
        except Exception as exc:  # unreachable head: said on the line, polled again
            self.post_message(LockPolled(None, str(exc) or type(exc).__name__))
            return
        self.post_message(LockPolled(holder))

    def on_lock_polled(self, message: LockPolled) -> None:
        self.lock_view = self._lock_line(message.holder, message.error)
        for screen in self.screen_stack:
            for indicator in screen.query(LockIndicator):
                indicator.show(*self.lock_view)
        self.set_timer(self.lock_poll_s, self._start_lock_poll)  # re-armed once this poll is done

    def _lock_line(self, holder: Any, error: str) -> tuple[str, bool, bool]:
        from ..actions.lock import PROCESS_SESSION, STALE_S
        from ..timefmt import parse as parse_time

        if error:
            return "lock: unknown (head not answering)", False, False
        if holder is None:
            return "lock: free", False, False
        if holder.problem or not holder.record:
            return "lock: held (holder unreadable)", True, False
        since = parse_time(holder.record.get("since"))
        age = f", {duration(time.time() - since)}" if since is not None else ""
        stale = " (stale?)" if holder.stale_reason(STALE_S) else ""
        mine = holder.record.get("session") == PROCESS_SESSION and holder.pid == os.getpid()
        return f"lock: {holder.who} — {holder.action}{age}{stale}", True, mine

    def on_resize(self, event: events.Resize) -> None:
        self.call_after_refresh(self._place_lock_indicators)

    def _place_lock_indicators(self) -> None:
        for screen in self.screen_stack:
            for indicator in screen.query(LockIndicator):
                if indicator.display:
                    indicator.place()

    def _toast_others(self) -> None:
        """A note or an action of another operator (shared timeline) becomes a toast; one's own never
        arrive here (the timeline source leaves them out)."""
        entries = self.engine.state.timeline
        if not entries or entries[-1] is self._last_timeline_entry:
            return
        start = 0
        for i in range(len(entries) - 1, -1, -1):
            if entries[i] is self._last_timeline_entry:
                start = i + 1
                break
        self._last_timeline_entry = entries[-1]
        now = self.clock()
        toasts: list[tuple[str, str, str]] = []
        for e in entries[start:]:
            if now - e.ts > TOAST_MAX_AGE:
                continue
            if e.kind == "note":
                toasts.append((f"note from {e.operator}", e.message, "information"))
                continue
            run = (e.operator, e.session, e.action)
            first = now - self._toasted_runs.get(run, float("-inf")) > TOAST_RUN_S
            if first or e.status in ("fail", "cancelled"):
                self._toasted_runs[run] = now
                text = f"{e.action} {e.step}: {e.status}" + (f" — {e.message}" if e.message else "")
                toasts.append((f"{e.operator}", text[:200], "warning" if e.status == "fail" else "information"))
        for title, text, severity in toasts[:TOASTS_AT_ONCE]:
            self.notify(text, title=title, severity=severity)  # type: ignore[arg-type]
        if len(toasts) > TOASTS_AT_ONCE:
            self.notify(f"{len(toasts) - TOASTS_AT_ONCE} more from the other operators: L (timeline)")

    # ------------------------------------------------------------------ host keys
    def _node_handles(self) -> "Mapping[str, Node]":
        if self._action_nodes is None:
            self._action_nodes = self._nodes_factory() if self._nodes_factory else {}
        return self._action_nodes

    def _check_host_keys(self) -> None:
        """An unreachable node whose key nobody vouched for (the facts come on its reachability
        event, into the state): show the fingerprint and ask."""
        if self._nodes_factory is None or self._asking_host_key:
            return
        for name, ns in self.engine.state.nodes.items():
            key = ns.host_key
            if ns.reachable is not False or key is None or (name, key.fingerprint) in self._host_keys_asked:
                continue
            self._host_keys_asked.add((name, key.fingerprint))
            self._asking_host_key = True
            from .screens.hostkey import HostKeyModal

            self.push_screen(HostKeyModal.from_offer(name, key),
                             lambda yes, name=name, fp=key.fingerprint: self._host_key_answer(name, fp, yes))
            return

    def _host_key_answer(self, name: str, fingerprint: str, yes: bool | None) -> None:
        self._asking_host_key = False
        node = self._node_handles().get(name) if yes else None
        if node is not None:  # only now does the app need the node itself: to record the key
            self.run_worker(lambda: node.trust_offered_key(fingerprint), thread=True,  # type: ignore[attr-defined]
                            exit_on_error=False, group="hostkey", description="trust host key")
            self.notify(f"{name}: key {fingerprint} trusted; reconnecting at the next retry")
        else:
            self.notify(f"{name}: host key refused; the node stays unreachable", severity="warning")
        self._check_host_keys()

    def _tick(self) -> None:
        # ages and "retry in" move with the clock even when no event arrives
        screen = self._main_screen()
        if screen is not None and not self._refresh_pending:
            screen.refresh_state()

    def _main_screen(self) -> MainScreen | None:
        for screen in self.screen_stack:
            if isinstance(screen, MainScreen):
                return screen
        return None

    def _populated(self) -> bool:
        nodes = self.engine.state.nodes
        return bool(nodes) and all(n.containers and n.memory is not None for n in nodes.values())

    def _first_paint_done(self) -> None:
        self.first_paint_at = time.time()
        self.exit(0)

    # ------------------------------------------------------------------ actions (registry: scope "app")
    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.read_only, self._keys_by_id(), len(self.engine.config.nodes),
                                        demo=self.demo))

    def _keys_by_id(self) -> dict[str, str]:
        out = {}
        for e in keymap.entries():
            out[e.id] = self._keymap.get(e.id, e.keys) if hasattr(self, "_keymap") else e.keys
        return out

    def action_timeline(self) -> None:
        if not isinstance(self.screen, TimelineScreen):
            self.push_screen(TimelineScreen())

    def action_note(self) -> None:
        if not isinstance(self.screen, NoteModal):
            self.push_screen(NoteModal(), lambda text: self.add_note(text) if text else None)

    def add_note(self, text: str) -> None:
        """A timestamped note: into the session (engine) and onto the cluster's shared timeline."""
        from ..model import Note

        note = Note(text, author=self.operator)
        if self.engine.started:
            self.engine.emit(note)
        else:  # a replay or a test: no pump runs, apply it now
            self.engine.process([note])
        if self.shared_timeline is not None:
            self.shared_timeline.note(note)
        self.notify("note added to the timeline", timeout=2)

    def acknowledge(self, finding: "Finding") -> "FindingStatus":
        """An operator owns ``finding``: into the session (engine, so it leaves the ranking) and onto
        the cluster's shared timeline (the other operators' faces apply it when they read it)."""
        from ..model import FindingAcknowledged
        from ..state import FindingStatus

        ack = FindingAcknowledged(finding.key, operator=self.operator)
        if self.engine.started:
            self.engine.emit(ack)
        else:  # a replay or a test: no pump runs, apply it now
            self.engine.process([ack])
        if self.shared_timeline is not None:
            self.shared_timeline.ack(ack, finding.id, finding.node)
        self.notify(f"acknowledged: {finding.title[:60]}", timeout=2)
        return FindingStatus("acknowledged", ack.ts, operator=ack.operator)

    def action_show_log(self, index: int, source: str) -> None:
        screen = self._main_screen()
        if screen is None:
            return
        screen.action_select_node(index)
        screen.active_pane.log_view.set_source(source)
        screen.active_pane.sync_cursor()

    def _verify_actions(self) -> None:
        self.run_worker(self._import_actions, thread=True, exit_on_error=False, group="verify-actions",
                        description="import the guided actions")

    def _import_actions(self) -> None:
        """After the first paint: import each guided action once; one that fails is hidden."""
        for entry in registry.present():
            if registry.load(entry) is None:
                self.broken_actions[entry.name] = f"{entry.module} does not import"
        if self.broken_actions:
            self.call_from_thread(self.refresh_bindings)

    def action_allowed(self, name: str) -> bool:
        return not self.action_refusal(name)

    def action_refusal(self, name: str) -> str:
        """Why the guided action ``name`` cannot be started here ('' when it can): said when its key is pressed."""
        if self._nodes_factory is None:
            return f"{name}: not available here (a replay has no node to act on)"
        if name in self.broken_actions:
            return f"{name}: not in this build ({self.broken_actions[name]})"
        entry = registry.entry(name)
        if entry is None:
            return f"{name}: not in this build"
        # read-only first: an observer is told about their role, which holds on every cluster
        if self.read_only and (why := entry.read_only_refusal()):
            return why
        return entry.demo_refusal() if self.demo and not entry.in_demo else ""

    def action_not_offered(self, name: str) -> bool:
        """A guided action this face shows but does not offer (the demo's Docker actions): dimmed in the
        footer, marked in help and the palette, its key says why."""
        entry = registry.entry(name)
        return self.demo and entry is not None and not entry.in_demo

    def action_guided(self, name: str) -> None:
        """The palette's way to a guided action the screen does not offer (the demo's): says why."""
        self.open_action(name)

    def on_open_action(self, message: OpenAction) -> None:
        message.stop()
        self.open_action(message.name)

    def open_action(self, name: str) -> None:
        entry = registry.entry(name)
        why = self.action_refusal(name)
        if entry is None or why:
            self.notify(why or f"{name}: not available", severity="warning")
            return
        cls = registry.load(entry)
        if cls is None:
            self.notify(f"{name}: not in this build", severity="warning")
            return
        screen_cls = screen_for(entry.name)
        self.push_screen(screen_cls(entry, cls, self.make_action_context))  # attributes down

    def make_action_context(self, *, emit: "Emit", confirm: "ConfirmFn") -> "ActionContext":
        from ..actions.base import ActionContext

        ctx = ActionContext(self.engine.config, self._node_handles(), emit=emit, confirm=confirm, read_only=self.read_only)
        ctx.timeline = self.shared_timeline  # every step outcome also goes to the cluster's shared timeline
        ctx.wait_hint = "w: wait for the lock"  # the action screen's way to queue (ActionScreen.action_wait_lock)
        from ..actions.tap import Tap

        if self.live:  # the screen's own engine: what the action reads is what the panes show
            ctx.tap = Tap(self.engine)
        else:  # this engine follows no container: a small one of the action's own, as the CLI's
            from ..collectors.small_engine import small_engine

            config, nodes = self.engine.config, ctx.nodes
            ctx.tap = Tap(make=lambda: small_engine(config, nodes))
        return ctx


def exit_after_first_paint_requested() -> bool:
    return os.environ.get("SPARKTUI_EXIT_AFTER_FIRST_PAINT", "") not in ("", "0")
