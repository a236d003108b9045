"""Hang rules for faults: R1 peer dead, R2/R3 init hangs (bootstrap / transport), R6 fabric.

Pure functions of the gathered facts (rule_context.RuleContext); each notes the lines it relied on, per node.
"""

from __future__ import annotations

import re

from . import pyspy as pyspy_mod
from .facts import RankFacts
from .rule_context import RuleContext, Verdict, desync_in_logs, fix, rank_labels


# --------------------------------------------------------------------------- R1


def rule_r1(ctx: RuleContext) -> Verdict | None:
    dead: list[RankFacts] = []
    why: list[str] = []
    conf = 0.0
    for nf in ctx.nodes:
        for _, st in nf.ras:
            for m in st.dead_ranks:
                rf = next((r for r in ctx.ranks if r.rank == m.rank), None)
                if rf and rf not in dead:
                    dead.append(rf)
                state = "considered dead" if m.considered_dead else "unresponsive"
                ctx.note(nf.node, f"RAS: rank {m.rank} {state} (host {m.host or '?'}, pid {m.pid or '?'})")
                why.append(f"RAS says {state}")
                conf = max(conf, 0.9)
    alive = [r for r in ctx.ranks if r.alive]
    for r in ctx.ranks:
        if r.alive is False and alive and (r.has("init_complete") or r.has("init_start") or r.pid):
            if r not in dead:
                dead.append(r)
            ctx.note(r, f"process {r.pid or '?'} is gone; its log ends: {r.last_line[:160]}")
            why.append("its process is gone")
            conf = max(conf, 0.8)
    if not desync_in_logs(ctx.ranks):
        for r in ctx.ranks:
            m = r.first("conn_closed") or r.first("remote_exited")
            if m:
                ctx.note(r, m.line[:200])
                peers = [p for p in ctx.ranks if p is not r and (p.alive is False or p in dead)] or \
                        [p for p in ctx.ranks if p is not r and not p.first("conn_closed")]
                for p in peers[:1]:
                    if p not in dead:
                        dead.append(p)
                    if p.alive is False:
                        ctx.note(p, f"process {p.pid or '?'} is gone; its log ends: {p.last_line[:160]}")
                why.append("its peer saw the connection close")
                conf = max(conf, 0.75 if peers else 0.6)
    for n in ctx.ev.nodes:
        for line in n.dmesg:
            if "Out of memory: Killed process" in line and not _oom_could_be_a_rank(ctx, n.node, line):
                continue
            if "Out of memory: Killed process" in line or "NVRM: Xid" in line:
                ctx.note(n.node, "dmesg: " + line[:200])
                why.append("the kernel log shows " + ("an OOM kill" if "Out of memory" in line else "a GPU Xid"))
                conf = max(conf, 0.85)
        # an unreachable node is not evidence of a dead peer (a changed host key, a refused login):
        # verdict.decide() reports it as not inspected instead
    gone, others_run = _exited_containers(ctx)
    for c in gone:
        code = f" ({c['exit_code']})" if c.get("exit_code") is not None else ""
        ctx.note(c["node"], f"container {c['name']} ({_rank_of(c)}) {c['state']}{code}: {c.get('status', '')}".rstrip(": "))
        why.append(f"its container {c['state']}{code}")
        conf = max(conf, 0.9)
    if not why:
        return None
    who = rank_labels(dead) if dead else "a peer"
    ids = ["engine_dead"] if not dead else ["nccl_network_error"]
    if gone:
        # the container is the fact here: what ran the rank is gone, whatever the logs of the others say yet
        who = ", ".join([*(f"{_rank_of(c)} on {c['node']}" for c in gone), *([rank_labels(dead)] if dead else [])])
        ids = ["worker_died", *(["half_cluster"] if others_run else []), *(i for i in ids if i != "engine_dead")]
    if any("OOM kill" in w for w in why):
        ids.insert(0, "host_oom_killed")
    return ctx.make("R1", True, ids, conf + 0.03 * (len(why) - 1),
                  who=who, why="; ".join(dict.fromkeys(why)))


def _rank_of(c: dict) -> str:
    return f"rank {c['rank']}" if c.get("rank") is not None else "a rank"


def _exited_containers(ctx: RuleContext) -> tuple[list[dict], bool]:
    """The cluster's containers that ran and stopped (exited or dead; a created one may be a launch
    under way), and whether another of the same launch still runs.  A clean exit (0) of every one is a
    stopped cluster, not a death; one that ends while its peers run is a dead peer whatever its code."""
    rows = [c for c in (ctx.ev.cluster or {}).get("containers", []) if isinstance(c, dict)]
    running = [c for c in rows if c.get("state") in ("running", "restarting")]
    launches = {c.get("launch") for c in running}
    stopped = [c for c in rows if c.get("state") in ("exited", "dead")
               and (not running or c.get("launch") in launches)]
    if not running:
        stopped = [c for c in stopped if c.get("exit_code") not in (0,)]
    return stopped, bool(running)


_OOM_VICTIM = re.compile(r"Killed process (\d+) \(([^)]*)\)")
_WORKER_NAMES = ("vllm", "ray::", "sglang", "torchrun", "engine")


def _oom_could_be_a_rank(ctx: RuleContext, node: str, line: str) -> bool:
    """An OOM kill on the node is a dead peer only when it could have hit a rank: one of the ranks'
    pids, a worker-named process, or a node where a rank is gone.  The host's kernel log keeps
    kills from long before this run (another job, another day): those are not evidence here."""
    m = _OOM_VICTIM.search(line)
    if m is None:
        return True  # a line we cannot read: keep the old, cautious reading
    pid, name = int(m.group(1)), m.group(2).lower()
    ranks = [r for r in ctx.ranks if r.node == node]
    if any(r.pid == pid for r in ranks) or any(w in name for w in _WORKER_NAMES):
        return True
    return any(r.alive is False for r in ranks)


# --------------------------------------------------------------------------- R2 / R3


def rule_r2_no_interface(ctx: RuleContext) -> Verdict | None:
    """R2: NCCL's bootstrap found no socket interface (NCCL_SOCKET_IFNAME names none on the node)."""
    noif = [r for r in ctx.ranks if r.has("bootstrap_noif")]
    if not noif:
        return None
    for r in noif:
        ctx.note(r, r.first("bootstrap_noif").line[:200])
        ifname = r.env.get("NCCL_SOCKET_IFNAME", "")
        if ifname:
            ctx.note(r, f"NCCL_SOCKET_IFNAME={ifname}")
    ifname = next((r.env.get("NCCL_SOCKET_IFNAME") for r in noif if r.env.get("NCCL_SOCKET_IFNAME")), "")
    text = fix("no_interface", ifname="=" + ifname if ifname else "", node=noif[0].node or "the node")
    return ctx.make("R2", True, ["nccl_comm_init_failed", "wrong_network_interface"], 0.9, who=rank_labels(noif),
                    fix=text)


def _master_addr(ranks: list[RankFacts]) -> str:
    return next((f"{r.env['MASTER_ADDR']}:{r.env.get('MASTER_PORT', '?')}" for r in ranks if r.env.get("MASTER_ADDR")),
                "MASTER_ADDR:MASTER_PORT")


def _rank_list(ranks: list[int]) -> str:
    return ", ".join(f"rank {k}" for k in ranks)


def rule_r2_rendezvous(ctx: RuleContext) -> Verdict | None:
    """R2: ranks wait at the torch rendezvous (its timeout line, or py-spy inside it)."""
    rdv = [r for r in ctx.ranks if r.has("rendezvous_wait") or (r.where and all(w == "rendezvous" for w in r.where))]
    if not rdv:
        return None
    world = max((r.world_size or 0 for r in ctx.ranks), default=0)
    for r in rdv:
        m = r.first("rendezvous_wait")
        if m:
            ctx.note(r, m.line[:200])
            world = max(world, int(m.groups[2]))
        for t, d in r.pyspy[:1]:
            ctx.note(r, f"py-spy: waiting in {pyspy_mod.top_frame(d)}")
        addr = r.env.get("MASTER_ADDR")
        if addr:
            ctx.note(r, f"MASTER_ADDR={addr} MASTER_PORT={r.env.get('MASTER_PORT', '?')}")
    present = {r.rank for r in ctx.ranks if r.rank is not None and (r.alive or r.alive is None)}
    inspected_all = all(n.reachable for n in ctx.ev.nodes)
    missing = [k for k in range(world) if k not in present] if world and inspected_all else []
    who = _rank_list(missing) + " never joined" if missing else rank_labels(rdv) + " waiting"
    text = fix("rendezvous", missing=_rank_list(missing) or "the missing ranks", addr=_master_addr(rdv))
    ids = ["nccl_init_hang"] + (["rendezvous_timeout"] if any(r.has("rendezvous_wait") for r in rdv) else [])
    return ctx.make("R2", True, ids, 0.85 if missing else 0.7, who=who, fix=text, missing=missing)


def rule_r2_never_joined(ctx: RuleContext) -> Verdict | None:
    """R2: ranks of the declared world that no node shows, while no communicator completed."""
    missing = _never_joined(ctx)
    if not missing or any(r.has("init_complete") for r in ctx.ranks):
        return None
    waiting = [r for r in ctx.ranks if r.alive or r.alive is None]
    for r in waiting:
        ctx.note(r, f"alive, WORLD_SIZE={r.world_size}, no NCCL communicator yet; last line: {r.last_line[:140]}")
        for _, d in r.pyspy[-1:]:
            ctx.note(r, f"py-spy: {pyspy_mod.where(d)} in {pyspy_mod.top_frame(d)}")
    for n in ctx.ev.nodes:
        for chk in n.fabric:
            if chk.get("check") == "tcp_connect":
                ctx.note(n.node, f"TCP {chk['target']}: {'ok' if chk.get('ok') else 'failed ' + str(chk.get('detail', ''))[:80]}")
    text = fix("never_joined", missing=_rank_list(missing), addr=_master_addr(waiting))
    return ctx.make("R2", True, ["nccl_init_hang"], 0.8, who=_rank_list(missing) + " never joined", fix=text,
                    missing=missing)


def _stuck_in_init(ctx: RuleContext) -> list[RankFacts]:
    """Ranks whose NCCL init started and never completed, with the lines that say so noted (and the
    ranks that did complete, waiting for them)."""
    stuck = [r for r in ctx.ranks if r.has("init_start") and not r.has("init_complete")]
    if not stuck:
        return []
    for r in stuck:
        ctx.note(r, f"Init START without COMPLETE; last NCCL line: {r.last_nccl[:180]}")
        for kind in ("connect_retry", "connect_failed", "ibv_failed", "bootstrap_if"):
            m = r.first(kind)
            if m:
                ctx.note(r, m.line[:200])
        tops = [pyspy_mod.top_frame(d) for _, d in r.pyspy]
        if tops:
            ctx.note(r, f"py-spy: {tops[-1]}")
        busy = sum(1 for t in r.threads if t.state == "R")
        if r.threads:
            ctx.note(r, f"threads: {len(r.threads)} ({busy} running)")
    for r in ctx.ranks:
        if not r.has("init_complete"):
            continue
        ctx.note(r, "Init COMPLETE")
        if r.pyspy:
            ctx.note(r, f"py-spy: waits in {pyspy_mod.top_frame(r.pyspy[-1][1])} (its peer never connected)")
        if r.gpu and r.gpu[-1].util is not None:
            ctx.note(r, f"GPU {r.gpu[-1].index}: {r.gpu[-1].util:.0f}% util at {r.gpu[-1].power_w or 0:.0f} W")
    return stuck


def rule_r3_transport(ctx: RuleContext) -> Verdict | None:
    """R3: init stuck in transport setup (channels or IB named, or a peer that did complete)."""
    stuck = _stuck_in_init(ctx)
    transport = [r for r in stuck if r.has("channel") or r.has("ib_using") or r.has("ibv_failed")]
    if not stuck or not (transport or any(r.has("init_complete") for r in ctx.ranks)):
        return None
    ids = ["nccl_init_hang"] + (["nccl_ib_error"] if any(r.has("ibv_failed") for r in stuck) else [])
    return ctx.make("R3", True, ids, 0.75, who=rank_labels(stuck))


def rule_r2_bootstrap(ctx: RuleContext) -> Verdict | None:
    """R2: init started and its bootstrap never finished (tried after R3, which takes transport hangs)."""
    stuck = _stuck_in_init(ctx)
    if not stuck:
        return None
    retry = any(r.has("connect_retry") or r.has("connect_failed") for r in stuck)
    return ctx.make("R2", True, ["nccl_init_hang"], 0.8 if retry else 0.7, who=rank_labels(stuck),
                    fix=fix("bootstrap_retry" if retry else "bootstrap"))


def _never_joined(ctx: RuleContext) -> list[int]:
    """Ranks of the declared world that no node shows at all (no process, no log, no RAS entry)."""
    world = max((r.world_size or 0 for r in ctx.ranks if r.alive), default=0)
    if not world or any(not n.reachable for n in ctx.ev.nodes):
        return []  # a rank on a node that was not inspected may well have joined
    seen = {r.rank for r in ctx.ranks if r.rank is not None}
    seen |= {rr.rank for nf in ctx.nodes for _, st in nf.ras for cm in st.comms for rr in cm.ranks}
    return [k for k in range(world) if k not in seen]


# --------------------------------------------------------------------------- R6


def rule_r6(ctx: RuleContext) -> Verdict | None:
    bad: list[str] = []
    for r in ctx.ranks:
        m = r.first("ib_completion")
        if m:
            ctx.note(r, m.line[:200])
            bad.append(f"{r.label} (completion error)")
    for n in ctx.ev.nodes:
        for chk in n.fabric:
            if chk.get("check") == "ping_mtu" and chk.get("ok") is False:
                ctx.note(n.node, f"ping -M do to {chk.get('target')} failed: {chk.get('detail', '')[:120]}")
                bad.append(f"{n.node} -> {chk.get('target')}")
    if not bad:
        return None
    return ctx.make("R6", True, ["nccl_network_error"], 0.7 + 0.05 * min(3, len(bad)), who=", ".join(bad))
