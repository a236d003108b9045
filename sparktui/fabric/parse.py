"""Parsers for what the fabric check runs: ``all_reduce_perf`` (nccl-tests) output with NCCL's INFO
lines, ``iperf3 -J``, ``ping``, and the RDMA port listing.  Text in, dataclasses out; no IO.

Every input is a stranger's text: a line that does not fit is skipped, never a crash.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field

from ..diagnosis.nccl_lines import parse_nccl_line

# ---------------------------------------------------------------------------------------- nccl-tests


@dataclass(frozen=True)
class PerfRow:
    """One size of the table: out-of-place then in-place time (us), algbw and busbw (GB/s), #wrong
    (None where the table says N/A or where an old nccl-tests prints an error magnitude instead)."""

    size: int
    count: int
    type: str
    redop: str
    root: int | None
    oop_time_us: float
    oop_algbw: float
    oop_busbw: float
    oop_wrong: int | None
    ip_time_us: float
    ip_algbw: float
    ip_busbw: float
    ip_wrong: int | None
    oop_error: float | None = None  # an old table's "error" column: the largest difference from the expected value
    ip_error: float | None = None

    @property
    def busbw(self) -> float:
        return max(self.oop_busbw, self.ip_busbw)

    @property
    def wrong(self) -> int:
        return (self.oop_wrong or 0) + (self.ip_wrong or 0)

    @property
    def error_limit(self) -> float | None:
        """The largest error an old nccl-tests let pass for this type (its DeltaMaxValue); None: unknown type."""
        return ERROR_LIMITS.get(self.type)

    @property
    def error_out_of_bounds(self) -> bool:
        """An old table's error above the type's limit: what it counted as "Out of bounds values"."""
        limit = self.error_limit
        return limit is not None and any(e is not None and e > limit for e in (self.oop_error, self.ip_error))

    @property
    def failed(self) -> bool:
        return self.wrong > 0 or self.error_out_of_bounds


@dataclass
class PerfRun:
    rows: list[PerfRow] = field(default_factory=list)
    avg_busbw: float | None = None  # "# Avg bus bandwidth    : 6.6972"
    out_of_bounds: int | None = None  # "# Out of bounds values : 0 OK"
    nranks: int = 0  # "#  Rank  1 Group ..." lines
    socket: bool = False  # NCCL used NET/Socket (INFO "NET/Socket : Using", "Using network Socket", "via NET/Socket")
    ib_devices: tuple[str, ...] = ()  # "NET/IB : Using [0]rocep1s0f1:1/RoCE [1]..." -> ("rocep1s0f1", ...)
    socket_ifaces: tuple[str, ...] = ()  # "NET/Socket : Using [0]eno3:..." -> ("eno3",)
    bootstrap_if: str = ""  # "Bootstrap : Using enp1s0f1np1:192.168.100.12<0>"
    gid_errors: tuple[str, ...] = ()  # "Call to ibv_modify_qp failed with 61 ..." messages
    warnings: tuple[str, ...] = ()  # NCCL WARN messages, first few

    @property
    def wrong(self) -> int:
        return sum(r.wrong for r in self.rows)

    @property
    def failed(self) -> bool:
        """Wrong results by any of the ways nccl-tests says it: #wrong, an old error column, the summary line."""
        return any(r.failed for r in self.rows) or (self.out_of_bounds or 0) > 0

    @property
    def peak_busbw(self) -> float | None:
        return max((r.busbw for r in self.rows), default=None)

    def to_json(self) -> dict:
        d = asdict(self)
        d["wrong"] = self.wrong
        d["peak_busbw"] = self.peak_busbw
        return d


# old nccl-tests' DeltaMaxValue per type name as the table prints it (integers must be exact)
ERROR_LIMITS = {"half": 1e-2, "float16": 1e-2, "bfloat16": 1e-2, "float": 1e-5, "float32": 1e-5, "double": 1e-12,
                "float64": 1e-12, **{t: 0.0 for t in ("int8", "uint8", "int", "int32", "uint32", "int64", "uint64")}}

_NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_WRONG = r"(?:\d+|N/A|" + _NUM + r")"
# current nccl-tests: size count type redop root | time algbw busbw #wrong | time algbw busbw #wrong
_ROW = re.compile(rf"^\s*(\d+)\s+(\d+)\s+(\w+)\s+(\w+)\s+(-?\d+)\s+({_NUM})\s+({_NUM})\s+({_NUM})\s+({_WRONG})"
                  rf"\s+({_NUM})\s+({_NUM})\s+({_NUM})\s+({_WRONG})\s*$")
# nccl-tests before the root column (2019-2020): size count type [redop] | time algbw busbw error | ...
_ROW_OLD = re.compile(rf"^\s*(\d+)\s+(\d+)\s+(\w+)(?:\s+([a-z]+))?\s+({_NUM})\s+({_NUM})\s+({_NUM})\s+({_WRONG})"
                      rf"\s+({_NUM})\s+({_NUM})\s+({_NUM})\s+({_WRONG})\s*$")
# "# Avg bus bandwidth : 6.6972"; nccl-tests of 2018-2020 printed these two without the "#"
_AVG = re.compile(rf"^\s*#?\s*Avg bus bandwidth\s*:\s*({_NUM})")
_OOB = re.compile(r"^\s*#?\s*Out of bounds values\s*:\s*(\d+)")
_RANK = re.compile(r"^#\s+Rank\s+\d+\s")
_SOCKET_VIA = re.compile(r"via NET/Socket")


def _wrong(text: str) -> int | None:
    return int(text) if text.isdigit() else None  # "N/A", or an old table's error magnitude (0e+00)


def _error(text: str) -> float | None:
    try:
        return float(text)  # an old table's "1e+00"
    except ValueError:
        return None  # "N/A"


def parse_perf(text: str) -> PerfRun:
    """all_reduce_perf's stdout (NCCL_DEBUG=INFO lines interleaved, as mpirun prints them)."""
    run = PerfRun()
    ib: list[str] = []
    socks: list[str] = []
    gid: list[str] = []
    warns: list[str] = []
    for raw in text.splitlines():
        line = raw.rstrip("\r")
        m = _ROW.match(line)
        if m:
            g = m.groups()
            run.rows.append(PerfRow(int(g[0]), int(g[1]), g[2], g[3], int(g[4]), float(g[5]), float(g[6]),
                                    float(g[7]), _wrong(g[8]), float(g[9]), float(g[10]), float(g[11]), _wrong(g[12])))
            continue
        m = _ROW_OLD.match(line)
        if m:
            g = m.groups()
            run.rows.append(PerfRow(int(g[0]), int(g[1]), g[2], g[3] or "", None, float(g[4]), float(g[5]), float(g[6]),
                                    _wrong(g[7]), float(g[8]), float(g[9]), float(g[10]), _wrong(g[11]),
                                    oop_error=_error(g[7]), ip_error=_error(g[11])))
            continue
        if m := _AVG.match(line):
            run.avg_busbw = float(m.group(1))
            continue
        if m := _OOB.match(line):
            run.out_of_bounds = int(m.group(1))
            continue
        if line.startswith("#"):
            if _RANK.match(line):
                run.nranks += 1
            continue
        if "NCCL" not in line:
            continue
        nl = parse_nccl_line(line)
        if nl is None:
            continue
        if nl.kind == "net_socket":
            run.socket = True
            socks += re.findall(r"\[\d+\]([\w.-]+):", nl.get("devices", ""))
        elif nl.kind == "network" and nl.get("network", "").lower() == "socket":
            run.socket = True
        elif nl.kind == "channel" and nl.get("net_kind") == "Socket":
            run.socket = True
        elif nl.kind == "net_ib":
            ib += re.findall(r"\[\d+\]([\w.-]+):\d+", nl.get("devices", ""))
        elif nl.kind == "bootstrap" and not run.bootstrap_if:
            run.bootstrap_if = nl.get("ifname", "")
        elif nl.kind == "ib_modify_qp":
            gid.append(nl.msg)
        elif _SOCKET_VIA.search(nl.msg):  # "Ring 00 : 7 -> 8 [send] via NET/Socket/0" (before "Channel")
            run.socket = True
        if nl.is_warn and len(warns) < 5:
            warns.append(nl.msg)
    run.ib_devices = tuple(dict.fromkeys(ib))
    run.socket_ifaces = tuple(dict.fromkeys(socks))
    run.gid_errors = tuple(gid[:3])
    run.warnings = tuple(warns)
    return run


# ---------------------------------------------------------------------------------------- iperf3


@dataclass(frozen=True)
class IperfResult:
    sent_bps: float
    received_bps: float
    retransmits: int | None
    streams: int
    seconds: float
    error: str = ""  # iperf3's own "error" field ("unable to connect to server: Connection refused")

    @property
    def gbps(self) -> float:
        return self.received_bps / 1e9

    def to_json(self) -> dict:
        return {**asdict(self), "gbps": round(self.gbps, 3)}


def _num(v: object) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def parse_iperf3(text: str) -> IperfResult:
    """The client's ``iperf3 -J`` document.  ValueError (one line) when it is not one."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        raise ValueError("iperf3 -J: not JSON") from None
    if not isinstance(data, dict):
        raise ValueError("iperf3 -J: not a JSON object")
    err = data.get("error") if isinstance(data.get("error"), str) else ""
    end = data.get("end") if isinstance(data.get("end"), dict) else {}
    sent = end.get("sum_sent") if isinstance(end.get("sum_sent"), dict) else {}
    recv = end.get("sum_received") if isinstance(end.get("sum_received"), dict) else {}
    start = data.get("start") if isinstance(data.get("start"), dict) else {}
    ts = start.get("test_start") if isinstance(start.get("test_start"), dict) else {}
    if not sent and not recv and not err:
        raise ValueError("iperf3 -J: no end.sum_sent/sum_received and no error")
    rx = _num(recv.get("bits_per_second")) or 0.0
    tx = _num(sent.get("bits_per_second")) or 0.0
    retr = sent.get("retransmits")
    return IperfResult(sent_bps=tx, received_bps=rx or tx,
                       retransmits=retr if isinstance(retr, int) and not isinstance(retr, bool) else None,
                       streams=int(_num(ts.get("num_streams")) or 0),
                       seconds=_num(recv.get("seconds")) or _num(sent.get("seconds")) or 0.0, error=err)


# ---------------------------------------------------------------------------------------- ping

_PING_COUNTS = re.compile(r"(\d+) packets transmitted, (\d+) (?:packets )?received")
_PING_MTU = re.compile(r"(?:mtu\s*=\s*|mtu=)(\d+)", re.I)
_PING_RTT = re.compile(r"= [\d.]+/([\d.]+)/")


@dataclass(frozen=True)
class PingResult:
    sent: int
    received: int
    too_big: bool  # "message too long" / "Frag needed": the frame did not fit the path
    path_mtu: int | None  # what the kernel or a router said the MTU is, when it said
    rtt_ms: float | None
    text: str = ""  # the last line that says what went wrong, for evidence

    @property
    def ok(self) -> bool:
        return self.received > 0 and not self.too_big

    def to_json(self) -> dict:
        return asdict(self)


def parse_ping(text: str) -> PingResult:
    """iputils ping's output (stdout and stderr together)."""
    sent = recv = 0
    if m := _PING_COUNTS.search(text):
        sent, recv = int(m.group(1)), int(m.group(2))
    low = text.lower()
    too_big = "message too long" in low or "frag needed" in low or "fragmentation needed" in low
    mtu = int(m.group(1)) if (m := _PING_MTU.search(text)) else None
    rtt = float(m.group(1)) if (m := _PING_RTT.search(text)) else None
    # the line that says why, most telling first: the MTU refusal, then no route, then the loss
    lines = [ln.strip() for ln in text.splitlines()]
    why = next((ln for words in (("too long", "frag"), ("unreachable", "error"), ("100% packet loss",))
                for ln in lines if any(w in ln.lower() for w in words)), "")
    return PingResult(sent, recv, too_big, mtu, rtt, why)


# ---------------------------------------------------------------------------------------- RDMA ports

# the lines of RDMA_PORTS_SH: "<device> <port> <state> <rate> <link_layer> <netdev|-> <gid3|->"
RDMA_PORTS_SH = (
    'for p in /sys/class/infiniband/*/ports/*; do [ -d "$p" ] || continue; '
    'd=${p%/ports/*}; d=${d##*/}; n=${p##*/}; '
    'nd=$(ls "/sys/class/infiniband/$d/device/net" 2>/dev/null | head -n1); '
    'g=$(cat "$p/gid_attrs/types/3" 2>/dev/null | tr " " _); '
    'echo "$d $n $(cut -d" " -f2 "$p/state" 2>/dev/null) $(cut -d" " -f1 "$p/rate" 2>/dev/null) '
    '$(cat "$p/link_layer" 2>/dev/null) ${nd:--} ${g:--}"; done'
)


@dataclass(frozen=True)
class RdmaPort:
    device: str
    port: int
    state: str  # ACTIVE / DOWN / INIT ...
    rate_gbps: float | None
    link_layer: str  # Ethernet (RoCE) / InfiniBand
    netdev: str
    gid3_type: str  # the type of GID index 3 ("RoCE_v2"), "" when absent

    @property
    def up(self) -> bool:
        return self.state.upper() == "ACTIVE"


def parse_rdma_ports(text: str) -> list[RdmaPort]:
    out = []
    for line in text.splitlines():
        f = line.split()
        if len(f) != 7 or not f[1].isdigit():
            continue
        try:
            rate = float(f[3])
        except ValueError:
            rate = None
        out.append(RdmaPort(f[0], int(f[1]), f[2].upper(), rate, f[4], "" if f[5] == "-" else f[5],
                            "" if f[6] == "-" else f[6].replace("_", " ")))
    return out
