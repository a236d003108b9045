"""Pure formatting helpers for the panes (no Textual, easy to test)."""

from __future__ import annotations

import time

def clock(ts: float | None) -> str:
    """HH:MM:SS in local time (the operator's clock)."""
    return "--:--:--" if ts is None else time.strftime("%H:%M:%S", time.localtime(ts))


def stamp(ts: float | None) -> str:
    """A log timestamp column: HH:MM:SS.mmm, or blanks when the line has none."""
    if ts is None:
        return " " * 12
    return time.strftime("%H:%M:%S", time.localtime(ts)) + f".{int((ts % 1) * 1000):03d}"


def duration(seconds: float | None) -> str:
    """Compact age like docker's: 45s, 3m12s, 2h05m, 3d04h."""
    if seconds is None:
        return "-"
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    m, s = divmod(s, 60)
    if m < 60:
        return f"{m}m{s:02d}s"
    h, m = divmod(m, 60)
    if h < 24:
        return f"{h}h{m:02d}m"
    d, h = divmod(h, 24)
    return f"{d}d{h:02d}h"


def bar(fraction: float, width: int) -> tuple[str, str]:
    """(filled, empty) parts of a gauge of ``width`` cells, with eighth-block precision."""
    fraction = min(max(fraction, 0.0), 1.0)
    eighths = round(fraction * width * 8)
    full, part = divmod(eighths, 8)
    filled = "█" * full + ("" if part == 0 or full >= width else " ▏▎▍▌▋▊▉"[part])
    return filled, " " * max(0, width - len(filled))


def level(fraction: float, warn: float = 0.75, error: float = 0.9) -> str:
    """Theme variable for a utilisation level."""
    if fraction >= error:
        return "$error"
    if fraction >= warn:
        return "$warning"
    return "$success"
