"""Two small real Actions for the ActionScreen tests (the framework is the real one)."""

from __future__ import annotations

from sparktui.actions.base import Action, ActionContext, ActionRefused, ActionResult


class EchoAction(Action):
    name = "echo-test"
    title = "Echo"
    mutating = False

    async def execute(self, ctx: ActionContext) -> ActionResult:
        async with ctx.step("list nodes") as rec:
            rec.message = ", ".join(sorted(ctx.nodes))
        return ActionResult(self.name, True, f"{len(ctx.nodes)} nodes")


class WipeAction(Action):
    name = "wipe-test"
    title = "Wipe"
    mutating = True
    wiped: list[bool] = []

    async def execute(self, ctx: ActionContext) -> ActionResult:
        async with ctx.step("confirm"):
            if not await ctx.confirm("Remove container vllm_qwen35 on spark1?", "docker rm -f vllm_qwen35"):
                raise ActionRefused("operator said no")
        async with ctx.step("wipe"):
            WipeAction.wiped.append(True)
        return ActionResult(self.name, True, "wiped")
