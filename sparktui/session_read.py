"""Reading a recorded session back (``report``, ``replay``): every file checked before use.

A session directory may come from someone else (attached to a ticket), so it is read like a
bundle: no link inside it is followed, nothing but regular files is opened, logs are read as
their tail past a size cap, and every event is checked against the model's own dataclass
annotations before anything builds on it.  A wrong shape is one ``SessionError`` line naming the
file, the line and the field; the commands print it and exit 2.

Tolerated on purpose: a torn line in events.jsonl (the last write of a crashed session) is skipped,
event types this version does not know are skipped (a newer sparktui wrote them), keys a
dataclass does not have are ignored (from_jsonable drops them), and an older version's status
word is read as today's (``model.LEGACY_STATUS``: "failed" is "fail").
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import types
import typing
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator

from . import model
from .logs.safe_files import MIB, SafeDir, UnsafeFile, describe

MAX_META_BYTES = 1 * MIB
MAX_EVENT_LINE = 4 * MIB  # one event; a longer line is not one sparktui wrote
TS_FIELDS = frozenset({"ts", "started", "since", "started_at", "finished_at"})
TS_MAX = 1e11  # year 5138: past it time.localtime() overflows

TYPES = {name: obj for name, obj in vars(model).items() if dataclasses.is_dataclass(obj) and isinstance(obj, type)}
STATUS_TYPES = frozenset({"ActionEvent", "TimelineEntry"})  # events whose ``status`` is a step's word


class SessionError(Exception):
    """A session file of the wrong kind or shape (one line)."""


def _what(v: Any) -> str:
    from .diagnosis.shapes import what

    return what(v)


@lru_cache(maxsize=None)
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _fits(v: Any, hint: Any, name: str) -> str:
    """"" when ``v`` (decoded JSON) fits the annotation, else what was expected."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return ""
    if hint is type(None):
        return "" if v is None else "null"
    if origin in (typing.Union, types.UnionType):
        misses = [_fits(v, a, name) for a in args]
        return "" if "" in misses else " or ".join(misses)
    if origin is typing.Literal:
        return "" if isinstance(v, str) and v in args else "one of " + ", ".join(map(str, args))
    if hint is bool:
        return "" if isinstance(v, bool) else "true or false"
    if hint is int:
        return "" if isinstance(v, int) and not isinstance(v, bool) else "an integer"
    if hint is float:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            return "a finite number"
        if name in TS_FIELDS and not 0 <= v < TS_MAX:
            return "a timestamp (epoch seconds)"
        return ""
    if hint is str or (isinstance(hint, type) and issubclass(hint, enum.Enum)):
        return "" if isinstance(v, str) else "a string"  # enums parse leniently (ContainerState.parse)
    if origin is tuple:
        if not isinstance(v, list):
            return "a list"
        if len(args) == 2 and args[1] is Ellipsis:
            for x in v:
                if miss := _fits(x, args[0], name):
                    return f"a list of {miss}"
            return ""
        if len(v) != len(args):
            return f"a list of {len(args)}"
        return next((f"a list of ({m})" for x, a in zip(v, args) if (m := _fits(x, a, name))), "")
    if dataclasses.is_dataclass(hint):
        return "" if isinstance(v, dict) else "an object"
    return ""


def check_event(obj: dict, where: str, cls: type | None = None, path: str = "") -> None:
    """``obj`` (one decoded event, or a nested dataclass in it) against the model's annotations."""
    cls = cls or TYPES[obj["type"]]
    hints = _hints(cls)
    for f in dataclasses.fields(cls):
        field = f"{path}{f.name}"
        if f.name not in obj:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise SessionError(f"{where}: {cls.__name__} without {field}")
            continue
        v, hint = obj[f.name], hints[f.name]
        if miss := _fits(v, hint, f.name):
            raise SessionError(f"{where}: {field}: {_what(v)}, expected {miss}")
        # nested dataclasses (Finding in FindingRaised, ContainerInfo in a snapshot) are checked the same way
        for sub, sub_cls in _nested(v, hint):
            # from_jsonable rebuilds by the "type" key: absent means the annotated class, another is wrong
            if sub.setdefault("type", sub_cls.__name__) != sub_cls.__name__:
                got = repr(sub["type"][:40]) if isinstance(sub["type"], str) else _what(sub["type"])
                raise SessionError(f"{where}: {field}.type: {got}, expected {sub_cls.__name__!r}")
            check_event(sub, where, sub_cls, f"{field}.")


def _nested(v: Any, hint: Any) -> Iterator[tuple[dict, type]]:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if dataclasses.is_dataclass(hint) and isinstance(v, dict):
        yield v, hint
    elif origin in (typing.Union, types.UnionType):
        for a in args:
            if dataclasses.is_dataclass(a) and isinstance(v, dict):
                yield v, a
    elif origin is tuple and args and dataclasses.is_dataclass(args[0]) and isinstance(v, list):
        for x in v:
            yield x, args[0]


# --------------------------------------------------------------------------- the files


def open_session(path: Path) -> SafeDir:
    try:
        return SafeDir(path)
    except UnsafeFile as exc:
        raise SessionError(str(exc)) from None


def read_meta(d: SafeDir, *, required: bool) -> dict:
    """meta.json, checked; {} when absent and not required."""
    where = d.join("meta.json")
    try:
        if d.lkind("meta.json") is None and not required:
            return {}
        text = d.read_text("meta.json", limit=MAX_META_BYTES)
        meta = json.loads(text)
    except UnsafeFile as exc:
        raise SessionError(str(exc)) from None
    except json.JSONDecodeError as exc:
        raise SessionError(f"{where}: unreadable ({exc.msg} at line {exc.lineno})") from None
    except RecursionError:
        raise SessionError(f"{where}: JSON nested too deeply") from None
    if not isinstance(meta, dict):
        raise SessionError(f"{where}: {_what(meta)}, expected an object")
    for key, hint in (("started", float | None), ("kind", str | None), ("scenario", str | None),
                      ("config", str | None), ("nodes", tuple[str, ...])):
        if key in meta and (miss := _fits(meta[key], hint, key)):
            raise SessionError(f"{where}: {key}: {_what(meta[key])}, expected {miss}")
    return meta


def read_events(d: SafeDir) -> list[dict]:
    """events.jsonl as checked dicts, in order (unknown types and a torn line skipped)."""
    where = d.join("events.jsonl")
    out = []
    try:
        if d.lkind("events.jsonl") is None:
            return []
        with d.open_binary("events.jsonl") as fh:
            i = 0
            while raw := fh.readline(MAX_EVENT_LINE + 1):  # streamed: memory follows the events kept
                i += 1
                if len(raw) > MAX_EVENT_LINE:
                    raise SessionError(f"{where} line {i}: over {MAX_EVENT_LINE >> 20} MiB, not an event")
                if raw.strip():
                    ev = _event(raw, f"{where} line {i}")
                    if ev is not None:
                        out.append(ev)
    except UnsafeFile as exc:
        raise SessionError(str(exc)) from None
    return out


def _event(raw: bytes, where: str) -> dict | None:
    try:
        ev = json.loads(raw.decode("utf-8", "replace"))
    except json.JSONDecodeError:
        return None  # a torn line after a crash
    except RecursionError:
        raise SessionError(f"{where}: JSON nested too deeply") from None
    if not isinstance(ev, dict):
        raise SessionError(f"{where}: {_what(ev)}, expected an event object")
    kind = ev.get("type")
    if not isinstance(kind, str):
        raise SessionError(f"{where}: type: {_what(kind)}, expected an event type name")
    if kind not in TYPES:
        return None  # written by a newer sparktui
    if kind in STATUS_TYPES and isinstance(ev.get("status"), str):
        ev["status"] = model.current_status(ev["status"])  # an older sparktui's word ("failed")
    check_event(ev, where)
    return ev


def from_jsonable(obj: Any) -> Any:
    """Inverse of ``session.to_jsonable`` for the model's dataclasses (lists come back as tuples)."""
    if isinstance(obj, dict):
        cls = TYPES.get(obj.get("type", ""))
        if cls is None:
            return {k: from_jsonable(v) for k, v in obj.items()}
        names = {f.name for f in dataclasses.fields(cls)}
        kw = {k: from_jsonable(v) for k, v in obj.items() if k in names}
        if cls is model.ContainerInfo and isinstance(kw.get("state"), str):
            kw["state"] = model.ContainerState.parse(kw["state"])
        return cls(**kw)
    if isinstance(obj, list):
        return tuple(from_jsonable(x) for x in obj)
    return obj


@dataclasses.dataclass
class LogFile:
    node: str
    stem: str
    path: str
    text: str  # the whole file, or its tail when it was larger than the cap
    truncated: bool = False
    lines: int = 0  # lines in the whole file


def read_logs(d: SafeDir, *, tail_bytes: int) -> list[LogFile]:
    """logs/<node>/<source>.log, sorted; each read up to its last ``tail_bytes``."""
    out: list[LogFile] = []
    try:
        kind = d.lkind("logs")
        if kind is None:
            return out
        if kind != "dir":
            raise SessionError(f"{d.join('logs')}: {describe(kind)}, expected the session's log folder")
        with d.sub("logs") as logs:
            for node, nkind in sorted(logs.entries().items()):
                if nkind == "file":
                    continue  # not a node's folder, and not read
                if nkind != "dir":
                    raise SessionError(f"{logs.join(node)}: {describe(nkind)}, expected a node's log folder")
                with logs.sub(node) as nd:
                    for name, fkind in sorted(nd.entries().items()):
                        if not name.endswith(".log"):
                            continue
                        if fkind != "file":
                            raise SessionError(f"{nd.join(name)}: {describe(fkind)}; "
                                               "session logs are read only as regular files")
                        r = nd.read_log(name, head=0, tail=tail_bytes)
                        text = r.text.split("\n", 1)[1] if r.truncated else r.text  # drop the marker line
                        total = nd.count_lines(name) if r.truncated else len(text.splitlines())
                        out.append(LogFile(node, name[:-4], nd.join(name), text, r.truncated, total))
    except UnsafeFile as exc:
        raise SessionError(str(exc)) from None
    except OSError as exc:
        raise SessionError(f"{exc.filename or d.path}: {exc.strerror or exc}") from None
    return out
