"""Scrubbing a recorded session: the events on one time axis, a play head that moves at a speed,
jumps to a time, and steps between findings.  No Textual import: the TUI's replay mode drives it.

The engine is a pure reducer of events, so moving forward processes only the events between the
old and the new position, and moving back rebuilds a fresh engine up to the new position."""

from __future__ import annotations

import bisect
import re
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Callable

from . import model

MIN_SPEED, MAX_SPEED = 0.01, 10000.0


@dataclass(frozen=True)
class FindingMark:
    ts: float
    title: str
    severity: str


class Timeline:
    """Every event of a session sorted by time; a log file's lines become one event per line so
    they appear when they were written (a line without a stamp takes its predecessor's)."""

    def __init__(self, events: list[Any], started: float | None = None) -> None:
        items: list[tuple[float, int, Any]] = []
        for i, ev in enumerate(events):
            if isinstance(ev, model.LogBatch):
                last = ev.ts or started or 0.0
                for ln in ev.lines:
                    last = ln.ts if ln.ts else last
                    items.append((last, len(items), ln))
            else:
                items.append((float(getattr(ev, "ts", 0.0) or started or 0.0), len(items), ev))
        items.sort(key=lambda x: (x[0], x[1]))  # stable: same-time events keep the recorded order
        self.stamps = [t for t, _, _ in items]
        self.events = [e for _, _, e in items]
        self.start = self.stamps[0] if self.stamps else (started or 0.0)
        self.end = self.stamps[-1] if self.stamps else self.start
        self.findings = [FindingMark(t, e.finding.title, e.finding.severity)
                         for t, e in zip(self.stamps, self.events) if isinstance(e, model.FindingRaised)]

    def index_at(self, t: float) -> int:
        """How many events happened at or before ``t``."""
        return bisect.bisect_right(self.stamps, t)

    def batch(self, lo: int, hi: int) -> list[Any]:
        """Events [lo, hi) with runs of lines of one log joined into LogBatches (cheaper to apply)."""
        out: list[Any] = []
        run: list[model.LogLine] = []

        def flush() -> None:
            if run:
                out.append(model.LogBatch(run[0].node, run[0].source, tuple(run), ts=run[0].ts or 0.0))
                run.clear()

        for ev in self.events[lo:hi]:
            if isinstance(ev, model.LogLine):
                if run and (run[0].node, run[0].source) != (ev.node, ev.source):
                    flush()
                run.append(ev)
            else:
                flush()
                out.append(ev)
        flush()
        return out


class Player:
    """The play head.  ``make_engine()`` gives a fresh engine; ``on_engine`` is told when a jump
    backwards replaced it (the screen must then read the new one)."""

    def __init__(self, timeline: Timeline, make_engine: Callable[[], Any], *, speed: float = 1.0,
                 on_engine: Callable[[Any], None] | None = None) -> None:
        self.timeline = timeline
        self.make_engine = make_engine
        self.on_engine = on_engine or (lambda e: None)
        self.engine = make_engine()
        self.speed = clamp_speed(speed)
        self.now = timeline.start
        self.pos = 0
        self.paused = False
        self._last_wall: float | None = None

    @property
    def at_end(self) -> bool:
        return self.pos >= len(self.timeline.events) and self.now >= self.timeline.end

    def seek(self, t: float) -> None:
        t = min(max(t, self.timeline.start), self.timeline.end)
        target = self.timeline.index_at(t)
        if target < self.pos:  # back in time: state is a reduction, so rebuild it from the start
            self.engine = self.make_engine()
            self.pos = 0
            self.on_engine(self.engine)
        if target > self.pos:
            self.engine.process(self.timeline.batch(self.pos, target))
        self.pos = target
        self.now = t

    def tick(self, wall: float | None = None) -> bool:
        """Advance by the wall time since the last tick times the speed; False when nothing moved."""
        wall = time.monotonic() if wall is None else wall
        last, self._last_wall = self._last_wall, wall
        if self.paused or last is None or self.at_end:
            return False
        self.seek(self.now + (wall - last) * self.speed)
        if self.now >= self.timeline.end:
            self.paused = True  # the end: stay on the last screen
        return True

    def toggle_pause(self) -> None:
        self.paused = not self.paused
        self._last_wall = None  # the pause itself is not played back
        if not self.paused and self.at_end:
            self.seek(self.timeline.start)  # play again from the start

    def set_speed(self, speed: float) -> None:
        self.speed = clamp_speed(speed)

    def finding_index(self) -> int:
        """How many findings are at or before the play head."""
        return bisect.bisect_right([f.ts for f in self.timeline.findings], self.now)

    def next_finding(self) -> FindingMark | None:
        for f in self.timeline.findings:
            if f.ts > self.now:
                self.seek(f.ts)
                return f
        return None

    def prev_finding(self) -> FindingMark | None:
        """The finding before the one at the play head (so repeated presses keep walking back)."""
        for f in reversed(self.timeline.findings):
            if f.ts < self.now:
                self.seek(f.ts)
                return f
        return None


def clamp_speed(speed: float) -> float:
    return min(max(float(speed), MIN_SPEED), MAX_SPEED)


_OFFSET = re.compile(r"^([+-])?\s*(?:(\d+)h)?\s*(?:(\d+)m)?\s*(?:(\d+(?:\.\d+)?)s?)?$")


def parse_when(text: str, start: float, end: float, now: float) -> float:
    """A time to jump to: ``start``/``end``, ``HH:MM[:SS]`` (local clock, on the session's day),
    ``+90``/``+1m30s`` from the start, ``-30s`` back from the play head.  ValueError if neither."""
    s = text.strip().lower()
    if s in ("start", "begin", "0"):
        return start
    if s == "end":
        return end
    m = re.fullmatch(r"(\d{1,2}):(\d{2})(?::(\d{2}(?:\.\d+)?))?", s)
    if m:
        day = datetime.fromtimestamp(start)
        at = day.replace(hour=int(m.group(1)), minute=int(m.group(2)), second=0, microsecond=0)
        at += timedelta(seconds=float(m.group(3) or 0))
        if at.timestamp() < start - 1:  # a session past midnight: the next day's clock
            at += timedelta(days=1)
        return at.timestamp()
    m = _OFFSET.match(s)
    if m and any(m.group(i) for i in (2, 3, 4)):
        secs = int(m.group(2) or 0) * 3600 + int(m.group(3) or 0) * 60 + float(m.group(4) or 0)
        if m.group(1) == "-":
            return now - secs
        return start + secs
    raise ValueError(f"not a time: {text!r} (HH:MM:SS, +SECONDS from the start, -SECONDS back, start, end)")


def position(t: float, start: float) -> str:
    s = max(0, int(t - start))
    h, rem = divmod(s, 3600)
    return f"{h}:{rem // 60:02d}:{rem % 60:02d}" if h else f"{rem // 60:02d}:{rem % 60:02d}"
