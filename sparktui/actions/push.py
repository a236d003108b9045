"""``push-image``: node-to-node copy of an image, then proof of identical image IDs.

Push design: the SOURCE node runs ``docker save IMG | <layer filter> | <byte counter> | ssh TARGET
docker load``.  The bytes go straight from one node to the other over the fabric address
(``fabric_ip``, else ``host``) with the node's own SSH trust (``cluster.peer_ssh_args`` adds options
such as ``-i``); nothing passes through the operator's machine and nothing is written to disk.

Only the layers the target lacks are sent: a patched image shares all but its last layers with the
base the target already has, and ``docker load`` never reads a layer it holds
(``probes/layers.py`` plans it, ``transport/layer_skip.py`` filters the tar on the source).  A copy
that leaves layers out and fails is sent again whole (the target may have dropped a layer since it
was asked); ``--full`` always sends everything.  The counter is GNU dd on the source reporting bytes
once a second (the progress bar and MB/s).  The pipeline runs with ``pipefail`` and reports its exit
status, so a failed ``docker load`` (a full disk) is seen, and the target is checked to hold no new
image afterwards.  A cancel stops exactly that pipeline.
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid

from ..model import FAIL, Finding
from ..nodes.base import Node, NodeError, quote_argv
from ..probes.image import ImageInfo, ImageNotFound, default_image, image_exists, inspect_image
from ..probes.layers import LayerPlan, held_images, plan_layers
from ..units import MB
from .base import Action, ActionContext, ActionFailed, ActionResult
from .image import image_finding

# Constant pipeline; every variable part is a positional argument, never pasted into the script.
# GNU dd counts the bytes between `docker save` and `ssh` (status=progress, once a second, on
# stderr with carriage returns, turned into lines here): a C copy loop, no measurable cost.
PIPELINE = ('set -o pipefail; img=$1; shift; '
            'docker save "$img" | dd bs=1M status=progress 2> >(tr "\\r" "\\n" >&2) | ssh "$@"; rc=$?; '
            'echo "SPARKTUI-EXIT $rc"')
# The same with the layer filter (python3 on the source, as the log relay needs) after the save.
PIPELINE_SKIP = ('set -o pipefail; img=$1; prog=$2; plan=$3; shift 3; '
                 'docker save "$img" | python3 -c "$prog" "$plan" '
                 '| dd bs=1M status=progress 2> >(tr "\\r" "\\n" >&2) | ssh "$@"; rc=$?; '
                 'echo "SPARKTUI-EXIT $rc"')
_SKIPPED = re.compile(r"^SPARKTUI-SKIPPED (\d+) (\d+)$")
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



def _mb(n: float) -> str:
    # whole MB as docker tells image sizes; a copy of only a small top layer keeps two decimals
    return f"{n / MB:,.0f}" if n >= 10 * MB or n == 0 else f"{n / MB:.2f}"


def push_progress(sent: int, size: int, seconds: float) -> str:
    """``docker save`` writes a tar: layer headers and manifests make the stream a little larger
    than the image size Docker reports, so that size is an estimate, never a total to pass."""
    rate = f"{_mb(sent / max(1e-6, seconds))} MB/s"
    if not size:
        return f"{_mb(sent)} MB  {rate}"
    if sent <= size:
        return f"{_mb(sent)} / ~{_mb(size)} MB  {rate}"
    return f"{_mb(sent)} MB (image {_mb(size)} MB + tar headers)  {rate}"


def push_done(sent: int, size: int, seconds: float) -> str:
    """The end of a push: what was sent is the total now, said as one (done = total), with the
    estimate the progress showed beside it when they differ."""
    total = _mb(sent)
    est = f" (estimated ~{_mb(size)} MB)" if size and _mb(size) != total else ""
    return f"{total} / {total} MB{est} in {seconds:.1f} s = {_mb(sent / max(1e-6, seconds))} MB/s"


class PushImageAction(Action):
    def __init__(self, image: str | None = None, source: str | None = None, targets: list[str] | None = None,
                 full: bool = False) -> None:
        self.image, self.source, self.targets, self.full = image, source, targets, full
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
        image = self.image or await default_image(ctx.config.cluster, src)
        findings = self.findings
        async with ctx.step("inspect", f"{image} on {src_name}", node=src_name) as rec:
            try:
                info = await inspect_image(src, image)
            except ImageNotFound as exc:
                rec.status, rec.message = FAIL, str(exc)
                findings.append(image_finding("image_not_found", str(exc), src_name, [], "build or load it on the source first"))
                return ActionResult(self.name, False, str(exc), findings=findings)
            before = {t: await image_exists(ctx.nodes[t], image) for t in targets}
            todo = [t for t in targets if before[t] != info.id]
            plans = {t: await self._plan(ctx.nodes[t], info) for t in todo}
            rec.message = (f"{info.id[:19]}, {info.size / MB:.0f} MB; "
                           + (f"to copy to {', '.join(todo)}" if todo else "already identical everywhere"))
            rec.data = {"layers": len(info.layers),
                        "held": {t: {"layers": p.held, "why": p.why} for t, p in plans.items()}}
        if todo and not await ctx.confirm(f"Copy {image} ({info.size / MB:.0f} MB) from {src_name} to {', '.join(todo)}?",
                                          "; ".join(f"{t}: {_plan_words(p)}" for t, p in plans.items())
                                          + " (streamed node-to-node: docker save | ssh TARGET docker load)"):
            return ActionResult(self.name, False, "not confirmed")
        rates = {}
        for t in todo:
            rates[t] = await self._push_one(ctx, src, t, image, info.size, before[t], plans[t], findings)
        async with ctx.step("verify", "image IDs on every node") as rec:
            ids = {src_name: info.id}
            for t in targets:
                ids[t] = await image_exists(ctx.nodes[t], image) or "(missing)"
            rec.data = {"ids": ids}
            if len(set(ids.values())) != 1:
                rec.status = FAIL
                rec.message = "; ".join(f"{k}: {v[:19]}" for k, v in ids.items())
                findings.append(image_finding("image_mismatch", f"{image} differs across nodes", "",
                                         [f"{k}: {v}" for k, v in ids.items()], "run push-image again"))
                return ActionResult(self.name, False, rec.message, findings=findings, data={"ids": ids, "rates": rates})
            rec.message = f"identical on {', '.join(ids)}: {info.id[:19]}"
        return ActionResult(self.name, True, f"{image} identical on every node ({info.id[:19]})",
                            findings=findings, data={"image": image, "id": info.id, "ids": ids,
                                                     "mb_per_s": rates})

    async def _plan(self, target: Node, info: ImageInfo) -> LayerPlan:
        if self.full:
            return LayerPlan(len(info.layers), why="--full")
        images, why = await held_images(target)
        return plan_layers(info.layers, images) if not why else LayerPlan(len(info.layers), why=why)

    async def _push_one(self, ctx: ActionContext, src: Node, target: str, image: str, size: int,
                        had: str | None, plan: LayerPlan, findings: list[Finding]) -> float:
        if plan.held:
            rate = await self._copy(ctx, src, target, image, size, had, plan, findings)
            if rate is not None:
                return rate
            # the target may have lost a layer since it was asked, or the source lacks python3: the
            # whole image never depends on what the target holds
            plan = LayerPlan(plan.total, why="the copy without the held layers failed")
            rate = await self._copy(ctx, src, target, image, size, had, plan, findings, step=f"push {target} whole")
        else:
            rate = await self._copy(ctx, src, target, image, size, had, plan, findings)
        assert rate is not None
        return rate

    async def _copy(self, ctx: ActionContext, src: Node, target: str, image: str, size: int,
                    had: str | None, plan: LayerPlan, findings: list[Finding], step: str = "") -> float | None:
        """One copy; None when one that left layers out failed for a reason other than space."""
        token = f"sparktui-push-{uuid.uuid4().hex[:12]}"  # $0 of the pipeline: lets cleanup find exactly it
        if plan.held:
            argv = ["bash", "-c", PIPELINE_SKIP, token, image, _filter_source(), plan.argument,
                    *self._ssh_args(ctx, target)]
            size = size - plan.held_bytes if plan.held_bytes is not None else 0
        else:
            argv = ["bash", "-c", PIPELINE, token, image, *self._ssh_args(ctx, target)]

        async def kill_pipeline() -> None:
            try:
                await src.run(["bash", "-c", KILL_PIPELINE, "sparktui-kill", token], timeout=30)
            except NodeError:
                pass

        what = f"{src.name} -> {target}" + (f", {plan.total - plan.held} of {plan.total} layers" if plan.held else "")
        step = step or f"push {target}"
        async with ctx.step(step, what, node=target) as rec:
            t0, sent, rc, tail, skipped = time.monotonic(), 0, None, [], None
            try:
                async for raw in src.stream(argv):
                    line = raw.decode("utf-8", "replace")
                    m = _DD_BYTES.match(line.strip())
                    if m:
                        sent = int(m.group(1))
                        dt = max(1e-6, time.monotonic() - t0)
                        ctx.emit(step, "progress", push_progress(sent, size, dt),
                                 progress=min(0.99, sent / size) if size else None, node=target)
                    elif line.startswith("SPARKTUI-EXIT "):
                        rc = int(line.split()[1])
                    elif (ms := _SKIPPED.match(line.strip())):
                        skipped = (int(ms.group(1)), int(ms.group(2)))
                    elif line.strip() and "records in" not in line and "records out" not in line:
                        tail.append(line)
            except asyncio.CancelledError:
                await asyncio.shield(kill_pipeline())
                raise
            dt = max(1e-6, time.monotonic() - t0)
            rate = sent / MB / dt
            if rc != 0 and plan.held and not any("space" in l.lower() for l in tail):
                rec.status = "warn"
                rec.message = (f"copy to {target} without its held layers failed (exit {rc}): "
                               f"{(tail or [''])[-1][:200]}; sending the whole image")
                rec.data = {"last_lines": tail[-10:]}
                return None
            if rc != 0:
                now = await image_exists(ctx.nodes[target], image)
                left = "nothing new on the target" if now == had else f"target now has {now}"
                why = next((l for l in reversed(tail) if "space" in l.lower() or "error" in l.lower()), tail[-1] if tail else "")
                rec.status = FAIL
                rec.message = f"copy to {target} failed (exit {rc}): {why[:200]}; {left}"
                rec.data = {"last_lines": tail[-10:]}
                advice = ("free space in the target's Docker data root (docker system prune, or a bigger disk)"
                          if "space" in why.lower() else
                          "check that the source can `ssh TARGET docker load` without a prompt (cluster.peer_ssh_args)")
                findings.append(image_finding("image_push_failed", rec.message, target, tail[-5:], advice))
                raise ActionFailed(rec.message)
            rec.message = push_done(sent, size, dt)
            rec.data = {"bytes": sent, "seconds": round(dt, 3), "mb_per_s": round(rate, 1)}
            if plan.held:
                left = skipped or (0, 0)
                rec.message += (f"; left out {left[0]} layer{'s' if left[0] != 1 else ''} ({left[1] / MB:,.0f} MB) "
                                f"that {target} holds")
                rec.data.update(layers_left_out=left[0], bytes_left_out=left[1])
        return rate


def _plan_words(plan: LayerPlan) -> str:
    if plan.held:
        rest = plan.total - plan.held
        sent = "nothing but its config is sent" if not rest else (
            "only its top layer is sent" if rest == 1 else f"only the other {rest} are sent")
        return f"holds {plan.held} of its {plan.total} layers, {sent}"
    return f"the whole image ({plan.why})"


def _filter_source() -> str:
    from importlib.resources import files

    return files("sparktui.transport").joinpath("layer_skip.py").read_text(encoding="utf-8")
