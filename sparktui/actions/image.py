"""``build-image``: the hybrid image, built through the head node's Docker API from an in-memory
context (Dockerfile + the registry patch script), with its output streamed as progress.  A cancel
cuts the build's HTTP stream (the daemon then cancels the build) and removes the step containers.
``push-image`` lives in push.py and shares ``image_finding`` from here.
"""

from __future__ import annotations

import asyncio
import threading
import time

from ..nodes.base import Node
from ..diagnosis.catalogue import finding
from ..model import FAIL, Finding
from ..probes.image import ImageNotFound, ImageProbeError, inspect_image, probe_support
from ..probes.model import ModelProbeError, probe_model
from .base import Action, ActionContext, ActionFailed, ActionResult
from .checks.entrypoint import passes_args
from .dockerfile import (NCCL_TESTS_PROBE, NCCL_TESTS_SRC, HybridSpec, NcclTestsBuild, build_context,
                         entries_from_model, plan_nccl_tests, render_dockerfile)
from ..logs.sanitize import strip_ansi



def image_finding(fid: str, title: str, node_name: str = "", evidence=(), advice: str = "") -> Finding:
    """An image action's finding (source "<node>/image") from the catalogue's factory."""
    return finding(fid, source=f"{node_name}/image" if node_name else "image", node=node_name, evidence=evidence,
                   title=title, advice=advice or None)


def _unix_url(client) -> str:
    """The unix:// URL a docker client talks to (its base_url reads http+docker://localhost)."""
    try:
        sock = client.api.get_adapter("http+docker://localhost").socket_path
        return "unix://" + sock
    except Exception:
        return client.api.base_url


def _is_build_step(command: str) -> bool:
    """Containers the classic builder makes for our Dockerfile's steps."""
    from ..model import BUILD_STEP_MARK

    return BUILD_STEP_MARK in command or NCCL_TESTS_SRC in command or "#(nop)" in command


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


def build_failure_advice(lines: list[str], why: str) -> str:
    """What to do about a failed build, from the builder's output (its last "Step n/m" names the step)."""
    if "unknown layout" in why:
        return ("the base image's vLLM files are not laid out as the patch knows; "
                "pick another base (--base) or add the entries by hand")
    step = next((l for l in reversed(lines) if l.startswith("Step ")), "")
    if NCCL_TESTS_SRC in step or "nccl-tests.tar.gz" in step:
        return ("the nccl-tests stage failed (fetching or compiling all_reduce_perf): read the build output above, "
                "or build without it (--no-nccl-tests; the fabric check then measures TCP only)")
    return "read the build output above"


class BuildImageAction(Action):
    def __init__(self, base: str | None = None, tag: str | None = None, node_name: str | None = None,
                 nccl_tests: bool = True) -> None:
        self.base, self.tag, self.node_name = base, tag, node_name
        self.nccl_tests = nccl_tests  # False: --no-nccl-tests
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
                findings.append(image_finding("image_not_found", str(exc), node.name, [f"base {base}"],
                                         "check cluster.base_image / --base, or load the image on the head"))
                rec.status, rec.message = FAIL, str(exc)
                return ActionResult(self.name, False, str(exc), findings=findings)
            arches, types = c.add_architectures, ()
            path = ctx.config.model_path_for(node.name)
            model = None
            if path:
                try:
                    model = await probe_model(node, path)
                except ModelProbeError:
                    model = None
            if model is not None:
                derived_a, types = entries_from_model(model.architectures, model.model_type)
                # the registry is only asked when cluster.add_architectures does not already say what to add
                sup = await probe_support(node, base, [] if arches else list(model.architectures), model.model_type)
                if not arches:
                    arches = tuple(a for a in derived_a if not sup.architectures.get(a[0], False))
                if sup.model_type_known:
                    types = ()  # transformers already knows it: its config map stays as it is
            clear = bool(info.entrypoint) and not await self._passes_args(node, base, info.entrypoint)
            nccl, nccl_note = await self._nccl_tests(node, base)
            spec = HybridSpec(base=base, tag=tag, architectures=tuple(arches), model_types=tuple(types),
                              clear_entrypoint=clear, nccl_tests=nccl)
            dockerfile = render_dockerfile(spec)
            rec.data = {"dockerfile": dockerfile, "nccl_tests": nccl_note}
            rec.message = (f"adds {', '.join(a for a, _, _ in arches) or 'no architecture'}"
                           f"{' + config ' + ', '.join(t for t, _ in types) if types else ''}"
                           f"{'; clears ENTRYPOINT ' + str(list(info.entrypoint)) if clear else ''}; {nccl_note}")
        if not await ctx.confirm(f"Build {tag} FROM {base} on {node.name}?", dockerfile):
            return ActionResult(self.name, False, "not confirmed", findings=findings)
        image_id = await self._build(ctx, node, spec)
        async with ctx.step("verify", "ask the new image's vLLM", node=node.name) as rec:
            if model is not None:
                sup = await probe_support(node, tag, list(model.architectures), model.model_type)
                missing = [a for a, k in sup.architectures.items() if not k]
                if missing or sup.model_type_known is False:
                    rec.status = FAIL
                    rec.message = f"still unknown after the patch: {', '.join(missing) or model.model_type}"
                    findings.append(image_finding("unsupported_architecture", rec.message, node.name))
                    return ActionResult(self.name, False, rec.message, findings=findings,
                                        data={"image": tag, "id": image_id})
                rec.message = f"vLLM {sup.vllm_version} knows {', '.join(model.architectures)}"
            else:
                rec.status, rec.message = "warn", "no model to check against (model_path unset or missing)"
        return ActionResult(self.name, True, f"built {tag} ({image_id[:19]}) on {node.name}; {nccl_note}",
                            findings=findings, data={"image": tag, "id": image_id, "base": base,
                                                     "dockerfile": dockerfile, "nccl_tests": nccl_note})

    async def _nccl_tests(self, node: Node, base: str) -> tuple[NcclTestsBuild | None, str]:
        """Whether the base can build nccl-tests (nvcc, mpirun, nccl.h, mpi.h), asked of the base itself."""
        from ..probes.image import run_in_image

        if not self.nccl_tests:
            return None, "nccl-tests not added: --no-nccl-tests"
        try:
            rc, text = await run_in_image(node, base, ["sh", "-c"], [NCCL_TESTS_PROBE], timeout=60)
        except ImageProbeError as exc:
            return None, f"nccl-tests not added: could not probe {base} ({str(exc)[:150]})"
        if rc != 0:
            return None, f"nccl-tests not added: probing {base} exited {rc} (no sh?)"
        return plan_nccl_tests(text, base)

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
                    text = strip_ansi(chunk.get("stream", ""))  # the builder colours RUN's stderr
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
                rec.status, rec.message = FAIL, why[:300]
                rec.data = {"last_lines": state["lines"][-15:], "error": state["error"]}
                self.findings.append(image_finding("image_build_failed", why[:300], node.name, state["lines"][-5:],
                                                   build_failure_advice(state["lines"], why)))
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

