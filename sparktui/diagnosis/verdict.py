"""The hang verdict: explicit rules R0..R7 over gathered Evidence (pure; live and --offline share it).

Precedence R1 > R2/R3 > R6 > R4 > R5 > R0, except that a collective
mismatch named exactly by the ranks' own records (R4, Flight Recorder or watchdog) goes first; R7 (latent
misconfiguration) is always reported beside the verdict.  Every rule names what it saw, per node,
so a reader can check the reasoning against the raw lines.
"""

from __future__ import annotations

from .evidence import Evidence
from .latent import latent_findings
from .rule_context import RuleContext, Verdict, fix
from .rules_faults import (rule_r1, rule_r2_bootstrap, rule_r2_never_joined, rule_r2_no_interface,
                           rule_r2_rendezvous, rule_r3_transport, rule_r6)
from .rules_runtime import rule_r0, rule_r4, rule_r4_exact, rule_r5, rule_serving

__all__ = ["RULES", "Verdict", "decide"]

# the order the rules are tried in; the first that fires is the verdict.  A split the ranks' own
# records name (Flight Recorder entries, watchdog lines) comes first: a peer that died or a link that
# broke after it is its consequence (NCCL errors out on a size mismatch)
# A head whose /metrics shows its work progressing (or none queued) is serving: before the hang rules,
# after the exact records and a dead peer.
RULES = (rule_r4_exact, rule_r1, rule_serving, rule_r2_no_interface, rule_r2_rendezvous, rule_r2_never_joined,
         rule_r3_transport, rule_r2_bootstrap, rule_r6, rule_r4, rule_r5)


def decide(ev: Evidence) -> Verdict:
    ctx = RuleContext(ev)
    verdict = None
    for rule in RULES:
        ctx.lines = {}  # a rule that does not fire leaves no evidence lines behind
        verdict = rule(ctx)
        if verdict is not None:
            break
    if verdict is None:
        ctx.lines = {}
        verdict = rule_r0(ctx)
    verdict.latent = latent_findings(ev, ctx.ranks)
    return _uninspected(ctx, verdict)


def _fix_for(node: str, error: str) -> str:
    """The next step for a node sparktui could not look at, from the reason it gave."""
    low = error.lower()
    if "host key" in low:
        return fix("host_key", node=node)
    if "checking off" in low:
        return fix("host_key_checking_off", node=node)
    if "login refused" in low or "permission denied" in low or "identity_file" in low:
        return fix("ssh_login", node=node)
    return fix("unreachable", node=node)


def _reason(node: str, error: str) -> str:
    text = (error or "no answer").strip().splitlines()[0] if (error or "").strip() else "no answer"
    return text[len(node) + 2:] if text.startswith(node + ": ") else text


def _uninspected(ctx: RuleContext, v: Verdict) -> Verdict:
    """Nodes that could not be looked at are said so, never read as a dead peer.  A problem found on
    the other nodes stays the verdict (with this beside it); otherwise this is the verdict."""
    unseen = {n.node: _reason(n.node, n.error) for n in ctx.ev.nodes if not n.reachable}
    if not unseen:
        return v
    names = ", ".join(unseen)
    # the title keeps the first sentence; the evidence keeps the whole reason (a hint's command)
    why = "; ".join(err.split(". ")[0].split("; refusing")[0][:160] for err in unseen.values())
    fixes = "; ".join(_fix_for(node, err) for node, err in unseen.items())
    item = {"id": "ssh_unreachable", "severity": "error", "title": fix("uninspected_title", nodes=names, why=why),
            "evidence": [f"{node}: {err}" for node, err in unseen.items()], "advice": fixes}
    if v.problem:
        v.latent.insert(0, item)
        v.details = {**v.details, "uninspected": unseen}
        return v
    ctx.lines = {}
    for node, err in unseen.items():
        ctx.note(node, f"could not be inspected: {err}")
    for node, lines in v.evidence.items():
        for line in lines:
            ctx.note(node, line)
    seen = f"{v.title} ({v.rule})" if any(n.reachable for n in ctx.ev.nodes) else "none was inspected"
    out = ctx.make("uninspected", True, ["ssh_unreachable"], 0.9, nodes=names, why=why, fix=fixes, seen=seen)
    out.details = {"uninspected": unseen, "others": v.to_json()}
    out.latent = v.latent
    return out
