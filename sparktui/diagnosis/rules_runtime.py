"""Hang rules at run time: R4 collective desync, R5 stuck kernel, R0 slow-not-hung / healthy.

Pure functions of the gathered facts (rule_context.RuleContext); each notes the lines it relied on, per node.
"""

from __future__ import annotations

from dataclasses import replace

from . import pyspy as pyspy_mod
from .collectives import CollOp, mismatches, op_from_line
from .rule_context import RuleContext, Verdict


# --------------------------------------------------------------------------- R4 / R5


def _count(digits: str) -> int | None:
    """A sequence number read from a log line; None for one no real job reaches (a hostile
    5000-digit run would hit Python's int-string limit, a ValueError, at 4300 digits)."""
    return int(digits) if len(digits) <= 18 else None


def _log_ops(ctx: RuleContext) -> list[CollOp]:
    out = []
    for r in ctx.ranks:
        # torch prints "Stack trace of the failed collective:" as "#N func from file:line": the first
        # frame outside torch is the line that issued it
        frame = next((f"{m.groups[0]} ({m.groups[1].rsplit('/', 1)[-1]}:{m.groups[2]})" for m in r.markers
                      if m.kind == "collective_frame" and "/torch/" not in m.groups[1]), "")
        for m in r.markers:
            if m.kind == "watchdog_timeout":
                o = op_from_line(m.line, source=r.label)
                if o is not None:
                    out.append(replace(o, frame=frame) if frame else o)
    return out


def _pyspy_frame(ctx: RuleContext, rank: int) -> str:
    rf = next((r for r in ctx.ranks if r.rank == rank and r.pyspy), None)
    if rf is None:
        return ""
    d = rf.pyspy[-1][1]
    return pyspy_mod.user_frame(d) or pyspy_mod.top_frame(d) or ""


def _frames(ctx: RuleContext, a: int, b: int, op_a: CollOp | None, op_b: CollOp | None) -> str:
    """Where each rank is: the line that issued the collective (Flight Recorder stack), and py-spy's
    frame, said per rank when py-spy tells them apart, and said plainly when it cannot."""
    parts = []
    fa, fb = (op_a.frame if op_a else ""), (op_b.frame if op_b else "")
    if fa or fb:
        parts.append(f"issued at rank {a}: {fa or '?'}; rank {b}: {fb or '?'}" if fa != fb else
                     f"both issued at {fa}: the same line, so rank-local data or state chose the op")
    pa, pb = _pyspy_frame(ctx, a), _pyspy_frame(ctx, b)
    if pa and pb and pa == pb:
        parts.append(f"py-spy shows both ranks in {pa}, which cannot tell them apart")
    elif pa or pb:
        parts.append(f"py-spy: rank {a} in {pa or '?'}, rank {b} in {pb or '?'}")
    return "; ".join(parts) or "no frame: take py-spy dumps or a Flight Recorder dump"


def rule_r4_exact(ctx: RuleContext) -> Verdict | None:
    return rule_r4_mismatch(ctx, exact_only=True)


def rule_r4_mismatch(ctx: RuleContext, exact_only: bool = False) -> Verdict | None:
    """Ranks that issued different collectives at one sequence number: from Flight Recorder entries
    or watchdog lines (exact), else from RAS counts ahead in both directions (placed as the counts allow)."""
    found, how = None, ""
    for source, ops in (("Flight Recorder", [o for r in ctx.ranks for o in r.fr_ops]), ("watchdog", _log_ops(ctx))):
        ms = mismatches(ops)
        if ms:
            found, how = ms[0], source
            break
    if found is None and exact_only:
        return None
    split, split_node, split_cmp, polls = None, "", None, 0
    for nf in ctx.nodes:
        for cmp in nf.comparisons:
            # both directions cannot happen on one shared sequence, moving or not (a rank further along it
            # has at least as many of every op), so a split counts even under traffic, with less weight
            if cmp.split is not None:
                split, split_node, split_cmp, polls = cmp.split, nf.node, cmp, len(nf.ras)
                break
        if split:
            break
    if found is None and split is None:
        return None
    ids = ["nccl_collective_mismatch"] + (["nccl_watchdog_timeout"] if any(r.has("watchdog_timeout") for r in ctx.ranks)
                                          else [])
    if split is not None:
        state = "frozen across polls" if split_cmp.frozen else "still moving" if polls > 1 else "one poll"
        ctx.note(split_node, f"RAS ({state}): {split.describe()}: each rank is ahead on a different collective")
    if found is not None:
        for o in (found.a, found.b):
            rf = next((r for r in ctx.ranks if r.rank == o.rank), None)
            ctx.note(rf if rf is not None else (ctx.ev.nodes[0].node if ctx.ev.nodes else ""),
                   o.text if how == "Flight Recorder" else f"{how}: {o.text[max(0, o.text.find('Watchdog')):][:220]}")
        if how == "Flight Recorder":
            for m in mismatches(_log_ops(ctx))[:1]:  # the watchdog lines that agree, beside the dumps
                for o in (m.a, m.b):
                    rf = next((r for r in ctx.ranks if r.rank == o.rank), None)
                    if rf is not None:
                        ctx.note(rf, f"watchdog: {o.text[max(0, o.text.find('Watchdog')):][:220]}")
        a, b, seq = found.a, found.b, found.seq
        where = f"#{seq}" + (f" of process group {found.pg}" if found.pg else "")
        op_a, op_b = a.describe(), b.describe()
        conf = 0.92 if how == "Flight Recorder" else 0.88
        what, ra, rb = found.what, a.rank, b.rank
    else:
        seq = split.at_most
        where = f"#{seq} or before"
        ctx.note(split_node, f"RAS counts say which ops differ, not where: {split.common} collectives agree by type, so the "
               f"split is at or before #{seq} (exactly there if the ranks hung on the mismatched pair); a Flight "
               "Recorder dump names it exactly")
        op_a, op_b, ra, rb, what = split.op_a, split.op_b, split.a, split.b, "op type"
        conf = 0.9 if split_cmp.frozen else 0.7 if "moving" in state else 0.75
    for r in ctx.ranks:
        if r.alive is False:
            ctx.note(r, f"process {r.pid or '?'} is gone: it ended after the split (a consequence, not the cause)")
    for rank in (ra, rb):
        rf = next((r for r in ctx.ranks if r.rank == rank and r.pyspy), None)
        if rf is not None:
            ctx.note(rf, f"py-spy: {pyspy_mod.where(rf.pyspy[-1][1])} in {_pyspy_frame(ctx, rank)}")
    frames = _frames(ctx, ra, rb, found.a if found else None, found.b if found else None)
    # NCCL does not check that ranks agree: a size mismatch can complete and the job carries on, every
    # result after the split wrong.  Counts that advanced between polls say so (not "neither can finish")
    moving = found is not None and any(cmp.advanced and not cmp.frozen for nf in ctx.nodes for cmp in nf.comparisons
                                       if len(nf.ras) > 1)
    if moving:
        for nf in ctx.nodes:
            if len(nf.ras) > 1 and any(cmp.advanced for cmp in nf.comparisons):
                ctx.note(nf.node, "RAS counts advanced between polls: the collectives after the split still complete")
    return ctx.make("R4_mismatch_moving" if moving else "R4_mismatch", True, ids, conf, where=where, seq=seq, a=ra,
                  b=rb, op_a=op_a, op_b=op_b, what=what, frames=frames, source=how or "RAS", lagging=[])


def rule_r4(ctx: RuleContext) -> Verdict | None:
    v = rule_r4_mismatch(ctx)
    if v is not None:
        return v
    ctx.lines = {}
    lagging: dict[int, str] = {}
    op, seq, conf = "", None, 0.0
    ids = ["nccl_collective_mismatch"]
    for nf in ctx.nodes:
        for cmp in nf.comparisons:
            if cmp.skew and (cmp.frozen or len(nf.ras) < 2):
                counts = dict(cmp.counts)
                lead = max(counts.values())
                ctx.note(nf.node, "RAS " + ("frozen across polls" if cmp.frozen else "one poll") + f": {cmp.op} counts "
                       + ", ".join(f"rank {k}={v}" for k, v in sorted(counts.items())))
                for k in cmp.lagging:
                    lagging.setdefault(k, f"RAS {cmp.op} count {counts[k]} < {lead}")
                # the first operation the lagging rank never launched
                op, seq = op or cmp.op, seq or (min(counts[k] for k in cmp.lagging) + 1)
                conf = max(conf, 0.9 if cmp.frozen else 0.55)
    for r in ctx.ranks:
        m = r.first("watchdog_timeout")
        if m:
            ctx.note(r, m.line[m.line.find("[Rank"):][:200])
            op, seq = op or m.groups[2], seq or _count(m.groups[1])
            ids.append("nccl_watchdog_timeout") if "nccl_watchdog_timeout" not in ids else None
            conf = max(conf, 0.7)
    if seq is not None:
        for r in ctx.ranks:
            for kind in ("dump_signal", "watchdog_status"):
                m = r.first(kind)
                if not m:
                    continue
                enq = _count(m.groups[1])
                if enq is not None and enq < seq and r.rank is not None:
                    ctx.note(r, f"last enqueued work {enq} < {seq}")
                    lagging.setdefault(r.rank, f"last enqueued work {enq}")
                    conf = max(conf, 0.85)
    fr = [r for r in ctx.ranks if r.fr_status]
    # dumps taken live are taken one rank after another: under traffic their "last enqueued" differ by
    # however many collectives ran in between (seen on two H200s: 1450 vs 1480 in a healthy job), so a
    # gap counts only when the RAS counts did not advance between polls
    moving = any(cmp.advanced for nf in ctx.nodes for cmp in nf.comparisons if len(nf.ras) > 1)
    if len(fr) >= 2 and not moving:
        top = max(r.fr_status[0] for r in fr)
        for r in fr:
            ctx.note(r, f"Flight Recorder: last enqueued {r.fr_status[0]}, completed {r.fr_status[1]}"
                   + (f", pending {r.fr_pending}" if r.fr_pending else ""))
            if r.fr_status[0] < top and r.rank is not None:
                lagging.setdefault(r.rank, f"Flight Recorder last enqueued {r.fr_status[0]} < {top}")
                seq = seq or top
                conf = max(conf, 0.85)
    # py-spy: one rank waits in a collective/sync while another is elsewhere, both frozen
    waiting = [r for r in ctx.ranks if r.where and r.where[-1] in ("collective", "sync")]
    away = [r for r in ctx.ranks if r.where and r.where[-1] in ("sleep", "running")]
    if waiting and away:
        for r in waiting + away:
            d = r.pyspy[-1][1]
            moved = {True: "frozen", False: "moving", None: "one dump"}[r.frozen_frames]
            ctx.note(r, f"py-spy ({moved}): {r.where[-1]} in {pyspy_mod.user_frame(d) or pyspy_mod.top_frame(d)}")
        if lagging or all(r.frozen_frames for r in waiting + away):
            for r in away:
                if r.rank is not None:
                    lagging.setdefault(r.rank, "py-spy: not in the collective")
            conf = max(conf, 0.6) + 0.05
    if not lagging:
        return None
    lag = [r for r in ctx.ranks if r.rank in lagging]
    for r in lag:
        if r.gpu:
            g = r.gpu[-1]
            ctx.note(r, f"GPU {g.index}: {g.util:.0f}% util, {g.power_w:.0f} W" if g.util is not None and g.power_w is not None
                   else f"GPU {g.index}: n/a")
    frame = next((pyspy_mod.user_frame(r.pyspy[-1][1]) for r in lag if r.pyspy), "") or "no py-spy dump"
    who = ", ".join(f"rank {k}" for k in sorted(lagging))
    return ctx.make("R4", True, ids, conf, who=who, op=op or "a collective", seq=seq if seq is not None else "?",
                  frame=frame, lagging=sorted(lagging))


def rule_r5(ctx: RuleContext) -> Verdict | None:
    frozen_equal = [cmp for nf in ctx.nodes for cmp in nf.comparisons if cmp.frozen and not cmp.skew]
    if not frozen_equal:
        return None
    spinning = [r for r in ctx.ranks if r.gpu and all((g.util or 0) >= 90 for g in r.gpu)]
    syncing = [r for r in ctx.ranks if r.where and r.where[-1] in ("sync", "collective") and r.frozen_frames is not False]
    if not spinning and not syncing:
        return None
    for nf in ctx.nodes:
        for cmp in nf.comparisons:
            if cmp.frozen and not cmp.skew:
                ctx.note(nf.node, f"RAS frozen and equal: {cmp.op} " + ", ".join(f"rank {k}={v}" for k, v in cmp.counts))
    for r in spinning:
        g = r.gpu[-1]
        ctx.note(r, f"GPU {g.index} spinning: {g.util:.0f}% util at {g.power_w or 0:.0f} W")
    for r in syncing:
        ctx.note(r, f"py-spy: {pyspy_mod.top_frame(r.pyspy[-1][1])}")
    return ctx.make("R5", True, ["gpu_kernel_stuck"], 0.55 + 0.15 * bool(spinning) + 0.15 * bool(syncing))


# --------------------------------------------------------------------------- R0 / healthy


def rule_r0(ctx: RuleContext) -> Verdict:
    moving: list[str] = []
    for nf in ctx.nodes:
        for cmp in nf.comparisons:
            if cmp.advanced and any(t for t, _ in nf.ras[1:]):
                ctx.note(nf.node, f"RAS {cmp.op or 'counts'} advanced between polls: "
                       + ", ".join(f"rank {k}={v}" for k, v in cmp.counts))
                moving.append("RAS counts advance")
    for r in ctx.ranks:
        if r.frozen_frames is False:
            ctx.note(r, "py-spy frames differ between dumps")
            moving.append("py-spy frames change")
    for n in ctx.ev.nodes:
        for src, grew in n.log_growth.items():
            if grew > 0:
                ctx.note(n.node, f"{src}: {grew} new progress lines between rounds")
                moving.append("logs progress")
    symptoms = [r for r in ctx.ranks if r.has("shm_broadcast") or r.has("rpc_timeout")]
    warm = [r for r in ctx.ranks if r.has("warmup")]
    if moving:
        why = ", ".join(dict.fromkeys(moving))
        if symptoms and warm:
            return ctx.make("R0_warmup", False, [], 0.6, why=why)
        if symptoms:
            for r in symptoms:
                ctx.note(r, (r.first("shm_broadcast") or r.first("rpc_timeout")).line[:200])
            return ctx.make("R0", False, [], 0.7, why=why)
        return ctx.make("healthy", False, [], 0.6 + 0.15 * min(2, len(set(moving))), why=why)
    answered = [st for nf in ctx.nodes for _, st in nf.ras if st.ok and st.comms]
    clean = not any(r.has(k) for r in ctx.ranks for k in ("traceback", "conn_closed", "remote_exited", "watchdog_timeout"))
    if answered and clean and not any(cmp.skew for nf in ctx.nodes for cmp in nf.comparisons):
        for nf in ctx.nodes:
            for cmp in nf.comparisons:
                ctx.note(nf.node, f"RAS: {cmp.op} counts equal (" + ", ".join(f"rank {k}={v}" for k, v in cmp.counts) + ")")
        busy = [r for r in ctx.ranks if r.gpu and (r.gpu[-1].util or 0) > 50]
        for r in busy:
            ctx.note(r, f"GPU {r.gpu[-1].index} busy: {r.gpu[-1].util:.0f}%")
        return ctx.make("healthy", False, [], 0.45 + 0.1 * bool(busy), why="one RAS poll, counts equal")
    if not any(r.alive for r in ctx.ranks):
        finished = all(r.has("init_complete") for r in ctx.ranks) and clean
        if not ctx.ranks or finished or all(r.alive is False for r in ctx.ranks):
            if finished and ctx.ranks:
                for r in ctx.ranks:
                    ctx.note(r, f"finished; last line: {r.last_line[:160]}")
            if clean:
                return ctx.make("idle", False, [], 0.6)
    for r in ctx.ranks:
        if r.last_line:
            ctx.note(r, f"last line: {r.last_line[:180]}")
    return ctx.make("unknown", True, ["nccl_init_hang"] if not any(r.has("init_complete") for r in ctx.ranks) else [], 0.3)


def rule_serving(ctx: RuleContext) -> Verdict | None:
    """The head's /metrics answered in every round and its work progresses (the finished-request or
    generated-token counter moved) or none is queued: a serving cluster, not a hang, however still
    its collectives and frames are while idle (equal frozen RAS counts, a worker waiting on its queue)."""
    s = ctx.ev.serving
    if not s or not all(x.get("up") for x in s):
        return None
    first, last = s[0], s[-1]
    node = last.get("node") or (ctx.ev.nodes[0].node if ctx.ev.nodes else "")
    queued = (last.get("running") or 0) + (last.get("waiting") or 0)
    moved = len(s) > 1 and any(first.get(k) != last.get(k) and last.get(k) is not None for k in ("finished", "tokens"))
    if not moved and queued:
        return None
    ctx.note(node, f"/metrics answered in {len(s)} round(s); requests running {last.get('running')}, waiting "
                   f"{last.get('waiting')}; finished {first.get('finished')} -> {last.get('finished')}, generated tokens "
                   f"{first.get('tokens')} -> {last.get('tokens')}")
    why = "requests finish" if moved else "no request is waiting or running"
    return ctx.make("healthy_serving", False, [], 0.85 if moved else 0.8, why=why)
