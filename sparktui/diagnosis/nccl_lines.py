"""Parse one NCCL debug line (and the torch watchdog lines about NCCL work) into a typed record.

Public API, used by the classifier, the per-rank NCCL view and the hang investigator:

    parse_nccl_line(text) -> NcclLine | None
    parse_watchdog_line(text) -> WatchdogLine | None
    strip_line_prefix(text) -> str       (docker timestamp, Ray actor prefix, ANSI removed)

The envelope follows NCCL's ``ncclDebugLog`` layout (src/debug.cc):
``[ts] host:pid:tid [dev] [file.cc:line (func)] NCCL INFO|WARN|TRACE|CALL msg``, optionally behind a
Ray actor prefix ``(RayWorkerWrapper pid=581, ip=10.0.0.2) `` and a docker RFC 3339 timestamp.
The message regexes follow NCCL's own wordings, checked against the real captures in
tests/fixtures/nccl-2gpu.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..logs.sanitize import strip_ansi
from .collectives import parse_work

__all__ = [
    "NcclLine",
    "WatchdogLine",
    "parse_nccl_line",
    "parse_watchdog_line",
    "strip_line_prefix",
    "NCCL_RESULT_NAMES",
]

# ncclResult_t values, as printed by "file.cc:line -> N" return traces (nccl.h).
NCCL_RESULT_NAMES = {
    0: "ncclSuccess",
    1: "ncclUnhandledCudaError",
    2: "ncclSystemError",
    3: "ncclInternalError",
    4: "ncclInvalidArgument",
    5: "ncclInvalidUsage",
    6: "ncclRemoteError",
    7: "ncclInProgress",
}

# docker logs --timestamps: "2026-11-29T19:11:29.002992818Z " (RFC 3339, ns)
_DOCKER_TS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)? ")
# Ray / vLLM actor prefix: "(RayWorkerWrapper pid=581, ip=10.0.0.2) ", "(EngineCore_DP0 pid=96) ",
# "(raylet, ip=10.0.0.3) ", "(VllmWorker TP1 pid=220) "
_ACTOR = re.compile(r"\(([^()\n]{0,160}?\b(?:pid|ip)=[^()\n]{0,160}?)\) ")
_ACTOR_PID = re.compile(r"\bpid=(\d+)")
_ACTOR_IP = re.compile(r"\bip=([^,\s)]+)")
_ACTOR_NAME = re.compile(r"^([A-Za-z_][\w.:-]*)")

# reference §1.2 envelope (the Ray part is handled above so other prefixes can precede it)
_ENVELOPE = re.compile(
    r"(?:\[([^\]]+)\] )?([^:\s\[\]()]+):(\d+):(\d+) (?:\[(\d+)\] )?"
    r"(?:([\w/.+-]+):(\d+)(?: \(([^)]*)\))? )?NCCL (INFO|WARN|TRACE|CALL|ERROR|ABORT) ?(.*)$"
)

# --------------------------------------------------------------------------- message kinds
# (kind, compiled regex, group names).  First match wins; order = most specific first.
_MSG_RULES: list[tuple[str, re.Pattern[str], tuple[str, ...]]] = [
    (
        "comm",
        re.compile(
            r"(?:\[Rank \d+\] )?(?:(\w+) )?comm (0x[0-9a-f]+) rank (\d+) nranks (\d+) cudaDev (\d+)"
            r"(?: nvmlDev (\d+))?(?: busId ([0-9a-f]+))?(?: commId (0x[0-9a-f]+))?.*?\s-\s(Init|Destroy|Abort) (START|COMPLETE)"
        ),
        ("func", "comm", "rank", "nranks", "cuda_dev", "nvml_dev", "bus_id", "comm_id", "what", "phase"),
    ),
    (
        "channel",
        re.compile(
            r"Channel (\d{2})(?:/(\d+))? : (\d+)\[([0-9a-f]+)\] -> (\d+)\[([0-9a-f]+)\] "
            r"(?:\[(send|receive)\] )?via ((NET/(\w+)(?:/(\d+))?(?:\(\d+\))?(/GDRDMA)?)\S*|P2P/\S+|SHM/\S+|\S+)"
        ),
        ("channel", "sub", "src_rank", "src_dev", "dst_rank", "dst_dev", "direction", "via",
         "net", "net_kind", "net_dev", "gdr"),
    ),
    ("rings", re.compile(r"Connected all rings(?:, use ring PXN (\d) GDR (\d))?"), ("pxn", "gdr")),
    ("trees", re.compile(r"Connected all trees"), ()),
    ("version", re.compile(r"NCCL version (\d+\.\d+\.\d+)(?:\S*?\+cuda([\d.]+))?"), ("version", "cuda")),
    (
        "bootstrap",
        re.compile(r"Bootstrap ?: Using (?:\[\d+\])?([\w.:-]+?):(\S+?)<\d+>"),
        ("ifname", "address"),
    ),
    ("bootstrap_no_if", re.compile(r"Bootstrap ?: no socket interface found"), ()),
    (
        "net_ib",
        re.compile(r"NET/IB ?: Using((?: \[\d+\][\w.-]+:\d+\S*?/(?:RoCE|IB))+) ?(\[RO\])?; OOB ([\w.-]+):(\S+?)<"),
        ("devices", "relaxed_order", "ifname", "address"),
    ),
    ("net_ib_none", re.compile(r"NET/IB ?: No device found"), ()),
    (
        "net_socket",
        re.compile(r"NET/Socket ?: Using((?: \[\d+\][\w.-]+:\S+?<\d+>)+)"),
        ("devices",),
    ),
    ("network", re.compile(r"Using network (\S+)"), ("network",)),
    # the network plugin (libnccl-net.so: HPC-X's SHARP, AWS OFI, ...) each process loaded, or the
    # internal transports it fell back to when it found none
    ("net_plugin_internal", re.compile(r"NET/Plugin ?: ?(?:Could not find\b|No plugin found\b|.{0,80}?\bUsing internal\b)"), ()),
    (
        "net_plugin_loaded",
        re.compile(r"^Plugin Path ?: ?(?P<path>\S+)|NET/Plugin ?: ?Loaded net plugin (?P<name>.+?)\s*$"
                   r"|Successfully loaded external (?:net )?plugin (?P<ext>\S+)"),
        ("path", "name", "ext"),
    ),
    (
        "coll",
        re.compile(
            r"(\w+): opCount ([0-9a-f]+) sendbuff \S+ recvbuff \S+ count (\d+) datatype (\d+) op (\d+)"
            r" root (-?\d+) comm (0x[0-9a-f]+) \[nranks=(\d+)\]"
        ),
        ("op", "op_count", "count", "datatype", "redop", "root", "comm", "nranks"),
    ),
    (
        "connect_retry",
        re.compile(r"(\w+): connect to (\S+) returned (.+?), retrying \((\d+)/(\d+)\)"),
        ("func", "peer", "error", "attempt", "attempts"),
    ),
    ("connect_failed", re.compile(r"connect to (\S+) failed ?: (.+)"), ("peer", "error")),
    ("peer_closed", re.compile(r"socketProgress: Connection closed by remote peer ?(\S*)"), ("peer",)),
    (
        "ib_completion",
        re.compile(r"NET/IB ?: Got completion from peer (\S+) with (?:error \d+, opcode \d+, len \d+, vendor err \d+ \()?status=(\w+)"),
        ("peer", "status"),
    ),
    ("ib_modify_qp", re.compile(r"Call to ibv_modify_qp failed with (\d+) ([^,]+)"), ("errno", "error")),
    (
        "ib_verbs_failed",
        re.compile(r"Call to (ibv_\w+) failed(?: with error)? ?(.*)"),
        ("call", "error"),
    ),
    ("shm_failed", re.compile(r"failed to extend (/dev/shm/nccl-\w+) to (\d+) bytes"), ("path", "bytes")),
    (
        "truncated",
        re.compile(r"Message truncated ?: received (\d+) bytes instead of (\d+)"),
        ("received", "expected"),
    ),
    ("result", re.compile(r"([\w/.+-]+\.cc):(\d+) -> (\d+)"), ("file", "line", "code")),
]


@dataclass(frozen=True, slots=True)
class NcclLine:
    """One parsed NCCL line.  ``kind`` names the message ("comm", "channel", "rings", "version",
    "bootstrap", "bootstrap_no_if", "net_ib", "net_ib_none", "net_socket", "network", "net_plugin_internal",
    "net_plugin_loaded", "coll",
    "connect_retry", "connect_failed", "peer_closed", "ib_completion", "ib_modify_qp",
    "ib_verbs_failed", "shm_failed", "truncated", "result", or "other"); ``data`` holds the
    named fields of that message (strings; absent groups are left out)."""

    level: str  # INFO / WARN / TRACE / CALL
    msg: str  # the message after "NCCL LEVEL "
    host: str
    pid: int
    tid: int
    dev: int | None = None  # the [N] CUDA device
    ts: str | None = None  # NCCL's own timestamp (NCCL_DEBUG_TIMESTAMP_*), if printed
    src_file: str | None = None  # WARN lines: "misc/socket.cc"
    src_line: int | None = None
    func: str | None = None
    actor: str | None = None  # Ray actor prefix: "RayWorkerWrapper"
    actor_pid: int | None = None
    actor_ip: str | None = None
    kind: str = "other"
    data: dict[str, str] = field(default_factory=dict, compare=False, hash=False)

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.data.get(key, default)

    @property
    def is_warn(self) -> bool:
        return self.level == "WARN"

    @property
    def rank(self) -> int | None:
        r = self.data.get("rank")
        return int(r) if r is not None else None


def strip_line_prefix(text: str) -> str:
    """Drop ANSI codes, a trailing CR, a docker timestamp and one Ray actor prefix."""
    if "\x1b" in text:  # tested here: the hot path skips the call for the common clean line
        text = strip_ansi(text)
    text = text.rstrip("\r\n")
    m = _DOCKER_TS.match(text)
    if m:
        text = text[m.end():]
    if text.startswith("("):
        m = _ACTOR.match(text)
        if m:
            text = text[m.end():]
    return text


def _actor(text: str) -> tuple[str, tuple[str | None, int | None, str | None]]:
    m = _ACTOR.match(text)
    if not m:
        return text, (None, None, None)
    inner = m.group(1)
    name = _ACTOR_NAME.match(inner)
    pid = _ACTOR_PID.search(inner)
    ip = _ACTOR_IP.search(inner)
    return text[m.end():], (
        name.group(1) if name else None,
        int(pid.group(1)) if pid else None,
        ip.group(1) if ip else None,
    )


def _classify(msg: str) -> tuple[str, dict[str, str]]:
    for kind, rx, names in _MSG_RULES:
        m = rx.search(msg)
        if m:
            return kind, {n: v for n, v in zip(names, m.groups()) if v is not None}
    return "other", {}


def parse_nccl_line(text: str | bytes, *, max_len: int = 8192) -> NcclLine | None:
    """Parse one log line; None when it is not an NCCL debug line.  Never raises.

    Accepts the line as read (CR, ANSI codes, docker timestamp, Ray actor prefix).  Very long
    lines are cut at ``max_len`` characters before matching (bounded work).
    """
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8", "replace")
    if "NCCL " not in text:
        return None
    if len(text) > max_len:
        text = text[:max_len]
    if "\x1b" in text:  # tested here: the hot path skips the call for the common clean line
        text = strip_ansi(text)
    if "\x00" in text:
        text = text.replace("\x00", "")
    text = text.rstrip("\r\n")
    m = _DOCKER_TS.match(text)
    if m:
        text = text[m.end():]
    actor: tuple[str | None, int | None, str | None] = (None, None, None)
    if text.startswith("("):
        text, actor = _actor(text)
    m = _ENVELOPE.search(text)
    if m is None:
        return None
    ts, host, pid, tid, dev, sfile, sline, func, level, msg = m.groups()
    msg = msg.rstrip()
    kind, data = _classify(msg)
    return NcclLine(
        level=level,
        msg=msg,
        host=host,
        pid=int(pid),
        tid=int(tid),
        dev=int(dev) if dev is not None else None,
        ts=ts,
        src_file=sfile,
        src_line=int(sline) if sline is not None else None,
        func=func,
        actor=actor[0],
        actor_pid=actor[1],
        actor_ip=actor[2],
        kind=kind,
        data=data,
    )


# --------------------------------------------------------------------------- torch watchdog

_WD_FAILURE = re.compile(
    r"(?:Rank (\d+)\]\s+)?failure detected by watchdog at work sequence id: (\d+) PG status: "
    r"last enqueued work: (-?\d+), last completed work: (-?\d+)"
)
_WD_DUMP = re.compile(
    r"(?:Rank (\d+)\]\s+)?Received a dump signal due to a collective timeout from\s+(this local rank|rank \d+)"
    r".*?Last enqueued NCCL work: (-?\d+), last completed NCCL work: (-?\d+)"
)
_RANK_TAG = re.compile(r"\[rank(\d+)\]:|\bRank (\d+)\]")  # "[rank0]:" prefix, "[Rank 0]", "[PG ID … Rank 0]"


@dataclass(frozen=True, slots=True)
class WatchdogLine:
    """torch ProcessGroupNCCL watchdog facts from one line.

    kind "timeout": the watchdog fired on ``seq`` (op, timeout_ms, ran_ms set);
    kind "failure": ``seq`` failed, PG status last enqueued/completed set;
    kind "dump": a flight-recorder dump was requested (``origin`` = "this local rank" or "rank N"),
    with this rank's last enqueued/completed work.
    """

    kind: str
    rank: int | None
    seq: int | None = None
    op: str | None = None
    timeout_ms: int | None = None
    ran_ms: int | None = None
    last_enqueued: int | None = None
    last_completed: int | None = None
    origin: str | None = None
    numel_in: int | None = None
    numel_out: int | None = None
    pg: str | None = None  # "PG ID n" of the line's prefix, when it has one


def _rank_of(text: str) -> int | None:
    m = _RANK_TAG.search(text)
    if not m:
        return None
    return int(m.group(1) or m.group(2))


def parse_watchdog_line(text: str, *, max_len: int = 8192) -> WatchdogLine | None:
    """Parse a torch NCCL watchdog line (reference §2); None for anything else.  Never raises.

    The work a line names is read field by field (``WorkNCCL(SeqNum=…, OpType=…, NumelIn=…)``, see
    collectives.parse_work), so torch versions that reorder or add fields, or reword the phrase
    around them, still parse.  kind "work": a line that names a work item without a timeout."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8", "replace")
    if "ork" not in text:  # "work"/"Work"/"WorkNCCL": cheap reject
        return None
    text = text[:max_len]
    work = _work(text) if "Work" in text else None
    if work is not None and "caught collective operation timeout" in text:
        ran = _WD_RAN.search(text)
        return WatchdogLine("timeout", work.rank, work.seq, work.op, work.timeout_ms,
                            int(ran.group(1)) if ran else None, numel_in=work.numel_in, numel_out=work.numel_out,
                            pg=work.pg)
    m = _WD_FAILURE.search(text)
    if m:
        r, seq, enq, comp = m.groups()
        rank = int(r) if r is not None else _rank_of(text)
        return WatchdogLine("failure", rank, int(seq), last_enqueued=int(enq), last_completed=int(comp))
    m = _WD_DUMP.search(text)
    if m:
        r, origin, enq, comp = m.groups()
        rank = int(r) if r is not None else _rank_of(text)
        return WatchdogLine("dump", rank, last_enqueued=int(enq), last_completed=int(comp), origin=origin)
    return work


_WD_RAN = re.compile(r"\bran for (\d{1,15}) milliseconds")
_PG_ID = re.compile(r"\[PG ID (\d+) ")


def _work(text: str) -> WatchdogLine | None:
    f = parse_work(text)
    if not f or not f.get("OpType") or not (f.get("SeqNum") or "").isdecimal() or len(f["SeqNum"]) > 15:
        return None
    num = lambda k: int(f[k]) if re.fullmatch(r"-?\d{1,18}", f.get(k) or "") else None  # noqa: E731
    pg = _PG_ID.search(text)
    return WatchdogLine("work", _rank_of(text), int(f["SeqNum"]), f["OpType"][:60], num("Timeout"),
                        numel_in=num("NumelIn"), numel_out=num("NumelOut"), pg=pg.group(1) if pg else None)
