"""``build-image`` (the hybrid image, built through the head node's Docker API) and ``push-image``
(node-to-node copy, then proof of identical image IDs).

Push design: the SOURCE node runs ``docker save IMG | <byte counter> | ssh TARGET docker load``.
The bytes go straight from one node to the other over the fabric address (``fabric_ip``, else
``host``) with the node's own SSH trust (``cluster.peer_ssh_args`` adds options such as ``-i``);
nothing passes through the operator's machine and nothing is written to disk.  The counter is GNU
dd on the source reporting bytes once a second (the progress bar and MB/s); the pipeline runs with ``pipefail`` and reports its exit status, so a failed ``docker load`` (a
full disk) is seen, and the target is checked to hold no new image afterwards.
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
import uuid

from ..nodes.base import Node, NodeError, quote_argv
from ..probes.image import ImageNotFound, ImageProbeError, inspect_image, probe_support
from ..probes.model import ModelProbeError, probe_model
from .base import Action, ActionContext, ActionFailed, ActionResult
from .checks.entrypoint import passes_args
from .dockerfile import HybridSpec, build_context, entries_from_model, render_dockerfile
from ..model import Finding

MB = 1_000_000
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")

# Constant pipeline; every variable part is a positional argument, never pasted into the script.
# GNU dd counts the bytes between `docker save` and `ssh` (status=progress, once a second, on
# stderr with carriage returns, turned into lines here): a C copy loop, no measurable cost.
PIPELINE = ('set -o pipefail; img=$1; shift; '
            'docker save "$img" | dd bs=1M status=progress 2> >(tr "\\r" "\\n" >&2) | ssh "$@"; rc=$?; '
            'echo "SPARKTUI-EXIT $rc"')
_DD_BYTES = re.compile(r"^(\d+) bytes")


# Stops exactly the pipeline whose $0 is the token: its bash and that bash's children (save, counter,
# ssh), then waits (bounded) until they are gone.  Skips itself: its own argv holds the token too.
KILL_PIPELINE = r'''
for p in $(pgrep -f -- "$1"); do
  [ "$p" = "$$" ] && continue
  kids=$(pgrep -P "$p")
  kill -TERM $kids "$p" 2>/dev/null
  for i in $(seq 50); do
    alive=0
    for k in $kids $p; do kill -0 "$k" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && break
    sleep 0.2
  done
done
'''


def _finding(id: str, title: str, node: str = "", evidence=(), advice: str = "", severity: str = "error") -> Finding:
    return Finding(id=id, severity=severity, title=title, source=f"{node}/image" if node else "image",  # type: ignore[arg-type]
                   evidence=tuple(evidence), advice=advice, node=node)


async def image_exists(node: Node, ref: str) -> str | None:
    try:
        return (await inspect_image(node, ref)).id
    except ImageNotFound:
        return None


async def default_image(ctx: ActionContext, node: Node) -> str:
    c = ctx.config.cluster
    if c.hybrid_image and await image_exists(node, c.hybrid_image):
        return c.hybrid_image
    return c.image


def _unix_url(client) -> str:
    """The unix:// URL a docker client talks to (its base_url reads http+docker://localhost)."""
    try:
        sock = client.api.get_adapter("http+docker://localhost").socket_path
        return "unix://" + sock
    except Exception:
        return client.api.base_url


def _is_build_step(command: str) -> bool:
    """Containers the classic builder makes for our Dockerfile's steps."""
    return "patch_vllm_registry" in command or "#(nop)" in command


def _catching(fn, state: dict):
    def wrapped() -> None:
        try:
            fn()
        except Exception as exc:  # reported by the step, not lost in a thread
            state["exc"] = exc
    return wrapped


def _shutdown_stream(resp) -> None:
    """Cut a streaming HTTP response's socket so a thread blocked reading it wakes up."""
    if resp is None:
        return
    import socket

    for get in (lambda r: r.raw.connection.sock, lambda r: r.raw._fp.fp.raw._sock):
        try:
            sock = get(resp)
        except AttributeError:
            continue
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
    resp.close()


class _KeepsFindings(Action):
    """ActionFailed ends a step early; the findings gathered so far still belong in the result."""

    findings: list[Finding]

    async def run(self, ctx: ActionContext) -> ActionResult:
        result = await super().run(ctx)
        for f in getattr(self, "findings", []):
            if f not in result.findings:
                result.findings.append(f)
        return result


class BuildImageAction(_KeepsFindings):
    name = "build-image"
    title = "Build the hybrid image"
    mutating = True

    def __init__(self, base: str | None = None, tag: str | None = None, node: str | None = None) -> None:
        self.base, self.tag, self.node_name = base, tag, node
        self.findings: list[Finding] = []

    async def execute(self, ctx: ActionContext) -> ActionResult:
        c = ctx.config.cluster
        node = ctx.nodes[self.node_name or ctx.config.head.name]
        base = self.base or c.base_image or c.image
        tag = self.tag or c.hybrid_image or f"{base.split(':')[0]}-hybrid"
        findings = self.findings
        async with ctx.step("plan", f"{tag} FROM {base} on {node.name}", node=node.name) as rec:
            try:
                info = await inspect_image(node, base)
            except ImageNotFound as exc:
                findings.append(_finding("image_not_found", str(exc), node.name, [f"base {base}"],
                                         "check cluster.base_image / --base, or load the image on the head"))
                rec.status, rec.message = "failed", str(exc)
                return ActionResult(self.name, False, str(exc), findings=findings)
            arches, types = c.add_architectures, ()
            path = ctx.config.node(node.name).model_path or c.model_path
            model = None
            if path:
                try:
                    model = await probe_model(node, path)
                except ModelProbeError:
                    model = None
            if model is not None:
                derived_a, types = entries_from_model(model.architectures, model.model_type)
                if not arches:
                    sup = await probe_support(node, base, list(model.architectures), model.model_type)
                    arches = tuple(a for a in derived_a if not sup.architectures.get(a[0], False))
                    if sup.model_type_known:
                        types = ()
            clear = bool(info.entrypoint) and not await self._passes_args(node, base, info.entrypoint)
            spec = HybridSpec(base=base, tag=tag, architectures=tuple(arches), model_types=tuple(types),
                              clear_entrypoint=clear)
            dockerfile = render_dockerfile(spec)
            rec.data = {"dockerfile": dockerfile}
            rec.message = (f"adds {', '.join(a for a, _, _ in arches) or 'no architecture'}"
                           f"{' + config ' + ', '.join(t for t, _ in types) if types else ''}"
                           f"{'; clears ENTRYPOINT ' + str(list(info.entrypoint)) if clear else ''}")
        if not await ctx.confirm(f"Build {tag} FROM {base} on {node.name}?", dockerfile):
            return ActionResult(self.name, False, "not confirmed", findings=findings)
        image_id = await self._build(ctx, node, spec)
        async with ctx.step("verify", "ask the new image's vLLM", node=node.name) as rec:
            if model is not None:
                sup = await probe_support(node, tag, list(model.architectures), model.model_type)
                missing = [a for a, k in sup.architectures.items() if not k]
                if missing or sup.model_type_known is False:
                    rec.status = "failed"
                    rec.message = f"still unknown after the patch: {', '.join(missing) or model.model_type}"
                    findings.append(_finding("unsupported_architecture", rec.message, node.name))
                    return ActionResult(self.name, False, rec.message, findings=findings,
                                        data={"image": tag, "id": image_id})
                rec.message = f"vLLM {sup.vllm_version} knows {', '.join(model.architectures)}"
            else:
                rec.status, rec.message = "warn", "no model to check against (model_path unset or missing)"
        return ActionResult(self.name, True, f"built {tag} ({image_id[:19]}) on {node.name}",
                            findings=findings, data={"image": tag, "id": image_id, "base": base,
                                                     "dockerfile": dockerfile})

    async def _passes_args(self, node: Node, image: str, entrypoint) -> bool:
        from ..probes.image import run_in_image

        if not entrypoint[0].startswith("/"):
            return False
        try:
            rc, text = await run_in_image(node, image, ["cat"], [entrypoint[0]], timeout=60)
        except ImageProbeError:
            return False
        return rc == 0 and passes_args(text)

    async def _build(self, ctx: ActionContext, node: Node, spec: HybridSpec) -> str:
        import docker

        client = await node.docker()
        # a client of its own, built with the known API version: no blocking version request on the
        # event loop (an SSH node's forwarded socket is served by this very loop)
        api = docker.APIClient(base_url=_unix_url(client), version=client.api.api_version, timeout=3600)
        loop = asyncio.get_running_loop()
        before = {c["Id"] for c in await asyncio.to_thread(lambda: client.api.containers(all=True))}
        state: dict = {"id": "", "error": "", "lines": [], "response": None}
        finished = threading.Event()

        async def cleanup() -> None:
            # cutting the build's HTTP stream makes the daemon cancel the build (and forcerm its container)
            _shutdown_stream(state["response"])
            await asyncio.to_thread(finished.wait, 30)
            api.close()
            # the daemon may still be creating the step's container when the stream drops: sweep until
            # two looks in a row find none of the build's containers (bounded)
            clean, deadline = 0, time.monotonic() + 20
            while clean < 2 and time.monotonic() < deadline:
                left = [c["Id"] for c in await asyncio.to_thread(lambda: client.api.containers(all=True))
                        if c["Id"] not in before and _is_build_step(c.get("Command", ""))]
                for cid in left:
                    try:
                        await asyncio.to_thread(lambda cid=cid: client.api.remove_container(cid, force=True))
                    except docker.errors.APIError:
                        pass
                clean = clean + 1 if not left else 0
                await asyncio.sleep(0.5)

        ctx.on_cleanup(cleanup)

        def run() -> None:
            try:
                params = {"t": spec.tag, "rm": True, "forcerm": True, "pull": False, "q": False, "nocache": False}
                resp = api._post(api._url("/build"), data=build_context(spec), params=params,
                                 headers={"Content-Type": "application/tar"}, stream=True, timeout=None)
                state["response"] = resp
                api._raise_for_status(resp)
                for chunk in api._stream_helper(resp, decode=True):
                    if "error" in chunk:
                        state["error"] = chunk["error"].strip()
                    elif "aux" in chunk and "ID" in chunk["aux"]:
                        state["id"] = chunk["aux"]["ID"]
                    text = _ANSI.sub("", chunk.get("stream", ""))  # the builder colours RUN's stderr
                    for line in text.splitlines():
                        if line.strip():
                            state["lines"].append(line)
                            loop.call_soon_threadsafe(self._progress, ctx, node, line)
            finally:
                finished.set()

        async with ctx.step("build", f"building {spec.tag} through {node.name}'s Docker API", node=node.name) as rec:
            worker = threading.Thread(target=_catching(run, state), daemon=True, name="build-image")
            worker.start()
            await asyncio.to_thread(finished.wait)
            if state.get("exc") is not None:
                exc = state["exc"]
                state["error"] = state["error"] or str(getattr(exc, "explanation", None) or exc)
            if state["error"]:
                # the patch script says why in one line; that beats "returned a non-zero code"
                why = next((l.strip() for l in reversed(state["lines"]) if l.startswith("patch_vllm_registry:")),
                           state["error"])
                rec.status, rec.message = "failed", why[:300]
                rec.data = {"last_lines": state["lines"][-15:], "error": state["error"]}
                self.findings.append(_finding("image_build_failed", why[:300], node.name, state["lines"][-5:],
                                              "the base image's vLLM files are not laid out as the patch knows; "
                                              "pick another base (--base) or add the entries by hand"
                                              if "unknown layout" in why else "read the build output above"))
                raise ActionFailed(f"build failed: {why[:300]}")
            if not state["id"]:
                state["id"] = (await inspect_image(node, spec.tag)).id
            rec.message = f"{spec.tag} = {state['id'][:19]}"
        return state["id"]

    @staticmethod
    def _progress(ctx: ActionContext, node: Node, line: str) -> None:
        frac = None
        if line.startswith("Step ") and "/" in line:
            try:
                n, m = line.split()[1].split("/")
                frac = (int(n) - 1) / int(m)
            except ValueError:
                frac = None
        ctx.emit("build", "progress", line[:200], progress=frac, node=node.name)


class PushImageAction(_KeepsFindings):
    name = "push-image"
    title = "Copy the image node-to-node"
    mutating = True

    def __init__(self, image: str | None = None, source: str | None = None, targets: list[str] | None = None) -> None:
        self.image, self.source, self.targets = image, source, targets
        self.findings: list[Finding] = []

    def _ssh_args(self, ctx: ActionContext, target: str) -> list[str]:
        t = ctx.config.node(target)
        args = ["-o", "BatchMode=yes", "-o", "ConnectTimeout=10", *ctx.config.cluster.peer_ssh_args]
        if t.port:
            args += ["-p", str(t.port)]
        if t.user:
            args += ["-l", t.user]
        return [*args, t.fabric_ip or t.host, quote_argv(["docker", "load"])]

    async def execute(self, ctx: ActionContext) -> ActionResult:
        src_name = self.source or ctx.config.head.name
        src = ctx.nodes[src_name]
        targets = self.targets or [n.name for n in ctx.config.nodes if n.name != src_name]
        for t in targets:
            if t not in ctx.nodes:
                raise ActionFailed(f"unknown target node {t!r}")
        image = self.image or await default_image(ctx, src)
        findings = self.findings
        async with ctx.step("inspect", f"{image} on {src_name}", node=src_name) as rec:
            try:
                info = await inspect_image(src, image)
            except ImageNotFound as exc:
                rec.status, rec.message = "failed", str(exc)
                findings.append(_finding("image_not_found", str(exc), src_name, [], "build or load it on the source first"))
                return ActionResult(self.name, False, str(exc), findings=findings)
            before = {t: await image_exists(ctx.nodes[t], image) for t in targets}
            todo = [t for t in targets if before[t] != info.id]
            rec.message = (f"{info.id[:19]}, {info.size / MB:.0f} MB; "
                           + (f"to copy to {', '.join(todo)}" if todo else "already identical everywhere"))
        if todo and not await ctx.confirm(f"Copy {image} ({info.size / MB:.0f} MB) from {src_name} to {', '.join(todo)}?",
                                          "streamed node-to-node: docker save | ssh TARGET docker load"):
            return ActionResult(self.name, False, "not confirmed")
        rates = {}
        for t in todo:
            rates[t] = await self._push_one(ctx, src, t, image, info.size, before[t], findings)
        async with ctx.step("verify", "image IDs on every node") as rec:
            ids = {src_name: info.id}
            for t in targets:
                ids[t] = await image_exists(ctx.nodes[t], image) or "(missing)"
            rec.data = {"ids": ids}
            if len(set(ids.values())) != 1:
                rec.status = "failed"
                rec.message = "; ".join(f"{k}: {v[:19]}" for k, v in ids.items())
                findings.append(_finding("image_mismatch", f"{image} differs across nodes", "",
                                         [f"{k}: {v}" for k, v in ids.items()], "run push-image again"))
                return ActionResult(self.name, False, rec.message, findings=findings, data={"ids": ids, "rates": rates})
            rec.message = f"identical on {', '.join(ids)}: {info.id[:19]}"
        return ActionResult(self.name, True, f"{image} identical on every node ({info.id[:19]})",
                            findings=findings, data={"image": image, "id": info.id, "ids": ids,
                                                     "mb_per_s": rates})

    async def _push_one(self, ctx: ActionContext, src: Node, target: str, image: str, size: int,
                        had: str | None, findings: list[Finding]) -> float:
        token = f"sparktui-push-{uuid.uuid4().hex[:12]}"  # $0 of the pipeline: lets cleanup find exactly it
        argv = ["bash", "-c", PIPELINE, token, image, *self._ssh_args(ctx, target)]

        async def kill_pipeline() -> None:
            try:
                await src.run(["bash", "-c", KILL_PIPELINE, "sparktui-kill", token], timeout=30)
            except NodeError:
                pass

        async with ctx.step(f"push {target}", f"{src.name} -> {target}", node=target) as rec:
            t0, sent, rc, tail = time.monotonic(), 0, None, []
            try:
                async for raw in src.stream(argv):
                    line = raw.decode("utf-8", "replace")
                    m = _DD_BYTES.match(line.strip())
                    if m:
                        sent = int(m.group(1))
                        dt = max(1e-6, time.monotonic() - t0)
                        ctx.emit(f"push {target}", "progress",
                                 f"{sent / MB:,.0f} / {size / MB:,.0f} MB  {sent / MB / dt:,.0f} MB/s",
                                 progress=min(1.0, sent / size) if size else None, node=target)
                    elif line.startswith("SPARKTUI-EXIT "):
                        rc = int(line.split()[1])
                    elif line.strip() and "records in" not in line and "records out" not in line:
                        tail.append(line)
            except asyncio.CancelledError:
                await asyncio.shield(kill_pipeline())
                raise
            dt = max(1e-6, time.monotonic() - t0)
            rate = sent / MB / dt
            if rc != 0:
                now = await image_exists(ctx.nodes[target], image)
                left = "nothing new on the target" if now == had else f"target now has {now}"
                why = next((l for l in reversed(tail) if "space" in l.lower() or "error" in l.lower()), tail[-1] if tail else "")
                rec.status = "failed"
                rec.message = f"copy to {target} failed (exit {rc}): {why[:200]}; {left}"
                rec.data = {"last_lines": tail[-10:]}
                advice = ("free space in the target's Docker data root (docker system prune, or a bigger disk)"
                          if "space" in why.lower() else
                          "check that the source can `ssh TARGET docker load` without a prompt (cluster.peer_ssh_args)")
                findings.append(_finding("image_push_failed", rec.message, target, tail[-5:], advice))
                raise ActionFailed(rec.message)
            rec.message = f"{sent / MB:,.0f} MB in {dt:.1f} s = {rate:,.0f} MB/s"
            rec.data = {"bytes": sent, "seconds": round(dt, 3), "mb_per_s": round(rate, 1)}
        return rate
