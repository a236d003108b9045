"""The bounded in-memory log store that faces read (the session file keeps everything).

One ``LogSeries`` per (node, source).  Lines are kept as already-sanitised ``str`` in a list
with a moving base so line numbers stay stable after old lines are dropped.  Widgets read
slices for the viewport only (virtualised rendering).
"""

from __future__ import annotations

import threading
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
    base: int = 0  # line number (0-based) of texts[0]
    version: int = 0  # bumps on every append: cheap change detection for faces

    @property
    def total(self) -> int:
        """Lines ever appended (line numbers run 1..total)."""
        return self.base + len(self.texts)

    def append(self, lines: list[LogLine]) -> None:
        # what faces read is terminal-safe and secret-free: the screen (a --read-only observer
        # included), the filter and the save-log export all read these texts
        self.texts.extend(redact_lines([clean_line(ln.text) for ln in lines]))
        self.stamps.extend(ln.ts for ln in lines)
        over = len(self.texts) - self.max_lines
        if over > self.max_lines // 10:  # trim in chunks, not per line
            del self.texts[:over]
            del self.stamps[:over]
            self.base += over
        self.version += 1

    def get(self, lineno: int) -> str | None:
        """Text of 0-based line ``lineno`` (global numbering), or None if trimmed/not yet there."""
        i = lineno - self.base
        if 0 <= i < len(self.texts):
            return self.texts[i]
        return None

    def slice(self, start: int, stop: int) -> list[tuple[int, float | None, str]]:
        """(lineno, ts, text) for global 0-based line numbers [start, stop)."""
        lo = max(start - self.base, 0)
        hi = max(min(stop - self.base, len(self.texts)), lo)
        return [(self.base + i, self.stamps[i], self.texts[i]) for i in range(lo, hi)]


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
        return [s for (n, s) in self._series if n == node]

    def append(self, node: str, source: str, lines: list[LogLine]) -> None:
        self.series(node, source).append(lines)

    def total_lines(self) -> int:
        return sum(len(s.texts) for s in self._series.values())
