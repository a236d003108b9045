"""The hang verdict: explicit rules R0..R7 over gathered Evidence (pure; live and --offline share it).

Precedence R1 > R2/R3 > R6 > R4 > R5 > R0 (reference/nccl-debugging.md §6); R7 (latent
misconfiguration) is always reported beside the verdict.  Every rule names what it saw, per node,
so a reader can check the reasoning against the raw lines.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import pyspy as pyspy_mod
from .evidence import Evidence
from .facts import NodeFacts, RankFacts, node_facts, rank_facts, rules_data
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


# --------------------------------------------------------------------------- R1


def rule_r1(c: _Ctx) -> Verdict | None:
    dead: list[RankFacts] = []
    why: list[str] = []
    conf = 0.0
    for nf in c.nodes:
        for _, st in nf.ras:
            for m in st.dead_ranks:
                rf = next((r for r in c.ranks if r.rank == m.rank), None)
                if rf and rf not in dead:
                    dead.append(rf)
                state = "considered dead" if m.considered_dead else "unresponsive"
                c.note(nf.node, f"RAS: rank {m.rank} {state} (host {m.host or '?'}, pid {m.pid or '?'})")
                why.append(f"RAS says {state}")
                conf = max(conf, 0.9)
    alive = [r for r in c.ranks if r.alive]
    for r in c.ranks:
        if r.alive is False and alive and (r.has("init_complete") or r.has("init_start") or r.pid):
            if r not in dead:
                dead.append(r)
            c.note(r, f"process {r.pid or '?'} is gone; its log ends: {r.last_line[:160]}")
            why.append("its process is gone")
            conf = max(conf, 0.8)
    if not _desync_in_logs(c.ranks):
        for r in c.ranks:
            m = r.first("conn_closed") or r.first("remote_exited")
            if m:
                c.note(r, m.line[:200])
                peers = [p for p in c.ranks if p is not r and (p.alive is False or p in dead)] or \
                        [p for p in c.ranks if p is not r and not p.first("conn_closed")]
                for p in peers[:1]:
                    if p not in dead:
                        dead.append(p)
                    if p.alive is False:
                        c.note(p, f"process {p.pid or '?'} is gone; its log ends: {p.last_line[:160]}")
                why.append("its peer saw the connection close")
                conf = max(conf, 0.75 if peers else 0.6)
    for n in c.ev.nodes:
        for line in n.dmesg:
            if "Out of memory: Killed process" in line or "NVRM: Xid" in line:
                c.note(n.node, "dmesg: " + line[:200])
                why.append("the kernel log shows " + ("an OOM kill" if "Out of memory" in line else "a GPU Xid"))
                conf = max(conf, 0.85)
        if not n.reachable:
            c.note(n.node, f"node unreachable: {n.error}")
            why.append(f"node {n.node} is unreachable")
            conf = max(conf, 0.6)
    if not why:
        return None
    who = _who(dead) if dead else ", ".join(n.node for n in c.ev.nodes if not n.reachable) or "a peer"
    return c.make("R1", True, ["engine_dead"] if not dead else ["nccl_network_error"], conf + 0.03 * (len(why) - 1),
                  who=who, why="; ".join(dict.fromkeys(why)))


# --------------------------------------------------------------------------- R2 / R3


def rule_r2_r3(c: _Ctx) -> Verdict | None:
    started = [r for r in c.ranks if r.has("init_start")]
    complete = [r for r in c.ranks if r.has("init_complete")]
    rdv = [r for r in c.ranks if r.has("rendezvous_wait") or (r.where and all(w == "rendezvous" for w in r.where))]
    noif = [r for r in c.ranks if r.has("bootstrap_noif")]
    if noif:
        for r in noif:
            c.note(r, r.first("bootstrap_noif").line[:200])
            ifname = r.env.get("NCCL_SOCKET_IFNAME", "")
            if ifname:
                c.note(r, f"NCCL_SOCKET_IFNAME={ifname}")
        ifname = next((r.env.get("NCCL_SOCKET_IFNAME") for r in noif if r.env.get("NCCL_SOCKET_IFNAME")), "")
        fix = (f"NCCL_SOCKET_IFNAME{'=' + ifname if ifname else ''} matches no interface on {noif[0].node or 'the node'}: "
               "set it (and GLOO_SOCKET_IFNAME) to the fabric interface on every node, then restart both ranks.")
        return c.make("R2", True, ["nccl_comm_init_failed", "wrong_network_interface"], 0.9, who=_who(noif), fix=fix)
    if rdv:
        world = max((r.world_size or 0 for r in c.ranks), default=0)
        for r in rdv:
            m = r.first("rendezvous_wait")
            if m:
                c.note(r, m.line[:200])
                world = max(world, int(m.groups[2]))
            for t, d in r.pyspy[:1]:
                c.note(r, f"py-spy: waiting in {pyspy_mod.top_frame(d)}")
            addr = r.env.get("MASTER_ADDR")
            if addr:
                c.note(r, f"MASTER_ADDR={addr} MASTER_PORT={r.env.get('MASTER_PORT', '?')}")
        present = {r.rank for r in c.ranks if r.rank is not None and (r.alive or r.alive is None)}
        missing = [k for k in range(world) if k not in present] if world else []
        who = ", ".join(f"rank {k}" for k in missing) + " never joined" if missing else _who(rdv) + " waiting"
        addr = next((f"{r.env['MASTER_ADDR']}:{r.env.get('MASTER_PORT', '?')}" for r in rdv if r.env.get("MASTER_ADDR")),
                    "MASTER_ADDR:MASTER_PORT")
        fix = (f"Start (or restart) {', '.join(f'rank {k}' for k in missing) or 'the missing ranks'} and check it reaches "
               f"the rendezvous at {addr} (same MASTER_ADDR/PORT, firewall, VLLM_HOST_IP on the fabric).")
        ids = ["nccl_init_hang"] + (["rendezvous_timeout"] if any(r.has("rendezvous_wait") for r in rdv) else [])
        return c.make("R2", True, ids, 0.85 if missing else 0.7, who=who, fix=fix, missing=missing)
    missing = _never_joined(c)
    if missing and not complete:
        waiting = [r for r in c.ranks if r.alive or r.alive is None]
        for r in waiting:
            c.note(r, f"alive, WORLD_SIZE={r.world_size}, no NCCL communicator yet; last line: {r.last_line[:140]}")
            for _, d in r.pyspy[-1:]:
                c.note(r, f"py-spy: {pyspy_mod.where(d)} in {pyspy_mod.top_frame(d)}")
        for n in c.ev.nodes:
            for chk in n.fabric:
                if chk.get("check") == "tcp_connect":
                    c.note(n.node, f"TCP {chk['target']}: {'ok' if chk.get('ok') else 'failed ' + str(chk.get('detail', ''))[:80]}")
        who = ", ".join(f"rank {k}" for k in missing) + " never joined"
        addr = next((f"{r.env['MASTER_ADDR']}:{r.env.get('MASTER_PORT', '?')}" for r in waiting if r.env.get("MASTER_ADDR")),
                    "MASTER_ADDR:MASTER_PORT")
        fix = (f"Start {', '.join(f'rank {k}' for k in missing)} (it never reached the rendezvous at {addr}); check its "
               "node, its launcher's log and that it uses the same MASTER_ADDR/PORT and WORLD_SIZE.")
        return c.make("R2", True, ["nccl_init_hang"], 0.8, who=who, fix=fix, missing=missing)
    stuck = [r for r in started if not r.has("init_complete")]
    if not stuck:
        return None
    transport = [r for r in stuck if r.has("channel") or r.has("ib_using") or r.has("ibv_failed")]
    for r in stuck:
        c.note(r, f"Init START without COMPLETE; last NCCL line: {r.last_nccl[:180]}")
        for kind in ("connect_retry", "connect_failed", "ibv_failed", "bootstrap_if"):
            m = r.first(kind)
            if m:
                c.note(r, m.line[:200])
        tops = [pyspy_mod.top_frame(d) for _, d in r.pyspy]
        if tops:
            c.note(r, f"py-spy: {tops[-1]}")
        busy = sum(1 for t in r.threads if t.state == "R")
        if r.threads:
            c.note(r, f"threads: {len(r.threads)} ({busy} running)")
    for r in complete:
        c.note(r, "Init COMPLETE")
        if r.pyspy:
            c.note(r, f"py-spy: waits in {pyspy_mod.top_frame(r.pyspy[-1][1])} (its peer never connected)")
        if r.gpu and r.gpu[-1].util is not None:
            c.note(r, f"GPU {r.gpu[-1].index}: {r.gpu[-1].util:.0f}% util at {r.gpu[-1].power_w or 0:.0f} W")
    if transport or (complete and stuck):
        who = _who(stuck)
        return c.make("R3", True, ["nccl_init_hang"] + (["nccl_ib_error"] if any(r.has("ibv_failed") for r in stuck) else []),
                      0.75, who=who)
    retry = [r for r in stuck if r.has("connect_retry") or r.has("connect_failed")]
    fix = ("Rank(s) cannot reach their peer's bootstrap address: check both nodes' bootstrap IPs are on one subnet, "
           "pin NCCL_SOCKET_IFNAME/GLOO_SOCKET_IFNAME to the fabric interface, check firewalls; then restart both ranks."
           if retry else
           "Init started but bootstrap never finished: check every rank was started with the same world size and "
           "MASTER_ADDR, and that NCCL_SOCKET_IFNAME names the fabric interface on each node; restart both ranks.")
    return c.make("R2", True, ["nccl_init_hang"], 0.8 if retry else 0.7, who=_who(stuck), fix=fix)


def _never_joined(c: _Ctx) -> list[int]:
    """Ranks of the declared world that no node shows at all (no process, no log, no RAS entry)."""
    world = max((r.world_size or 0 for r in c.ranks if r.alive), default=0)
    if not world:
        return []
    seen = {r.rank for r in c.ranks if r.rank is not None}
    seen |= {rr.rank for nf in c.nodes for _, st in nf.ras for cm in st.comms for rr in cm.ranks}
    return [k for k in range(world) if k not in seen]


# --------------------------------------------------------------------------- R6


def rule_r6(c: _Ctx) -> Verdict | None:
    bad: list[str] = []
    for r in c.ranks:
        m = r.first("ib_completion")
        if m:
            c.note(r, m.line[:200])
            bad.append(f"{r.label} (completion error)")
    for n in c.ev.nodes:
        for chk in n.fabric:
            if chk.get("check") == "ping_mtu" and chk.get("ok") is False:
                c.note(n.node, f"ping -M do to {chk.get('target')} failed: {chk.get('detail', '')[:120]}")
                bad.append(f"{n.node} -> {chk.get('target')}")
    if not bad:
        return None
    return c.make("R6", True, ["nccl_network_error"], 0.7 + 0.05 * min(3, len(bad)), who=", ".join(bad))


# --------------------------------------------------------------------------- R4 / R5


def rule_r4(c: _Ctx) -> Verdict | None:
    lagging: dict[int, str] = {}
    op, seq, conf = "", None, 0.0
    ids = ["nccl_collective_mismatch"]
    for nf in c.nodes:
        for cmp in nf.comparisons:
            if cmp.skew and (cmp.frozen or len(nf.ras) < 2):
                counts = dict(cmp.counts)
                lead = max(counts.values())
                c.note(nf.node, "RAS " + ("frozen across polls" if cmp.frozen else "one poll") + f": {cmp.op} counts "
                       + ", ".join(f"rank {k}={v}" for k, v in sorted(counts.items())))
                for k in cmp.lagging:
                    lagging.setdefault(k, f"RAS {cmp.op} count {counts[k]} < {lead}")
                # the first operation the lagging rank never launched
                op, seq = op or cmp.op, seq or (min(counts[k] for k in cmp.lagging) + 1)
                conf = max(conf, 0.9 if cmp.frozen else 0.55)
    for r in c.ranks:
        m = r.first("watchdog_timeout")
        if m:
            c.note(r, m.line[m.line.find("[Rank"):][:200])
            op, seq = op or m.groups[2], seq or int(m.groups[1])
            ids.append("nccl_watchdog_timeout") if "nccl_watchdog_timeout" not in ids else None
            conf = max(conf, 0.7)
    if seq is not None:
        for r in c.ranks:
            for kind in ("dump_signal", "watchdog_status"):
                m = r.first(kind)
                if not m:
                    continue
                enq = int(m.groups[1])
                if enq < seq and r.rank is not None:
                    c.note(r, f"last enqueued work {enq} < {seq}")
                    lagging.setdefault(r.rank, f"last enqueued work {enq}")
                    conf = max(conf, 0.85)
    fr = [r for r in c.ranks if r.fr_status]
    if len(fr) >= 2:
        top = max(r.fr_status[0] for r in fr)
        for r in fr:
            c.note(r, f"Flight Recorder: last enqueued {r.fr_status[0]}, completed {r.fr_status[1]}"
                   + (f", pending {r.fr_pending}" if r.fr_pending else ""))
            if r.fr_status[0] < top and r.rank is not None:
                lagging.setdefault(r.rank, f"Flight Recorder last enqueued {r.fr_status[0]} < {top}")
                seq = seq or top
                conf = max(conf, 0.85)
    # py-spy: one rank waits in a collective/sync while another is elsewhere, both frozen
    waiting = [r for r in c.ranks if r.where and r.where[-1] in ("collective", "sync")]
    away = [r for r in c.ranks if r.where and r.where[-1] in ("sleep", "running")]
    if waiting and away:
        for r in waiting + away:
            d = r.pyspy[-1][1]
            moved = {True: "frozen", False: "moving", None: "one dump"}[r.frozen_frames]
            c.note(r, f"py-spy ({moved}): {r.where[-1]} in {pyspy_mod.user_frame(d) or pyspy_mod.top_frame(d)}")
        if lagging or all(r.frozen_frames for r in waiting + away):
            for r in away:
                if r.rank is not None:
                    lagging.setdefault(r.rank, "py-spy: not in the collective")
            conf = max(conf, 0.6) + 0.05
    if not lagging:
        return None
    lag = [r for r in c.ranks if r.rank in lagging]
    for r in lag:
        if r.gpu:
            g = r.gpu[-1]
            c.note(r, f"GPU {g.index}: {g.util:.0f}% util, {g.power_w:.0f} W" if g.util is not None and g.power_w is not None
                   else f"GPU {g.index}: n/a")
    frame = next((pyspy_mod.user_frame(r.pyspy[-1][1]) for r in lag if r.pyspy), "") or "no py-spy dump"
    who = ", ".join(f"rank {k}" for k in sorted(lagging))
    return c.make("R4", True, ids, conf, who=who, op=op or "a collective", seq=seq if seq is not None else "?",
                  frame=frame, lagging=sorted(lagging))


def rule_r5(c: _Ctx) -> Verdict | None:
    frozen_equal = [cmp for nf in c.nodes for cmp in nf.comparisons if cmp.frozen and not cmp.skew]
    if not frozen_equal:
        return None
    spinning = [r for r in c.ranks if r.gpu and all((g.util or 0) >= 90 for g in r.gpu)]
    syncing = [r for r in c.ranks if r.where and r.where[-1] in ("sync", "collective") and r.frozen_frames is not False]
    if not spinning and not syncing:
        return None
    for nf in c.nodes:
        for cmp in nf.comparisons:
            if cmp.frozen and not cmp.skew:
                c.note(nf.node, f"RAS frozen and equal: {cmp.op} " + ", ".join(f"rank {k}={v}" for k, v in cmp.counts))
    for r in spinning:
        g = r.gpu[-1]
        c.note(r, f"GPU {g.index} spinning: {g.util:.0f}% util at {g.power_w or 0:.0f} W")
    for r in syncing:
        c.note(r, f"py-spy: {pyspy_mod.top_frame(r.pyspy[-1][1])}")
    return c.make("R5", True, ["gpu_kernel_stuck"], 0.55 + 0.15 * bool(spinning) + 0.15 * bool(syncing))


# --------------------------------------------------------------------------- R0 / healthy


def rule_r0(c: _Ctx) -> Verdict:
    moving: list[str] = []
    for nf in c.nodes:
        for cmp in nf.comparisons:
            if cmp.advanced and any(t for t, _ in nf.ras[1:]):
                c.note(nf.node, f"RAS {cmp.op or 'counts'} advanced between polls: "
                       + ", ".join(f"rank {k}={v}" for k, v in cmp.counts))
                moving.append("RAS counts advance")
    for r in c.ranks:
        if r.frozen_frames is False:
            c.note(r, "py-spy frames differ between dumps")
            moving.append("py-spy frames change")
    for n in c.ev.nodes:
        for src, grew in n.log_growth.items():
            if grew > 0:
                c.note(n.node, f"{src}: {grew} new progress lines between rounds")
                moving.append("logs progress")
    symptoms = [r for r in c.ranks if r.has("shm_broadcast") or r.has("rpc_timeout")]
    warm = [r for r in c.ranks if r.has("warmup")]
    if moving:
        why = ", ".join(dict.fromkeys(moving))
        if symptoms and warm:
            return c.make("R0_warmup", False, [], 0.6, why=why)
        if symptoms:
            for r in symptoms:
                c.note(r, (r.first("shm_broadcast") or r.first("rpc_timeout")).line[:200])
            return c.make("R0", False, [], 0.7, why=why)
        return c.make("healthy", False, [], 0.6 + 0.15 * min(2, len(set(moving))), why=why)
    answered = [st for nf in c.nodes for _, st in nf.ras if st.ok and st.comms]
    clean = not any(r.has(k) for r in c.ranks for k in ("traceback", "conn_closed", "remote_exited", "watchdog_timeout"))
    if answered and clean and not any(cmp.skew for nf in c.nodes for cmp in nf.comparisons):
        for nf in c.nodes:
            for cmp in nf.comparisons:
                c.note(nf.node, f"RAS: {cmp.op} counts equal (" + ", ".join(f"rank {k}={v}" for k, v in cmp.counts) + ")")
        busy = [r for r in c.ranks if r.gpu and (r.gpu[-1].util or 0) > 50]
        for r in busy:
            c.note(r, f"GPU {r.gpu[-1].index} busy: {r.gpu[-1].util:.0f}%")
        return c.make("healthy", False, [], 0.45 + 0.1 * bool(busy), why="one RAS poll, counts equal")
    if not any(r.alive for r in c.ranks):
        finished = all(r.has("init_complete") for r in c.ranks) and clean
        if not c.ranks or finished or all(r.alive is False for r in c.ranks):
            if finished and c.ranks:
                for r in c.ranks:
                    c.note(r, f"finished; last line: {r.last_line[:160]}")
            if clean:
                return c.make("idle", False, [], 0.6)
    for r in c.ranks:
        if r.last_line:
            c.note(r, f"last line: {r.last_line[:180]}")
    return c.make("unknown", True, ["nccl_init_hang"] if not any(r.has("init_complete") for r in c.ranks) else [], 0.3)


def decide(ev: Evidence) -> Verdict:
    c = _Ctx(ev)
    verdict = None
    for rule in (rule_r1, rule_r2_r3, rule_r6, rule_r4, rule_r5):
        c.lines = {}  # a rule that does not fire leaves no evidence lines behind
        verdict = rule(c)
        if verdict is not None:
            break
    if verdict is None:
        c.lines = {}
        verdict = rule_r0(c)
    verdict.latent = latent_findings(ev, c.ranks)
    for item in verdict.latent:
        for node_line in item.get("evidence", []):
            node, _, text = node_line.partition(": ")
            verdict.evidence.setdefault(node, [])
    return verdict
