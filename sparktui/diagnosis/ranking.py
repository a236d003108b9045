"""Order findings: most severe and most causal first (the root cause before its consequences).

A finding A is a cause of finding B when A's id is in B's ``caused_by`` (catalogue) and A came
first: earlier in the same source, or in another source (ranks/nodes: order unknown, the relation
is trusted); or when A's id is in B's ``consequence_of`` and A is earlier in the same source.  A cause inherits the severity of its worst consequence for ordering, so a warning
that explains an error is listed before that error.

B marked ``consequence`` (the engine died, a worker died, the group was aborted: what any failure
looks like from outside) has more causes: every error that is not a consequence itself, of the same
source before it or of another source (another rank or node), and its ``caused_by`` ids in the
same source in either order (a C++ WARN on stderr and a Python traceback on stdout interleave out
of order); an error of the same source printed up to ``CRASH_SPAN`` lines after it counts too.
For any B, a cause printed at most ``INTERLEAVE`` lines after it in the same source counts for the
same reason; for B marked ``cause_follows`` (a report printed before the traceback that says why),
one printed up to ``CRASH_SPAN`` lines after it.
"""

from __future__ import annotations

from ..model import SEVERITY_RANK, Finding
from .catalogue import Catalogue

GENERIC_IDS = frozenset({"unhandled_exception"})
# a failure reported only by its shape (last_words.py): after every recognised finding but info
FALLBACK_IDS = frozenset({"unrecognised_failure"})
# a cause printed this few lines AFTER its consequence still counts: a C++ library's stderr (NCCL's
# WARN) and Python's stdout (the traceback) interleave out of order
INTERLEAVE = 30
# a consequence (the engine died, a worker died, a watchdog fired) is printed by whichever process
# notices first; the failing process's own traceback can follow it by a whole crash's output (vLLM's
# API server reports EngineDeadError while the engine core is still printing why).  A root error this
# many lines after a consequence of the same source still explains it.
CRASH_SPAN = 400


def causes(findings: list[Finding], catalogue: Catalogue) -> dict[int, list[int]]:
    """index of a finding -> indexes of the findings that caused it."""
    out: dict[int, list[int]] = {}
    ents = catalogue.entries
    for j, f in enumerate(findings):
        entry = ents.get(f.id)
        if entry is None or not (entry.caused_by or entry.consequence_of or entry.consequence):
            continue
        for i, c in enumerate(findings):
            if i == j:
                continue
            ce = ents.get(c.id)
            # a finding that names f as what it follows from is never f's cause
            root = (ce is not None and not ce.consequence and c.id not in GENERIC_IDS
                    and f.id not in ce.consequence_of)
            if entry.consequence and root and c.severity == "error" \
                    and (c.source != f.source or (c.line or 0) - (f.line or 0) <= CRASH_SPAN):
                pass  # an error of its own source (before, or in the same crash's output), or of another rank/node
            elif c.id in entry.caused_by:
                after = (c.line or 0) - (f.line or 0)
                interleaved = root and (entry.consequence or after <= INTERLEAVE
                                        or (entry.cause_follows and after <= CRASH_SPAN))
                if c.source == f.source and after > 0 and not interleaved:
                    continue  # it came after: a consequence of the same event, not its cause
            elif c.id in entry.consequence_of:
                if c.source != f.source or (c.line or 0) >= (f.line or 0):
                    continue  # only an earlier finding of the same source explains this one
            else:
                continue
            out.setdefault(j, []).append(i)
    return out


def rank_findings(findings: list[Finding], catalogue: Catalogue, source_order: dict[str, int] | None = None) -> list[Finding]:
    if not findings:
        return []
    order = source_order or {}
    cause_of = causes(findings, catalogue)
    depth: dict[int, int] = {}

    def d(j: int, seen: frozenset[int] = frozenset()) -> int:
        if j in depth:
            return depth[j]
        parents = [i for i in cause_of.get(j, []) if i not in seen]
        depth[j] = 0 if not parents else 1 + max(d(i, seen | {j}) for i in parents)
        return depth[j]

    sev = [SEVERITY_RANK.get(f.severity, 9) for f in findings]
    eff = list(sev)
    # propagate a consequence's severity up to its causes (a few passes: chains are short)
    for _ in range(len(findings)):
        changed = False
        for j, parents in cause_of.items():
            for i in parents:
                if eff[j] < eff[i]:
                    eff[i] = eff[j]
                    changed = True
        if not changed:
            break
    # a traceback nothing in the catalogue recognises says least: after the named findings
    generic = [1 if f.id in GENERIC_IDS else 0 for f in findings]
    for k, f in enumerate(findings):
        if f.id in FALLBACK_IDS and f.severity != "info":
            eff[k] = SEVERITY_RANK["warning"]  # below the warnings too: generic[k] orders it after them
            generic[k] = 2
    idx = sorted(
        range(len(findings)),
        key=lambda k: (eff[k], generic[k], d(k), order.get(findings[k].source, 1 << 30), findings[k].line or 0,
                       sev[k]),
    )
    return [findings[k] for k in idx]
