"""``fabric``: is the link between the nodes what NCCL needs (sparktui/fabric/check.py), as an action:
one step per stage with progress, the report in the result's data, the causes as findings.

The NCCL/Gloo env judged and exported to all_reduce_perf is the launch's own (cluster_plan.pinned_env
plus cluster.env and the node's env), so the check measures the path the model will take.
"""

from __future__ import annotations

from ..fabric.check import FabricCheck, FabricOptions, FabricReport
from ..diagnosis.catalogue import finding
from ..model import Finding
from ..nodes.base import NodeError
from ..probes.image import ImageProbeError
from .base import Action, ActionContext, ActionResult
from .cluster_plan import pinned_env

VERDICT_STEP = {"ok": "ok", "warn": "warn", "fail": "fail", "skip": "skip"}


def launch_envs(config) -> dict[str, dict[str, str]]:
    """node -> the env its rank gets at launch (what NCCL/Gloo will read)."""
    head = config.head
    head_ip = head.fabric_ip or head.host
    c = config.cluster
    return {n.name: {**pinned_env(config, n, n.fabric_ip or n.host, head_ip), **dict(c.env), **dict(n.env)}
            for n in config.nodes}


def verdict_findings(report: FabricReport) -> list[Finding]:
    v = report.verdict
    if v is None or v.status not in ("fail", "warn"):
        return []
    out = []
    for e in v.failures + v.causes:
        sev = "error" if v.status == "fail" else "warning"
        out.append(finding(e["finding"] or "nccl_network_error", severity=sev, title=e["title"], source="fabric",
                           evidence=e["evidence"], advice=e["fix"] or None, explanation=e["why"] or None))
    return out


class FabricAction(Action):
    raises_findings = True  # its findings come from measurements, not logs

    def __init__(self, options: FabricOptions | None = None) -> None:
        self.options = options or FabricOptions()
        self.report: FabricReport | None = None

    async def execute(self, ctx: ActionContext) -> ActionResult:
        cfg = ctx.config
        image = ""
        if not self.options.quick and cfg.head.name in ctx.nodes:
            from .checks.image_choice import resolve_image

            try:
                image = await resolve_image(ctx, ctx.nodes[cfg.head.name])
            except (NodeError, ImageProbeError, OSError):
                image = cfg.cluster.image

        def progress(step: str, fraction: float, message: str) -> None:
            # the percentage in the words too: the CLI's progress line shows the message only
            ctx.emit(step, "progress", f"{fraction * 100:3.0f}% {message}", progress=fraction)

        check = FabricCheck(cfg, ctx.nodes, launch_envs(cfg), self.options, image=image, on_progress=progress)
        self.report = check.report
        await check.run(ctx.step)
        report = check.report
        v = report.verdict
        assert v is not None
        async with ctx.step("verdict") as rec:
            rec.status = VERDICT_STEP.get(v.status, "ok")
            rec.message = v.title
        findings = verdict_findings(report)
        return ActionResult(self.name, v.status != "fail", v.title, findings=findings, data=report.to_json())
