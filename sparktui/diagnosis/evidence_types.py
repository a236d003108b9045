"""What an investigation gathered, as data: workers, raw samples, per-node and whole evidence.

Below evidence.py (bundle writing and reading) and plain_dir.py (a user's folder), which both build it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field


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
    read_notes: list[str] = field(default_factory=list)  # what reading a bundle cut short or dropped
    # the head's /metrics per round: {"t", "node", "up", "running", "waiting", "finished", "tokens"}
    serving: list[dict] = field(default_factory=list)
    # the cluster's own containers, as `status` lists them: {"name", "containers": [{"node", "name", "state",
    # "status", "rank", "exit_code", "launch"}]}; a rank whose container exited is gone however quiet the rest
    cluster: dict = field(default_factory=dict)

    def node(self, name: str) -> NodeEvidence:
        for n in self.nodes:
            if n.node == name:
                return n
        raise KeyError(name)


class BundleError(Exception):
    """The folder is neither a bundle nor a capture folder, or holds a file of the wrong kind or
    shape (one line, for the CLI)."""


HEAD_LINES, TAIL_LINES = 200, 400
MAX_READ_BYTES = 256 << 20  # everything one read takes in: a real bundle is a few MB


def head_tail(lines: list[str], head: int = HEAD_LINES, tail: int = TAIL_LINES) -> list[str]:
    """The start (init, transport) and the end (where it stopped) of a long log."""
    if len(lines) <= head + tail:
        return lines
    return lines[:head] + [f"### ... {len(lines) - head - tail} lines skipped ..."] + lines[-tail:]
