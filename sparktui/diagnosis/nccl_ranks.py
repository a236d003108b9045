"""The NCCL view of each rank, and which rank is behind.

``RankTracker`` (one per log source) consumes parsed NCCL lines (``nccl_lines.parse_nccl_line``),
torch watchdog lines and NCCL proxy ``ACTIVE OPS`` dumps, and keeps: version, bootstrap interface,
per communicator Init START/COMPLETE, transport per channel, rings connected, the last NCCL line,
the highest collective opCount (SUBSYS=COLL), watchdog SeqNum / last enqueued / last completed.

``compare_ranks(trackers)`` looks across sources (files or nodes) and names the rank that is
behind, with the reason and evidence: a rank still in init while its peers completed; a rank whose
last enqueued work is below the SeqNum the watchdog fired on; a lower opCount; a rank with no
active collective while its peers wait inside one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .collectives import CollOp, Mismatch, mismatches
from .nccl_lines import NcclLine, WatchdogLine

# how far ahead (in SeqNums) a rank of one process group can get while a peer is stuck: torch
# enqueues a few collectives asynchronously before the ahead rank blocks too
MAX_SEQ_DRIFT = 64
_ACTIVE_OP = re.compile(r"\[(\d+)-(\d+)\|(\d+)\|\s*(Coll|Send|Recv)\s*(\d+)\s*([IGSRFD]?)\s*/\s*(\d+)\]")


@dataclass
class CommState:
    comm: str
    rank: int
    nranks: int
    comm_id: str | None = None
    func: str = ""
    init_start: int | None = None  # line numbers
    init_complete: int | None = None
    destroyed: int | None = None
    channels: dict[str, str] = field(default_factory=dict)  # "00/0 send" -> "NET/Socket/0"
    rings_connected: int | None = None
    gdr: str | None = None
    max_op_count: int | None = None


@dataclass(eq=False)
class RankTracker:
    source: str
    node: str = ""
    host: str | None = None
    pids: set[int] = field(default_factory=set)
    version: str | None = None
    cuda: str | None = None
    network: str | None = None  # "Socket" / "IB" from "Using network X"
    # the network plugin the process loaded (its path's file or its name), "internal" when it found none
    net_plugin: str | None = None
    bootstrap: tuple[str, str] | None = None  # (ifname, address)
    ib_devices: str | None = None
    comms: dict[str, CommState] = field(default_factory=dict)
    last_comm: str | None = None
    last_line: tuple[int, str] | None = None  # the last NCCL line seen
    warns: int = 0
    first_warn: tuple[int, str] | None = None
    wd_seq: int | None = None  # SeqNum the watchdog fired on (this rank)
    wd_op: str | None = None
    wd_line: tuple[int, str] | None = None
    last_enqueued: int | None = None
    last_completed: int | None = None
    enq_line: tuple[int, str] | None = None
    active_ops: int | None = None  # pending proxy ops in the latest ACTIVE OPS dump (0 = none)
    active_op_count: int | None = None
    active_line: tuple[int, str] | None = None
    torch_rank: int | None = None
    ops: list[CollOp] = field(default_factory=list)  # the collectives this rank's lines name (WorkNCCL(...))

    # ------------------------------------------------------------------ feeding
    def feed(self, p: NcclLine, lineno: int, text: str) -> None:
        self.host = self.host or p.host
        self.pids.add(p.pid)
        self.last_line = (lineno, text)
        k, d = p.kind, p.data
        if p.level == "WARN":
            self.warns += 1
            if self.first_warn is None:
                self.first_warn = (lineno, text)
        if k == "comm":
            key = d["comm"]
            st = self.comms.get(key)
            if st is None:
                st = self.comms[key] = CommState(key, int(d["rank"]), int(d["nranks"]))
            if d.get("comm_id"):
                st.comm_id = d["comm_id"]
            if d.get("func"):
                st.func = d["func"]
            if d["what"] == "Init":
                if d["phase"] == "START":
                    st.init_start = st.init_start or lineno
                else:
                    st.init_complete = lineno
                self.last_comm = key
            elif d["phase"] == "COMPLETE":
                st.destroyed = lineno
        elif k == "channel":
            st = self._current()
            if st is not None:
                st.channels[f"{d['channel']}/{d.get('sub', '0')} {d.get('direction', '')}".strip()] = d["via"]
        elif k == "rings":
            st = self._current()
            if st is not None:
                st.rings_connected = lineno
                st.gdr = d.get("gdr")
        elif k == "version":
            self.version, self.cuda = d.get("version"), d.get("cuda")
        elif k == "network":
            self.network = d["network"]
        elif k == "net_plugin_internal":
            self.net_plugin = "internal"
        elif k == "net_plugin_loaded":
            self.net_plugin = (d.get("path") or d.get("ext") or "").rsplit("/", 1)[-1] or d.get("name", "")
        elif k == "bootstrap":
            self.bootstrap = (d["ifname"], d["address"])
        elif k == "net_ib":
            self.ib_devices = d["devices"].strip()
        elif k == "coll":
            st = self.comms.get(d["comm"]) or self._current()
            if st is not None:
                n = int(d["op_count"], 16)
                st.max_op_count = n if st.max_op_count is None else max(st.max_op_count, n)

    def _current(self) -> CommState | None:
        return self.comms.get(self.last_comm) if self.last_comm else None

    def feed_watchdog(self, w: WatchdogLine, lineno: int, text: str) -> None:
        if w.rank is not None:
            self.torch_rank = w.rank
        rank = w.rank if w.rank is not None else self.rank
        if w.op and w.seq is not None and rank is not None and len(self.ops) < 1000:
            # torch repeats a work item's line (caught, then "terminated with exception: …"), once with
            # its PG prefix: one op per rank and SeqNum, the PG filled in from whichever line names it.
            # One file can hold several ranks' lines ([rank3]: and [rank7]: interleaved): keyed by rank
            same = next((i for i, o in enumerate(self.ops)
                         if o.seq == w.seq and o.rank == rank and (not o.pg or not w.pg or o.pg == w.pg)), None)
            if same is None:
                self.ops.append(CollOp(rank=rank, seq=w.seq, op=w.op, numel_in=w.numel_in, numel_out=w.numel_out,
                                       pg=w.pg or "", source=self.source, line=lineno, text=text.strip()[:300]))
            elif w.pg and not self.ops[same].pg:
                from dataclasses import replace

                self.ops[same] = replace(self.ops[same], pg=w.pg)
        if w.kind == "timeout" and self.wd_seq is None:
            self.wd_seq, self.wd_op, self.wd_line = w.seq, w.op, (lineno, text)
        if w.last_enqueued is not None:
            self.last_enqueued, self.last_completed = w.last_enqueued, w.last_completed
            self.enq_line = (lineno, text)

    def feed_active_ops(self, first_line: str, lineno: int) -> None:
        """An ``ACTIVE OPS`` dump started; ``first_line`` is the line after the header."""
        m = _ACTIVE_OP.search(first_line)
        if m and m.group(4) == "Coll":
            self.active_ops = 1
            self.active_op_count = int(m.group(3))
        elif first_line.strip() == "[X]":
            self.active_ops = 0
            self.active_op_count = None
        else:
            return
        self.active_line = (lineno, first_line.strip())

    # ------------------------------------------------------------------ views
    @property
    def rank(self) -> int | None:
        for st in self.comms.values():
            return st.rank
        return self.torch_rank

    @property
    def transport(self) -> str | None:
        kinds = []
        for st in self.comms.values():
            for via in st.channels.values():
                kind = via.split("/")[0] if not via.startswith("NET/") else "/".join(via.split("/")[:2])
                if kind not in kinds:
                    kinds.append(kind)
        if kinds:
            return "+".join(kinds)
        if self.network:
            return f"NET/{self.network}"
        return None

    def open_inits(self) -> list[CommState]:
        return [st for st in self.comms.values() if st.init_start and not st.init_complete]

    @property
    def seen(self) -> bool:
        return self.last_line is not None or self.wd_line is not None or self.active_line is not None

    def to_json(self) -> dict:
        return {
            "source": self.source,
            "node": self.node,
            "rank": self.rank,
            "host": self.host,
            "pid": min(self.pids) if self.pids else None,
            "version": self.version,
            "transport": self.transport,
            "bootstrap": ":".join(self.bootstrap) if self.bootstrap else None,
            "ib_devices": self.ib_devices,
            "comms": [
                {
                    "comm": st.comm,
                    "comm_id": st.comm_id,
                    "rank": st.rank,
                    "nranks": st.nranks,
                    "init": "COMPLETE" if st.init_complete else ("START" if st.init_start else None),
                    "rings_connected": st.rings_connected is not None,
                    "channels": dict(sorted(st.channels.items())),
                    "max_op_count": st.max_op_count,
                }
                for st in self.comms.values()
            ],
            "watchdog_seq": self.wd_seq,
            "last_enqueued": self.last_enqueued,
            "last_completed": self.last_completed,
            "active_ops": self.active_ops,
            "warns": self.warns,
            "last_nccl_line": self.last_line[1] if self.last_line else None,
            "last_nccl_line_no": self.last_line[0] if self.last_line else None,
        }


@dataclass(frozen=True)
class Behind:
    rank: int | None
    source: str
    reason: str
    line: int | None
    evidence: tuple[str, ...]
    kind: str  # init | watchdog | opcount | active_ops

    def to_json(self) -> dict:
        return {"rank": self.rank, "source": self.source, "reason": self.reason, "line": self.line}


def _ev(src: str, item: tuple[int, str] | None) -> list[str]:
    return [f"{src}:{item[0]}: {item[1]}"] if item else []


def compare_ranks(trackers: list[RankTracker]) -> list[Behind]:
    """Which rank is behind, across the given sources (empty when it cannot be told)."""
    ts = [t for t in trackers if t.seen]
    if len(ts) < 2:
        # one file may still hold several ranks' watchdogs (a timeout fired: otherwise ranks in motion)
        return _seq_behind(ts, []) if any(t.wd_seq is not None for t in ts) else []
    out: list[Behind] = []
    # 1. init: some ranks completed a communicator, another started it and never completed
    done = [t for t in ts if any(st.init_complete for st in t.comms.values())]
    for t in ts:
        if t.open_inits() and done:
            st = t.open_inits()[0]
            out.append(Behind(
                t.rank, t.source,
                f"rank {st.rank} started NCCL init of comm {st.comm_id or st.comm} and never completed it; "
                f"{len(done)} other rank(s) completed",
                st.init_start, tuple(_ev(t.source, t.last_line)), "init",
            ))
    # 2. watchdog: a rank timed out on SeqNum N; a peer whose last enqueued work < N never got there
    # a rank that issued a different collective at the same SeqNum is not behind: the mismatch is the story
    fired = [t for t in ts if t.wd_seq is not None] if not collective_mismatches(ts) else []
    for f in fired:
        for t in ts:
            if t is f or t.last_enqueued is None or t.last_enqueued >= f.wd_seq:
                continue
            if any(b.source == t.source for b in out):
                continue
            out.append(Behind(
                t.rank, t.source,
                f"rank {t.rank} never reached SeqNum {f.wd_seq} ({f.wd_op}): its last enqueued work is "
                f"{t.last_enqueued}, last completed {t.last_completed}; rank {f.rank} timed out waiting in it",
                t.enq_line[0] if t.enq_line else None,
                tuple(_ev(f.source, f.wd_line) + _ev(t.source, t.enq_line)), "watchdog",
            ))
    # 2b. watchdogs fired on different SeqNums (no PG status line to say more): the lowest is behind
    if fired:
        top = max(fired, key=lambda t: t.wd_seq)
        for t in fired:
            if t.wd_seq < top.wd_seq and not any(b.source == t.source for b in out):
                out.append(Behind(
                    t.rank, t.source,
                    f"rank {t.rank}'s watchdog fired on SeqNum {t.wd_seq} ({t.wd_op}) while rank {top.rank} had "
                    f"reached SeqNum {top.wd_seq} ({top.wd_op})",
                    t.wd_line[0] if t.wd_line else None, tuple(_ev(t.source, t.wd_line) + _ev(top.source, top.wd_line)),
                    "watchdog",
                ))
    if fired:
        out.extend(_seq_behind(ts, out))
    # 3. ACTIVE OPS: peers wait inside a collective, this rank has none in flight
    waiting = [t for t in ts if t.active_ops]
    for t in ts:
        if t.active_ops == 0 and waiting and not any(b.source == t.source for b in out):
            w = waiting[0]
            out.append(Behind(
                t.rank, t.source,
                f"rank {t.rank} stopped issuing collectives: no active NCCL op in its proxy dump while "
                f"rank {w.rank} waits in collective opCount {w.active_op_count}",
                t.active_line[0] if t.active_line else None,
                tuple(_ev(w.source, w.active_line) + _ev(t.source, t.active_line)), "active_ops",
            ))
    # 4. COLL opCount: the lowest count is behind (only when counts differ)
    counts = {}
    for t in ts:
        c = [st.max_op_count for st in t.comms.values() if st.max_op_count is not None]
        if c:
            counts[t.source] = (max(c), t)
    if len(counts) >= 2:
        lo = min(counts.values(), key=lambda x: x[0])
        hi = max(counts.values(), key=lambda x: x[0])
        if lo[0] < hi[0] and not any(b.source == lo[1].source for b in out):
            t = lo[1]
            out.append(Behind(
                t.rank, t.source,
                f"rank {t.rank} issued collectives up to opCount {lo[0]:#x}, rank {hi[1].rank} up to {hi[0]:#x}",
                t.last_line[0] if t.last_line else None, tuple(_ev(t.source, t.last_line)), "opcount",
            ))
    return out


def _seq_behind(ts: list[RankTracker], known: list[Behind]) -> list[Behind]:
    """Watchdog SeqNums compared per rank, from the ops the watchdog lines name: one file may hold
    several ranks' lines ("[rank0]:" and "[rank3]:" interleaved), so ranks are told apart by their
    own numbers.  The ranks below the highest SeqNum of the group are behind (a desync, even without
    a Flight Recorder dump)."""
    ops = [o for t in ts for o in t.ops]
    if not ops or mismatches(ops):
        return []  # a split at one SeqNum is the story (collective_mismatches)
    out: list[Behind] = []
    for o in _behind_by_seq(ops):
        if any(b.rank == o.rank and (b.source == o.source or b.kind == "watchdog") for b in known + out):
            continue
        top = max((x for x in ops if not o.pg or x.pg in ("", o.pg)), key=lambda x: x.seq)
        out.append(Behind(
            o.rank, o.source,
            f"rank {o.rank}'s watchdog fired on SeqNum {o.seq} ({o.op}) while rank {top.rank} had reached "
            f"SeqNum {top.seq} ({top.op}): the ranks are out of step",
            o.line, (f"{o.source}:{o.line}: {o.text}", f"{top.source}:{top.line}: {top.text}"), "watchdog",
        ))
    return out


def _behind_by_seq(ops: list[CollOp]) -> list[CollOp]:
    """Each rank's last op where the ranks' last SeqNums of one process group differ: the ranks
    below the highest (lowest first).  Lines without a process group join the only one named; with
    several named, only ops that name theirs are compared (SeqNums count per group)."""
    named = {o.pg for o in ops if o.pg}
    groups = {pg: [o for o in ops if o.pg == pg] for pg in named} if len(named) > 1 else {"": ops}
    out: list[CollOp] = []
    for group in groups.values():
        last: dict[int, CollOp] = {}
        seqs: dict[int, set[int]] = {}
        for o in group:
            seqs.setdefault(o.rank, set()).add(o.seq)
            if o.rank not in last or o.seq > last[o.rank].seq:
                last[o.rank] = o
        # a rank timing out on several SeqNums is in several groups the lines do not tell apart
        if len(last) < 2 or any(len(v) > 1 for v in seqs.values()):
            continue
        hi = max(o.seq for o in last.values())
        # ranks of one group cannot drift far apart (the ahead one blocks in its next collectives):
        # a wide gap means different groups, not a desync
        out.extend(sorted((o for o in last.values() if hi - MAX_SEQ_DRIFT <= o.seq < hi), key=lambda o: o.seq))
    return out


def collective_mismatches(trackers: list[RankTracker]) -> list[Mismatch]:
    """Ranks whose logs name different collectives (op type, element count) at one SeqNum."""
    return mismatches([o for t in trackers for o in t.ops])


def versions_differ(trackers: list[RankTracker]) -> dict[str, str] | None:
    vs = {_who(t): t.version for t in trackers if t.version}
    return vs if len(set(vs.values())) > 1 else None


def plugins_differ(trackers: list[RankTracker]) -> list[str] | None:
    """Evidence lines when the processes loaded different NCCL network plugins, or some one and some
    none (HPC-X's plugin on part of the nodes): their transports need not meet, and the job hangs or
    fails only between those nodes."""
    seen = [t for t in trackers if t.net_plugin]
    loaded = [t.net_plugin for t in seen if t.net_plugin != "internal"]
    # a plugin is named by its file ("Plugin Path : ...") or by the name it reports ("Loaded net plugin
    # NCCL RDMA Plugin (v6)"): one process may print either, so only like is compared with like
    files = {p for p in loaded if p.endswith(".so") or ".so." in p}
    names = set(loaded) - files
    if not ((loaded and len(loaded) < len(seen)) or len(files) > 1 or len(names) > 1):
        return None
    return [f"{_who(t)}: " + ("no network plugin (NCCL's internal transports)" if t.net_plugin == "internal"
                              else f"network plugin {t.net_plugin}") for t in seen]


def _who(t: RankTracker) -> str:
    """A process in evidence: its source, and its host and pid where NCCL printed them."""
    return f"{t.source} ({t.host}:{min(t.pids)})" if t.pids else t.source


def bootstrap_subnets_differ(trackers: list[RankTracker]) -> list[str] | None:
    """Evidence lines when the ranks' NCCL bootstrap addresses are not on one IPv4 /24 (R2: a rank
    bootstrapping over the management port or Wi-Fi while its peer uses the fabric)."""
    seen = [(t, t.bootstrap) for t in trackers if t.bootstrap]
    nets = set()
    for _, (_, addr) in seen:
        parts = addr.split(".")
        if len(parts) != 4 or not all(p.isdigit() for p in parts):
            return None  # IPv6 or a name: not judged here
        nets.add(".".join(parts[:3]))
    if len(nets) < 2:
        return None
    # one interface name everywhere inside one /16: a cluster fabric wider than a /24 (each rack or
    # pod its own /24), not a rank on another network
    if len({ifn for _, (ifn, _) in seen}) == 1 and len({".".join(n.split(".")[:2]) for n in nets}) == 1:
        return None
    return [f"rank {t.rank} ({t.source}): bootstrap on {ifn}:{addr}" for t, (ifn, addr) in seen]


def one_host(trackers: list[RankTracker]) -> str | None:
    """The host name when the input shows a single-machine job: every NCCL process sits on one host
    and none of their communicators has more ranks than those processes (or, with no rank count
    printed, at least two local processes are there).  A one-process log of a multi-node job shows
    one host too, so one process alone is not enough without its communicator's size."""
    seen = [t for t in trackers if t.host]
    hosts = {t.host for t in seen}
    if len(hosts) != 1:
        return None
    procs = {(t.source, p) for t in seen for p in t.pids}
    sizes = [c.nranks for t in seen for c in t.comms.values() if c.nranks]
    if sizes:
        return next(iter(hosts)) if max(sizes) <= len(procs) else None
    return next(iter(hosts)) if len(procs) >= 2 else None


def absent_ranks(trackers: list[RankTracker]) -> tuple[RankTracker, CommState, list[int]] | None:
    """A communicator that no rank in these logs completed, and ranks of it (0..nranks-1, the world
    size every member prints) that no log shows starting it: the ranks the others wait for.
    (a waiting rank's tracker, its state, the absent ranks), or None."""
    groups: dict[str, list[tuple[RankTracker, CommState]]] = {}
    for t in trackers:
        for st in t.comms.values():
            if st.nranks >= 2 and st.init_start is not None:
                groups.setdefault(st.comm_id or f"nranks={st.nranks}", []).append((t, st))
    for members in groups.values():
        n = members[0][1].nranks
        if any(st.init_complete or st.nranks != n for _, st in members):
            continue  # it completed somewhere (a rank behind, not absent), or not one communicator
        absent = sorted(set(range(n)) - {st.rank for _, st in members})
        if absent:
            t, st = min(members, key=lambda m: m[1].rank)
            return t, st, absent
    return None
