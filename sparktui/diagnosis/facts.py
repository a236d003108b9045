"""Facts per rank and per node, read out of gathered Evidence (pure; the verdict's input).

Each rank gets: its log markers (init, transport, warnings, watchdog), where py-spy saw it in
each round, its GPU's utilisation/power, its threads; each node gets its RAS polls compared.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources

from . import flight_recorder
from . import pyspy as pyspy_mod
from . import ras as ras_mod
from .evidence import Evidence, NodeEvidence
from .samples import GpuRow, ThreadRow, parse_gpu_csv, parse_threads


@lru_cache(maxsize=1)
def rules_data() -> dict:
    text = resources.files("sparktui.diagnosis").joinpath("verdict_rules.toml").read_text()
    return tomllib.loads(text)


@lru_cache(maxsize=1)
def patterns() -> dict[str, re.Pattern]:
    return {k: re.compile(v) for k, v in rules_data()["patterns"].items()}


@dataclass
class Marker:
    kind: str
    line: str
    groups: tuple = ()


@dataclass
class RankFacts:
    node: str
    rank: int | None
    pid: int | None = None
    alive: bool | None = None
    world_size: int | None = None
    markers: list[Marker] = field(default_factory=list)
    last_nccl: str = ""
    last_line: str = ""
    pyspy: list[tuple[float, pyspy_mod.PyDump]] = field(default_factory=list)
    gpu: list[GpuRow] = field(default_factory=list)
    threads: tuple[ThreadRow, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    libnccl: str = ""
    libnccl_sha256: str = ""
    fr_status: tuple[int, int] | None = None  # (last enqueued, last completed) from a Flight Recorder dump
    fr_pending: str = ""  # profiling name of the first not-completed entry
    fr_ops: list = field(default_factory=list)  # collectives.CollOp from the Flight Recorder entries

    @property
    def label(self) -> str:
        where = f"{self.node}/" if self.node else ""
        return f"{where}rank {self.rank}" if self.rank is not None else f"{where}pid {self.pid}"

    def has(self, kind: str) -> bool:
        return any(m.kind == kind for m in self.markers)

    def first(self, kind: str) -> Marker | None:
        for m in self.markers:
            if m.kind == kind:
                return m
        return None

    def index(self, kind: str) -> int | None:
        for i, m in enumerate(self.markers):
            if m.kind == kind:
                return i
        return None

    @property
    def where(self) -> list[str]:
        return [pyspy_mod.where(d) for _, d in self.pyspy]

    @property
    def frozen_frames(self) -> bool | None:
        if len(self.pyspy) < 2:
            return None
        return pyspy_mod.same_place(self.pyspy[0][1], self.pyspy[-1][1])


@dataclass
class NodeFacts:
    node: str
    ras: list[tuple[float, ras_mod.RasStatus]] = field(default_factory=list)
    comparisons: list[ras_mod.RasComparison] = field(default_factory=list)
    gpu_rounds: list[tuple[float, list[GpuRow]]] = field(default_factory=list)


_ORDER = ("init_start", "bootstrap_if", "bootstrap_noif", "connect_retry", "connect_failed", "ib_no_device", "ib_using",
          "channel", "rings", "init_complete", "net_socket", "conn_closed", "remote_exited", "ib_completion",
          "ibv_failed", "watchdog_timeout", "watchdog_status", "collective_frame", "dump_signal", "rendezvous_wait", "store_closed",
          "shm_broadcast", "rpc_timeout", "vllm_rank", "oom_killed", "xid", "traceback", "progress", "warmup",
          "nccl_warn")


def scan_lines(lines: list[str]) -> list[Marker]:
    pats = patterns()
    out: list[Marker] = []
    for line in lines:
        for kind in _ORDER:
            m = pats[kind].search(line)
            if m:
                out.append(Marker(kind, line.strip(), m.groups()))
                if kind not in ("net_socket", "channel"):
                    break
    return out


_NCCL_LINE = re.compile(r"NCCL (INFO|WARN)")
_NCCL_PID = re.compile(r"^(?:\[[^\]]+\] )?[^:\s]+:(\d+):\d+ ")
_RANKLESS_INIT = re.compile(r"\bcomm 0x[0-9a-f]+ rank (\d+) nranks (\d+)")


def _attribute(key: str, lines: list[str], node: NodeEvidence) -> tuple[int | None, int | None]:
    """(rank, pid) a log belongs to: by its key, by the NCCL prefix pid, or by its comm-init line."""
    if key.startswith("rank "):
        return int(key.split()[1]), None
    pid = None
    if key.startswith("pid "):
        pid = int(key.split()[1])
        w = node.worker(pid=pid)
        if w and w.rank is not None:
            return w.rank, pid
    else:
        for w in node.workers:
            if any(key in (f, f.rsplit("/", 1)[-1], f.rsplit("/", 1)[-1].removesuffix(".log")) for f in w.log_files):
                if w.rank is not None:
                    return w.rank, w.pid
                pid = w.pid
    for line in lines[:400]:
        if pid is None and (m := _NCCL_PID.match(line)) and _NCCL_LINE.search(line):
            pid = int(m.group(1))
            w = node.worker(pid=pid)
            if w and w.rank is not None:
                return w.rank, pid
        if m := _RANKLESS_INIT.search(line):
            return int(m.group(1)), pid
    return None, pid


def _fr_status(blob: bytes, rank: int | None, source: str) -> tuple[tuple[int, int] | None, str, list]:
    # the bundle reader already refused undecodable dumps and noted dropped fields; here a bad
    # dump (Evidence built by other code) just contributes nothing
    try:
        data = flight_recorder.decode(blob)
        d = flight_recorder.read(blob)
    except flight_recorder.FlightRecorderError:
        return None, "", []
    ops = flight_recorder.collective_ops(data, rank, source) if rank is not None else []
    return d.status, d.pending, ops


def rank_facts(ev: Evidence) -> list[RankFacts]:
    out: dict[tuple[str, int | str], RankFacts] = {}

    def get(node: str, rank: int | None, pid: int | None) -> RankFacts:
        key = (node, rank if rank is not None else f"pid{pid}")
        if key not in out:
            out[key] = RankFacts(node=node, rank=rank, pid=pid)
        rf = out[key]
        if pid and not rf.pid:
            rf.pid = pid
        return rf

    for n in ev.nodes:
        for w in n.workers:
            rf = get(n.node, w.rank, w.pid or None)
            rf.alive, rf.world_size, rf.env = w.alive, w.world_size, dict(w.env)
            rf.libnccl, rf.libnccl_sha256 = w.libnccl, w.libnccl_sha256
        for key, lines in n.logs.items():
            rank, pid = _attribute(key, lines, n)
            if rank is None and pid is None:
                continue
            rf = get(n.node, rank, pid)
            rf.markers.extend(scan_lines(lines))
            nccl = [l for l in lines if _NCCL_LINE.search(l)]
            if nccl:
                rf.last_nccl = nccl[-1].strip()
            body = [l for l in lines if l.strip() and not l.startswith("### ")]
            if body:
                rf.last_line = body[-1].strip()
        for s in n.pyspy:
            kind, _, num = s.key.partition(" ")
            if not num.isdecimal():
                continue
            rank = int(num) if kind == "rank" else None
            pid = int(num) if kind == "pid" else None
            dump = pyspy_mod.parse(s.text)
            if rank is None and dump.pid:
                w = n.worker(pid=dump.pid)
                rank = w.rank if w else None
            get(n.node, rank, pid or dump.pid).pyspy.append((s.t, dump))
        for key, blob in n.fr_traces.items():
            rank = int(key.split()[-1]) if key.split()[-1].isdecimal() else None
            rf = get(n.node, rank, None)
            rf.fr_status, rf.fr_pending, rf.fr_ops = _fr_status(blob, rank, f"{n.node}/{key}")
        groups = [g for s in n.threads[-1:] for g in parse_threads(s.text)]
        for g in groups:
            if g.rank is not None or g.pid is not None:
                w = n.worker(pid=g.pid) if g.pid else None
                rank = g.rank if g.rank is not None else (w.rank if w else None)
                get(n.node, rank, g.pid).threads = g.threads
    # vLLM's "rank=N" line names the rank of a pid-keyed entry
    for rf in out.values():
        if rf.rank is None and (m := rf.first("vllm_rank")):
            rf.rank = int(m.groups[1])
        if rf.world_size is None:
            init = rf.first("init_start") or rf.first("init_complete")
            if init and int(init.groups[2]) <= 1 << 16:  # a damaged log's nranks must not size a range()
                rf.world_size = int(init.groups[2])
    return sorted(out.values(), key=lambda r: (r.node, r.rank if r.rank is not None else 1 << 30, r.pid or 0))


def node_facts(ev: Evidence, ranks: list[RankFacts]) -> list[NodeFacts]:
    out = []
    for n in ev.nodes:
        nf = NodeFacts(node=n.node)
        by_t: dict[float, ras_mod.RasStatus] = {}
        for s in sorted(n.ras, key=lambda s: (s.t, s.key != "json")):
            st = ras_mod.parse(s.text)
            if s.t in by_t and by_t[s.t].ok and by_t[s.t].format == "json":
                continue  # the JSON answer of a round says more than its text twin
            by_t[s.t] = st
        nf.ras = sorted(by_t.items())
        answered = [st for _, st in nf.ras if st.ok]
        if len(answered) >= 2:
            nf.comparisons = ras_mod.compare(answered[0], answered[-1])
        elif answered:
            nf.comparisons = [ras_mod.RasComparison(comm=c.comm, advanced=False, frozen=False, skew=c.skew,
                                                    lagging=c.lagging, op=c.op, counts=c.counts, pids=c.pids,
                                                    hosts=c.hosts) for c in ras_mod.compare(answered[0], answered[0])]
        rounds = sorted({s.t for s in n.gpu})
        for t in rounds:
            rows = [r for s in n.gpu if s.t == t for r in parse_gpu_csv(s.text)]
            nf.gpu_rounds.append((t, rows))
        # a rank's GPU: RAS names its NVML device; otherwise one GPU per rank in rank order
        devs = {}
        for _, st in nf.ras:
            for c in st.comms:
                for r in c.ranks:
                    if r.nvml_dev is not None:
                        devs[r.rank] = r.nvml_dev
        indices = sorted({r.index for _, rows in nf.gpu_rounds for r in rows})
        for rf in ranks:
            if rf.node != n.node or rf.rank is None:
                continue
            if rf.rank in devs:
                dev = devs[rf.rank]
            elif len(indices) == 1:
                dev = indices[0]
            elif rf.env.get("LOCAL_RANK", "").isdecimal():
                dev = int(rf.env["LOCAL_RANK"])
            else:
                dev = rf.rank
            rf.gpu = [r for _, rows in nf.gpu_rounds for r in rows if r.index == dev]
        out.append(nf)
    return out
