"""Typed, immutable events and findings: the vocabulary shared by backends, engine and faces.

Every collector turns what it reads into one of these; ClusterState, the Diagnoser and the
Session consume them.  Nothing here does IO and nothing imports Textual.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import Enum
from typing import Callable, Literal, Union

Severity = Literal["error", "warning", "info"]
SEVERITY_RANK: dict[str, int] = {"error": 0, "warning": 1, "info": 2}

# The status words, one set for a doctor check, an action step and its events.  "fail" is the
# checks' word (the doctor contract: ok / warn / fail); steps and events said "failed" before.
OK, WARN, FAIL, SKIP = "ok", "warn", "fail", "skip"
CheckStatus = Literal["ok", "warn", "fail", "skip"]
StepStatus = Literal["started", "progress", "ok", "warn", "fail", "cancelled", "info", "skip"]
TIMELINE_STATUSES = frozenset({"started", OK, WARN, FAIL, "cancelled"})  # what timelines keep: not progress/info
LEGACY_STATUS = {"failed": FAIL}  # words of older recordings (sessions, shared timelines), read as today's


def current_status(word: str) -> str:
    """``word`` as this version says it: a recording made before the words were one still reads."""
    return LEGACY_STATUS.get(word, word)


def now() -> float:
    return time.time()


# --------------------------------------------------------------------------- node facts


class ContainerState(str, Enum):
    CREATED = "created"
    RUNNING = "running"
    PAUSED = "paused"
    RESTARTING = "restarting"
    REMOVING = "removing"
    EXITED = "exited"
    DEAD = "dead"
    REMOVED = "removed"  # gone from the daemon (e.g. `--rm`); kept so its logs stay reachable

    @classmethod
    def parse(cls, value: str) -> "ContainerState":
        try:
            return cls(value.lower())
        except ValueError:
            return cls.DEAD


@dataclass(frozen=True, slots=True)
class ContainerInfo:
    id: str  # full id
    name: str
    image: str  # the reference it was started from, e.g. "vllm-node-qwen35"
    image_id: str = ""  # sha256:...
    state: ContainerState = ContainerState.RUNNING
    status: str = ""  # docker's human text, e.g. "Up 3 minutes"
    health: str | None = None  # healthy / unhealthy / starting / None
    started_at: float | None = None  # epoch seconds
    finished_at: float | None = None
    exit_code: int | None = None
    command: str = ""
    labels: tuple[tuple[str, str], ...] = ()

    @property
    def short_id(self) -> str:
        return self.id[:12]


# sparktui's own short-lived containers (doctor's probes in an image) carry this label and name prefix;
# they are not the cluster's: no pane row, no log source, no milestone
PROBE_LABEL = "sparktui.probe"
PROBE_PREFIX = "sparktui-probe-"
# build-image's step containers: the Dockerfile sets this label before its RUN step (the step's
# container inherits it, and the Engine's events carry it) and blanks it last, so the image's own
# containers do not carry it.  Their command names the registry patch the RUN step runs.
BUILD_LABEL = "sparktui.build"
BUILD_STEP_MARK = "patch_vllm_registry"


def is_own_probe(info: ContainerInfo) -> bool:
    """A doctor probe or a build-image step container: sparktui's own, never the cluster's."""
    return (info.name.startswith(PROBE_PREFIX) or BUILD_STEP_MARK in info.command
            or any(k == PROBE_LABEL or (k == BUILD_LABEL and v) for k, v in info.labels))


@dataclass(frozen=True, slots=True)
class GpuProcess:
    pid: int
    name: str
    used_memory_bytes: int | None  # None when the driver reports [N/A]


@dataclass(frozen=True, slots=True)
class GpuInfo:
    index: int
    name: str
    util_percent: float | None
    power_w: float | None
    power_limit_w: float | None = None
    clock_sm_mhz: float | None = None
    temp_c: float | None = None
    mem_used_bytes: int | None = None  # None on GB10 ("Not Supported" / "[N/A]")
    mem_total_bytes: int | None = None
    processes: tuple[GpuProcess, ...] = ()

    @property
    def unified_memory(self) -> bool:
        return self.mem_total_bytes is None


@dataclass(frozen=True, slots=True)
class MemoryInfo:
    """Host memory from /proc/meminfo and /proc/pressure/memory (bytes).

    On a GB10 this *is* the GPU's memory: used = MemTotal - MemAvailable.
    """

    total: int
    available: int
    cached: int = 0
    swap_total: int = 0
    swap_free: int = 0
    psi_some_avg10: float | None = None
    psi_full_avg10: float | None = None

    @property
    def used(self) -> int:
        return max(0, self.total - self.available)

    @property
    def used_fraction(self) -> float:
        return self.used / self.total if self.total else 0.0


@dataclass(frozen=True, slots=True)
class LinkInfo:
    name: str
    addresses: tuple[str, ...]  # "192.168.200.12/24"
    mtu: int | None
    state: str  # UP / DOWN / UNKNOWN
    rdma_device: str | None = None  # rocep1s0f1 when ibdev2netdev maps it


# --------------------------------------------------------------------------- events


@dataclass(frozen=True, slots=True)
class HostKeyOffer:
    """A host key the node offered that known_hosts does not vouch for: what a person must judge."""

    host: str
    fingerprint: str  # SHA256:...
    changed: bool  # known_hosts holds another key for this host: possibly a man in the middle
    hint: str = ""  # how to check it on the node's console


@dataclass(frozen=True, slots=True)
class NodeReachability:
    node: str
    reachable: bool
    ts: float = field(default_factory=now)
    since: float | None = None  # when it became unreachable
    error: str | None = None
    retry_in: float | None = None
    backend: str = ""  # ssh / local / sim
    host_key: HostKeyOffer | None = None  # unreachable because nobody vouched for this key yet


@dataclass(frozen=True, slots=True)
class DockerStatus:
    """Whether the node's Docker Engine answers (SSH can be up while dockerd is down/restarting)."""

    node: str
    available: bool
    error: str | None = None
    ts: float = field(default_factory=now)


@dataclass(frozen=True, slots=True)
class ContainersSnapshot:
    """The full set of containers on a node (reconcile poll)."""

    node: str
    containers: tuple[ContainerInfo, ...]
    ts: float = field(default_factory=now)


@dataclass(frozen=True, slots=True)
class ContainerChanged:
    """One container changed state (docker events stream)."""

    node: str
    container: ContainerInfo
    ts: float = field(default_factory=now)


@dataclass(frozen=True, slots=True)
class MemorySample:
    node: str
    memory: MemoryInfo
    ts: float = field(default_factory=now)


# a node's CPU or IO wait (percent of the last 10 s) worth showing (the TUI, status): below it its
# tasks hardly wait
PRESSURE_SHOWN = 5.0


@dataclass(frozen=True, slots=True)
class NodePressure:
    """The node's pressure stall information (/proc/pressure/{cpu,io,memory}, read with its memory):
    the percent of the last 10 s in which some task waited for a CPU, for IO, for memory (None: not
    exposed).  A node under pressure runs every process slower, so a rank's start-up steps take longer
    in silence (diagnosis.stall); a rank blocked waiting on a peer adds to none of them."""

    node: str
    cpu: float | None = None
    io: float | None = None
    memory: float | None = None
    ts: float = field(default_factory=now)

    @property
    def worst(self) -> float:
        """The largest of the three, percent (0 when none is known)."""
        return max((v for v in (self.cpu, self.io, self.memory) if v is not None), default=0.0)


@dataclass(frozen=True, slots=True)
class GpuSample:
    node: str
    gpus: tuple[GpuInfo, ...]
    available: bool = True  # False: no nvidia-smi on this node
    error: str | None = None
    ts: float = field(default_factory=now)


@dataclass(frozen=True, slots=True)
class LinkSample:
    node: str
    links: tuple[LinkInfo, ...]
    ts: float = field(default_factory=now)


@dataclass(frozen=True, slots=True)
class ServingSample:
    """The serving node's ``/metrics``, read every few seconds (probes.metrics).

    Gauges and ``*_total`` counts are as scraped (summed over label sets); rates and latencies are
    over ``interval_s`` since the previous scrape.  None: the server does not expose it, or nothing
    to measure (no request finished in the interval), never a made-up 0.
    """

    node: str
    up: bool  # the API server answered
    error: str | None = None  # one line: why not up, or why there are no numbers (no /metrics)
    running: float | None = None
    waiting: float | None = None
    kv_cache_usage: float | None = None  # 0..1
    requests_total: float | None = None  # finished requests since the server started (all reasons)
    prompt_tokens_total: float | None = None
    generation_tokens_total: float | None = None
    interval_s: float | None = None  # None on the first scrape: no rates yet
    prompt_tps: float | None = None
    generation_tps: float | None = None
    requests_ps: float | None = None
    ttft_mean: float | None = None  # seconds, over the interval
    ttft_p90: float | None = None
    e2e_mean: float | None = None
    e2e_p90: float | None = None
    itl_mean: float | None = None
    ttft_mean_all: float | None = None  # since the server started: shown while idle
    e2e_mean_all: float | None = None
    reset: bool = False  # counters went down: the server restarted
    note: str | None = None  # why some numbers show "–" (the server sent NaN/Inf for them)
    ts: float = field(default_factory=now)


@dataclass(frozen=True, slots=True)
class LogLine:
    """One line of a container (or file) log. ``text`` is raw data: never markup."""

    node: str
    source: str  # container name, or a file path
    text: str
    ts: float | None = None  # the line's own timestamp (docker --timestamps), if any
    seq: int = 0  # 1-based line number within its source
    raw_ts: str | None = None  # the timestamp exactly as the daemon wrote it (RFC 3339, ns)


@dataclass(frozen=True, slots=True)
class LogBatch:
    """Several lines from one source at once: what collectors emit at high rates."""

    node: str
    source: str
    lines: tuple[LogLine, ...]
    ts: float = field(default_factory=now)


@dataclass(frozen=True, slots=True)
class LogBlock:
    """Lines a follower did not take apart because it was behind a flood: ``data`` is ``count``
    whole lines exactly as the session file keeps them (``<daemon timestamp> <text>``, newline
    ended), numbered ``last_seq - count + 1 .. last_seq``.  They go to the session file only
    (skipped: neither analysed nor held for the screen), at a fraction of a parsed line's cost."""

    node: str
    source: str
    data: bytes
    count: int
    last_seq: int
    ts: float = field(default_factory=now)


@dataclass(frozen=True, slots=True)
class LogGap:
    """What a source's lines did not get, so far (totals): ``skipped`` lines were written to the
    session file but neither analysed nor held for the screen (the engine fell behind a flood and
    dropped to the tail); ``lost`` lines reached neither; ``unsaved`` lines reached the screen but
    not the session file (it reached its size cap)."""

    node: str
    source: str
    skipped: int = 0
    lost: int = 0
    unsaved: int = 0
    ts: float = field(default_factory=now)


@dataclass(frozen=True, slots=True)
class Finding:
    id: str  # a catalogue id ("nccl_init_hang", ...): docs/findings.md lists them all
    severity: Severity
    title: str
    source: str = ""  # file, or "node/container"
    line: int | None = None  # 1-based
    evidence: tuple[str, ...] = ()
    advice: str = ""
    explanation: str = ""
    node: str = ""
    ts: float = field(default_factory=now)

    def to_json(self) -> dict:
        return {
            "id": self.id,
            "severity": self.severity,
            "title": self.title,
            "source": self.source,
            "line": self.line,
            "evidence": list(self.evidence),
            "advice": self.advice,
        }

    @property
    def key(self) -> str:
        """What names this finding across events, sessions and operators (see ``finding_key``)."""
        return finding_key(self.id, self.node, self.source, self.line)


def finding_key(id: str, node: str, source: str, line: int | None) -> str:
    """One finding's identity as text: the fields the state dedups on, so a resolution or an
    acknowledgement (possibly another operator's, read from the shared timeline) names it."""
    return f"{id}|{node}|{source}|{line or ''}"


@dataclass(frozen=True, slots=True)
class FindingRaised:
    finding: Finding
    ts: float = field(default_factory=now)

    @property
    def node(self) -> str:
        return self.finding.node


@dataclass(frozen=True, slots=True)
class FindingResolved:
    """A finding's condition ended (its container is gone, the cluster was relaunched and is ready,
    the check passes): it leaves the ranking but stays in the panel, the timeline and the report."""

    key: str  # Finding.key
    reason: str  # "container removed", "relaunched, ready", "stopped", "check passes"
    ts: float = field(default_factory=now)


@dataclass(frozen=True, slots=True)
class FindingAcknowledged:
    """An operator has seen a finding and owns it: it leaves the ranking, marked with who."""

    key: str  # Finding.key
    operator: str = ""  # "user@host"
    ts: float = field(default_factory=now)


@dataclass(frozen=True, slots=True)
class Milestone:
    """Startup progress on one node (the steps of ``MILESTONE_ORDER``; docs/architecture.md "Milestones")."""

    id: str  # container_started, ray_joined, arch_resolved, nccl_ready, weights_loading,
    # weights_loaded, kv_cache, cuda_graphs, api_ready, first_prompt
    text: str
    node: str = ""
    source: str = ""
    line: int | None = None
    progress: float | None = None  # 0..1 within the milestone (weights_loading shards)
    detail: tuple[tuple[str, str], ...] = ()  # e.g. (("transport", "NET/IB"),)
    ts: float = field(default_factory=now)


@dataclass(frozen=True, slots=True)
class MilestoneReached:
    milestone: Milestone
    ts: float = field(default_factory=now)

    @property
    def node(self) -> str:
        return self.milestone.node


@dataclass(frozen=True, slots=True)
class ActionEvent:
    """Progress of a guided action (doctor, validate, build-image, ...)."""

    action: str
    step: str
    status: StepStatus
    message: str = ""
    progress: float | None = None
    node: str = ""
    ts: float = field(default_factory=now)
    key: str = ""  # machine-readable detail: the milestone id of a launch's per-node progress


@dataclass(frozen=True, slots=True)
class Note:
    """A free-text note the operator added to the session timeline."""

    text: str
    author: str = ""
    ts: float = field(default_factory=now)


@dataclass(frozen=True, slots=True)
class TimelineEntry:
    """An action step or note of ANOTHER operator's session on the same cluster, read from the
    shared timeline on the head node (actions/shared_timeline.py), so a watcher sees what the
    driver did.  Own records are never turned into these (they are ActionEvents and Notes)."""

    kind: Literal["action", "note", "ack"]  # ack: a finding acknowledged (``message`` is its key)
    operator: str  # "user@host"
    session: str
    message: str = ""
    action: str = ""
    step: str = ""
    status: str = ""
    node: str = ""
    ts: float = field(default_factory=now)


@dataclass(frozen=True, slots=True)
class LogEnded:
    """A container's log was read to its end (the container stopped): ``state`` and ``exit_code``
    as Docker gave them when the follower finished."""

    node: str
    source: str
    state: str = ""
    exit_code: int | None = None
    container: str = ""  # its id: a container of the same name made since is another one
    ts: float = field(default_factory=now)


@dataclass(frozen=True, slots=True)
class InputEnded:
    """End of input for some sources (keys ``node/source``), asked by whoever reads them (an action
    whose container stopped): the Diagnoser runs its end-of-input analysis over those sources
    (open tracebacks, the phase a log stopped in, last words, cross-rank comparison) and answers
    with the same event, ``done``, after the findings it raised, carrying every finding of those
    sources after the analysis, ranked (root cause first).  ``token`` pairs the answer with its ask."""

    sources: tuple[str, ...]
    token: str = ""
    done: bool = False
    findings: tuple["Finding", ...] = ()
    node: str = ""
    ts: float = field(default_factory=now)


Event = Union[
    NodeReachability,
    DockerStatus,
    ContainersSnapshot,
    ContainerChanged,
    MemorySample,
    GpuSample,
    LinkSample,
    ServingSample,
    LogLine,
    LogBatch,
    LogBlock,
    LogGap,
    FindingRaised,
    FindingResolved,
    FindingAcknowledged,
    MilestoneReached,
    ActionEvent,
    Note,
    TimelineEntry,
    LogEnded,
    InputEnded,
]
# what every producer of events (node sources, collectors, actions) is handed to report them
Emit = Callable[[Event], None]

MILESTONE_ORDER: tuple[str, ...] = (
    "container_started",
    "ray_joined",
    "arch_resolved",
    "nccl_ready",
    "weights_loading",
    "weights_loaded",
    "kv_cache",
    "cuda_graphs",
    "api_ready",
    "first_prompt",
)
