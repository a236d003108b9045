"""The fabric verdict: bandwidth against the line rate, and when short, the likely causes ranked from
what was seen, each with its fix.  The causes and fixes are data (causes.toml); this module only
matches the check's signals to them.  No IO besides reading that file once.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

CAUSES_FILE = Path(__file__).with_name("causes.toml")
OK_FRACTION = 0.80  # busbw >= 80 % of the line rate is a healthy link
# the observations a check can make; a cause's `signal` must be one of these
SIGNALS = ("wrong", "socket", "one_hca", "mtu", "wrong_if", "gid", "link_speed", "slow")


@dataclass(frozen=True)
class Cause:
    id: str
    rank: int
    signal: str
    title: str
    why: str
    fix: str
    finding: str
    failure: bool = False  # a failure of its own (not a reason for low bandwidth)


@dataclass
class Verdict:
    status: str  # ok / warn / fail / skip
    title: str
    measured_gbps: float | None  # what the verdict judged, in Gb/s
    line_rate_gbps: float
    source: str  # "all_reduce_perf busbw" / "iperf3 TCP" / ""
    causes: list[dict] = field(default_factory=list)  # ranked: {id, title, why, fix, evidence, finding}
    failures: list[dict] = field(default_factory=list)

    @property
    def fraction(self) -> float | None:
        if self.measured_gbps is None or not self.line_rate_gbps:
            return None
        return self.measured_gbps / self.line_rate_gbps

    def to_json(self) -> dict:
        return {"status": self.status, "title": self.title, "measured_gbps": self.measured_gbps,
                "line_rate_gbps": self.line_rate_gbps, "fraction": (round(self.fraction, 4) if self.fraction is not None
                                                                     else None),
                "source": self.source, "causes": self.causes, "failures": self.failures}


class CausesError(ValueError):
    pass


@lru_cache(maxsize=1)
def causes() -> tuple[Cause, ...]:
    """causes.toml, checked: a broken entry is a one-line CausesError naming it."""
    raw = tomllib.loads(CAUSES_FILE.read_text(encoding="utf-8"))
    out = []
    for kind in ("failure", "cause"):
        for i, e in enumerate(raw.get(kind, [])):
            try:
                c = Cause(id=e["id"], rank=int(e.get("rank", 0)), signal=e["signal"], title=e["title"], why=e["why"],
                          fix=e["fix"], finding=e.get("finding", ""), failure=kind == "failure")
            except (KeyError, TypeError, ValueError) as exc:
                raise CausesError(f"{CAUSES_FILE.name}: {kind}[{i}] is broken ({exc})") from None
            if c.signal not in SIGNALS:
                raise CausesError(f"{CAUSES_FILE.name}: {c.id}: unknown signal {c.signal!r}")
            out.append(c)
    return tuple(out)


def _fill(text: str, values: dict[str, str]) -> str:
    for k, v in values.items():
        text = text.replace("{" + k + "}", v)
    return text


def judge(measured_gbps: float | None, line_rate_gbps: float, source: str, seen: dict[str, list[str]],
          values: dict[str, str] | None = None) -> Verdict:
    """``seen``: signal -> evidence lines (a signal present with an empty list counts as seen).
    ``values`` fills the fixes' placeholders ({fabric_if}, {hcas}, {mtu}, {payload}, {peer})."""
    values = values or {}
    failures = [_entry(c, seen[c.signal], values) for c in causes() if c.failure and c.signal in seen]
    if measured_gbps is None:
        status = "fail" if failures else "skip"
        path = [_entry(c, seen[c.signal], values) for c in _ranked(seen) if c.signal != "slow"]
        title = failures[0]["title"] if failures else "no bandwidth measured"
        if path and not failures:
            status, title = "fail", path[0]["title"]
        return Verdict(status, title, None, line_rate_gbps, source, path, failures)
    frac = measured_gbps / line_rate_gbps if line_rate_gbps else 0.0
    pct = f"{measured_gbps:.1f} Gb/s = {frac * 100:.0f} % of {line_rate_gbps:g} Gb/s ({source})"
    if frac >= OK_FRACTION:
        # a fast link can still carry a problem (an MTU mismatch on one direction): list it, but ok
        noted = [_entry(c, seen[c.signal], values) for c in _ranked(seen) if c.signal != "slow"]
        status = "fail" if failures else ("warn" if noted else "ok")
        return Verdict(status, (failures[0]["title"] + "; " if failures else "") + pct, measured_gbps, line_rate_gbps,
                       source, noted, failures)
    seen = {**seen, "slow": seen.get("slow", [])}  # below the line: "unexplained" stands when nothing else does
    ranked = [c for c in _ranked(seen)]
    explained = [c for c in ranked if c.signal != "slow"]
    chosen = explained or ranked
    entries = [_entry(c, seen[c.signal], values) for c in chosen]
    title = f"below line rate: {pct}; likely: {entries[0]['title']}" if entries else f"below line rate: {pct}"
    return Verdict("fail", title, measured_gbps, line_rate_gbps, source, entries, failures)


def _ranked(seen: dict[str, list[str]]) -> list[Cause]:
    return sorted((c for c in causes() if not c.failure and c.signal in seen), key=lambda c: c.rank)


def _entry(c: Cause, evidence: list[str], values: dict[str, str]) -> dict:
    return {"id": c.id, "title": _fill(c.title, values), "why": _fill(c.why, values), "fix": _fill(c.fix, values),
            "evidence": list(evidence), "finding": c.finding}
