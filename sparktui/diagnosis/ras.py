"""NCCL RAS answers (port 28028) as data: JSON (NCCL >= 2.28.7) and the older text form.

Pure parsing, no IO.  The input is exactly what the wire returned, protocol header lines
(``SERVER PROTOCOL 2``, ``OK``) included, as in fixtures/nccl-2gpu/*.ras.{json,txt}.

Two quirks handled on purpose:
- NCCL 2.28.9 writes ``missing_ranks`` entries without the comma between objects
  (``} {``); the JSON is repaired before decoding (Ray's callback does the same).
- A MISMATCH under traffic is normal; only counts frozen across two polls mean stuck
  (``compare`` says which).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

INIT_STATE_OK = 0


@dataclass(frozen=True)
class RasRank:
    rank: int
    host: str = ""
    pid: int | None = None
    cuda_dev: int | None = None
    nvml_dev: int | None = None
    init_state: int | None = None  # 0 ok, 7 in progress
    async_error: int | None = None
    finalize_called: bool = False
    destroy_flag: bool = False
    abort_flag: bool = False
    counts: tuple[tuple[str, int], ...] = ()  # (collective, count)
    # missing-rank only
    unresponsive: bool = False
    considered_dead: bool = False

    def count(self, op: str) -> int:
        return dict(self.counts).get(op, 0)

    @property
    def total(self) -> int:
        return sum(c for _, c in self.counts)


@dataclass(frozen=True)
class RasComm:
    hash: str
    size: int
    ranks: tuple[RasRank, ...] = ()
    missing: tuple[RasRank, ...] = ()
    status: str = ""  # text form: RUNNING / INIT / ...
    errors: str = ""  # text form: OK / MISMATCH / ...


@dataclass(frozen=True)
class RasStatus:
    ok: bool  # an answer was parsed
    format: str = ""  # json / text
    nccl_version: str = ""
    comms: tuple[RasComm, ...] = ()
    timeouts: int = 0
    error: str = ""  # why there is no answer (connect refused, ...)
    messages: tuple[str, ...] = ()  # text-form warning/error lines, verbatim
    raw: str = field(default="", repr=False)

    @property
    def dead_ranks(self) -> list[RasRank]:
        return [m for c in self.comms for m in c.missing if m.considered_dead or m.unresponsive]


_MISSING_COMMA = re.compile(r"}(\s*){")


def _repair_json(text: str) -> str:
    # 2.28.9: objects inside arrays written back to back; inserting the comma is safe because
    # a '}' followed by '{' is never valid JSON otherwise.
    return _MISSING_COMMA.sub(r"},\1{", text)


def _body(raw: str) -> str:
    """Drop the protocol preamble (SERVER PROTOCOL n / OK lines) and trailing notes."""
    lines = raw.splitlines()
    i = 0
    while i < len(lines) and (lines[i].startswith("SERVER PROTOCOL") or lines[i].strip() == "OK" or not lines[i].strip()):
        i += 1
    return "\n".join(l for l in lines[i:] if not l.startswith("### "))


def _int(v) -> int | None:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v and abs(v) < 1 << 62 else None


def _dict(v) -> dict:
    return v if isinstance(v, dict) else {}


def _list(v) -> list:
    return v if isinstance(v, list) else []


def _rank_from_json(d: dict, missing: bool = False) -> RasRank | None:
    # answers come off the wire (or out of a bundle someone handed over): a field of the wrong type
    # is treated as absent, an entry without a numeric rank is skipped
    rank = _int(d.get("rank", -1))
    if rank is None:
        return None
    st = _dict(d.get("status"))
    counts = _dict(d.get("collective_counts"))
    return RasRank(
        rank=rank, host=str(d.get("host", ""))[:200], pid=_int(d.get("pid")),
        cuda_dev=_int(d.get("cuda_dev")), nvml_dev=_int(d.get("nvml_dev")),
        init_state=_int(st.get("init_state")), async_error=_int(st.get("async_error")),
        finalize_called=bool(st.get("finalize_called")), destroy_flag=bool(st.get("destroy_flag")),
        abort_flag=bool(st.get("abort_flag")),
        counts=tuple((str(k), _int(v)) for k, v in counts.items() if _int(v) is not None),
        unresponsive=missing and bool(st.get("unresponsive")),
        considered_dead=missing and bool(st.get("considered_dead")),
    )


def parse_json(raw: str) -> RasStatus:
    body = _body(raw)
    start = body.find("{")
    if start < 0:
        return RasStatus(ok=False, format="json", error=_first_line(body) or _note(raw) or "empty answer", raw=raw)
    text = body[start:]
    try:
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            data = json.loads(_repair_json(text))
    except json.JSONDecodeError as exc:
        return RasStatus(ok=False, format="json", error=f"unreadable RAS JSON: {exc.msg} at line {exc.lineno}", raw=raw)
    except RecursionError:
        return RasStatus(ok=False, format="json", error="unreadable RAS JSON: nested too deeply", raw=raw)
    if not isinstance(data, dict):
        return RasStatus(ok=False, format="json", error="unreadable RAS JSON: not an object", raw=raw)
    comms = []
    for c in _list(data.get("communicators")):
        if not isinstance(c, dict):
            continue
        ranks = (_rank_from_json(r) for r in _list(c.get("ranks")) if isinstance(r, dict))
        missing = (_rank_from_json(r, missing=True) for r in _list(c.get("missing_ranks")) if isinstance(r, dict))
        comms.append(RasComm(
            hash=str(c.get("hash", ""))[:200], size=_int(c.get("size")) or 0,
            ranks=tuple(r for r in ranks if r is not None), missing=tuple(r for r in missing if r is not None),
        ))
    return RasStatus(ok=True, format="json", nccl_version=str(data.get("nccl_version", ""))[:200], comms=tuple(comms),
                     timeouts=_int(_dict(data.get("ras")).get("timeouts_count")) or 0, raw=raw)


_TXT_VERSION = re.compile(r"^NCCL version (\S+)")
_TXT_GROUP = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(NOCOMM|INIT|RUNNING|FINALIZE|ABORT)\s+(\w+)\s*$")
_TXT_COMM = re.compile(r"^#(\d+)-(\d+) \(([0-9a-f]+)\) (\w+)")
_TXT_LAUNCHED = re.compile(r"Rank (\d+) has launched up to operation (\d+) -- GPU (\d+) managed by process (\d+) on node (\S+)")
_TXT_OPS = re.compile(r"Communicator ranks have different (\w+) operation counts")
_TXT_TIMEOUTS = re.compile(r"Encountered (\d+) communication timeouts?")
_TXT_DEAD = re.compile(r"considered dead|unreachable via the RAS network")
_TXT_MISSING = re.compile(r"The missing ranks?: ([\d, ]+)")


def parse_text(raw: str) -> RasStatus:
    """The human form (``VERBOSE STATUS`` without ``SET FORMAT json``; NCCL < 2.28.7)."""
    body = _body(raw)
    if "Job summary" not in body and "Communicators" not in body:
        return RasStatus(ok=False, format="text", error=_first_line(body) or _note(raw) or "empty answer", raw=raw)
    version = ""
    groups: list[tuple[str, str]] = []
    comms: list[RasComm] = []
    messages: list[str] = []
    timeouts = 0
    current: dict | None = None

    def close() -> None:
        if current is not None:
            # one rank may be listed under several "different X operation counts" blocks: one entry each,
            # its counts per op
            per: dict[int, tuple[int, int, str, dict[str, int]]] = {}
            for r, n, g, p, h, op in current["ranks"]:
                entry = per.setdefault(r, (g, p, h, {}))
                if op:
                    entry[3][op] = n
            ranks = tuple(RasRank(rank=r, host=h, pid=p, cuda_dev=g, counts=tuple(c.items()))
                          for r, (g, p, h, c) in sorted(per.items()))
            missing = tuple(RasRank(rank=r, considered_dead=current["dead"], unresponsive=True) for r in current["missing"])
            comms.append(RasComm(hash="0x" + current["hash"], size=len(ranks) + len(missing), ranks=ranks,
                                 missing=missing, status=current.get("status", ""), errors=current["errors"]))

    for line in body.splitlines():
        if m := _TXT_VERSION.match(line):
            version = m.group(1)
        elif m := _TXT_GROUP.match(line):
            groups.append((m.group(7), m.group(8)))
        elif m := _TXT_COMM.match(line):
            close()
            current = {"hash": m.group(3), "errors": m.group(4), "op": "", "ranks": [], "missing": [], "dead": False}
            if groups:
                current["status"] = groups[min(int(m.group(1)), len(groups) - 1)][0]
        elif current is not None and (m := _TXT_OPS.search(line)):
            current["op"] = m.group(1)
            messages.append(line.strip())
        elif current is not None and (m := _TXT_LAUNCHED.search(line)):
            current["ranks"].append((int(m.group(1)), int(m.group(2)), int(m.group(3)), int(m.group(4)), m.group(5),
                                     current["op"]))
            messages.append(line.strip())
        elif current is not None and (m := _TXT_MISSING.search(line)):
            current["missing"].extend(int(x) for x in re.findall(r"\d+", m.group(1)))
            messages.append(line.strip())
        elif m := _TXT_TIMEOUTS.search(line):
            timeouts = int(m.group(1))
            messages.append(line.strip())
        elif _TXT_DEAD.search(line):
            if current is not None:
                current["dead"] = True
            messages.append(line.strip())
    close()
    if not comms and groups:
        # healthy answers list groups but no per-communicator detail
        comms = [RasComm(hash="", size=0, status=s, errors=e) for s, e in groups]
    return RasStatus(ok=True, format="text", nccl_version=version, comms=tuple(comms), timeouts=timeouts,
                     messages=tuple(messages), raw=raw)


def parse(raw: str) -> RasStatus:
    """JSON or text, whichever the answer is."""
    body = _body(raw)
    if body.lstrip().startswith("{"):
        return parse_json(raw)
    return parse_text(raw)


def _note(raw: str) -> str:
    for line in raw.splitlines():
        if line.startswith("### "):
            return line[4:].strip()[:200]
    return ""


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:200]
    return ""


# --------------------------------------------------------------------------- comparing two polls


@dataclass(frozen=True)
class RasComparison:
    """What two RAS polls, taken apart in time, say about one communicator."""

    comm: str
    advanced: bool  # some count of some rank moved
    frozen: bool  # nothing moved on any rank
    skew: bool  # ranks disagree on some collective's count
    lagging: tuple[int, ...] = ()  # ranks behind the leader (on the skewed op)
    op: str = ""  # the collective whose counts differ
    counts: tuple[tuple[int, int], ...] = ()  # (rank, count) for ``op`` at the second poll
    pids: tuple[tuple[int, int], ...] = ()  # (rank, pid)
    hosts: tuple[tuple[int, str], ...] = ()
    split: "OpSplit | None" = None  # ranks ahead on different ops: an op-type mismatch, not a lagging rank


def compare(first: RasStatus, second: RasStatus) -> list[RasComparison]:
    """Per communicator present in both polls (or only in ``second``)."""
    out: list[RasComparison] = []
    before = {c.hash: c for c in first.comms if c.hash}
    for comm in second.comms:
        if not comm.ranks:
            continue
        old = before.get(comm.hash)
        old_counts = {r.rank: dict(r.counts) for r in old.ranks} if old else {}
        advanced = False
        for r in comm.ranks:
            prev = old_counts.get(r.rank)
            if prev is None or any(prev.get(k, 0) != v for k, v in r.counts):
                advanced = True
        frozen = old is not None and not advanced
        op, skew, lag, counts = skew_of(comm)
        out.append(RasComparison(comm=comm.hash, advanced=advanced, frozen=frozen, skew=skew, lagging=lag, op=op,
                                 counts=counts, pids=tuple((r.rank, r.pid or 0) for r in comm.ranks),
                                 hosts=tuple((r.rank, r.host) for r in comm.ranks), split=op_split(comm)))
    return out


def skew_of(comm: RasComm) -> tuple[str, bool, tuple[int, ...], tuple[tuple[int, int], ...]]:
    """The collective on which ranks disagree most, whether they do, and who is behind."""
    ops = sorted({k for r in comm.ranks for k, _ in r.counts})
    best = ("", False, (), ())
    best_gap = 0
    for op in ops:
        vals = [(r.rank, r.count(op)) for r in comm.ranks]
        hi = max(v for _, v in vals)
        lo = min(v for _, v in vals)
        if hi - lo > best_gap:
            best_gap = hi - lo
            best = (op, True, tuple(r for r, v in vals if v < hi), tuple(vals))
    if not best[0] and ops:
        op = max(ops, key=lambda o: sum(r.count(o) for r in comm.ranks))
        best = (op, False, (), tuple((r.rank, r.count(op)) for r in comm.ranks))
    return best


@dataclass(frozen=True)
class OpSplit:
    """Two ranks each ahead on a different collective type: at some collective they issued different
    ops (rank ``a`` ran ``op_a`` where rank ``b`` ran ``op_b``).

    RAS counts say how many of each op a rank launched, not in which order, so the split is placed
    as far as the counts allow: the ops both ranks agree on number ``common`` (the sum over ops of the
    smaller count), and the ranks diverged at or before collective ``common + 1`` (exactly there when
    the ranks hung on the mismatched pair itself)."""

    a: int
    op_a: str
    counts_a: tuple[int, int]  # op_a: (rank a's count, rank b's count)
    b: int
    op_b: str
    counts_b: tuple[int, int]  # op_b: (rank b's count, rank a's count)
    totals: tuple[int, int]  # all collectives launched by a, by b
    common: int

    @property
    def at_most(self) -> int:
        return self.common + 1

    def describe(self) -> str:
        return (f"rank {self.a} launched {self.op_a} {self.counts_a[0]} vs {self.counts_a[1]}, rank {self.b} launched "
                f"{self.op_b} {self.counts_b[0]} vs {self.counts_b[1]} (totals {self.totals[0]} and {self.totals[1]})")


def op_split(comm: RasComm) -> OpSplit | None:
    """Compare per-op counts in both directions; the first pair of ranks where each is ahead on a
    different op (an op-type mismatch), else None (plain skew: one rank behind)."""
    ranks = sorted(comm.ranks, key=lambda r: r.rank)
    for i, ra in enumerate(ranks):
        ca = dict(ra.counts)
        for rb in ranks[i + 1:]:
            cb = dict(rb.counts)
            ops = sorted(set(ca) | set(cb))
            a_ahead = [(ca.get(o, 0) - cb.get(o, 0), o) for o in ops if ca.get(o, 0) > cb.get(o, 0)]
            b_ahead = [(cb.get(o, 0) - ca.get(o, 0), o) for o in ops if cb.get(o, 0) > ca.get(o, 0)]
            if not a_ahead or not b_ahead:
                continue
            op_a = max(a_ahead)[1]
            op_b = max(b_ahead)[1]
            common = sum(min(ca.get(o, 0), cb.get(o, 0)) for o in ops)
            return OpSplit(a=ra.rank, op_a=op_a, counts_a=(ca.get(op_a, 0), cb.get(op_a, 0)), b=rb.rank, op_b=op_b,
                           counts_b=(cb.get(op_b, 0), ca.get(op_b, 0)), totals=(sum(ca.values()), sum(cb.values())),
                           common=common)
    return None
