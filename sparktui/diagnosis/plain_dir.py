"""A plain folder of what a user has (rank logs, Flight Recorder dumps, py-spy, RAS, nvidia-smi), read
as one node's evidence.  Each file's kind is told by its content, its rank by its name or content.

``sniff(name, head)`` is pure: the kind of a file from its first bytes (and, where the content is
silent, its name).  ``read_files`` does the reading through the bundle reader's byte budget and
safe-open rules; a file that turns out not to be what it looked like is skipped with a note (a
user's folder holds other things too), never a crash.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

from . import flight_recorder, shapes
from .evidence_types import BundleError, Evidence, NodeEvidence, Sample, Worker, head_tail

if TYPE_CHECKING:
    from ..logs.safe_files import SafeDir

SNIFF_BYTES = 4096

# torch's Flight Recorder names: TORCH_NCCL_DEBUG_INFO_TEMP_FILE default "/tmp/nccl_trace_rank_", the
# analyser's "*.fr_trace_N" / "<prefix>N"; rank tags in any file name: "rank0", "rank_1", "rank-2"
_NAME_RANK = re.compile(r"(?:fr_trace_|trace_rank_|rank[_-]?|(?<![a-z])fr_)(\d{1,5})(?!\d)", re.I)
_TRAILING = re.compile(r"(\d{1,5})(?:\.[A-Za-z]+)?$")
_NAME_T = re.compile(r"(?:^|[._-])t(\d{1,6})(?:[._-]|$)")
_LOG_RANK = (re.compile(r"^\[rank(\d{1,5})\]:", re.M), re.compile(r"\bcomm 0x[0-9a-f]+ rank (\d{1,5}) nranks \d+"),
             re.compile(r"\[Rank (\d{1,5})\]"), re.compile(r"\bworld_size=\d+ rank=(\d{1,5})\b"))
_PYSPY_PID = re.compile(r"^Process (\d+):", re.M)
_SMI = re.compile(r"NVIDIA-SMI \d")
_GPU_CSV = re.compile(r"^(?:index, )?utilization\.gpu|^index,", re.M)
_THREADS = re.compile(r"^## rank \S+ pid \d+", re.M)
_RAS_TEXT = ("Job summary", "Communicators", "SERVER PROTOCOL", "NCCL RAS")


def _json_kind(data) -> str:
    if isinstance(data, dict):
        if "entries" in data and any(k in data for k in ("pg_config", "pg_status", "version", "nccl_comm_state")):
            return "fr"
        if "communicators" in data or ("nccl_version" in data and "ras" in data):
            return "ras"
        if "frames" in data and any(k in data for k in ("thread_id", "thread_name", "os_thread_id")):
            return "pyspy"
    if isinstance(data, list) and data and all(isinstance(t, dict) for t in data[:8]) \
            and all("frames" in t for t in data[:8]):
        return "pyspy"
    return ""


def sniff(name: str, head: bytes, whole: bytes | None = None) -> str:
    """fr / ras / pyspy / gpu / threads / log, or "" (binary or unknown).  Never raises.

    ``whole`` (when the caller has the file) lets JSON be decoded fully; from ``head`` alone a JSON
    document is told by its first keys."""
    if not head:
        return ""
    if head[:1] == b"\x80":  # pickle protocol 2+: how torch writes Flight Recorder dumps
        return "fr"
    text = head.decode("utf-8", "replace")
    if "\x00" in text or text.count("\ufffd") > len(text) // 8:
        return ""
    body = text.lstrip()
    lines = [ln for ln in body.splitlines()[:4]]
    if lines and lines[0].startswith("SERVER PROTOCOL"):
        return "ras"
    if body[:1] in ("{", "["):
        if whole is not None:
            try:
                kind = _json_kind(json.loads(whole.decode("utf-8", "replace")))
            except (ValueError, RecursionError):
                kind = ""
            if kind:
                return kind
        if re.search(r'"(?:entries|pg_config|pg_status)"', text):
            return "fr"
        if re.search(r'"(?:communicators|collective_counts)"', text):
            return "ras"
        if re.search(r'"(?:frames|thread_name|os_thread_id)"', text):
            return "pyspy"
        return "log"
    if _SMI.search(text) or "==NVSMI LOG==" in text:
        return "gpu"
    if _GPU_CSV.search(text):
        return "gpu"
    if _THREADS.search(text):
        return "threads"
    if _PYSPY_PID.search(text) and ("Python v" in text or "Thread " in text):
        return "pyspy"
    if "Job summary" in text and "Communicators" in text:
        return "ras"
    return "log"


def rank_from_name(name: str) -> int | None:
    m = _NAME_RANK.search(name)
    if m:
        return int(m.group(1))
    return None


def rank_from_log(text: str) -> int | None:
    """The rank a log belongs to: torch's ``[rankN]:`` tag, NCCL's comm init line, ``[Rank N]``,
    vLLM's ``rank=N``; None when the lines name none (or several ranks, e.g. a merged log)."""
    for rx in _LOG_RANK:
        found = {m.group(1) for m, _ in zip(rx.finditer(text), range(200))}
        if len(found) == 1:
            return int(found.pop())
        if len(found) > 1:
            return None
    return None


def time_of(name: str, index: int) -> float:
    m = _NAME_T.search(name)
    return float(m.group(1)) if m else float(index)


def read_files(rd, d: "SafeDir", names: list[str], node: "NodeEvidence") -> list[str]:
    """Add each of ``names`` (regular files in ``d``) to ``node`` by its content; returns the
    names that were used.  ``rd`` is the bundle reader (byte budget, notes)."""
    used: list[str] = []
    counts: dict[tuple[str, str], int] = {}
    for name in sorted(names):
        try:
            with d.open_binary(name) as fh:
                head = fh.read(SNIFF_BYTES)
        except OSError as exc:
            rd.notes.append(f"{d.join(name)}: not read ({exc.strerror or exc})")
            continue
        whole = None
        if head[:1] in (b"{", b"[") or head.lstrip()[:1] in (b"{", b"["):
            whole = rd.blob(d, name)
        kind = sniff(name, head, whole)
        if not kind:
            rd.notes.append(f"{d.join(name)}: skipped (not text, not a Flight Recorder dump)")
            continue
        rank = rank_from_name(name)
        idx = counts.setdefault((kind, str(rank)), 0)
        counts[(kind, str(rank))] = idx + 1
        t = time_of(name, idx)
        where = d.join(name)
        if kind == "fr":
            blob = whole if whole is not None else rd.blob(d, name)
            try:
                data = flight_recorder.decode(blob, where)
            except flight_recorder.FlightRecorderError as exc:
                rd.notes.append(f"{exc}; skipped")
                continue
            r = data.get("rank")
            if rank is None and isinstance(r, int) and not isinstance(r, bool) and 0 <= r <= shapes.MAX_RANKS:
                rank = r
            if rank is None:
                m = _TRAILING.search(name)
                rank = int(m.group(1)) if m else None
            if rank is None:
                rd.notes.append(f"{where}: a Flight Recorder dump whose rank neither its name nor its content says; "
                                "skipped")
                continue
            rd.notes += flight_recorder.read(blob, where).notes
            node.fr_traces[f"rank {rank}"] = blob
        elif kind == "log":
            lines = rd.log(d, name).splitlines()
            if rank is None:
                rank = rank_from_log("\n".join(lines[:2000]))
            key = f"rank {rank}" if rank is not None else name.rsplit(".", 1)[0] or name
            node.logs.setdefault(key, [])
            node.logs[key] = head_tail(node.logs[key] + lines)
        else:
            text = (whole.decode("utf-8", "replace") if whole is not None else rd.text(d, name))
            if kind == "ras":
                node.ras.append(Sample(t, text, "json" if text.lstrip().startswith("{") or '"communicators"' in text
                                       else "text"))
            elif kind == "gpu":
                node.gpu.append(Sample(t, text))
            elif kind == "threads":
                node.threads.append(Sample(t, text))
            elif kind == "pyspy":
                if text.lstrip()[:1] in ("{", "["):
                    try:
                        shapes.pyspy_json(text, where)
                    except shapes.ShapeError as exc:
                        rd.notes.append(f"{exc}; skipped")
                        continue
                if rank is None:
                    m = _PYSPY_PID.search(text)
                    pid = int(m.group(1)) if m else None
                    if pid is None:
                        try:
                            data = json.loads(text)
                            first = data[0] if isinstance(data, list) and data else data
                            pid = first.get("pid") if isinstance(first, dict) and isinstance(first.get("pid"), int) \
                                else None
                        except (ValueError, RecursionError):
                            pid = None
                    key = f"pid {pid}" if pid is not None else ""
                else:
                    key = f"rank {rank}"
                if not key:
                    rd.notes.append(f"{where}: a py-spy dump with neither a rank in its name nor a pid; skipped")
                    continue
                node.pyspy.append(Sample(t, text, key))
        used.append(name)
    return used


# --------------------------------------------------------------------------- grouping

_SKIP_SUFFIXES = (".md", ".py", ".toml", ".sh", ".gz", ".zip", ".tar", ".png", ".jpg")


def loose_files(entries: dict[str, str], is_capture_file) -> list[str]:
    """Files of a folder that are neither a bundle's nor capture-named: read by their content."""
    out = []
    for name, kind in entries.items():
        if name.startswith(".") or name == "meta.json" or name.endswith(_SKIP_SUFFIXES) or is_capture_file(name):
            continue
        if kind != "file":
            continue  # a user's folder may hold links and sub-folders: never followed, not evidence
        out.append(name)
    return sorted(out)


def with_loose(rd, d: "SafeDir", folder: str, groups: list, loose: list[str]) -> list:
    """Loose files join the capture group whose prefix they carry, or the only group; the rest make
    one group of their own (a plain folder: one incident, every file read by its content)."""
    rest = []
    for name in loose:
        owner = next((ev for pre, ev in groups if name.startswith(pre + ".")), None)
        if owner is None and len(groups) == 1:
            owner = groups[0][1]
        if owner is None:
            rest.append(name)
            continue
        before = len(rd.notes)
        read_files(rd, d, [name], owner.nodes[0])
        owner.read_notes += rd.notes[before:]
        _capture_workers(owner.nodes[0])
    if rest:
        before = len(rd.notes)
        node = NodeEvidence(node="local")
        used = read_files(rd, d, rest, node)
        if not used and not groups:
            why = "; ".join(rd.notes[before:before + 3])
            raise BundleError(f"{d.path}: no file there is a rank log, Flight Recorder dump, py-spy, RAS or "
                              f"nvidia-smi output" + (f" ({why})" if why else ""))
        if used:
            _capture_workers(node)
            times = sorted({s.t for s in node.ras} | {s.t for s in node.pyspy})
            groups.append((folder, Evidence(nodes=[node], started=0.0, source="offline",
                                            interval=(times[-1] - times[0]) if len(times) > 1 else 0.0,
                                            read_notes=rd.notes[before:])))
    return groups


def _capture_workers(node: "NodeEvidence") -> None:
    ranks = sorted({int(k.split()[1]) for k in list(node.logs) + [s.key for s in node.pyspy] + list(node.fr_traces)
                    if k.startswith("rank ") and k.split()[1].isdecimal()})
    known = {w.rank for w in node.workers}
    node.workers += [Worker(pid=0, rank=r, alive=None) for r in ranks if r not in known]
    node.ras.sort(key=lambda s: (s.t, s.key))
    node.gpu.sort(key=lambda s: s.t)
    node.threads.sort(key=lambda s: s.t)
    node.pyspy.sort(key=lambda s: (s.t, s.key))


def read_node_dirs(rd, top: "SafeDir", entries: dict[str, str], is_capture_file) -> list:
    """A folder of per-node folders (``spark1/``, ``spark2/``, each with that node's files): one
    incident, one node each.  One level deep; links are never followed (SafeDir.sub refuses them)."""
    nodes = []
    before = len(rd.notes)
    for name, kind in sorted(entries.items()):
        if kind != "dir" or name.startswith("."):
            continue
        with top.sub(name) as d:
            sub = d.entries()
            files = [n for n, k in sub.items() if k == "file" and not n.startswith(".") and not n.endswith(_SKIP_SUFFIXES)]
            node = NodeEvidence(node=name)
            if files and read_files(rd, d, files, node):
                _capture_workers(node)
                nodes.append(node)
    if not nodes:
        return []
    times = sorted({s.t for n in nodes for s in n.ras} | {s.t for n in nodes for s in n.pyspy})
    return [(top.path.rstrip("/").rsplit("/", 1)[-1], Evidence(
        nodes=nodes, started=0.0, source="offline", interval=(times[-1] - times[0]) if len(times) > 1 else 0.0,
        read_notes=rd.notes[before:]))]
