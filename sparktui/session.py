"""Session: everything worth keeping, on disk under the XDG state dir.

Layout of one session directory::

    <state>/sparktui/sessions/<YYYYmmdd-HHMMSS>-<cluster>/
        meta.json          config path, nodes, start time, sparktui version
        events.jsonl       one JSON object per kept event (not log lines), in arrival order
        logs/<node>/<source>.log   every streamed line, as received (daemon timestamp first)

Secrets never reach these files: ``logs.redact`` masks secret values (env, flags, JSON keys, bearer
tokens, token shapes).  Directories are 0700 and files 0600: they hold the operator's cluster.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import os
import re
import time
from pathlib import Path
from typing import IO, Any

from .logs.redact import mask_dict, mask_list, redact, redact_bytes, redact_env  # noqa: F401  (redact_env: re-exported)
from .logs.archive import CAP_NOTE  # the file's last line at its cap: its reader knows it
from .logs.safe_files import DIR_MODE, FILE_MODE, open_private as _open_private, private_dir as _private_dir  # noqa: F401
from .logs.sanitize import json_dumps
from .units import human_bytes
from .model import Event, LogBatch, LogBlock, LogLine
from . import session_read

# files hold log lines, commands and findings of the operator's cluster: owner only (umask-proof).
# DIR_MODE/FILE_MODE and the folder maker live with the safe writes: investigate's bundles use them too.




def state_dir() -> Path:
    base = os.environ.get("SPARKTUI_STATE_DIR")
    if base:
        return Path(base)
    xdg = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(xdg) / "sparktui"


def sessions_dir(config: Any = None) -> Path:
    """Where sessions live: the config's ``session_dir`` when it sets one, else under the state dir."""
    custom = getattr(config, "session_dir", None)
    return Path(custom) if custom else state_dir() / "sessions"


def _safe_component(name: str) -> str:
    """A file-name component from arbitrary text (container names, paths)."""
    out = re.sub(r"\.{2,}", ".", re.sub(r"[^A-Za-z0-9._-]+", "_", name)).strip("._") or "_"
    return out[:120]


def to_jsonable(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        d = {"type": type(obj).__name__}
        for f in dataclasses.fields(obj):
            d[f.name] = to_jsonable(getattr(obj, f.name))
        return d
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, (list, tuple)):
        # an argv list: a secret flag's value is the next element ("--api-key", "xyz")
        return mask_list([to_jsonable(x) for x in obj])
    if isinstance(obj, str):
        return redact(obj)
    if isinstance(obj, dict) or hasattr(obj, "items"):  # dict, MappingProxyType: env/labels by key
        return mask_dict({str(k): to_jsonable(v) for k, v in obj.items()})
    return obj


DEFAULT_LOG_CAP = 1 << 30  # bytes per source's log file: a flood fills no disk (config: session_log_cap_mib)


class Session:
    def __init__(self, path: Path, max_log_bytes: int = DEFAULT_LOG_CAP) -> None:
        self.path = path
        self.logs_dir = path / "logs"
        self.max_log_bytes = max_log_bytes
        self._events: IO[str] | None = None
        self._logs: dict[tuple[str, str], IO[bytes]] = {}
        self._sizes: dict[tuple[str, str], int] = {}
        self.unsaved: dict[tuple[str, str], int] = {}  # lines a full log file did not take

    @classmethod
    def create(cls, cluster_name: str, meta: dict | None = None, root: Path | None = None,
               max_log_bytes: int = DEFAULT_LOG_CAP) -> "Session":
        root = root or sessions_dir()
        stamp = time.strftime("%Y%m%d-%H%M%S")
        base = root / f"{stamp}-{_safe_component(cluster_name)}"
        path = base
        i = 1
        while path.exists():
            i += 1
            path = Path(f"{base}-{i}")
        _private_dir(root)
        path.mkdir(mode=DIR_MODE)
        os.chmod(path, DIR_MODE)
        s = cls(path, max_log_bytes)
        with _open_private(path / "meta.json", "w", encoding="utf-8") as fh:
            fh.write(json.dumps(to_jsonable({"started": time.time(), **(meta or {})}), indent=2))
        return s

    @classmethod
    def open(cls, path: Path) -> "Session":
        return cls(Path(path))

    def log_path(self, node: str, source: str) -> Path:
        return self.logs_dir / _safe_component(node) / f"{_safe_component(source)}.log"

    def record(self, event: Event) -> int:
        """Keep ``event``; for log lines, return how many the capped file did not take."""
        if isinstance(event, LogLine):
            return self._write_lines(event.node, event.source, (event,))
        if isinstance(event, LogBatch):
            return self._write_lines(event.node, event.source, event.lines)
        if isinstance(event, LogBlock):  # already in the file's own form: only the secrets masked
            if (event.node, event.source) in self.unsaved:  # the file is full: count, never mask
                return self._write_data(event.node, event.source, b"", event.count)
            if not event.data:  # lines counted, never read (a relay in tail mode): none of them saved
                return event.count
            return self._write_data(event.node, event.source, redact_bytes(event.data), event.count)
        if self._events is None:
            self._events = _open_private(self.path / "events.jsonl", "a", encoding="utf-8")
        # json_dumps: controls as \u escapes only, so `cat events.jsonl` is terminal-safe too
        self._events.write(json_dumps(to_jsonable(event)) + "\n")
        return 0

    def _write_lines(self, node: str, source: str, lines) -> int:
        if (node, source) in self.unsaved:  # the file is full: count, never build
            return self._write_data(node, source, b"", len(lines))
        parts = []
        for ln in lines:
            text = ln.text
            parts.append(f"{ln.raw_ts} {text}\n" if ln.raw_ts else f"{text}\n")
        data = redact_bytes("".join(parts).encode("utf-8", "surrogateescape"))
        return self._write_data(node, source, data, len(lines))

    def _write_data(self, node: str, source: str, data: bytes, count: int) -> int:
        """Append ``count`` whole lines (``data``) to the source's file, up to its cap; how many
        lines it did not take."""
        key = (node, source)
        if key in self.unsaved:  # the file is full: count, never write
            self.unsaved[key] += count
            return count
        fh = self._logs.get(key)
        if fh is None:
            p = self.log_path(node, source)
            _private_dir(p.parent.parent)
            _private_dir(p.parent)
            fh = self._logs[key] = _open_private(p, "ab")
            self._sizes[key] = fh.tell()
        room = self.max_log_bytes - self._sizes[key]
        if len(data) <= room:
            fh.write(data)
            self._sizes[key] += len(data)
            return 0
        # whole lines up to the cap, then one line that says so (a reader knows where it stops)
        cut = data.rfind(b"\n", 0, max(room, 0)) + 1
        fh.write(data[:cut])
        fh.write(CAP_NOTE.format(cap=human_bytes(self.max_log_bytes)).encode())
        fh.flush()
        self._sizes[key] += cut
        self.unsaved[key] = data.count(b"\n", cut)
        return self.unsaved[key]

    def flush(self) -> None:
        if self._events:
            self._events.flush()
        for fh in self._logs.values():
            fh.flush()

    def close(self) -> None:
        self.flush()
        if self._events:
            self._events.close()
            self._events = None
        for fh in self._logs.values():
            fh.close()
        self._logs.clear()

    def read_events(self) -> list[dict]:
        """events.jsonl back as checked dicts, through the one reader (``session_read``)."""
        with session_read.open_session(self.path) as d:
            return session_read.read_events(d)


def latest_session(root: Path | None = None) -> Path | None:
    d = root or sessions_dir()
    if not d.is_dir():
        return None
    dirs = sorted((p for p in d.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime)
    return dirs[-1] if dirs else None
