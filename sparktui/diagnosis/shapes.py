"""Shape checks for the JSON a bundle holds (meta.json, node.json, py-spy dumps).  Pure.

Everything read from a bundle is checked here before any rule sees it, so a wrong shape ends as
one ``ShapeError`` line naming the file and the field ("meta.json: nodes: a string, expected a
list of node names") instead of a traceback deep in the verdict, and a string is never iterated
as if it were a list.  The bundle format is versioned (``sparktui_bundle``), so keys this version
does not write are refused in sparktui's own files; py-spy's JSON is someone else's format, so
there only the fields we read are checked.
"""

from __future__ import annotations

import json
import math
from typing import Any

MAX_JSON_BYTES = 16 << 20

MAX_RANKS = 1 << 16  # more ranks than any cluster has: beyond it a number is damage, not data


class ShapeError(ValueError):
    """A document of the wrong shape (one line: where, which field, what was found)."""


def what(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, int):
        return "an integer"
    if isinstance(v, float):
        return "a number"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, (list, tuple)):
        return "a list"
    if isinstance(v, dict):
        return "an object"
    return type(v).__name__


def loads(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ShapeError(f"{where}: not JSON ({exc.msg} at line {exc.lineno})") from None
    except RecursionError:
        raise ShapeError(f"{where}: JSON nested too deeply") from None


def _name(k: str) -> str:
    """A key from the file, shortened for a one-line message."""
    return k if len(k) <= 40 and k.isprintable() else repr(k[:40])


def key(k: str) -> str:
    return repr(k[:40])


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _fail(where: str, field: str, v: Any, expected: str) -> ShapeError:
    return ShapeError(f"{where}: {field}: {what(v)}, expected {expected}")


def obj(v: Any, where: str, field: str = "top level") -> dict:
    if not isinstance(v, dict):
        raise _fail(where, field, v, "an object")
    return v


def string(d: dict, key: str, where: str, default: str = "", *, field: str = "", optional: bool = False) -> str | None:
    v = d.get(key, default)
    if v is None and optional:
        return None
    if not isinstance(v, str):
        raise _fail(where, field or key, v, "a string")
    return v


def integer(d: dict, key: str, where: str, default: int | None = None, *, field: str = "",
            optional: bool = True) -> int | None:
    v = d.get(key, default)
    if v is None and optional:
        return None
    if not _is_int(v):
        raise _fail(where, field or key, v, "an integer")
    return v


def number(d: dict, key: str, where: str, default: float | None = None, *, field: str = "",
           optional: bool = True) -> float | None:
    v = d.get(key, default)
    if v is None and optional:
        return None
    if not _is_num(v):
        raise _fail(where, field or key, v, "a number")
    return float(v)


def boolean(d: dict, key: str, where: str, default: bool | None = None, *, field: str = "",
            optional: bool = True) -> bool | None:
    v = d.get(key, default)
    if v is None and optional:
        return None
    if not isinstance(v, bool):
        raise _fail(where, field or key, v, "true or false")
    return v


def str_list(d: dict, key: str, where: str, *, field: str = "") -> list[str]:
    v = d.get(key, [])
    if v is None:
        return []
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise _fail(where, field or key, v if not isinstance(v, list) else next(x for x in v if not isinstance(x, str)),
                    "a list of strings")
    return list(v)


def str_map(d: dict, key: str, where: str, *, field: str = "") -> dict[str, str]:
    v = d.get(key, {})
    if v is None:
        return {}
    obj(v, where, field or key)
    for k, x in v.items():
        if not isinstance(x, str):
            raise _fail(where, f"{field or key}.{_name(k)}", x, "a string")
    return dict(v)


# --------------------------------------------------------------------------- sparktui's bundle files

META_KEYS = {"sparktui_bundle", "nodes", "started", "finished", "interval", "source", "fabric_ips", "expected_hcas"}


def meta(data: Any, where: str) -> dict:
    """meta.json, checked and normalised."""
    obj(data, where)
    if "nodes" in data:
        nodes = data["nodes"]
        if not isinstance(nodes, list):
            raise _fail(where, "nodes", nodes, "a list of node names")
        for i, n in enumerate(nodes):
            if not isinstance(n, str) or not n.strip():
                raise _fail(where, f"nodes[{i}]", n, "a node name")
    hcas = data.get("expected_hcas") or {}
    obj(hcas, where, "expected_hcas")
    return {
        "nodes": list(data.get("nodes") or []),
        "started": number(data, "started", where) or 0.0,
        "finished": number(data, "finished", where),
        "interval": number(data, "interval", where, 25.0, optional=False),
        "fabric_ips": str_map(data, "fabric_ips", where),
        "expected_hcas": {k: str_list(hcas, k, where, field=f"expected_hcas.{_name(k)}") for k in hcas},
        "serving": _rows(data, "serving", where),
        "cluster": _cluster(data, where),
    }


_SCALAR = (str, int, float, bool, type(None))


def _rows(data: dict, key: str, where: str) -> list[dict]:
    """A list of flat objects of scalars (the head's /metrics rounds, the cluster's containers)."""
    rows = data.get(key) or []
    if not isinstance(rows, list):
        raise _fail(where, key, rows, "a list of objects")
    for i, row in enumerate(rows):
        if not isinstance(row, dict) or not all(isinstance(v, _SCALAR) for v in row.values()):
            raise _fail(where, f"{key}[{i}]", row, "an object of plain values")
    return rows


def _cluster(data: dict, where: str) -> dict:
    c = data.get("cluster") or {}
    obj(c, where, "cluster")
    if not c:
        return {}
    name = c.get("name", "")
    if not isinstance(name, str):
        raise _fail(where, "cluster.name", name, "a cluster name")
    return {"name": name, "containers": _rows(c, "containers", f"{where} cluster")}


WORKER_KEYS = ("pid", "rank", "world_size", "alive", "cmdline", "container", "env", "libnccl", "libnccl_sha256",
               "log_files")


def worker(data: Any, where: str, field: str) -> dict:
    """One entry of node.json ``workers``: the keys ``Worker`` takes, with their types."""
    obj(data, where, field)
    unknown = sorted(set(data) - set(WORKER_KEYS))
    if unknown:
        raise ShapeError(f"{where}: {field}: unknown key {key(unknown[0])} "
                         f"(this bundle version has {', '.join(WORKER_KEYS)})")
    pid = integer(data, "pid", where, field=f"{field}.pid", optional=False)
    for k in ("rank", "world_size"):
        v = integer(data, k, where, field=f"{field}.{k}")
        if v is not None and not 0 <= v <= MAX_RANKS:  # rules walk range(world_size): a bound, not a DoS
            raise _fail(where, f"{field}.{k}", v, f"a rank number in 0..{MAX_RANKS}")
    return {"pid": pid, "rank": data.get("rank"), "world_size": data.get("world_size"),
            "alive": boolean(data, "alive", where, True, field=f"{field}.alive"),
            "cmdline": string(data, "cmdline", where, field=f"{field}.cmdline"),
            "container": string(data, "container", where, field=f"{field}.container"),
            "env": str_map(data, "env", where, field=f"{field}.env"),
            "libnccl": string(data, "libnccl", where, field=f"{field}.libnccl"),
            "libnccl_sha256": string(data, "libnccl_sha256", where, field=f"{field}.libnccl_sha256"),
            "log_files": str_list(data, "log_files", where, field=f"{field}.log_files")}


NODE_KEYS = {"node", "reachable", "error", "hostname", "workers", "containers", "fabric", "dmesg", "notes",
             "log_growth", "samples"}
# the container settings the rules read (latent.py); docker's other keys pass through untouched
_CONTAINER_STR = ("Name", "Image", "NetworkMode", "IpcMode", "error")


def node_info(data: Any, where: str) -> dict:
    """<node>/node.json, checked and normalised."""
    obj(data, where)
    unknown = sorted(set(data) - NODE_KEYS)
    if unknown:
        raise ShapeError(f"{where}: unknown key {key(unknown[0])}")
    workers = data.get("workers") or []
    if not isinstance(workers, list):
        raise _fail(where, "workers", workers, "a list")
    containers = data.get("containers") or {}
    obj(containers, where, "containers")
    for cid, s in containers.items():
        f = f"containers.{_name(cid)}"
        obj(s, where, f)
        for k in _CONTAINER_STR:
            string(s, k, where, field=f"{f}.{k}", optional=True)
        integer(s, "ShmSize", where, field=f"{f}.ShmSize")
        str_list(s, "CapAdd", where, field=f"{f}.CapAdd")
        boolean(s, "Privileged", where, field=f"{f}.Privileged")
    fabric = data.get("fabric") or []
    if not isinstance(fabric, list):
        raise _fail(where, "fabric", fabric, "a list")
    for i, chk in enumerate(fabric):
        f = f"fabric[{i}]"
        obj(chk, where, f)
        string(chk, "check", where, field=f"{f}.check", default=None)
        string(chk, "target", where, field=f"{f}.target", default=None)
        string(chk, "detail", where, field=f"{f}.detail")
        boolean(chk, "ok", where, field=f"{f}.ok")
    growth = data.get("log_growth") or {}
    obj(growth, where, "log_growth")
    for k, v in growth.items():
        if not _is_int(v):
            raise _fail(where, f"log_growth.{_name(k)}", v, "an integer")
    return {"reachable": boolean(data, "reachable", where, True),
            "error": string(data, "error", where),
            "hostname": string(data, "hostname", where),
            "workers": [worker(w, where, f"workers[{i}]") for i, w in enumerate(workers)],
            "containers": containers, "fabric": fabric,
            "dmesg": str_list(data, "dmesg", where), "notes": str_list(data, "notes", where),
            "log_growth": dict(growth)}


# --------------------------------------------------------------------------- py-spy dump --json


def pyspy_json(text: str, where: str) -> None:
    """A ``py-spy dump --json`` file: a list of thread objects (or one process object around them)
    whose frames are objects.  Only the fields the parser reads are checked."""
    data = loads(text, where)
    threads = [data] if isinstance(data, dict) else data
    if not isinstance(threads, list):
        raise _fail(where, "top level", data, "a list of threads")
    for i, t in enumerate(threads):
        f = f"[{i}]"
        obj(t, where, f)
        for k in ("pid", "thread_id", "os_thread_id"):
            integer(t, k, where, field=f"{f}.{k}")
        string(t, "thread_name", where, field=f"{f}.thread_name", optional=True)
        boolean(t, "active", where, field=f"{f}.active")
        frames = t.get("frames") or []
        if not isinstance(frames, list):
            raise _fail(where, f"{f}.frames", frames, "a list")
        for j, fr in enumerate(frames):
            ff = f"{f}.frames[{j}]"
            obj(fr, where, ff)
            for k in ("name", "filename", "short_filename", "module"):
                string(fr, k, where, field=f"{ff}.{k}", optional=True)
            integer(fr, "line", where, field=f"{ff}.line")
