"""The phase a log ends in (data: ``end_phases.toml``).

At end of input the classifier hands over the last lines of a source; when the last non-blank one
belongs to a start-up phase (NCCL setup, waiting for the engine core, graph capture, rendezvous)
and no error came after it, the log stopped inside that phase.  Nothing here runs per log line.
"""

from __future__ import annotations

import functools
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from . import lineprefix
from .last_words import CTRL_C, before_report, is_shutdown_request, terminal_residue

PHASES_PATH = Path(__file__).with_name("end_phases.toml")


@dataclass(frozen=True)
class EndPhase:
    id: str
    finding: str
    text: str
    markers: tuple[re.Pattern[str], ...]


@dataclass(frozen=True)
class Together:
    """A milestone detail and a finding of one source that together name another id."""

    milestone: str
    detail: str
    finding: str
    id: str
    why: str


@dataclass(frozen=True)
class EndPhases:
    done: tuple[re.Pattern[str], ...]
    phases: tuple[EndPhase, ...]
    last_lines: tuple[tuple[re.Pattern[str], str, bool], ...] = ()  # (pattern, id, unexplained only)
    together: tuple[Together, ...] = ()

    def last_line(self, tail: list[tuple[int, str]], explained: bool = False) -> tuple[int, str] | None:
        """(line number, finding id) when the last non-blank line says how the process ended
        (``explained``: a cause is named already, so the entries marked unexplained stay quiet)."""
        for lineno, text in reversed(tail):
            body = lineprefix.body(lineprefix.clean(text))[:2000].strip()
            if not body:
                continue
            return next(((lineno, fid) for rx, fid, alone in self.last_lines
                         if rx.search(body) and not (alone and explained)), None)
        return None

    def of_line(self, line: str) -> EndPhase | None:
        """The phase a (raw) log line belongs to, or None (a finished run, or no phase known)."""
        body = lineprefix.body(lineprefix.clean(line))[:2000]
        if any(rx.search(body) for rx in self.done):
            return None
        for ph in self.phases:
            if any(rx.search(body) for rx in ph.markers):
                return ph
        return None

    def ends_in(self, tail: list[tuple[int, str]]) -> tuple[int, EndPhase] | None:
        """(line number, phase) when the last non-blank line of ``tail`` is inside a phase."""
        for lineno, text in reversed(tail):
            if not lineprefix.body(lineprefix.clean(text)).strip():
                continue
            ph = self.of_line(text)
            return (lineno, ph) if ph is not None else None
        return None


@dataclass(frozen=True)
class LogEnd:
    """Where a log's own output ended: ``lines`` up to its last real line (the terminal's residue and
    a report pasted after it left out, and a stop that was asked for with what it printed), ``stop``
    the line of that request."""

    lines: list[tuple[int, str]]
    stop: tuple[int, str] | None = None


def log_end(window: list[tuple[int, str]], eps: "EndPhases") -> LogEnd:
    """The end of a log as the process left it.  A hang is usually ended by a person (Ctrl+C, a
    KeyboardInterrupt traceback) or an orchestrator (SIGTERM, "shutting down"): what it was doing
    is the last line BEFORE that request, so the request and the teardown after it are set aside
    when nothing after the request is inside a phase again (the process did not go on)."""
    k = len(window)
    while k and terminal_residue(window[k - 1][1]):
        k -= 1
    report = before_report(window[:k])  # an environment report pasted after the log is no part of it
    if report is not None:
        k = len(report[0])
    first: int | None = None
    for i in range(k - 1, -1, -1):
        text = window[i][1]
        if eps.of_line(text) is not None:
            break  # the last phase line: a request (if any) came after it
        body = lineprefix.body(lineprefix.clean(text)).lstrip()
        if body.startswith(CTRL_C) or is_shutdown_request(text):
            first = i
    if first is None:
        return LogEnd(window[:k])
    stop = (window[first][0], lineprefix.clean(window[first][1]).strip())
    k = first
    while k and terminal_residue(window[k - 1][1]):
        k -= 1
    return LogEnd(window[:k], stop)


def parse_end_phases(text: str, path: str, known_ids: set[str] | None = None) -> EndPhases:
    data = tomllib.loads(text)
    done = tuple(re.compile(p) for p in data.get("done", {}).get("markers", []))
    phases = []
    for raw in data.get("phase", []):
        fid = raw["finding"]
        if known_ids is not None and fid not in known_ids:
            raise ValueError(f"{path}: phase {raw.get('id')!r}: finding {fid!r} is not a catalogue id")
        phases.append(EndPhase(raw["id"], fid, raw["text"], tuple(re.compile(p) for p in raw["markers"])))
    last = []
    for raw in data.get("last_line", []):
        if known_ids is not None and raw["id"] not in known_ids:
            raise ValueError(f"{path}: last_line {raw['pattern']!r}: {raw['id']!r} is not a catalogue id")
        last.append((re.compile(raw["pattern"]), raw["id"], bool(raw.get("unexplained", False))))
    together = []
    for raw in data.get("together", []):
        t = Together(raw["milestone"], raw["detail"], raw["finding"], raw["id"], raw.get("why", ""))
        if known_ids is not None and not {t.finding, t.id} <= known_ids:
            raise ValueError(f"{path}: together {t.id!r}: {t.finding!r} or {t.id!r} is not a catalogue id")
        together.append(t)
    ep = EndPhases(done, tuple(phases), tuple(last), tuple(together))
    for raw in data.get("last_line", []):
        for ex in raw.get("examples", []):
            if ep.last_line([(1, ex)]) != (1, raw["id"]):
                raise ValueError(f"{path}: last_line {raw['pattern']!r}: example not recognised: {ex[:80]!r}")
    for raw in data.get("phase", []):
        for ex in raw.get("examples", []):
            got = ep.of_line(ex)
            if got is None or got.id != raw["id"]:
                raise ValueError(f"{path}: phase {raw['id']!r}: example not recognised: {ex[:80]!r}")
    return ep


@functools.lru_cache(maxsize=1)
def default_end_phases() -> EndPhases:
    from .catalogue import default_catalogue

    return parse_end_phases(PHASES_PATH.read_text(encoding="utf-8"), str(PHASES_PATH),
                            set(default_catalogue().entries))
