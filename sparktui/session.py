"""Session: everything worth keeping, on disk under the XDG state dir.

Layout of one session directory::

    <state>/sparktui/sessions/<YYYYmmdd-HHMMSS>-<cluster>/
        meta.json          config path, nodes, start time, sparktui version
        events.jsonl       one JSON object per kept event (not log lines), in arrival order
        logs/<node>/<source>.log   every streamed line, as received (daemon timestamp first)

Secrets never reach these files: ``redact`` masks values of known secret env names and tokens.
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

from .model import Event, LogBatch, LogLine

_SECRET_KEYS = re.compile(r"(HF_TOKEN|HUGGING_FACE_HUB_TOKEN|HUGGINGFACE_TOKEN|API_KEY|SECRET|PASSWORD|TOKEN)", re.I)
_SECRET_VALUES = re.compile(r"\b(hf_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_-]{20,})\b")
_SECRET_WORDS = ("TOKEN", "API_KEY", "SECRET", "PASSWORD")
_SECRET_ASSIGN = re.compile(r"\b([A-Z0-9_]*(?:TOKEN|API_KEY|SECRET|PASSWORD)[A-Z0-9_]*)=(\S+)")


def redact(text: str) -> str:
    """Mask tokens and ``NAME=value`` for secret-looking names."""
    # literal checks first: this runs on every persisted log batch, and almost none hold a secret
    if "hf_" in text or "sk-" in text:
        text = _SECRET_VALUES.sub("***", text)
    if "=" in text and any(w in text for w in _SECRET_WORDS):
        text = _SECRET_ASSIGN.sub(lambda m: f"{m.group(1)}=***", text)
    return text


def redact_env(env: dict[str, str]) -> dict[str, str]:
    return {k: ("***" if _SECRET_KEYS.search(k) else v) for k, v in env.items()}


def state_dir() -> Path:
    base = os.environ.get("SPARKTUI_STATE_DIR")
    if base:
        return Path(base)
    xdg = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(xdg) / "sparktui"


def sessions_dir() -> Path:
    return state_dir() / "sessions"


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
        return [to_jsonable(x) for x in obj]
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, str):
        return redact(obj)
    if hasattr(obj, "items"):  # MappingProxyType
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    return obj


class Session:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.logs_dir = path / "logs"
        self._events: IO[str] | None = None
        self._logs: dict[tuple[str, str], IO[bytes]] = {}

    @classmethod
    def create(cls, cluster_name: str, meta: dict | None = None, root: Path | None = None) -> "Session":
        root = root or sessions_dir()
        stamp = time.strftime("%Y%m%d-%H%M%S")
        base = root / f"{stamp}-{_safe_component(cluster_name)}"
        path = base
        i = 1
        while path.exists():
            i += 1
            path = Path(f"{base}-{i}")
        path.mkdir(parents=True)
        s = cls(path)
        (path / "meta.json").write_text(json.dumps({"started": time.time(), **(meta or {})}, indent=2))
        return s

    @classmethod
    def open(cls, path: Path) -> "Session":
        return cls(Path(path))

    def log_path(self, node: str, source: str) -> Path:
        return self.logs_dir / _safe_component(node) / f"{_safe_component(source)}.log"

    def record(self, event: Event) -> None:
        if isinstance(event, LogLine):
            self._write_lines(event.node, event.source, (event,))
            return
        if isinstance(event, LogBatch):
            self._write_lines(event.node, event.source, event.lines)
            return
        if self._events is None:
            self._events = open(self.path / "events.jsonl", "a", encoding="utf-8")
        self._events.write(json.dumps(to_jsonable(event), ensure_ascii=False) + "\n")

    def _write_lines(self, node: str, source: str, lines) -> None:
        key = (node, source)
        fh = self._logs.get(key)
        if fh is None:
            p = self.log_path(node, source)
            p.parent.mkdir(parents=True, exist_ok=True)
            fh = self._logs[key] = open(p, "ab")
        parts = []
        for ln in lines:
            text = ln.text
            parts.append(f"{ln.raw_ts} {text}\n" if ln.raw_ts else f"{text}\n")
        fh.write(redact("".join(parts)).encode("utf-8", "surrogateescape"))

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
        p = self.path / "events.jsonl"
        if not p.exists():
            return []
        out = []
        for line in p.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue
        return out


def latest_session() -> Path | None:
    d = sessions_dir()
    if not d.is_dir():
        return None
    dirs = sorted((p for p in d.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime)
    return dirs[-1] if dirs else None
