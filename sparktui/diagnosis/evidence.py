"""The evidence an investigation gathers, and its bundle on disk.

Evidence holds what the nodes *said* (raw RAS answers, py-spy output, nvidia-smi CSV, /proc thread
lines, log tails) plus the few facts a probe establishes (pids, ranks, env, libnccl, container
settings, fabric checks).  The verdict parses the raw texts itself, so a bundle written by a live
run and read back with ``--offline`` gives the same verdict.

Bundle layout (one folder per node, each laid out like fixtures/nccl-2gpu)::

    DIR/meta.json                       {"sparktui_bundle": 1, nodes, started, interval, ...}
    DIR/verdict.json                    the verdict of the run that wrote it
    DIR/<node>/node.json                workers, containers, fabric checks, dmesg, errors
    DIR/<node>/ev.t<NN>.ras.json|txt    RAS answers, NN = seconds after the start
    DIR/<node>/ev.t<NN>.gpu.csv         nvidia-smi --query-gpu CSV (one or more samples)
    DIR/<node>/ev.t<NN>.threads.txt     "## rank R pid P" then tid<TAB>comm<TAB>state<TAB>wchan<TAB>ticks
    DIR/<node>/ev.t<NN>.pyspy.rank<R>.json
    DIR/<node>/ev.rank<R>.log           the last lines of each rank's logs
    DIR/<node>/ev.<name>.log            other logs read (container logs, NCCL debug files)

``read_capture_dir`` also reads a plain capture folder (``*.rankN.log``, ``*.tNN.ras.json|txt``,
``*.pyspy*.json|txt``, ``*.gpu.csv``, ``*.threads.txt``, ``*.fr_trace_N``), one prefix at a time.
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

BUNDLE_VERSION = 1


@dataclass
class Worker:
    """One rank's process, as found on a node."""

    pid: int
    rank: int | None = None
    world_size: int | None = None
    alive: bool | None = True  # None: unknown (offline captures)
    cmdline: str = ""
    container: str = ""  # container id when the process runs in one
    env: dict[str, str] = field(default_factory=dict)  # NCCL_*, GLOO_*, VLLM_HOST_IP, MASTER_ADDR, ...
    libnccl: str = ""
    libnccl_sha256: str = ""
    log_files: list[str] = field(default_factory=list)  # stdout/stderr/NCCL debug files found for it

    @property
    def label(self) -> str:
        return f"rank {self.rank}" if self.rank is not None else f"pid {self.pid}"


@dataclass
class Sample:
    """A raw text read at ``t`` seconds after the investigation began."""

    t: float
    text: str
    key: str = ""  # rank label for per-rank samples (py-spy, threads), format for RAS ("json"/"text")


@dataclass
class NodeEvidence:
    node: str
    reachable: bool = True
    error: str = ""
    hostname: str = ""
    workers: list[Worker] = field(default_factory=list)
    ras: list[Sample] = field(default_factory=list)
    gpu: list[Sample] = field(default_factory=list)
    threads: list[Sample] = field(default_factory=list)
    pyspy: list[Sample] = field(default_factory=list)  # key = "rank R" / "pid P"
    logs: dict[str, list[str]] = field(default_factory=dict)  # key "rank R" or a source name
    fr_traces: dict[str, bytes] = field(default_factory=dict)  # key "rank R"
    containers: dict[str, dict] = field(default_factory=dict)  # id -> settings from docker inspect
    fabric: list[dict] = field(default_factory=list)  # {"check", "target", "ok", "detail"}
    dmesg: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what could not be read, and why
    log_growth: dict[str, int] = field(default_factory=dict)  # progress lines added between the rounds

    def worker(self, rank: int | None = None, pid: int | None = None) -> Worker | None:
        for w in self.workers:
            if (rank is not None and w.rank == rank) or (pid is not None and w.pid == pid):
                return w
        return None


@dataclass
class Evidence:
    nodes: list[NodeEvidence]
    started: float = field(default_factory=time.time)
    finished: float | None = None
    interval: float = 25.0
    source: str = "live"  # live / offline / sim
    fabric_ips: dict[str, str] = field(default_factory=dict)  # node -> configured fabric IP
    expected_hcas: dict[str, list[str]] = field(default_factory=dict)

    def node(self, name: str) -> NodeEvidence:
        for n in self.nodes:
            if n.node == name:
                return n
        raise KeyError(name)


# --------------------------------------------------------------------------- bundle writing


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._")[:80] or "_"


def _key_file(key: str) -> str:
    return key.replace(" ", "")  # "rank 1" -> "rank1", "pid 12" -> "pid12"


def write_bundle(ev: Evidence, path: str | os.PathLike, verdict: dict | None = None) -> Path:
    root = Path(path)
    root.mkdir(parents=True, exist_ok=True)
    meta = {"sparktui_bundle": BUNDLE_VERSION, "nodes": [n.node for n in ev.nodes], "started": ev.started,
            "finished": ev.finished, "interval": ev.interval, "source": ev.source,
            "fabric_ips": ev.fabric_ips, "expected_hcas": ev.expected_hcas}
    (root / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    for n in ev.nodes:
        d = root / _safe(n.node)
        d.mkdir(exist_ok=True)
        info = {"node": n.node, "reachable": n.reachable, "error": n.error, "hostname": n.hostname,
                "workers": [asdict(w) for w in n.workers], "containers": n.containers, "fabric": n.fabric,
                "dmesg": n.dmesg, "notes": n.notes, "log_growth": n.log_growth,
                "samples": {"ras": [[s.t, s.key] for s in n.ras], "gpu": [s.t for s in n.gpu]}}
        (d / "node.json").write_text(json.dumps(info, indent=2) + "\n")
        for s in n.ras:
            ext = "json" if s.key == "json" else "txt"
            (d / f"ev.t{int(s.t):02d}.ras.{ext}").write_text(s.text)
        for s in n.gpu:
            (d / f"ev.t{int(s.t):02d}.gpu.csv").write_text(s.text)
        for s in n.threads:
            (d / f"ev.t{int(s.t):02d}.threads.txt").write_text(s.text)
        for s in n.pyspy:
            ext = "json" if s.text.lstrip().startswith(("[", "{")) else "txt"
            (d / f"ev.t{int(s.t):02d}.pyspy.{_key_file(s.key)}.{ext}").write_text(s.text)
        for key, lines in n.logs.items():
            name = _key_file(key) if key.startswith(("rank ", "pid ")) else _safe(key.removesuffix(".log"))
            (d / f"ev.{name}.log").write_text("\n".join(lines) + ("\n" if lines else ""))
        for key, blob in n.fr_traces.items():
            (d / f"ev.fr_trace_{key.split()[-1]}").write_bytes(blob)
    if verdict is not None:
        (root / "verdict.json").write_text(json.dumps(verdict, indent=2) + "\n")
    return root


# --------------------------------------------------------------------------- reading


class BundleError(Exception):
    """The folder is neither a bundle nor a capture folder (one line, for the CLI)."""


_T = re.compile(r"\.t(\d+)\.")
_RANK = re.compile(r"\.(rank|pid)(\d+)\.")
_KEYED = re.compile(r"^(rank|pid)(\d+)$")


def _read_text(p: Path) -> str:
    return p.read_bytes().decode("utf-8", "replace")


HEAD_LINES, TAIL_LINES = 200, 400


def head_tail(lines: list[str], head: int = HEAD_LINES, tail: int = TAIL_LINES) -> list[str]:
    """The start (init, transport) and the end (where it stopped) of a long log."""
    if len(lines) <= head + tail:
        return lines
    return lines[:head] + [f"### ... {len(lines) - head - tail} lines skipped ..."] + lines[-tail:]


def _read_node_dir(d: Path, prefix: str, node: str, info: dict | None = None) -> NodeEvidence:
    n = NodeEvidence(node=node)
    if info:
        n.reachable = bool(info.get("reachable", True))
        n.error = info.get("error", "")
        n.hostname = info.get("hostname", "")
        n.workers = [Worker(**w) for w in info.get("workers", [])]
        n.containers = info.get("containers", {})
        n.fabric = info.get("fabric", [])
        n.dmesg = info.get("dmesg", [])
        n.notes = info.get("notes", [])
        n.log_growth = info.get("log_growth", {})
    pre = prefix + "."
    for p in sorted(d.iterdir()):
        name = p.name
        if not name.startswith(pre) or not p.is_file():
            continue
        rest = name[len(pre):]
        tm = _T.search("." + rest)
        t = float(tm.group(1)) if tm else 0.0
        rk = _RANK.search("." + rest)
        key = f"{rk.group(1)} {rk.group(2)}" if rk else ""
        if rest.endswith((".ras.json", ".ras.txt")):
            n.ras.append(Sample(t, _read_text(p), "json" if rest.endswith(".json") else "text"))
        elif rest.endswith(".gpu.csv"):
            n.gpu.append(Sample(t, _read_text(p)))
        elif rest.endswith(".threads.txt"):
            n.threads.append(Sample(t, _read_text(p)))
        elif ("pyspy" in rest.split(".")[:3] or "pyspy-native" in rest) and rest.endswith((".json", ".txt")):
            # the native text dump duplicates the plain one; keep it only when nothing else exists
            if "pyspy-native" in rest and any(s.key == key and s.t == t for s in n.pyspy):
                continue
            if "pyspy-native" not in rest:
                n.pyspy = [s for s in n.pyspy if not (s.key == key and s.t == t)]
            n.pyspy.append(Sample(t, _read_text(p), key))
        elif rest.startswith("fr_trace_") or ".fr_trace_" in rest:
            n.fr_traces[f"rank {rest.rsplit('_', 1)[-1]}"] = p.read_bytes()
        elif rest.endswith(".log"):
            stem = rest[:-4]
            km = _KEYED.match(stem)
            lkey = f"{km.group(1)} {km.group(2)}" if km else stem
            n.logs[lkey] = head_tail(_read_text(p).splitlines())
    n.ras.sort(key=lambda s: (s.t, s.key))
    n.gpu.sort(key=lambda s: s.t)
    n.threads.sort(key=lambda s: s.t)
    n.pyspy.sort(key=lambda s: (s.t, s.key))
    return n


def capture_prefixes(d: Path) -> list[str]:
    """The scenario prefixes of a capture folder (``desync_ras`` from ``desync_ras.t20.ras.json``)."""
    out: set[str] = set()
    for p in d.iterdir():
        if p.is_file() and "." in p.name and not p.name.endswith(".md"):
            first = p.name.split(".", 1)[0]
            if any(tok in p.name for tok in (".rank", ".ras.", ".pyspy", ".gpu.csv", ".threads.txt", ".fr_trace_")):
                out.add(first)
    return sorted(out)


def read_bundle(path: str | os.PathLike) -> list[tuple[str, Evidence]]:
    """A sparktui bundle, a capture folder (every prefix), or ``folder/prefix`` (one prefix)."""
    p = Path(path)
    if p.is_dir() and (p / "meta.json").is_file():
        try:
            meta = json.loads((p / "meta.json").read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise BundleError(f"{p / 'meta.json'}: unreadable ({exc})") from None
        if meta.get("sparktui_bundle") != BUNDLE_VERSION:
            raise BundleError(f"{p}: meta.json is not a sparktui bundle (version {meta.get('sparktui_bundle')!r})")
        nodes = []
        for name in meta.get("nodes", []):
            d = p / _safe(name)
            info = None
            if (d / "node.json").is_file():
                info = json.loads((d / "node.json").read_text())
            nodes.append(_read_node_dir(d, "ev", name, info) if d.is_dir() else NodeEvidence(node=name, reachable=False,
                                                                                             error="missing from bundle"))
        ev = Evidence(nodes=nodes, started=meta.get("started") or 0.0, finished=meta.get("finished"),
                      interval=meta.get("interval", 25.0), source="offline", fabric_ips=meta.get("fabric_ips", {}),
                      expected_hcas=meta.get("expected_hcas", {}))
        return [(p.name, ev)]
    if p.is_dir():
        prefixes = capture_prefixes(p)
        if not prefixes:
            raise BundleError(f"{p}: no bundle (meta.json) and no capture files (*.rankN.log, *.ras.json, ...)")
        return [(pre, _capture(p, pre)) for pre in prefixes]
    if p.parent.is_dir() and p.name in capture_prefixes(p.parent):
        return [(p.name, _capture(p.parent, p.name))]
    if not p.exists():
        raise BundleError(f"{p}: no such folder")
    raise BundleError(f"{p}: not a folder")


def _capture(d: Path, prefix: str) -> Evidence:
    node = _read_node_dir(d, prefix, "local")
    # a capture folder has no node.json: ranks come from the files themselves
    ranks = sorted({int(k.split()[1]) for k in list(node.logs) + [s.key for s in node.pyspy] if k.startswith("rank ")})
    node.workers = [Worker(pid=0, rank=r, alive=None) for r in ranks]
    times = sorted({s.t for s in node.ras} | {s.t for s in node.pyspy})
    interval = (times[-1] - times[0]) if len(times) > 1 else 0.0
    return Evidence(nodes=[node], started=0.0, interval=interval, source="offline")
