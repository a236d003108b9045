"""Cross-rank comparison of the collectives each rank issued, by sequence number.  Pure.

The inputs are what a rank says about its own collectives: torch's ``WorkNCCL(SeqNum=…, OpType=…,
NumelIn=…, NumelOut=…)`` (watchdog and error lines) and Flight Recorder entries
(``collective_seq_id``, ``profiling_name``, ``input_sizes``/``output_sizes``, ``process_group``).
As PyTorch's Flight Recorder analyser does, the same sequence number in the same process group with a
different op type, element count or dtype on two ranks is a collective mismatch (the ranks split
there); otherwise the rank whose last sequence number is lower is behind.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# "WorkNCCL(" … ")" with its "Key=Value" fields; keys may carry a unit: "Timeout(ms)=600000"
# (values hold no "=" and fields are split by ", ": one way to read a line, no backtracking blow-up)
_ITEM = r"\w+(?:\(\w+\))?=[^,()\s=]*"
_WORK = re.compile(rf"\bWork\w*\(({_ITEM}(?:, {_ITEM}){{1,15}})\)")
_FIELD = re.compile(r"(\w+)(?:\((\w+)\))?=([^,()\s=]*)")
_RANK = re.compile(r"\bRank (\d+)\]|\[rank(\d+)\]:")
_PG = re.compile(r"\[PG ID (\d+) PG GUID ([^\s\]]*)")

# ops whose per-rank sizes legitimately differ (uneven all_to_all, root-only gather/scatter, p2p)
_SIZE_FREE = ("alltoall", "gather", "scatter", "send", "recv")


def norm_op(name: str) -> str:
    """One spelling per collective: "nccl:all_reduce", "ALLREDUCE", "AllReduce" -> "allreduce";
    "_all_gather_base", "all_gather_into_tensor", "_ALLGATHER_BASE" -> "allgather"."""
    s = name.rsplit(":", 1)[-1].strip().lower().strip("_")
    for suffix in ("_into_tensor", "_tensor", "_base"):
        s = s.removesuffix(suffix)
    return s.replace("_", "")


def _sizes_matter(op: str) -> bool:
    # "allgather"/"reducescatter" must match on every rank; "gather", "scatter", "alltoall…" need not
    return not op.startswith(_SIZE_FREE)


@dataclass(frozen=True)
class CollOp:
    """One collective as one rank issued it."""

    rank: int
    seq: int
    op: str  # as written: "ALLREDUCE", "nccl:all_reduce"
    numel_in: int | None = None
    numel_out: int | None = None
    dtype: str = ""
    pg: str = ""  # process group ("0" / "default_pg"), "" when the line does not say
    state: str = ""  # Flight Recorder: scheduled / started / completed
    source: str = ""  # file or node the fact came from
    line: int | None = None
    text: str = ""  # the evidence line (or a one-line rendering of the FR entry)
    frame: str = ""  # the innermost user frame, when known

    @property
    def kind(self) -> str:
        return norm_op(self.op)

    def describe(self) -> str:
        bits = []
        if self.numel_in is not None and self.numel_out not in (None, self.numel_in):
            bits.append(f"{self.numel_in} elements in, {self.numel_out} out")
        elif self.numel_in is not None or self.numel_out is not None:
            bits.append(f"{self.numel_in if self.numel_in is not None else self.numel_out} elements")
        if self.dtype:
            bits.append(self.dtype)
        return self.op + (f" ({', '.join(bits)})" if bits else "")


def parse_work(text: str) -> dict[str, str] | None:
    """The ``Key=Value`` fields of the first ``Work…(…)`` in a line, by name (None: no such group).
    Field order, extra fields and the phrase around it do not matter."""
    if "Work" not in text:
        return None
    m = _WORK.search(text[:8192])
    if m is None:
        return None
    return {k: v for k, _unit, v in _FIELD.findall(m.group(1))}


def _int(v: str | None) -> int | None:
    if v is None or not re.fullmatch(r"-?\d{1,18}", v):
        return None
    return int(v)


def op_from_line(text: str, *, source: str = "", line: int | None = None,
                 rank: int | None = None) -> CollOp | None:
    """A ``CollOp`` from a torch line that names its work (``WorkNCCL(SeqNum=…, OpType=…)``)."""
    f = parse_work(text)
    if not f:
        return None
    seq, op = _int(f.get("SeqNum")), f.get("OpType")
    if seq is None or not op:
        return None
    if rank is None:
        m = _RANK.search(text)
        rank = int(m.group(1) or m.group(2)) if m else None
    if rank is None:
        return None
    pg = _PG.search(text)
    return CollOp(rank=rank, seq=seq, op=op[:60], numel_in=_int(f.get("NumelIn")), numel_out=_int(f.get("NumelOut")),
                  pg=pg.group(1) if pg else "", source=source, line=line, text=text.strip()[:300])


@dataclass(frozen=True)
class Mismatch:
    """Two ranks issued different collectives at one sequence number of one process group."""

    seq: int
    what: str  # "op type" / "size" / "dtype"
    a: CollOp
    b: CollOp
    pg: str = ""

    @property
    def title(self) -> str:
        return (f"collective #{self.seq}{f' (process group {self.pg})' if self.pg else ''}: "
                f"rank {self.a.rank} ran {self.a.describe()}, rank {self.b.rank} ran {self.b.describe()}")

    def to_json(self) -> dict:
        side = lambda o: {"rank": o.rank, "op": o.op, "numel_in": o.numel_in, "numel_out": o.numel_out,  # noqa: E731
                          "dtype": o.dtype, "state": o.state, "source": o.source, "line": o.line, "frame": o.frame}
        return {"seq": self.seq, "what": self.what, "pg": self.pg, "a": side(self.a), "b": side(self.b)}


def _differ(a: CollOp, b: CollOp) -> str:
    if a.kind != b.kind:
        return "op type"
    if _sizes_matter(a.kind):
        if a.numel_in is not None and b.numel_in is not None and a.numel_in != b.numel_in:
            return "size"
        if a.numel_out is not None and b.numel_out is not None and a.numel_out != b.numel_out:
            return "size"
    if a.dtype and b.dtype and a.dtype != b.dtype:
        return "dtype"
    return ""


def mismatches(ops: list[CollOp]) -> list[Mismatch]:
    """The first mismatch per process group (the split; later ones are its consequences)."""
    by_key: dict[tuple[str, int], dict[int, CollOp]] = {}
    for o in ops:
        by_key.setdefault((o.pg, o.seq), {}).setdefault(o.rank, o)
    # a rank's lines may omit the process group where its peer's name it: then pg "" matches any
    first: dict[str, Mismatch] = {}
    for (pg, seq), ranks in sorted(by_key.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        peers = dict(ranks)
        if pg:
            for r, o in by_key.get(("", seq), {}).items():
                peers.setdefault(r, o)
        if len(peers) < 2:
            continue
        rs = sorted(peers)
        for i, ra in enumerate(rs):
            for rb in rs[i + 1:]:
                what = _differ(peers[ra], peers[rb])
                if what and (pg or "") not in first:
                    first[pg] = Mismatch(seq, what, peers[ra], peers[rb], pg)
    return sorted(first.values(), key=lambda m: m.seq)


def last_seq(ops: list[CollOp]) -> dict[int, int]:
    out: dict[int, int] = {}
    for o in ops:
        out[o.rank] = max(out.get(o.rank, o.seq), o.seq)
    return out
