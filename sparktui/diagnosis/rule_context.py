"""What every hang rule reads and writes: the gathered facts, the lines it relied on, and the verdict it makes.

Kept apart from verdict.py (which runs the rules) so the rule modules import it without a loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .evidence import Evidence
from .facts import RankFacts, node_facts, rank_facts, rules_data


@dataclass
class Verdict:
    rule: str  # R0..R6, healthy, idle, unknown
    title: str
    state: str  # healthy / slow / hung / dead / idle
    problem: bool
    finding_ids: list[str]
    confidence: float
    next_action: str
    evidence: dict[str, list[str]] = field(default_factory=dict)  # node -> lines, side by side
    latent: list[dict] = field(default_factory=list)  # R7 items: {id, severity, title, evidence}
    details: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"rule": self.rule, "title": self.title, "state": self.state, "problem": self.problem,
                "finding_ids": self.finding_ids, "confidence": round(self.confidence, 2),
                "next_action": self.next_action, "evidence": self.evidence, "latent": self.latent,
                "details": self.details}

    @property
    def exit_code(self) -> int:
        return 1 if self.problem else 0


class RuleContext:
    def __init__(self, ev: Evidence) -> None:
        self.ev = ev
        self.ranks = rank_facts(ev)
        self.nodes = node_facts(ev, self.ranks)
        self.lines: dict[str, list[str]] = {}

    def note(self, rf: RankFacts | str, text: str) -> None:
        node = rf if isinstance(rf, str) else rf.node
        prefix = "" if isinstance(rf, str) else (f"rank {rf.rank}: " if rf.rank is not None else f"pid {rf.pid}: ")
        line = prefix + text
        bucket = self.lines.setdefault(node, [])
        if line not in bucket:
            bucket.append(line)

    def make(self, rule: str, problem: bool, ids: list[str], confidence: float, **fmt) -> Verdict:
        spec = rules_data()["rules"][rule]
        safe = _Fmt(fmt)
        return Verdict(rule=rule.split("_")[0], title=spec["title"].format_map(safe), state=spec["state"],
                       problem=problem, finding_ids=ids, confidence=min(0.99, confidence),
                       next_action=spec["action"].format_map(safe),
                       evidence={n.node: self.lines.get(n.node, []) for n in self.ev.nodes}, details=fmt)


class _Fmt(dict):
    def __missing__(self, key: str) -> str:
        return "?"


def rank_labels(ranks: list[RankFacts]) -> str:
    return ", ".join(r.label for r in ranks) or "a rank"


def desync_in_logs(ranks: list[RankFacts]) -> bool:
    # a collective that timed out on one rank while another never issued it; a watchdog report that
    # follows a remote error ("remote process exited") is the consequence of a dead peer, not a desync
    return any(r.has("watchdog_timeout") or r.has("dump_signal") for r in ranks)


def fix(name: str, **fmt) -> str:
    """A fix sentence from verdict_rules.toml's [fixes], filled from the evidence."""
    return rules_data()["fixes"][name].format_map(_Fmt(fmt))
