"""``validate``: start the image on ONE node with the model mounted read-only, the way the image
wants to be started (its env variables when it has a custom entrypoint that ignores arguments,
else ``vllm serve`` arguments), read its log's milestones and findings from the face's engine
(``ctx.watch``: the events its screen and session get) until the API server is up, or a finding
says why not; then prove the server answers: ``/health``, ``/v1/models`` and one real chat
completion through the openai client, reached through the node's own connection, and report the
vLLM version it runs (``GET /version``).

When the memory fit already says one node cannot hold the model, it says so BEFORE starting: the
run then validates architecture support only, and "architecture OK, OOM as predicted" is a pass.
The container is removed at the end, on failure and on cancel.
"""

from __future__ import annotations

import asyncio
import time

from ..diagnosis.catalogue import finding
from ..model import FAIL, Finding, FindingRaised, LogBatch, LogLine, MilestoneReached
from ..probes.image import ImageInfo, ImageNotFound, default_image, inspect_image, run_in_image
from ..probes.model import ModelProbeError, probe_model
from ..probes.serving import ServingError, chat, endpoint, server_info
from .base import Action, ActionContext, ActionFailed, ActionResult
from .checks.entrypoint import passes_args
from .tap import SourceWatch, ended
from ..units import gib
from .checks.fit import compute_fit, read_meminfo
from .lock import LABEL_ACTION, LABEL_OPERATOR, LABEL_SESSION, owner_labels

OOM_IDS = {"cuda_oom", "kv_cache_oom", "insufficient_free_memory", "host_oom_killed"}
ENGINE_READY = {"kv_cache", "cuda_graphs", "api_ready"}  # enough when an OOM is predicted anyway
SERVING = {"api_ready"}
SMOKE_PROMPT = "Say hello in one short sentence."
CONSEQUENCES = {"engine_dead"}  # what follows any start-up failure: the cause is the other finding
VALIDATE_LABEL = "sparktui.validate"
# env names community images read, per role (the names differ from one image tag to the next)
ENV_ROLES = {
    "model": ("MODEL_PATH", "MODEL_ID"),
    "port": ("PORT", "VLLM_PORT"),
    "host": ("HOST", "VLLM_HOST"),
    "max_len": ("MAX_MODEL_LEN", "VLLM_MAX_MODEL_LEN"),
    "util": ("GPU_MEMORY_UTIL", "VLLM_GPU_MEMORY_UTIL", "GPU_MEMORY_UTILIZATION"),
}


def env_for_image(info: ImageInfo, mount: str, port: int, host: str, max_len: int | None, util: float) -> dict[str, str]:
    have = info.env_map
    values = {"model": mount, "port": str(port), "host": host, "max_len": str(max_len) if max_len else None,
              "util": f"{util}"}
    out = {}
    for role, names in ENV_ROLES.items():
        if values[role] is None:
            continue
        present = [n for n in names if n in have] or ([names[0]] if role == "model" else [])
        for n in present:
            out[n] = values[role]
    return out


class ValidateAction(Action):
    def __init__(self, node_name: str | None = None, image: str | None = None, timeout: float = 600.0) -> None:
        self.node_name, self.image, self.timeout = node_name, image, timeout

    async def execute(self, ctx: ActionContext) -> ActionResult:
        c = ctx.config.cluster
        node_name = self.node_name or ctx.config.head.name
        if node_name not in ctx.nodes:
            raise ActionFailed(f"unknown node {node_name!r}")
        node = ctx.nodes[node_name]
        findings: list[Finding] = []
        image = self.image or await default_image(ctx.config.cluster, node)
        path = ctx.config.model_path_for(node_name)
        mount = ctx.config.model_mount
        async with ctx.step("plan", f"{image} on {node_name}", node=node_name) as rec:
            try:
                info = await inspect_image(node, image)
            except ImageNotFound as exc:
                findings.append(finding("image_not_found", title=str(exc), source=f"{node_name}/validate", node=node_name,
                                        advice="check --image / cluster.image, or push-image it to this node"))
                rec.status, rec.message = FAIL, str(exc)
                return ActionResult(self.name, False, str(exc), findings=findings)
            try:
                model = await probe_model(node, path) if path else None
            except ModelProbeError as exc:
                model = None
                findings.append(finding("model_path_missing", title=str(exc), source=f"{node_name}/validate", node=node_name,
                                        evidence=(f"path {path!r}",), advice="copy the model there or fix model_path"))
            if model is None:
                msg = findings[-1].title if findings else "no model_path configured"
                rec.status, rec.message = FAIL, msg
                return ActionResult(self.name, False, msg, findings=findings)
            predicted_oom, fit_text = False, "memory not checked"
            try:
                mi = await read_meminfo(node, ctx.config.node(node_name).meminfo_path)
                if model.total_bytes and "MemTotal" in mi:
                    f = compute_fit(model.total_bytes, 1, mi["MemTotal"], mi.get("MemAvailable", 0),
                                    c.gpu_memory_utilization)
                    predicted_oom = not f.fits
                    fit_text = (f"{gib(model.total_bytes)} of weights vs {gib(f.reservation)} vLLM may take on one node")
            except Exception:  # memory is advice here, never a reason not to validate
                pass
            env_mode = bool(info.entrypoint) and not await self._passes_args(node, image, info)
            if env_mode:
                env = env_for_image(info, mount, c.serve_port, c.serve_host, c.max_model_len, c.gpu_memory_utilization)
                command = None
                how = "custom ENTRYPOINT configured by env: " + " ".join(f"{k}={v}" for k, v in env.items())
            else:
                env = {}
                command = ["vllm", "serve", mount, "--tensor-parallel-size", "1",
                           "--gpu-memory-utilization", f"{c.gpu_memory_utilization}",
                           "--host", c.serve_host, "--port", str(c.serve_port)]
                if c.max_model_len:
                    command += ["--max-model-len", str(c.max_model_len)]
                command += list(c.serve_args)
                how = "vllm serve arguments: " + " ".join(command)
            env = {**dict(c.env), **env}
            rec.data = {"image": image, "mode": "env" if env_mode else "args", "env": env, "command": command,
                        "predicted_oom": predicted_oom}
            rec.message = how
            if predicted_oom:
                rec.status = "warn"
                rec.message = (f"OOM expected ({fit_text}): this run validates architecture support only; {how}")
        cname = f"{c.name}-validate"
        if not await ctx.confirm(f"Start {cname} ({image}) on {node_name}?",
                                 f"model {path} -> {mount} (read-only); {how}"):
            return ActionResult(self.name, False, "not confirmed")
        client = await node.docker()
        import docker.errors

        mine = owner_labels(ctx)

        async def owner_of() -> dict | None:
            """Labels of the container named cname on the node (None: there is none)."""
            try:
                info = await asyncio.to_thread(client.api.inspect_container, cname)
            except docker.errors.NotFound:
                return None
            return (info.get("Config") or {}).get("Labels") or {}

        async def remove() -> None:
            # only this run's own container (operator AND session): never another operator's
            labels = await owner_of()
            if labels is not None and all(labels.get(k) == v for k, v in mine.items() if k != LABEL_ACTION):
                try:
                    await asyncio.to_thread(lambda: client.api.remove_container(cname, force=True))
                except docker.errors.NotFound:
                    pass

        ctx.on_cleanup(remove)
        async with ctx.step("start", f"{cname} on {node_name}", node=node_name) as rec:
            labels = await owner_of()
            if labels is not None:  # a leftover of an earlier, killed run
                owner = labels.get(LABEL_OPERATOR)
                if owner and owner != mine[LABEL_OPERATOR]:
                    raise ActionFailed(f"{cname} on {node_name} belongs to {owner} ({labels.get(LABEL_ACTION, '?')}, "
                                       f"session {labels.get(LABEL_SESSION, '?')}): not removed; ask them, or "
                                       f"`docker rm -f {cname}` on {node_name} yourself")
                # ours from an earlier run, or from a sparktui before owner labels: we hold the cluster lock
                await asyncio.to_thread(lambda: client.api.remove_container(cname, force=True))
            # as the cluster runs it: host network and IPC (vLLM's shared-memory broadcast outgrows
            # docker's 64 MiB /dev/shm).  One node: no RDMA, so no memlock ulimit to ask for.
            kw = dict(name=cname, detach=True, network_mode="host", ipc_mode="host",
                      labels={VALIDATE_LABEL: "1", **mine},
                      environment=env, volumes={path: {"bind": mount, "mode": "ro"}})
            if command:
                kw["command"] = command
            # before it starts: the engine's events of it, from its first line
            watch = ctx.watch([(node_name, cname)])
            try:
                container = await asyncio.to_thread(lambda: client.containers.run(image, **kw))
            except BaseException:
                watch.close()
                raise
            rec.message = f"{container.short_id} started; model mounted read-only at {mount}"
        try:
            verdict = await self._follow(ctx, node_name, watch, container.id, predicted_oom, findings)
        finally:
            watch.close()
        if not verdict.ok and verdict.findings and any(f.id == "port_in_use" for f in verdict.findings):
            verdict = await self._name_port_holder(node, c.serve_port, verdict)
        if verdict.ok and verdict.data.get("outcome") == "ready" and not predicted_oom:
            verdict = await self._serve_check(ctx, node_name, node, verdict)
        return verdict

    @staticmethod
    async def _name_port_holder(node, port: int, verdict: ActionResult) -> ActionResult:
        """vLLM's "Address already in use" does not say which port nor who holds it: add both."""
        from dataclasses import replace

        extra = [f"serve port {port} on {node.name} is already taken"]
        try:
            res = await node.run(["ss", "-Hltnp", f"sport = :{port}"], timeout=10)
            extra += [l.strip() for l in res.text.splitlines() if l.strip()][:3]
        except Exception:  # who holds it is a courtesy; the finding stands without it
            pass
        found = [replace(f, evidence=(*f.evidence, *extra)) if f.id == "port_in_use" else f for f in verdict.findings]
        return replace(verdict, findings=found)

    async def _serve_check(self, ctx: ActionContext, node_name: str, node, verdict: ActionResult) -> ActionResult:
        """The server answers: /health (polled until 200), /version, /v1/models, one chat completion."""
        c = ctx.config.cluster
        data = dict(verdict.data)
        api_key = ctx.config.api_key()
        async with ctx.step("serve", f"the API on {node_name}:{c.serve_port}", node=node_name) as rec:
            try:
                base = await endpoint(node, c.serve_host, c.serve_port)
                deadline = time.monotonic() + 60
                while True:  # "Starting vLLM API server" comes a moment before /health answers
                    try:
                        info = await server_info(base, api_key=api_key)
                    except ServingError as exc:
                        if exc.kind == "auth" or time.monotonic() > deadline:
                            raise
                        info = None
                    if info is not None and info.healthy:
                        break
                    if time.monotonic() > deadline:
                        raise ServingError(f"{base}/health did not answer 200 within 60 s", kind="unhealthy")
                    await asyncio.sleep(0.5)
                if not info.models:
                    raise ServingError(f"{base}/v1/models lists no model", kind="no_model")
                answer = await chat(base, info.models[0], SMOKE_PROMPT, api_key=api_key, max_tokens=64)
            except ServingError as exc:
                rec.status, rec.message = FAIL, str(exc)
                data["serving"] = {"error": str(exc)}
                f = finding("server_not_answering", title=f"the API server does not answer: {exc}",
                            source=f"{node_name}/validate", node=node_name, evidence=(str(exc),),
                            advice="read the container log; check serve_host/serve_port and the API key")
                return ActionResult(self.name, False, f.title, findings=[*verdict.findings, f], data=data)
            data["vllm_version"] = info.version
            data["served_model"] = info.models[0]
            if node.forwards_ports:  # the URL is this command's own forward
                from .serving_target import forward_note

                data["serve_hint"] = forward_note(ctx.config, node_name, base)
            data["answer"] = answer.to_json()
            said = (answer.content or "").strip() or f"(no content; reasoning: {(answer.reasoning or '')[:60]!r})"
            rec.message = (f"vLLM {info.version or '?'} serves {info.models[0]!r}; chat answered "
                           f"{said[:80]!r} ({answer.finish_reason}, {answer.total_s:.2f} s)")
            rec.data = {"base_url": base, "health": info.healthy, "version": info.version, "models": list(info.models)}
        version = f"vLLM {info.version}: " if info.version else ""
        return ActionResult(self.name, True, f"{version}architecture resolved, the server answered a chat completion",
                            findings=verdict.findings, data=data)

    async def _passes_args(self, node, image: str, info: ImageInfo) -> bool:
        if not info.entrypoint[0].startswith("/"):
            return False
        rc, text = await run_in_image(node, image, ["cat"], [info.entrypoint[0]], timeout=60)
        return rc == 0 and passes_args(text)

    async def _follow(self, ctx: ActionContext, node_name: str, watch: SourceWatch, cid: str, predicted_oom: bool,
                      findings: list[Finding]) -> ActionResult:
        seen_ms: set[str] = set()
        errs: list[Finding] = []
        tail: list[str] = []
        deadline = time.monotonic() + self.timeout
        outcome = "timeout"

        def take(ev) -> None:
            nonlocal tail
            if isinstance(ev, (LogBatch, LogLine)):
                tail = (tail + ([ln.text for ln in ev.lines] if isinstance(ev, LogBatch) else [ev.text]))[-20:]
            elif isinstance(ev, FindingRaised):
                self._note(ctx, node_name, ev.finding, seen_ms, errs)
            elif isinstance(ev, MilestoneReached):
                self._note(ctx, node_name, ev.milestone, seen_ms, errs)

        async with ctx.step("follow", "milestones from the container log", node=node_name) as rec:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                try:
                    ev = await watch.next(left)  # never loses a Ctrl+C (waiting.py)
                except TimeoutError:
                    break
                end = ended(ev)
                if end is not None:
                    if end[1] and end[1] != cid:
                        continue  # the leftover of an earlier run, removed before this one started
                    outcome = "exited"
                    break
                take(ev)
                if seen_ms & (ENGINE_READY if predicted_oom else SERVING):
                    outcome = "ready"
                    break
            more, ranked = await watch.finish()  # the engine's end-of-input analysis of this log
            for ev in more:
                take(ev)
            # the Diagnoser's causal order (root cause first), one finding per id
            root_first: list[Finding] = []
            for f in ranked:
                if f.severity == "error" and all(g.id != f.id for g in root_first):
                    root_first.append(f)
            errs[:] = root_first
            rec.data = {"milestones": sorted(seen_ms), "last_lines": tail[-10:]}
            rec.message = f"{outcome}; milestones: {', '.join(sorted(seen_ms)) or 'none'}"
        return self._verdict(ctx, node_name, outcome, seen_ms, errs, predicted_oom, findings, tail)

    @staticmethod
    def _note(ctx, node_name, item, seen_ms: set[str], errs: list[Finding]) -> None:
        if isinstance(item, Finding):
            if item.severity == "error" and all(f.id != item.id for f in errs):
                errs.append(item)
                ctx.emit("follow", "info", f"finding {item.id}: {item.title}", node=node_name)
        elif getattr(item, "id", None) == "container_started":
            return  # the start step said so already
        elif getattr(item, "id", None) and item.id not in seen_ms:
            seen_ms.add(item.id)
            ctx.emit("follow", "progress", item.text, progress=item.progress, node=node_name)

    def _verdict(self, ctx, node_name, outcome, seen_ms, errs, predicted_oom, findings, tail) -> ActionResult:
        arch = "arch_resolved" in seen_ms
        ooms = [f for f in errs if f.id in OOM_IDS]
        # errs are ranked root cause first (the Diagnoser's order); engine_dead and the like follow it
        root = next((f for f in errs if f.id not in CONSEQUENCES), errs[0] if errs else None)
        data = {"milestones": sorted(seen_ms), "outcome": outcome, "predicted_oom": predicted_oom,
                "architecture_resolved": arch, "oom": bool(ooms)}
        if arch and outcome == "ready" and not errs:
            return ActionResult(self.name, True, "architecture resolved, engine initialised", data=data)
        if arch and predicted_oom and root is not None and root.id in OOM_IDS:
            return ActionResult(self.name, True, "architecture OK, OOM as predicted (one node cannot hold the model; "
                                "serve it with TP across the nodes)", findings=[*findings, *ooms], data=data)
        if root is not None:
            rest = [f for f in errs if f is not root]
            return ActionResult(self.name, False, f"{root.id}: {root.title}", findings=[*findings, root, *rest],
                                data=data)
        what = "timed out" if outcome == "timeout" else "the container exited"
        f = finding("engine_dead" if outcome != "timeout" else "rendezvous_timeout",
                    title=f"{what} before the engine initialised", source=f"{node_name}/validate", evidence=tail[-5:],
                    node=node_name, advice="read the last lines; run `sparktui diagnose` on the full log")
        return ActionResult(self.name, False, f.title, findings=[*findings, f], data=data)
