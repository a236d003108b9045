"""py-spy dumps as data: ``py-spy dump --json`` and the text form (``py-spy dump [--native]``).

Pure parsing plus the two questions the verdict asks of them:
- where is this process (in a collective, in a CUDA sync, sleeping in user code, in rendezvous)?
- did two dumps taken apart in time show the same function names (stuck) or not (moving)?
Function names are compared, not line numbers, because serving loops poll.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Frame:
    name: str
    file: str = ""
    line: int | None = None
    native: bool = False

    def __str__(self) -> str:
        loc = f"{self.file}:{self.line}" if self.line else self.file
        return f"{self.name} ({loc})" if loc else self.name


@dataclass(frozen=True)
class PyThread:
    tid: int
    name: str
    active: bool | None  # None when the dump does not say
    frames: tuple[Frame, ...]  # innermost first

    @property
    def python_frames(self) -> tuple[Frame, ...]:
        return tuple(f for f in self.frames if not f.native)


@dataclass(frozen=True)
class PyDump:
    pid: int | None
    threads: tuple[PyThread, ...]
    error: str = ""

    @property
    def main(self) -> PyThread | None:
        for t in self.threads:
            if t.name == "MainThread":
                return t
        return self.threads[0] if self.threads else None


def _int(v) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def parse_json(text: str) -> PyDump:
    # live output and bundle files both land here: values of the wrong type count as absent
    # (the bundle reader refuses such files before; a live py-spy is trusted no further)
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return PyDump(pid=None, threads=(), error=_first_line(text) or "empty py-spy output")
    if isinstance(data, dict):  # some versions wrap one process
        data = [data]
    threads = []
    pid = None
    for t in data if isinstance(data, list) else []:
        if not isinstance(t, dict):
            continue
        pid = pid or _int(t.get("pid"))
        frames = tuple(
            Frame(name=_str(f.get("name"), "?"), file=_str(f.get("short_filename")) or _str(f.get("filename")),
                  line=f.get("line") if _int(f.get("line")) and f.get("line") > 0 else None,
                  native=not _str(f.get("filename")).endswith(".py") and bool(f.get("module")))
            for f in (t.get("frames") if isinstance(t.get("frames"), list) else []) if isinstance(f, dict))
        active = t.get("active")
        threads.append(PyThread(tid=_int(t.get("os_thread_id")) or _int(t.get("thread_id")) or 0,
                                name=_str(t.get("thread_name")), active=active if isinstance(active, bool) else None,
                                frames=frames))
    return PyDump(pid=pid or None, threads=tuple(threads))


def _str(v, default: str = "") -> str:
    return v if isinstance(v, str) else default


_PROC = re.compile(r"^Process (\d+):")
_THREAD = re.compile(r'^Thread (?:0x[0-9a-fA-F]+|\d+) \((\w+)(?:, gil)?\)(?:: "([^"]*)")?')
_THREAD_ID = re.compile(r"^Thread (0x[0-9a-fA-F]+|\d+)")
_PYFRAME = re.compile(r"^\s+(\S.*?) \(([^():]+?\.py):(\d+)\)\s*$")
_NATFRAME = re.compile(r"^\s+(\S.*?) \(([^()]+)\)\s*$")
_ADDR = re.compile(r"^\s+(0x[0-9a-f]+) \(([^()]+)\)\s*$")


def parse_text(text: str) -> PyDump:
    pid = None
    threads: list[PyThread] = []
    cur: dict | None = None

    def close() -> None:
        if cur is not None:
            threads.append(PyThread(tid=cur["tid"], name=cur["name"], active=cur["active"], frames=tuple(cur["frames"])))

    for line in text.splitlines():
        if m := _PROC.match(line):
            pid = int(m.group(1))
        elif line.startswith("Thread "):
            close()
            m = _THREAD.match(line)
            idm = _THREAD_ID.match(line)
            tok = idm.group(1) if idm else "0"
            tid = int(tok, 16) if tok.startswith("0x") else int(tok)  # base 0 refuses "0123"
            state = m.group(1) if m else ""
            cur = {"tid": tid, "name": (m.group(2) if m and m.group(2) else ""), "frames": [],
                   "active": {"active": True, "idle": False}.get(state)}
        elif cur is not None and line.startswith((" ", "\t")) and line.strip():
            if m := _PYFRAME.match(line):
                cur["frames"].append(Frame(name=m.group(1), file=m.group(2), line=int(m.group(3))))
            elif _ADDR.match(line):
                continue  # bare addresses carry nothing to compare
            elif m := _NATFRAME.match(line):
                cur["frames"].append(Frame(name=m.group(1), file=m.group(2), native=True))
    close()
    if pid is None and not threads:
        return PyDump(pid=None, threads=(), error=_first_line(text) or "empty py-spy output")
    return PyDump(pid=pid, threads=tuple(threads))


def parse(text: str) -> PyDump:
    s = text.lstrip()
    return parse_json(text) if s.startswith(("[", "{")) else parse_text(text)


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:200]
    return ""


# --------------------------------------------------------------------------- what the frames mean

COLLECTIVE_NAMES = ("all_reduce", "all_gather", "all_gather_into_tensor", "_all_gather_base", "reduce_scatter",
                    "reduce_scatter_tensor", "broadcast", "all_to_all", "barrier", "send", "recv",
                    "ncclAllReduce", "ncclAllGather", "ncclBroadcast", "ncclReduceScatter")
PYNCCL_FILES = ("pynccl.py", "pynccl_wrapper.py", "cuda_communicator.py", "parallel_state.py", "communication_op.py")
SYNC_NAMES = ("synchronize", "item", "cudaDeviceSynchronize", "cuCtxSynchronize_v2", "cudaStreamSynchronize",
              "sample_tokens", "tolist", "cpu")
RENDEZVOUS_NAMES = ("_create_c10d_store", "_env_rendezvous_handler", "TCPStore", "_store_based_barrier",
                    "rendezvous", "init_process_group")
SLEEP_NAMES = ("sleep", "clock_nanosleep", "nanosleep", "select", "poll", "epoll_wait", "wait")


def where(dump: PyDump) -> str:
    """A short class for the main thread: collective / sync / rendezvous / sleep / running / unknown."""
    t = dump.main
    if t is None or not t.frames:
        return "unknown"
    names = [f.name for f in t.frames]
    files = [f.file.rsplit("/", 1)[-1] for f in t.frames]
    if any(n.split(".")[-1] in RENDEZVOUS_NAMES for n in names):
        return "rendezvous"
    if any(n in COLLECTIVE_NAMES for n in names) or any(fl in PYNCCL_FILES for fl in files):
        return "collective"
    inner = [f for f in t.frames if not f.native]
    if t.frames[0].name in SLEEP_NAMES or (t.active is False and inner and inner[0].name not in SYNC_NAMES):
        return "sleep"
    if inner and inner[0].name in SYNC_NAMES or any(n in SYNC_NAMES[2:5] for n in names):
        return "sync"
    return "running"


def top_frame(dump: PyDump) -> str:
    t = dump.main
    if t is None or not t.python_frames:
        return ""
    return str(t.python_frames[0])


def user_frame(dump: PyDump) -> str:
    """The innermost frame outside torch/site-packages: the application's own line."""
    t = dump.main
    if t is None:
        return ""
    for f in t.python_frames:
        if "site-packages" not in f.file and not f.file.startswith(("torch/", "vllm/", "ray/")):
            return str(f)
    return str(t.python_frames[0]) if t.python_frames else ""


def signature(dump: PyDump) -> tuple[tuple[str, ...], ...]:
    """Function names per thread (sorted by thread id): equal signatures mean no movement."""
    return tuple(tuple(f.name for f in t.python_frames) for t in sorted(dump.threads, key=lambda t: t.tid))


def same_place(a: PyDump, b: PyDump) -> bool | None:
    """True when both dumps show the same function names in every thread; None if unknowable."""
    if a.error or b.error or not a.threads or not b.threads:
        return None
    return signature(a) == signature(b)
