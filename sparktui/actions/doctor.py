"""``doctor``: every preflight check (README "Doctor checks"), each ok / warn / fail with the
evidence and the fix.  Read-only: it starts nothing but short probe containers (removed again).

Which image: ``cluster.hybrid_image`` when it exists on the head (what build-image made and
launch will use), else ``cluster.image``.
"""

from __future__ import annotations

import asyncio

from ..model import FAIL, OK, SKIP, WARN
from ..nodes.base import Node, NodeError
from ..probes.image import ImageInfo, ImageNotFound, ImageProbeError, inspect_image, probe_support, run_in_image
from ..probes.model import ModelInfo, ModelProbeError, probe_model
from .base import Action, ActionContext, ActionResult
from .checks import CheckResult, fail, ok, skip, warn, worst
from .checks.basics import check_clocks, check_docker, check_ports, check_ssh, check_stale_container, check_versions, head_ports
from ..units import gib
from .checks.entrypoint import entrypoint_result
from .checks.fabric import fabric_results, gather_fabric, socket_if_results
from .checks.image_choice import resolve_image
from .checks.fit import fit_results, read_meminfo

MAX_ALTERNATIVES = 6
ALTERNATIVES_AT_ONCE = 3  # each probe holds a worker thread while it waits: leave the rest to the app
STEP_STATUS = {OK: OK, SKIP: SKIP, WARN: WARN, FAIL: FAIL}  # a check's word as its step's: a skip is no ok
CHECK_WORD = {FAIL: "failed", WARN: "warned", OK: "ok", SKIP: "skipped"}  # prose: "2 failed, 1 warned"


def image_id_results(image: str, infos: dict[str, ImageInfo], missing: list[str],
                     unchecked: list[str]) -> list[CheckResult]:
    """The image_id check from what `docker image inspect` said per node: ``infos`` (node -> the image),
    ``missing`` (nodes without it), ``unchecked`` (nodes not reached).  Every node must hold the same
    ID: a tag alone may name different builds on different nodes."""
    if not infos:
        return [fail("image_id", f"image {image!r} is on no node", "", [f"docker image inspect {image}: not found"],
                     "check cluster.image, or build it (`sparktui build-image`) / load it", "image_not_found")]
    ev = [f"{k}: {v.id[:19]}" for k, v in infos.items()] + [f"{m}: not present" for m in missing]
    if missing or len({i.id for i in infos.values()}) > 1:
        return [fail("image_id", f"{image} differs across nodes" if not missing else
                     f"{image} missing on {', '.join(missing)}", "", ev,
                     f"`sparktui push-image --image {image}` copies it node-to-node and checks the IDs",
                     "image_mismatch")]
    if unchecked:
        return [warn("image_id", f"same image ID on {', '.join(infos)}; not compared on {', '.join(unchecked)} "
                     "(unreachable)", "", ev, "fix the ssh/docker failure, then run doctor again", "image_mismatch")]
    return [ok("image_id", f"same image ID on every node ({next(iter(infos.values())).id[:19]})", "", ev)]


class DoctorAction(Action):
    raises_findings = True  # its findings come from checks, not logs: faces add them to the cluster's

    def __init__(self, deep: bool = False) -> None:
        self.results: list[CheckResult] = []
        self.deep = deep  # --deep: also the fabric check (moves traffic between the nodes)

    async def _group(self, ctx: ActionContext, step: str, coro) -> list[CheckResult]:
        async with ctx.step(step) as rec:
            try:
                got = await coro
            except (NodeError, OSError) as exc:
                got = [skip(step, f"could not run: {exc}")]
            got = got if isinstance(got, list) else [got]
            self.results.extend(got)
            st = worst(got)
            rec.status = STEP_STATUS[st]
            per_check = len(got) > 1 or any(r.node for r in got)
            if per_check:  # the checks get rows of their own (below): the step row counts them
                counts = {st: sum(r.status == st for r in got) for st in (FAIL, WARN, OK, SKIP)}
                rec.message = ", ".join(f"{n} {CHECK_WORD[st]}" for st, n in counts.items() if n)
            else:
                rec.message = got[0].title[:300] if got else ""
            rec.data = {"checks": [r.to_json() for r in got]}
        # one row per check and node, so a face shows which node said what
        if per_check:
            seen: set[tuple[str, str]] = set()
            for i, r in enumerate(got):
                key = r.check if (r.node, r.check) not in seen else f"{r.check}#{i}"
                seen.add((r.node, r.check))
                ctx.emit(step, STEP_STATUS[r.status], r.title, node=r.node, key=key)
        return got

    async def execute(self, ctx: ActionContext) -> ActionResult:
        cfg = ctx.config
        nodes = [ctx.nodes[n.name] for n in cfg.nodes if n.name in ctx.nodes]
        head = ctx.nodes[cfg.head.name]

        ssh = await self._group(ctx, "ssh", asyncio.gather(*(check_ssh(n, cfg.node(n.name).backend) for n in nodes)))
        up = [n for n, r in zip(nodes, ssh) if r.status == "ok"]
        dock = await self._group(ctx, "docker", asyncio.gather(*(check_docker(n) for n in up)))
        dup = [n for n, r in zip(up, dock) if r.status == "ok"]
        head_ok = head in dup

        image = await resolve_image(ctx, head) if head_ok else cfg.cluster.image
        infos: dict[str, ImageInfo] = {}
        await self._group(ctx, "image", self._images(dup, image, infos, [n.name for n in nodes if n not in dup]))
        models: dict[str, ModelInfo] = {}
        await self._group(ctx, "model", self._models(ctx, up, models))
        head_model = models.get(head.name) or next(iter(models.values()), None)
        arch = await self._group(ctx, "architecture", self._architecture(head, image, infos, head_model))
        await self._group(ctx, "entrypoint", self._entrypoint(head, image, infos))
        if head_model and any(r.finding == "unsupported_architecture" for r in arch):
            await self._group(ctx, "other images", self._alternatives(head, image, head_model))
        await self._group(ctx, "memory", self._memory(ctx, up, head_model))
        down = tuple(n.name for n in nodes if n not in up)
        await self._group(ctx, "fabric", self._fabric(ctx, up, down))
        if self.deep:
            await self._group(ctx, "fabric bandwidth", self._fabric_deep(ctx, up, image))
        await self._group(ctx, "ports", self._ports(ctx, up))
        await self._group(ctx, "stale container",
                          asyncio.gather(*(check_stale_container(n, cfg.cluster.name) for n in dup)))
        await self._group(ctx, "clocks", check_clocks(up))
        await self._group(ctx, "versions", check_versions(up))

        fails = [r for r in self.results if r.status == FAIL]
        warns = [r for r in self.results if r.status == "warn"]
        findings = [f for f in (r.to_finding() for r in self.results) if f is not None]
        findings.sort(key=lambda f: 0 if f.severity == "error" else 1)
        summary = (f"{len(fails)} failed, {len(warns)} warnings, "
                   f"{sum(r.status == 'ok' for r in self.results)} ok (image {image})")
        return ActionResult(self.name, not fails, summary, findings=findings,
                            data={"image": image, "checks": [r.to_json() for r in self.results]})

    async def _images(self, nodes: list[Node], image: str, infos: dict[str, ImageInfo],
                      unchecked: list[str]) -> list[CheckResult]:
        missing = []
        for n in nodes:
            try:
                infos[n.name] = await inspect_image(n, image)
            except ImageNotFound:
                missing.append(n.name)
        return image_id_results(image, infos, missing, unchecked)

    async def _models(self, ctx: ActionContext, nodes: list[Node], models: dict[str, ModelInfo]) -> list[CheckResult]:
        out = []
        for n in nodes:
            path = ctx.config.model_path_for(n.name)
            if not path:
                out.append(fail("model_path", "no model_path configured", n.name, [],
                                "set cluster.model_path (host path of the model directory)", "model_path_missing"))
                continue
            try:
                m = await probe_model(n, path)
            except ModelProbeError as exc:
                out.append(fail("model_path", str(exc), n.name, [f"path {path!r}"],
                                "copy the model there on every node (same path; hf-download.sh -c / rsync) "
                                "or fix model_path", "model_path_missing"))
                continue
            models[n.name] = m
            if not m.architectures:
                out.append(warn("model_path", "config.json has no `architectures`", n.name, [path], "check the model files",
                                "model_path_missing"))
                continue
            size = f"{gib(m.total_bytes)} ({m.size_source})" if m.total_bytes else "size unknown"
            out.append(ok("model_path", f"{path}: {', '.join(m.architectures)} / {m.model_type or '?'}, {size}", n.name))
        return out

    async def _architecture(self, head: Node, image: str, infos: dict, model: ModelInfo | None) -> list[CheckResult]:
        if model is None or head.name not in infos:
            return [skip("architecture", "needs the model's config.json and the image on the head")]
        try:
            sup = await probe_support(head, image, list(model.architectures), model.model_type)
        except ImageProbeError as exc:
            return [fail("architecture", "could not ask the image's vLLM", head.name, [str(exc)],
                         "check the image has python3 and vllm", "broken_install")]
        out = []
        how = dict(sup.sources).get("vllm registry")
        asked = {"import": "asked its ModelRegistry", "source": "read from its source"}.get(how or "", "not read")
        ev = [f"vLLM {sup.vllm_version or '?'} ({sup.registry_path or 'no registry'}, {asked}), "
              f"transformers {sup.transformers_version or '?'}", *sup.errors]
        if how == "source" and sup.import_errors:
            ev.append(f"importing it failed: {sup.import_errors[0]}")
        missing = [a for a, known in sup.architectures.items() if not known]
        if missing or not sup.architectures:
            miss = missing or list(model.architectures)
            out.append(fail("architecture", f"the image's vLLM does not know {', '.join(miss)}", head.name,
                            ev + [f"Model architectures {miss!r} are not supported for now (what vLLM will say)"],
                            f"`sparktui build-image` adds {', '.join(miss)} to the registry (cluster.add_architectures "
                            "names the module/class), or use an image with a newer vLLM", "unsupported_architecture",
                            data={"missing": miss, "model_type": model.model_type}))
        if model.model_type and sup.model_type_known is False:
            out.append(fail("transformers", f"the image's transformers {sup.transformers_version or ''} does not know "
                            f"model_type {model.model_type!r}".replace("  ", " "), head.name,
                            ev + [f"The checkpoint you are trying to load has model type `{model.model_type}` but "
                                  "Transformers does not recognize this architecture"],
                            "`sparktui build-image` registers the config class; or an image with newer transformers",
                            "transformers_version_mismatch", data={"model_type": model.model_type}))
        if not out:
            out.append(ok("architecture", f"vLLM {sup.vllm_version} knows {', '.join(model.architectures)}; "
                          f"transformers knows {model.model_type}", head.name, ev))
        return out

    async def _entrypoint(self, head: Node, image: str, infos: dict) -> list[CheckResult]:
        info = infos.get(head.name)
        if info is None:
            return [skip("entrypoint", "image not on the head")]
        script = None
        if info.entrypoint and info.entrypoint[0].startswith("/"):
            try:  # read the entrypoint script to see whether it passes its arguments on
                rc, text = await run_in_image(head, image, ["cat"], [info.entrypoint[0]], timeout=60)
                script = text if rc == 0 else None
            except ImageProbeError:
                script = None
        files, has_ray = None, None
        try:
            sup = await probe_support(head, image, [], "")
            files, has_ray = sup.workdir_files, sup.has_ray
        except ImageProbeError:
            pass
        return entrypoint_result(head.name, info, script, files, has_ray)

    async def _alternatives(self, head: Node, image: str, model: ModelInfo) -> list[CheckResult]:
        """The launch image lacks the architecture: which other images on the head know it, and
        could the cluster start run them (their ENTRYPOINT)?  The story's community image."""
        client = await head.docker()
        listed = await asyncio.to_thread(lambda: client.api.images())
        refs = [t for img in sorted(listed, key=lambda i: -i.get("Created", 0))
                for t in (img.get("RepoTags") or [])[:1] if t and t != "<none>:<none>"]
        knows = ", ".join(model.architectures)
        slots = asyncio.Semaphore(ALTERNATIVES_AT_ONCE)

        async def one(ref: str) -> list[CheckResult]:
            async with slots:
                return await probe(ref)

        async def probe(ref: str) -> list[CheckResult]:
            try:
                sup = await probe_support(head, ref, list(model.architectures), model.model_type)
                info = await inspect_image(head, ref)
            except ImageProbeError:
                return []
            if not sup.architectures or not all(sup.architectures.values()) or sup.model_type_known is False:
                return []
            got = await self._entrypoint(head, ref, {head.name: info})
            bad = [r for r in got if r.status != "ok"]
            for r in bad:
                r.title = f"{ref} knows {knows} but: {r.title}"
            return bad or [ok("other images", f"{ref} knows {knows} and starts "
                              "as the cluster start expects: consider cluster.image = " + ref, head.name)]

        # each probe imports that image's vLLM (seconds to a minute with torch): ask several at once,
        # so doctor does not wait for the sum of them; results keep the listing's order
        picked = [r for r in refs if r.split(":")[0] != image.split(":")[0]][:MAX_ALTERNATIVES]
        done = await asyncio.gather(*(one(ref) for ref in picked), return_exceptions=True)
        for got in done:  # none left running when one fails (a NodeError): then raise it, as before
            if isinstance(got, BaseException):
                raise got
        out = [r for got in done for r in got]
        return out or [skip("other images", "no other image on the head knows the architecture")]

    async def _memory(self, ctx: ActionContext, nodes: list[Node], model: ModelInfo | None) -> list[CheckResult]:
        if model is None or not model.total_bytes:
            return [skip("memory_fit", "model size unknown")]
        out = []
        c = ctx.config.cluster
        for n in nodes:
            path = ctx.config.node(n.name).meminfo_path
            try:
                mi = await read_meminfo(n, path)
            except NodeError as exc:
                out.append(skip("memory_fit", f"cannot read {path}: {exc}", n.name))
                continue
            if "MemTotal" not in mi:
                out.append(skip("memory_fit", f"{path} has no MemTotal", n.name))
                continue
            avail = mi.get("MemAvailable", mi.get("MemFree", 0))
            out.extend(fit_results(n.name, model.total_bytes, model.size_source, ctx.config.tp,
                                   mi["MemTotal"], avail, c.gpu_memory_utilization))
        # one single-node warning is enough when every node says the same
        singles = [r for r in out if r.check == "memory_fit_single"]
        if len(singles) > 1:
            out = [r for r in out if r.check != "memory_fit_single"] + [singles[0]]
            singles[0].node = ""
        return out

    async def _fabric(self, ctx: ActionContext, up: list[Node], down: tuple[str, ...]) -> list[CheckResult]:
        from .fabric import launch_envs

        found, reach, addrs = await gather_fabric(ctx.config, {n.name: n for n in up})
        return [*fabric_results(ctx.config, found, reach, down), *socket_if_results(launch_envs(ctx.config), addrs)]

    async def _fabric_deep(self, ctx: ActionContext, up: list[Node], image: str) -> list[CheckResult]:
        """The fabric check (actions/fabric.py) as doctor rows: the verdict, with its first cause's fix."""
        from ..fabric.check import FabricCheck
        from .fabric import launch_envs

        if len(up) < 2:
            return [skip("fabric_bandwidth", "needs two reachable nodes")]
        check = FabricCheck(ctx.config, {n.name: n for n in up}, launch_envs(ctx.config), image=image,
                            on_progress=lambda step, frac, msg: ctx.emit("fabric bandwidth", "progress",
                                                                         f"{step}: {msg}", progress=frac))
        report = await check.run()
        v = report.verdict
        assert v is not None
        data = {"fabric": report.to_json()}
        if v.status == "ok":
            return [ok("fabric_bandwidth", v.title, "", [check.summary(s)[1] for s in ("path", "iperf3", "all_reduce_perf")],
                       data=data)]
        if v.status == "skip":
            return [skip("fabric_bandwidth", v.title, "", [check.summary(s)[1] for s in ("iperf3", "all_reduce_perf")])]
        out = []
        for e in v.failures + v.causes:
            make = fail if v.status == "fail" else warn
            out.append(make("fabric_bandwidth", e["title"] if out else v.title, "", e["evidence"], e["fix"],
                            e["finding"], data=data if not out else {}))
        return out

    async def _ports(self, ctx: ActionContext, nodes: list[Node]) -> list[CheckResult]:
        out = []
        for n in nodes:
            ports = head_ports(ctx.config.cluster) if n.name == ctx.config.head.name else []
            if ports:
                out.append(await check_ports(n, ports))
        return out or [skip("ports", "no head reachable")]
