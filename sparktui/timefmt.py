"""RFC 3339 timestamps, read and written in one place (a leaf module; nothing here imports sparktui).

Docker stamps log lines and container times with nanoseconds ("2026-11-29T20:00:25.011869369Z");
the shared timeline writes milliseconds; the cluster lock writes local time with its offset.
All of them are read by ``parse`` (float seconds) or ``parse_ns`` (exact integer nanoseconds).
"""

from __future__ import annotations

import re
import time
from datetime import datetime, timedelta, timezone

_STAMP = re.compile(r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)")
# plausible epochs only: Docker's "0001-01-01T00:00:00Z" (never) and garbage years read as no time
_LAST_SECOND = 10**11


def _split(text: object) -> tuple[int, str] | None:
    """(whole epoch seconds, the fraction's digits) of a timestamp with a zone, or None."""
    m = _STAMP.fullmatch(text.strip()) if isinstance(text, str) else None
    if m is None:
        return None
    zone = m.group(8)
    try:
        tz = timezone.utc
        if zone != "Z":
            off = timedelta(hours=int(zone[1:3]), minutes=int(zone[4:6]))
            tz = timezone(off if zone[0] == "+" else -off)
        whole = int(datetime(*map(int, m.group(1, 2, 3, 4, 5, 6)), tzinfo=tz).timestamp())
    except ValueError:  # month 13, offset 25:00, ...
        return None
    return (whole, m.group(7) or "") if 0 <= whole < _LAST_SECOND else None


def parse(text: object) -> float | None:
    """Epoch seconds (to the microsecond, as datetime keeps them), or None for no time."""
    parts = _split(text)
    if parts is None:
        return None
    whole, frac = parts
    return (whole * 10**6 + int(frac[:6].ljust(6, "0"))) / 10**6


def parse_ns(text: object) -> int | None:
    """Exact integer nanoseconds (resume points compare these: a float loses the last digits)."""
    parts = _split(text)
    if parts is None:
        return None
    whole, frac = parts
    return whole * 10**9 + int(frac[:9].ljust(9, "0"))


def format_ns(epoch: float) -> str:
    """`docker logs --timestamps` form: 2026-04-08T23:16:38.123456789Z."""
    ns = int(round(epoch * 1e9))
    sec, frac = divmod(ns, 1_000_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec)) + f".{frac:09d}Z"


def format_ms(epoch: float) -> str:
    """UTC to the millisecond: 2026-04-08T23:16:38.123Z."""
    return datetime.fromtimestamp(epoch, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def now_local() -> str:
    """Now, in this machine's zone to the second, with its offset (what a person reading a file expects)."""
    return datetime.now(timezone.utc).astimezone().isoformat(timespec="seconds")


def local_clock(text: object) -> str:
    """HH:MM:SS in this machine's zone of a timestamp; the text itself when it is not one."""
    ts = parse(text)
    if ts is None:
        return str(text) if text else "?"
    return time.strftime("%H:%M:%S", time.localtime(ts))
