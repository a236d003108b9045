"""``launch``: the multi-node cluster, with a readiness gate and without the story's traps (stop: stop.py).

launch:
1. preflight: every node answers (a node that does not is the missing-worker finding, and nothing is
   started), the image exists with the same ID everywhere, the model is on every node, the ports are
   free, each rank's socket interface holds an address and its CPU KV cache fits its node's free
   memory, and no container with the cluster's name is left over (refused with the reason; ``--replace``
   removes it).  A cluster of this very plan already running on every node is attached to instead.
2. one confirmation showing one summary line per node (role, address, image, rank, ports, mounts),
   with the exact ``docker run`` per node as its details.
3. one container per node through the Docker API; with Ray, ``ray status`` must list every node and
   GPU before ``vllm serve`` starts detached in the head container.
4. the milestones and findings of every node's log, read from the face's engine (``ctx.watch``: the
   same events its screen and session get), until ``/health`` and ``/v1/models`` answer; a
   container that exits or the ready timeout ends it.

The cluster is detached: cancelling (Ctrl+C, Esc, a closed terminal, a lost SSH connection) stops
only the watching.  Containers are removed only when the launch itself failed, so no half-started
cluster is left; their last lines are kept in the result first.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from ..model import FAIL, Finding, FindingRaised, LogBatch, LogLine, MilestoneReached
from ..nodes.base import NodeError
from ..probes.cluster import LABEL_LAUNCH, Assessment, assess, catalogued_finding, find_cluster, parse_ray_status
from ..probes.serving import ServingError, endpoint, server_info
from .base import Action, ActionContext, ActionFailed, ActionResult
from .checks.fabric import SOCKET_IF_FIX, SOCKET_IF_VARS, node_addrs, unusable_socket_ifs
from .checks.fit import CPU_KV_VAR, kv_over_memory, read_meminfo
from .serving_target import forward_note
from .cluster_plan import ClusterPlan, NodePlan, PlanError, plan_cluster
from .tap import SourceWatch, ended
from .lock import owner_labels


def _is_forward(ctx: ActionContext, node: str) -> bool:
    """The head's serve port reached through sparktui's own ssh connection (gone when it exits)."""
    n = ctx.nodes.get(node)
    return n is not None and n.forwards_ports

class LaunchAction(Action):
    def __init__(self, *, replace: bool = False, timeout: float | None = None) -> None:
        self.replace = replace
        self.timeout = timeout
        self._remove_on_exit = False
        self._started: list[NodePlan] = []
        self._ids: dict[str, str] = {}  # node -> id of the container THIS launch started
        self._clients: dict[str, Any] = {}

    # ------------------------------------------------------------------ the workflow
    async def execute(self, ctx: ActionContext) -> ActionResult:
        c = ctx.config.cluster
        if c.launcher == "spark-vllm-docker":
            from .launch_script import launch_with_script

            return await launch_with_script(self, ctx)
        try:
            plan = plan_cluster(ctx.config, launch_id=uuid.uuid4().hex[:12], owner=owner_labels(ctx))
        except PlanError as exc:
            raise ActionFailed(f"cannot launch: {exc}") from None
        nodes = {np.node: ctx.nodes[np.node] for np in plan.nodes}
        findings: list[Finding] = []
        async with ctx.step("preflight", f"{len(nodes)} nodes, {plan.engine}/{plan.executor}, TP={plan.tp}") as rec:
            for w in plan.warnings:
                ctx.emit("preflight", "info", w)
            verdict = await self._preflight(ctx, plan, findings)
            if isinstance(verdict, ActionResult):
                rec.status, rec.message = FAIL, verdict.summary
                return verdict
            assessment, removals = verdict
            rec.message = "attach: the cluster is already running" if assessment.state == "running" else "ok"
        if assessment.state == "running":
            return await self._attach(ctx, plan, assessment)
        if not await self._plan_and_confirm(ctx, plan, removals):
            return ActionResult(self.name, False, "not confirmed")
        started = time.monotonic()
        # before the containers start: the engine's events of them, from their first line
        watch = ctx.watch([(np.node, np.container) for np in plan.nodes])
        try:
            await self._start(ctx, plan)
            if plan.executor == "ray" and plan.engine == "vllm":
                ok = await self._ray_gate(ctx, plan, findings)
                if not ok:
                    return await self._fail(ctx, plan, findings, "Ray did not list every node and GPU")
                await self._serve_in_head(ctx, plan)
            self._remove_on_exit = False  # from here on the cluster is detached from this process
            return await self._watch(ctx, plan, findings, started, attached=False, watch=watch)
        finally:
            watch.close()

    async def _plan_and_confirm(self, ctx: ActionContext, plan: ClusterPlan, removals) -> bool:
        """The plan said (one line per node) and the one confirmation; the full ``docker run``
        commands are its details (the TUI's ``v``, the CLI's ``--verbose``) and the step's record."""
        summary = plan.summary_lines()
        async with ctx.step("plan", f"{plan.name}: {len(plan.nodes)} containers") as rec:
            rec.message = f"{plan.name}: {len(plan.nodes)} containers ({plan.engine}/{plan.executor}, TP {plan.tp})"
            rec.data = {"summary": summary, "commands": plan.commands_text().splitlines(), "plan": plan.plan_hash,
                        "launch": plan.launch_id}
        if ctx.assume_yes:  # nothing will ask, so nothing else shows the plan: it goes with the progress
            for line in summary:
                ctx.emit("plan", "info", line)
        title = (f"Launch {plan.name} on {', '.join(np.node for np in plan.nodes)} ({plan.engine}/{plan.executor}, "
                 f"TP={plan.tp})?")
        return await self._confirm_and_replace(ctx, title, "\n".join(summary), removals,
                                               full=plan.commands_text(wrapped=True))

    async def _confirm_and_replace(self, ctx: ActionContext, title: str, detail: str, removals, *,
                                   full: str = "") -> bool:
        """The one confirmation (the stale containers' removal first, then the launch's plan; ``full``:
        the exact commands, shown on request); once given, the cleanup is armed and the stale
        containers go."""
        if removals:
            detail = "\n".join(f"docker rm -f {x.name}   # on {x.node}: {x.status}" for x in removals) + "\n" + detail
        if not await ctx.confirm(title, detail, full=full):
            return False
        ctx.on_cleanup(self._cleanup)
        for x in removals:
            async with ctx.step("replace", f"removing {x.name} ({x.status})", node=x.node):
                await self._remove(x.node, x.name)
        return True

    # ------------------------------------------------------------------ preflight
    async def _preflight(self, ctx: ActionContext, plan: ClusterPlan, findings: list[Finding]):
        c = ctx.config.cluster
        names = [np.node for np in plan.nodes]

        async def reach(np: NodePlan) -> tuple[str, Any]:
            node = ctx.nodes[np.node]
            try:
                async with asyncio.timeout(min(30.0, c.join_timeout)):
                    client = await node.docker()
                    await asyncio.to_thread(client.ping)
                    return np.node, client
            except Exception as exc:
                return np.node, exc

        reached = dict(await asyncio.gather(*(reach(np) for np in plan.nodes)))
        dead = {n: v for n, v in reached.items() if isinstance(v, BaseException)}
        for n, exc in dead.items():
            fid = "ray_worker_missing" if plan.executor == "ray" else "rendezvous_timeout"
            findings.append(catalogued_finding(
                fid, f"{n} cannot be reached, so its rank would never join; nothing was started", node=n,
                evidence=(f"{n}: {type(exc).__name__}: {exc}".strip(),),
                advice=f"bring {n} back (SSH and Docker must answer), or launch without it by removing it from the "
                       "config and lowering tensor_parallel"))
            ctx.emit("preflight", FAIL, f"unreachable: {exc}", node=n)
        if dead:
            return ActionResult(self.name, False, f"{', '.join(dead)} unreachable: nothing started",
                                findings=findings, data={"unreachable": {n: str(e) for n, e in dead.items()}})
        self._clients = dict(reached)
        for n in names:
            ctx.emit("preflight", "ok", "docker answers", node=n)
        # the running cluster, or what is left of one
        view = await find_cluster({n: ctx.nodes[n] for n in names}, plan.name)
        assessment = assess(view, names, plan.plan_hash)
        if assessment.state == "running":
            return assessment, []
        removals = view.all()
        if removals and not self.replace:
            findings.extend(assessment.findings)
            what = "; ".join(f.title for f in assessment.findings[:3])
            return ActionResult(self.name, False, f"refused: {what} (pass --replace to remove and launch)",
                                findings=findings, data={"cluster": view.to_json(), "state": assessment.state})
        # image: present and the same on every node
        ids: dict[str, str] = {}
        for n, client in self._clients.items():
            try:
                img = await asyncio.to_thread(client.images.get, plan.head.image)
                ids[n] = img.id
            except Exception as exc:
                findings.append(catalogued_finding("image_not_found", f"image {plan.head.image} is not on {n}", node=n,
                                         evidence=(str(exc)[:300],),
                                         advice=f"`sparktui push-image --to {n}` (or build it there)"))
        if len(set(ids.values())) > 1:
            findings.append(catalogued_finding("image_mismatch", f"{plan.head.image} differs between nodes",
                                     evidence=tuple(f"{n}: {i[:19]}" for n, i in ids.items()),
                                     advice="`sparktui push-image` from the head so every node runs the same ID"))
        # the model on every node
        for np in plan.nodes:
            path = next((h for h, v in np.volumes.items() if v["bind"] == ctx.config.model_mount), None)
            if not path:
                continue
            res = await ctx.nodes[np.node].run(["test", "-e", f"{path}/config.json"], timeout=20)
            if not res.ok:
                findings.append(catalogued_finding("model_path_missing", f"{path}/config.json is missing on {np.node}",
                                         node=np.node, evidence=(f"{np.node}: test -e {path}/config.json failed",),
                                         advice="copy the model there (same path on every node) or fix model_path"))
        # the interface each rank's sockets are pinned to must hold an address on its node: else its rendezvous
        # fails or hangs (the drill wrong-gloo-interface: ~60 s until Gloo's own error)
        for np in plan.nodes:
            if not any(np.env.get(v) for v in SOCKET_IF_VARS):
                continue
            addrs = await node_addrs(ctx.nodes[np.node])
            bad = unusable_socket_ifs(np.env, addrs) if addrs is not None else []  # no `ip`: the rank's error says it
            if bad:
                findings.append(catalogued_finding(
                    "wrong_network_interface", f"{np.node}: {', '.join(bad)} names no interface with an address there",
                    node=np.node, evidence=tuple(f"{np.node}: {b}" for b in bad),
                    advice=SOCKET_IF_FIX))
        # the KV cache each rank of the CPU build is told to allocate must fit in its node's free memory: else
        # vLLM refuses after its imports and the weights (the drill kv-too-big: ~45-65 s until its own error)
        for np in plan.nodes:
            if not np.env.get(CPU_KV_VAR):
                continue
            try:
                why = kv_over_memory(np.env, await read_meminfo(ctx.nodes[np.node], ctx.config.node(np.node).meminfo_path))
            except NodeError:  # unreadable: vLLM's own error will say it
                continue
            if why:
                findings.append(catalogued_finding(
                    "kv_cache_oom", f"{np.node}: the KV cache asked for does not fit in its free memory", node=np.node,
                    evidence=(f"{np.node}: {why}",),
                    advice=f"lower {CPU_KV_VAR} (GiB per rank) below the node's MemAvailable, leaving room for the "
                           "weights, or free memory on the node"))
        # ports on the head (attach skips this: the cluster holds them)
        ports = [plan.serve_port] + ([c.ray_port] if plan.executor == "ray" else [c.master_port])
        head = ctx.nodes[plan.head.node]
        for port in ports:
            try:
                res = await head.run(["ss", "-Hltnp", f"sport = :{port}"], timeout=10)
            except Exception:  # no ss: the container's own error will say it
                continue
            held = [line.strip() for line in res.text.splitlines() if line.strip()]
            if res.ok and held:
                findings.append(catalogued_finding("port_in_use", f"port {port} on {plan.head.node} is already taken",
                                         node=plan.head.node, evidence=tuple(held[:3]),
                                         advice="stop what holds it, or pick another port in the config"))
        errors = [f for f in findings if f.severity == "error"]
        if errors:
            return ActionResult(self.name, False, f"{errors[0].id}: {errors[0].title}", findings=findings)
        return assessment, removals

    # ------------------------------------------------------------------ start
    async def _start(self, ctx: ActionContext, plan: ClusterPlan) -> None:
        self._remove_on_exit = True  # until every container runs, a failure must not leave half a cluster
        for np in plan.nodes:  # the head first: the workers connect to it
            async with ctx.step("start", f"{np.container} ({np.role}, rank {np.rank})", node=np.node) as rec:
                client = self._clients[np.node]
                try:
                    container = await asyncio.to_thread(client.containers.run, np.image, **np.run_kwargs())
                except Exception:
                    await self._adopt_created(np, plan)
                    raise
                self._started.append(np)
                self._ids[np.node] = container.id
                rec.message = f"container {container.short_id} started (rank {np.rank})"
                ctx.emit("milestone", "progress", "container started", node=np.node, key="container_started")

    async def _adopt_created(self, np: NodePlan, plan: ClusterPlan) -> None:
        """A container docker created but could not start (e.g. no such executable) is still this
        launch's, by its launch label: hand it to the cleanup so no half cluster is left."""
        try:
            info = await asyncio.to_thread(self._clients[np.node].api.inspect_container, np.container)
        except Exception:
            return
        if ((info.get("Config") or {}).get("Labels") or {}).get(LABEL_LAUNCH) == plan.launch_id:
            self._started.append(np)
            self._ids[np.node] = info["Id"]

    async def _ray_gate(self, ctx: ActionContext, plan: ClusterPlan, findings: list[Finding]) -> bool:
        """Ray must list every node and enough GPUs before serve starts (the story's launcher never checked)."""
        c = ctx.config.cluster
        want_nodes, want_gpus = len(plan.nodes), plan.tp
        head = self._clients[plan.head.node]
        deadline = time.monotonic() + c.join_timeout
        text, seen = "", (0, 0.0)
        async with ctx.step("ray", f"waiting for {want_nodes} nodes and {want_gpus} GPUs in Ray") as rec:
            while True:
                try:
                    ctr = await asyncio.to_thread(head.containers.get, plan.head.container)
                    code, out = await asyncio.to_thread(ctr.exec_run, ["ray", "status"])
                    text = out.decode("utf-8", "replace") if isinstance(out, bytes) else str(out)
                    seen = parse_ray_status(text) if code == 0 else (0, 0.0)
                except Exception as exc:
                    text = f"{type(exc).__name__}: {exc}"
                ctx.emit("ray", "progress", f"{seen[0]}/{want_nodes} nodes, {seen[1]:g}/{want_gpus} GPU",
                         progress=min(1.0, seen[0] / want_nodes))
                if seen[0] >= want_nodes and seen[1] >= want_gpus:
                    rec.message = f"{seen[0]}/{want_nodes} nodes, {seen[1]:g} GPU"
                    rec.data = {"ray_status": text.splitlines()[-40:]}
                    for np in plan.nodes:
                        ctx.emit("milestone", "progress", "Ray node joined", node=np.node, key="ray_joined")
                    return True
                gone = await self._exited(plan)
                if gone or time.monotonic() > deadline:
                    break
                await asyncio.sleep(2)
            missing = [np.node for np in plan.nodes[1:]]
            ev = [line for line in text.splitlines() if line.strip()][-12:]
            for np in plan.nodes[1:]:
                ev += [f"{np.node}: {line}" for line in await self._tail(np, 4)]
            findings.append(catalogued_finding(
                "ray_worker_missing", f"Ray lists {seen[0]} of {want_nodes} nodes after "
                f"{c.join_timeout:.0f} s: a worker did not join", node=",".join(missing), evidence=ev,
                advice="check the worker's container log; RAY_NODE_IP_ADDRESS / --node-ip-address must be its fabric "
                       "IP and the head's port reachable from it"))
            rec.status, rec.message = FAIL, findings[-1].title
            return False

    async def _serve_in_head(self, ctx: ActionContext, plan: ClusterPlan) -> None:
        """``vllm serve`` detached inside the head container; its output joins the container's log."""
        client = self._clients[plan.head.node]
        # PID 1 (ray start --block) holds the log pipe: appending to its fds puts serve's output in
        # `docker logs`, where the story's launcher lost it to a terminal
        cmd = ["sh", "-c", 'exec "$@" >>/proc/1/fd/1 2>>/proc/1/fd/2', "sparktui-serve", *plan.serve_argv]
        async with ctx.step("serve", " ".join(plan.serve_argv[:3]) + " … (detached in the head)",
                            node=plan.head.node):
            ex = await asyncio.to_thread(client.api.exec_create, plan.head.container, cmd)
            await asyncio.to_thread(client.api.exec_start, ex["Id"], detach=True)

    # ------------------------------------------------------------------ watch until ready
    async def _attach(self, ctx: ActionContext, plan: ClusterPlan, assessment: Assessment) -> ActionResult:
        ctx.emit("attach", "info", f"launch {assessment.launch} already runs on every node: following it")
        for np in plan.nodes:
            ctx.emit("milestone", "progress", "container started", node=np.node, key="container_started")
        # what the engine read of the running cluster already, then what comes
        watch = ctx.watch([(np.node, np.container) for np in plan.nodes], backlog=True)
        try:
            return await self._watch(ctx, plan, [], time.monotonic(), attached=True, watch=watch)
        finally:
            watch.close()

    async def _watch(self, ctx: ActionContext, plan: ClusterPlan, findings: list[Finding], started: float,
                     *, attached: bool, watch: SourceWatch, extra: list | None = None) -> ActionResult:
        """``extra``: other readers feeding ``watch`` (the launcher script's output), stopped at the end."""
        c = ctx.config.cluster
        timeout = self.timeout or c.ready_timeout
        seen: dict[str, list[str]] = {np.node: ["container_started"] for np in plan.nodes}
        if plan.executor == "ray":
            for np in plan.nodes:
                seen[np.node].append("ray_joined")
        tails: dict[str, list[str]] = {np.node: [] for np in plan.nodes}
        errs: list[Finding] = []
        ended_as: dict[str, str] = {}  # node -> how its container's log ended (from the engine)
        outcome, why = "timeout", f"not ready within {timeout:.0f} s"
        deadline = time.monotonic() + timeout
        base: str | None = None
        info = None
        next_poll = time.monotonic() + 5
        async with ctx.step("ready", f"following {len(plan.nodes)} logs to /health and /v1/models") as rec:
            try:
                while True:
                    now = time.monotonic()
                    if now >= deadline:
                        break
                    try:
                        ev = await watch.next(max(0.05, min(deadline, next_poll) - now))
                    except TimeoutError:
                        info = await self._probe(ctx, plan)
                        if info is not None:
                            outcome = "ready"
                            break
                        next_poll = time.monotonic() + (1.0 if "api_ready" in seen[plan.head.node] else 5.0)
                        continue
                    end = ended(ev)
                    if end is not None:
                        node, cid, how = end
                        mine = self._ids.get(node)
                        if mine and cid and cid != mine:
                            continue  # an older container of that name, not this launch's
                        name = next((np.container for np in plan.nodes if np.node == node), "")
                        ended_as[node] = f"{name} {how}".strip()
                        gone = await self._exited(plan) if self._clients else dict(ended_as)
                        if gone:
                            outcome, why = "exited", "; ".join(f"{n}: {s}" for n, s in gone.items())
                            break
                        continue
                    self._take(ctx, ev, plan, seen, tails, errs)
                    if "api_ready" in seen[plan.head.node] and next_poll - time.monotonic() > 1.0:
                        next_poll = time.monotonic()
            finally:
                for p in extra or ():
                    p.stop()
            if outcome != "ready":  # end of input: the engine's last analysis of these logs
                more, ranked = await watch.finish()
                for ev in more:
                    self._take(ctx, ev, plan, seen, tails, errs)
            else:
                ranked = watch.ranked()
            ranked = [f for f in ranked if f.severity == "error"]
            errs[:] = [f for i, f in enumerate(ranked) if all(g.id != f.id for g in ranked[:i])]
            if outcome == "ready":
                base = await endpoint(ctx.nodes[plan.head.node], plan.serve_host, plan.serve_port)
                rec.message = (f"{base} serves {info.models[0]!r}" + (f" (vLLM {info.version})" if info.version else "")
                               + f" after {time.monotonic() - started:.0f} s")
            else:
                rec.status, rec.message = FAIL, why
        if outcome == "ready" and "api_ready" not in seen[plan.head.node]:
            # readiness came from HTTP before the head's log line did (a probe can win that race): the
            # milestone is reached, in the result's data as on the faces
            seen[plan.head.node].append("api_ready")
            ctx.emit("milestone", "progress", "API server ready", node=plan.head.node, key="api_ready")
        data = {"launch": plan.launch_id if not attached else "", "plan": plan.plan_hash, "attached": attached,
                "executor": plan.executor, "engine": plan.engine, "tp": plan.tp, "outcome": outcome,
                "seconds": round(time.monotonic() - started, 1),
                "nodes": {np.node: {"container": np.container, "rank": np.rank, "role": np.role, "ip": np.ip,
                                    "milestones": seen[np.node]} for np in plan.nodes}}
        if outcome == "ready":
            data.update(base_url=base, vllm_version=info.version, served_model=info.models[0], ready=True)
            if _is_forward(ctx, plan.head.node):
                data["serve_hint"] = forward_note(ctx.config, plan.head.node, base)
            how = "attached to the running cluster" if attached else f"launched on {len(plan.nodes)} nodes"
            return ActionResult(self.name, True, f"{how}: {base} answers ({info.models[0]})",
                                findings=[*findings, *errs], data=data)
        data["last_lines"] = {n: t[-12:] for n, t in tails.items()}
        findings.extend(errs)
        if outcome == "exited":
            if len(plan.nodes) > 1:
                findings.append(catalogued_finding(
                    "half_cluster", f"a container of {plan.name} exited during the launch ({why})",
                    evidence=tuple(why.split("; ")) + tuple(f"{n}: {line}" for n, t in tails.items() for line in t[-3:]),
                    advice="read the root cause above; the launch removes the rest of the cluster"))
            return await self._fail(ctx, plan, findings, why, data=data)
        # a timeout: the cluster is left running (it may still be loading); the finding says where it stands
        ctx.emit("ready", "warn", f"{why}; the cluster is left running (sparktui stop removes it)")
        return ActionResult(self.name, False, f"{why}; left running", findings=findings, data=data)

    async def _probe(self, ctx: ActionContext, plan: ClusterPlan):
        """/health and /v1/models through the head's connection; None until both answer."""
        try:
            base = await endpoint(ctx.nodes[plan.head.node], plan.serve_host, plan.serve_port)
            info = await server_info(base, api_key=ctx.config.api_key(), timeout=5)
        except (ServingError, OSError, Exception):
            return None
        return info if info.healthy and info.models else None

    def _take(self, ctx: ActionContext, ev, plan: ClusterPlan, seen: dict[str, list[str]],
              tails: dict[str, list[str]], errs: list[Finding]) -> None:
        """One engine event of the cluster's logs: lines into the tails, milestones and findings said."""
        if isinstance(ev, (LogBatch, LogLine)):
            node = ev.node if ev.node in tails else plan.head.node
            texts = [ln.text for ln in ev.lines] if isinstance(ev, LogBatch) else [ev.text]
            tails[node] = (tails[node] + texts)[-30:]
        elif isinstance(ev, FindingRaised):
            self._note(ctx, ev.finding.node or plan.head.node, ev.finding, seen, errs)
        elif isinstance(ev, MilestoneReached):
            self._note(ctx, ev.milestone.node or plan.head.node, ev.milestone, seen, errs)

    @staticmethod
    def _note(ctx: ActionContext, node_name: str, item, seen: dict[str, list[str]], errs: list[Finding]) -> None:
        if isinstance(item, Finding):
            if item.severity in ("error", "warning") and all(f.id != item.id or f.node != node_name for f in errs):
                errs.append(item)
                ctx.emit("finding", "warn" if item.severity == "error" else "info", item.title, node=node_name,
                         key=item.id)
            return
        mid = getattr(item, "id", None)
        if not mid:
            return
        have = seen.setdefault(node_name, [])
        if mid not in have or (mid == "weights_loading" and item.progress is not None):
            if mid not in have:
                have.append(mid)
            ctx.emit("milestone", "progress", item.text, progress=item.progress, node=node_name, key=mid)

    # ------------------------------------------------------------------ failure and cleanup
    async def _exited(self, plan: ClusterPlan) -> dict[str, str]:
        """Nodes whose container is no longer running, with docker's status."""
        out: dict[str, str] = {}
        for np in plan.nodes:
            why = await self._exited_one(np)
            if why:
                out[np.node] = why
        return out

    async def _exited_one(self, np: NodePlan) -> str:
        """'' while the node's container runs, else what became of it."""
        try:
            st = await asyncio.to_thread(self._clients[np.node].api.inspect_container, np.container)
        except Exception as exc:
            return f"{np.container} gone ({type(exc).__name__})"
        state = st.get("State", {})
        return "" if state.get("Running") else f"{np.container} exited ({state.get('ExitCode')})"

    async def _tail(self, np: NodePlan, n: int) -> list[str]:
        try:
            raw = await asyncio.to_thread(self._clients[np.node].api.logs, np.container, tail=n)
            return raw.decode("utf-8", "replace").splitlines()[-n:]
        except Exception:
            return []

    async def _fail(self, ctx: ActionContext, plan: ClusterPlan, findings: list[Finding], why: str,
                    data: dict | None = None) -> ActionResult:
        data = dict(data or {})
        if "last_lines" not in data:
            data["last_lines"] = {np.node: await self._tail(np, 12) for np in plan.nodes}
        self._remove_on_exit = True
        root = next((f for f in findings if f.severity == "error" and f.id not in ("engine_dead", "half_cluster")),
                    next((f for f in findings if f.severity == "error"), None))
        summary = f"{root.id}: {root.title}" if root else why
        return ActionResult(self.name, False, f"{summary} (the launch's containers are removed)", findings=findings,
                            data=data)

    async def _remove(self, node_name: str, name: str) -> None:
        import docker.errors

        client = self._clients[node_name]
        try:
            await asyncio.to_thread(client.api.remove_container, name, force=True)
        except docker.errors.NotFound:
            pass

    async def _cleanup(self) -> None:
        if not self._remove_on_exit:
            return
        for np in reversed(self._started):
            # by id where this launch started it: a container of the same name made since by someone
            # else is not ours to remove
            await self._remove(np.node, self._ids.get(np.node, np.container))
