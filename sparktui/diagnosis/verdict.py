"""The hang verdict: explicit rules R0..R7 over gathered Evidence (pure; live and --offline share it).

Precedence R1 > R2/R3 > R6 > R4 > R5 > R0, except that a collective
mismatch named exactly by the ranks' own records (R4, Flight Recorder or watchdog) goes first; R7 (latent
misconfiguration) is always reported beside the verdict.  Every rule names what it saw, per node,
so a reader can check the reasoning against the raw lines.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .evidence import Evidence
from .facts import RankFacts, node_facts, rank_facts, rules_data
from .latent import latent_findings


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


class _Ctx:
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


def _who(ranks: list[RankFacts]) -> str:
    return ", ".join(r.label for r in ranks) or "a rank"


def _desync_in_logs(ranks: list[RankFacts]) -> bool:
    # a collective that timed out on one rank while another never issued it; a watchdog report that
    # follows a remote error ("remote process exited") is the consequence of a dead peer, not a desync
    return any(r.has("watchdog_timeout") or r.has("dump_signal") for r in ranks)



def decide(ev: Evidence) -> Verdict:
    from .rules_faults import rule_r1, rule_r2_r3, rule_r6
    from .rules_runtime import rule_r0, rule_r4, rule_r4_exact, rule_r5

    c = _Ctx(ev)
    verdict = None
    # a split the ranks' own records name (Flight Recorder entries, watchdog lines) comes first: a
    # peer that died or a link that broke after it is its consequence (NCCL errors out on a size mismatch)
    for rule in (rule_r4_exact, rule_r1, rule_r2_r3, rule_r6, rule_r4, rule_r5):
        c.lines = {}  # a rule that does not fire leaves no evidence lines behind
        verdict = rule(c)
        if verdict is not None:
            break
    if verdict is None:
        c.lines = {}
        verdict = rule_r0(c)
    verdict.latent = latent_findings(ev, c.ranks)
    return _uninspected(c, verdict)


def _fix_for(node: str, error: str) -> str:
    """The next step for a node sparktui could not look at, from the reason it gave."""
    low = error.lower()
    if "host key" in low:
        return (f"Check {node}'s SSH host key on its console against the fingerprint shown, and trust it only "
                f"if they match (the `sparktui status` hint prints the exact command)")
    if "checking off" in low:
        return f"Turn host-key checking back on for {node} (see the hint in `sparktui status`)"
    if "login refused" in low or "permission denied" in low or "identity_file" in low:
        return f"Fix the SSH login to {node} (user, identity_file, agent): `sparktui status` shows the error"
    return f"Make {node} reachable over SSH (is it up? `sparktui status`)"


def _reason(node: str, error: str) -> str:
    text = (error or "no answer").strip().splitlines()[0] if (error or "").strip() else "no answer"
    return text[len(node) + 2:] if text.startswith(node + ": ") else text


def _uninspected(c: _Ctx, v: Verdict) -> Verdict:
    """Nodes that could not be looked at are said so, never read as a dead peer.  A problem found on
    the other nodes stays the verdict (with this beside it); otherwise this is the verdict."""
    unseen = {n.node: _reason(n.node, n.error) for n in c.ev.nodes if not n.reachable}
    if not unseen:
        return v
    names = ", ".join(unseen)
    # the title keeps the first sentence; the evidence keeps the whole reason (a hint's command)
    why = "; ".join(err.split(". ")[0].split("; refusing")[0][:160] for err in unseen.values())
    fix = "; ".join(_fix_for(node, err) for node, err in unseen.items())
    item = {"id": "ssh_unreachable", "severity": "error", "title": f"{names} could not be inspected: {why}",
            "evidence": [f"{node}: {err}" for node, err in unseen.items()], "advice": fix}
    if v.problem:
        v.latent.insert(0, item)
        v.details = {**v.details, "uninspected": unseen}
        return v
    c.lines = {}
    for node, err in unseen.items():
        c.note(node, f"could not be inspected: {err}")
    for node, lines in v.evidence.items():
        for line in lines:
            c.note(node, line)
    seen = f"{v.title} ({v.rule})" if any(n.reachable for n in c.ev.nodes) else "none was inspected"
    out = c.make("uninspected", True, ["ssh_unreachable"], 0.9, nodes=names, why=why, fix=fix, seen=seen)
    out.details = {"uninspected": unseen, "others": v.to_json()}
    out.latent = v.latent
    return out
