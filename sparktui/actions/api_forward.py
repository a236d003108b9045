"""``Keep API forward open`` (TUI): the cluster's API on this machine for as long as sparktui runs.

The forward is a local port forward on the head node's connection, which the face keeps open for
its whole life (the TUI's action nodes, closed when it exits): no widget owns it.  The result says
the URL, how long it lasts, and the ``ssh -L`` line that keeps one open after sparktui exits.  A
head reached directly (or a configured api_base) needs no forward: the result says so.  No Textual.
"""

from __future__ import annotations

from ..probes.serving import ServingError
from .base import Action, ActionContext, ActionFailed, ActionResult
from .serving_target import base_url, keep_forward_command


class KeepForwardAction(Action):
    async def execute(self, ctx: ActionContext) -> ActionResult:
        async with ctx.step("forward", "the head's serve port on this machine") as rec:
            try:
                url, node, via = await base_url(ctx.config, ctx.nodes)
            except ServingError as exc:
                raise ActionFailed(f"no forward: {exc}") from None
            head = ctx.nodes.get(node)
            forwarded = via == "forward" and head is not None and head.backend == "ssh"
            if forwarded:
                rec.message = f"{url} forwards to {node}:{ctx.config.cluster.serve_port} while sparktui runs"
            else:
                rec.message = f"{url} is reached {'as configured' if via == 'configured' else 'directly'}: no forward needed"
        data = {"base_url": url, "node": node, "via": via, "forwarded": forwarded}
        if forwarded:
            data["keep_command"] = keep_forward_command(ctx.config, node)
            return ActionResult(self.name, True, f"API at {url} (open until sparktui exits; after that: "
                                f"{data['keep_command']})", data=data)
        return ActionResult(self.name, True, f"API at {url}", data=data)
