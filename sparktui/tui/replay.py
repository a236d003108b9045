"""The TUI's replay mode: SparkApp over a recorded session with a play head (replay_player).

Keys (replay only, so they live here and not in the live keymap): space pause/play, [ and ]
previous/next finding, < and > slower/faster, J jump to a time (a small input)."""

from __future__ import annotations

import time
from typing import Any

from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from ..replay_player import Player, parse_when, position
from .app import SparkApp
from .format import clock as hhmmss
from .screens.main import MainScreen

TICK = 0.1  # seconds between play-head moves while playing


class JumpModal(ModalScreen["str | None"]):
    """One line: where to jump.  Enter jumps, Esc cancels."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="jump-cancel")]

    def __init__(self, hint: str) -> None:
        super().__init__()
        self.hint = hint

    def compose(self):
        with Vertical(classes="dialog note"):
            yield Static(f"Jump to (HH:MM:SS, +SECONDS from the start, -SECONDS back, start, end)  {self.hint}",
                         classes="dialog-title")
            yield Input(placeholder="e.g. 14:03:20, +90, +2m, -30s, end", id="jump-input", max_length=40)

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.dismiss(event.value.strip() or None)

    def action_cancel(self) -> None:
        self.dismiss(None)


class ReplayApp(SparkApp):
    BINDINGS = [
        *SparkApp.BINDINGS,
        Binding("space", "replay_pause", "Play/Pause", id="replay-pause"),
        Binding("left_square_bracket", "replay_prev_finding", "Prev finding", id="replay-prev"),
        Binding("right_square_bracket", "replay_next_finding", "Next finding", id="replay-next"),
        Binding("less_than_sign", "replay_slower", "Slower", show=False, id="replay-slower"),
        Binding("greater_than_sign", "replay_faster", "Faster", show=False, id="replay-faster"),
        Binding("J", "replay_jump", "Jump", id="replay-jump"),
    ]

    def __init__(self, player: Player, *, name: str, **kw: Any) -> None:
        self.player = player
        self.session_name = name
        player.on_engine = self._engine_replaced
        super().__init__(player.engine, read_only=True, live=False, clock=lambda: player.now, **kw)
        self.subtitle_text = self._status()
        self.moves = 0  # play-head moves applied (tests wait on it)

    def on_ready(self) -> None:
        # not on_mount: Textual calls each class's on_mount along the MRO, SparkApp's included
        self.set_interval(TICK, self._play)
        self._show_status()

    # ------------------------------------------------------------------ play head
    def _play(self) -> None:
        if self.player.tick(time.monotonic()):
            self._moved()

    def _moved(self) -> None:
        self.moves += 1
        self._show_status()
        self.refresh_now()

    def refresh_now(self) -> None:
        main = self._main_screen()
        if main is not None and not main.is_mounted:
            return  # a MainScreen for a rebuilt engine, still composing: its on_mount paints it
        super().refresh_now()

    def _engine_replaced(self, engine: Any) -> None:
        """A jump back rebuilt the engine: the panes hold the old log store, so make new ones."""
        if self._unsubscribe:
            self._unsubscribe()
        self.engine = engine
        self._unsubscribe = engine.subscribe(self._on_batch)
        main = self._main_screen()
        if main is not None and self.screen is main:
            self.switch_screen(MainScreen())

    def _status(self) -> str:
        p = self.player
        tl = p.timeline
        state = "paused" if p.paused else f"playing x{p.speed:g}"
        fi = f"  finding {p.finding_index()}/{len(tl.findings)}" if tl.findings else ""
        return (f"replay {self.session_name}  {hhmmss(p.now)}  {position(p.now, tl.start)}/"
                f"{position(tl.end, tl.start)}  {state}{fi}  (space [ ] < > J)")

    def _show_status(self) -> None:
        self.subtitle_text = self._status()
        main = self._main_screen()
        if main is not None and main.is_mounted:
            main._topbar()

    # ------------------------------------------------------------------ keys
    def action_replay_pause(self) -> None:
        self.player.toggle_pause()
        self._moved()

    def action_replay_next_finding(self) -> None:
        self._step(self.player.next_finding(), "no later finding")

    def action_replay_prev_finding(self) -> None:
        self._step(self.player.prev_finding(), "no earlier finding")

    def _step(self, mark, none: str) -> None:
        if mark is None:
            self.notify(none, timeout=2)
            return
        self.player.paused = True  # stepping is looking: hold the screen there
        self._moved()
        self.notify(f"{hhmmss(mark.ts)} [{mark.severity}] {mark.title}", timeout=4, markup=False)

    def action_replay_slower(self) -> None:
        self.player.set_speed(self.player.speed / 2)
        self._show_status()

    def action_replay_faster(self) -> None:
        self.player.set_speed(self.player.speed * 2)
        self._show_status()

    def action_replay_jump(self) -> None:
        if not isinstance(self.screen, JumpModal):
            tl = self.player.timeline
            self.push_screen(JumpModal(f"[{hhmmss(tl.start)} .. {hhmmss(tl.end)}]"), self._jump)

    def _jump(self, text: str | None) -> None:
        if not text:
            return
        p = self.player
        try:
            t = parse_when(text, p.timeline.start, p.timeline.end, p.now)
        except ValueError as exc:
            self.notify(str(exc), severity="warning", markup=False)
            return
        p.seek(t)
        self._moved()
