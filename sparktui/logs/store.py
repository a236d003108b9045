"""The bounded in-memory log store that faces read (the session file keeps everything).

One ``LogSeries`` per (node, source).  Lines are kept as already-sanitised ``str`` in a list
with a moving base, so a line keeps its *position* after older lines are dropped.  Widgets read
slices for the viewport only (virtualised rendering).

A line's number is its ``LogLine.seq``: the follower numbers a source's lines once, so a finding's
line, the row the view marks for it and the line of the session file are the same number.  Lines
can be missing from the store (skipped under a flood, see ``engine``), so positions and numbers
differ by the gaps: ``position_of`` converts (``seqs`` holds each kept line's number).

The engine's worker appends while the UI reads: a lock per series keeps a read from seeing a trim
half done (the appended texts are prepared before the lock is taken).
"""

from __future__ import annotations

import threading
from array import array
from bisect import bisect_left
from dataclasses import dataclass, field

from ..model import LogLine
from .redact import redact_lines
from .sanitize import clean_line

DEFAULT_MAX_LINES = 200_000  # per source


@dataclass
class LogSeries:
    node: str
    source: str
    max_lines: int = DEFAULT_MAX_LINES
    texts: list[str] = field(default_factory=list)
    stamps: list[float | None] = field(default_factory=list)
    seqs: array = field(default_factory=lambda: array("q"))  # each kept line's number (LogLine.seq)
    base: int = 0  # position (0-based) of texts[0]
    version: int = 0  # bumps on every append: cheap change detection for faces
    skipped: int = 0  # lines not analysed nor kept here under a flood (the session file has them)
    lost: int = 0  # lines that reached neither this store nor the session file (the reader fell too far behind)
    unsaved: int = 0  # lines held here that the session file did not take (it reached its cap)
    skipped_to: int = 0  # the number of the newest skipped line: the source's last may be one of them
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @property
    def total(self) -> int:
        """Lines ever appended here (positions run 0..total-1)."""
        return self.base + len(self.texts)

    @property
    def last_seq(self) -> int:
        """The newest line's number, held here or skipped (as in the session file)."""
        held = self.seqs[-1] if self.seqs else 0
        return held if held > self.skipped_to else self.skipped_to

    def append(self, lines: list[LogLine]) -> None:
        # what faces read is terminal-safe and secret-free: the screen (a --read-only observer
        # included), the filter and the save-log export all read these texts
        texts = redact_lines([clean_line(ln.text) for ln in lines])
        stamps = [ln.ts for ln in lines]
        nxt = self.last_seq
        seqs = []
        for ln in lines:  # a line without a number (a test, a plain file) follows the last one
            nxt = ln.seq if ln.seq > nxt else nxt + 1
            seqs.append(nxt)
        with self.lock:
            self.texts.extend(texts)
            self.stamps.extend(stamps)
            self.seqs.extend(seqs)
            over = len(self.texts) - self.max_lines
            if over > self.max_lines // 10:  # trim in chunks, not per line
                del self.texts[:over]
                del self.stamps[:over]
                del self.seqs[:over]
                self.base += over
            self.version += 1

    def note_gap(self, skipped: int = 0, lost: int = 0, unsaved: int = 0, last_seq: int = 0) -> None:
        with self.lock:
            if last_seq > self.skipped_to:
                self.skipped_to = last_seq
            self.skipped += skipped
            self.lost += lost
            self.unsaved += unsaved
            self.version += 1

    def _at(self, column: list | array, pos: int):
        with self.lock:  # base and the column read together: a trim cannot fall in between
            i = pos - self.base
            return column[i] if 0 <= i < len(column) else None

    def get(self, pos: int) -> str | None:
        """Text at position ``pos``, or None if trimmed/not yet there."""
        return self._at(self.texts, pos)

    def stamp(self, pos: int) -> float | None:
        return self._at(self.stamps, pos)


    def position_of(self, seq: int) -> int | None:
        """The position of line number ``seq``, or None when it is not held (trimmed or skipped)."""
        with self.lock:
            i = bisect_left(self.seqs, seq)
            if i < len(self.seqs) and self.seqs[i] == seq:
                return self.base + i
            return None

    def slice(self, start: int, stop: int) -> list[tuple[int, float | None, str]]:
        """(position, ts, text) for positions [start, stop)."""
        with self.lock:
            lo = max(start - self.base, 0)
            hi = max(min(stop - self.base, len(self.texts)), lo)
            return [(self.base + i, self.stamps[i], self.texts[i]) for i in range(lo, hi)]

    def window(self) -> tuple[int, list[str]]:
        """(base, texts) as one consistent pair, for scans over what is held."""
        with self.lock:
            return self.base, self.texts[:]


class LogStore:
    def __init__(self, max_lines_per_source: int = DEFAULT_MAX_LINES) -> None:
        self.max_lines = max_lines_per_source
        self._series: dict[tuple[str, str], LogSeries] = {}
        self._lock = threading.Lock()

    def series(self, node: str, source: str) -> LogSeries:
        key = (node, source)
        s = self._series.get(key)
        if s is None:
            with self._lock:
                s = self._series.setdefault(key, LogSeries(node, source, self.max_lines))
        return s

    def find(self, node: str, source: str) -> LogSeries | None:
        return self._series.get((node, source))

    def sources(self, node: str) -> list[str]:
        return [s for (n, s) in list(self._series) if n == node]

    def append(self, node: str, source: str, lines: list[LogLine]) -> None:
        self.series(node, source).append(lines)

    def total_lines(self) -> int:
        return sum(len(s.texts) for s in list(self._series.values()))
