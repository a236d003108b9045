"""`sparktui sessions [--json]`: the recorded sessions, newest first: name, start time, cluster,
kind, duration, size on disk, number of findings.

Sessions are read through session_read (links not followed, shapes checked); one that cannot be
read is listed with its error instead of hiding the others.  Exit 0, or 2 for a bad --config.
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from ..units import human_bytes

_NAME = re.compile(r"^(\d{8}-\d{6})-(.+?)$")


@dataclass
class SessionRow:
    name: str
    path: str
    started: float | None
    cluster: str
    kind: str
    duration_s: float | None
    size_bytes: int
    findings: int
    error: str | None = None
    scenario: str = ""  # a demo's scenario (healthy, nccl-hang, ...)


def _size_and_newest(path: Path) -> tuple[int, float]:
    """Bytes of the regular files under ``path`` and the newest mtime (links not followed)."""
    total, newest = 0, 0.0
    for root, dirs, files in os.walk(path, followlinks=False):
        for name in files:
            try:
                st = os.lstat(os.path.join(root, name))
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                total += st.st_size
                newest = max(newest, st.st_mtime)
    return total, newest


def describe(path: Path) -> SessionRow:
    from ..session_read import SessionError, open_session, read_events, read_meta

    m = _NAME.match(path.name)
    size, newest = _size_and_newest(path)
    row = SessionRow(name=path.name, path=str(path), started=None, cluster=m.group(2) if m else "", kind="",
                     duration_s=None, size_bytes=size, findings=0)
    try:
        with open_session(path) as sd:
            meta = read_meta(sd, required=True)
            events = read_events(sd)
    except SessionError as exc:
        row.error = str(exc)
        if m:  # the name still says when it started
            row.started = time.mktime(time.strptime(m.group(1), "%Y%m%d-%H%M%S"))
        return row
    row.started = meta.get("started")
    if isinstance(meta.get("cluster"), str):
        row.cluster = meta["cluster"]
    row.kind = meta.get("kind") or ""
    if isinstance(meta.get("scenario"), str):
        row.scenario = meta["scenario"]
    row.findings = sum(1 for e in events if e.get("type") == "FindingRaised")
    last = max((e.get("ts") or 0 for e in events if isinstance(e.get("ts"), (int, float))), default=0)
    end = max(last, newest)
    if row.started and end >= row.started:
        row.duration_s = round(end - row.started, 3)
    return row


def list_sessions(root: Path) -> list[SessionRow]:
    if not root.is_dir():
        return []
    rows = [describe(p) for p in root.iterdir() if p.is_dir() and not p.is_symlink()]
    rows.sort(key=lambda r: (r.started or 0, r.name), reverse=True)
    return rows


def _duration(s: float | None) -> str:
    if s is None:
        return "?"
    s = int(s)
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h}h{m:02d}m" if h else (f"{m}m{sec:02d}s" if m else f"{sec}s")


def render(rows: list[SessionRow], root: Path) -> str:
    from ..logs.sanitize import safe

    if not rows:
        return safe(f"no sessions recorded in {root}")
    head = ("NAME", "STARTED", "CLUSTER", "KIND", "DURATION", "SIZE", "FINDINGS")
    table = [head]
    for r in rows:
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.started)) if r.started else "?"
        kind = (r.kind or "?") + (f" ({r.scenario})" if r.scenario else "")
        table.append((r.name, started, r.cluster or "?", kind, _duration(r.duration_s), human_bytes(r.size_bytes),
                      "unreadable" if r.error else str(r.findings)))
    widths = [max(len(safe(str(row[i]))) for row in table) for i in range(len(head))]
    lines = ["  ".join(safe(str(c)).ljust(w) for c, w in zip(row, widths)).rstrip() for row in table]
    for r in rows:
        if r.error:
            lines.append(safe(f"{r.name}: {r.error}"))
    return "\n".join(lines)


def sessions_root(args) -> Path:
    """Where this operator's sessions are: the one resolution `sessions`, `report` and `replay` share
    with the session writer (the config's ``session_dir`` when it sets one, else the state dir)."""
    from ..config import default_config_path, load_config
    from ..session import sessions_dir

    explicit = getattr(args, "config", None)
    if explicit or default_config_path().is_file():
        return sessions_dir(load_config(explicit))  # the config's session_dir, when it sets one
    return sessions_dir()


def run(args) -> int:
    root = sessions_root(args)
    rows = list_sessions(root)
    if args.json:
        sys.stdout.write(json.dumps({"dir": str(root), "sessions": [asdict(r) for r in rows]}, indent=2) + "\n")
    else:
        print(render(rows, root))
    return 0
