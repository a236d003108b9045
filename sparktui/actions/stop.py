"""``stop``: serve and the cluster's containers on every node, found by the launch labels and by the
cluster's container name (what launch-cluster.sh or a person started has no labels).  The one
confirmation shows the exact commands; a node that cannot be asked makes the result a failure that
names it, never a silent success.
"""

from __future__ import annotations

import asyncio
import shlex
import time

from ..model import FAIL
from ..probes.cluster import LABEL_EXECUTOR, ClusterContainer, ClusterView, find_cluster
from .base import Action, ActionContext, ActionResult


async def _still_there(client, cid: str, wait: float = 15.0) -> bool:
    """Whether the container still exists once a removal someone else started (docker's 409
    "removal ... is already in progress") has had ``wait`` seconds to finish."""
    import docker.errors

    deadline = time.monotonic() + wait
    while True:
        try:
            await asyncio.to_thread(client.api.inspect_container, cid)
        except docker.errors.NotFound:
            return False
        except Exception:
            return True
        if time.monotonic() > deadline:
            return True
        await asyncio.sleep(0.5)


def _rayish(x: ClusterContainer) -> bool:
    """A Ray-based container: our ray executor, or one launch-cluster.sh started (no labels)."""
    executor = x.labels.get(LABEL_EXECUTOR)
    return executor.endswith("/ray") if executor else True


async def _exec(client, cid: str, argv: list[str], timeout: float = 30.0) -> None:
    """Best effort: a command that is missing or fails here only makes the stop after it slower."""
    try:
        async with asyncio.timeout(timeout):
            ctr = await asyncio.to_thread(client.containers.get, cid)
            await asyncio.to_thread(ctr.exec_run, argv)
    except Exception:
        pass


class StopAction(Action):
    """Stop serve and remove the cluster's containers on every node (by label and by name)."""

    async def execute(self, ctx: ActionContext) -> ActionResult:
        c = ctx.config.cluster
        async with ctx.step("find", f"containers of {c.name} on {len(ctx.nodes)} nodes") as rec:
            view: ClusterView = await find_cluster(ctx.nodes, c.name)
            found = view.all()
            rec.data = view.to_json()
            rec.message = (f"{len(found)} container(s): " + ", ".join(f"{x.node}:{x.name} ({x.state})" for x in found)
                           if found else "none")
            for n, why in view.unreachable.items():
                ctx.emit("find", "warn", f"cannot be asked: {why}", node=n)
        if not found:
            ok = not view.unreachable
            return ActionResult(self.name, ok, "nothing to stop" + ("" if ok else f"; unreachable: "
                                                                    f"{', '.join(view.unreachable)}"),
                                data={"removed": {}, "unreachable": view.unreachable})
        head_first = sorted(found, key=lambda x: (x.rank if x.rank is not None else 0, x.node))
        commands = []
        for x in head_first:
            if x.running and _rayish(x) and x.rank in (0, None):
                commands.append((x, ["docker", "exec", x.name, "pkill", "-INT", "-f", "vllm serve"]))
        for x in head_first:
            if x.running and _rayish(x):
                commands.append((x, ["docker", "exec", x.name, "ray", "stop", "--force"]))
            commands.append((x, ["docker", "stop", "-t", "30", x.name]))
            commands.append((x, ["docker", "rm", "-f", x.name]))
        detail = "\n".join(f"{shlex.join(argv)}   # on {x.node}" for x, argv in commands)
        if not await ctx.confirm(f"Stop {c.name} on {', '.join(sorted(view.containers))}?", detail):
            return ActionResult(self.name, False, "not confirmed")
        removed: dict[str, list[str]] = {}
        failed: dict[str, str] = {}
        clients = {x.node: await ctx.nodes[x.node].docker() for x in head_first}
        # serve first (its engine shuts down cleanly while the ranks still answer) ...
        for x in head_first:
            if x.running and _rayish(x) and x.rank in (0, None):
                async with ctx.step("serve", "stopping vllm serve", node=x.node):
                    await _exec(clients[x.node], x.id, ["pkill", "-INT", "-f", "vllm serve"])

        async def one(x: ClusterContainer) -> None:
            client = clients[x.node]
            async with ctx.step("stop", f"{x.name} ({x.status})", node=x.node) as rec:
                try:
                    if x.running and _rayish(x):
                        # `ray start --block` as PID 1 sits out docker's grace period on SIGTERM
                        await _exec(client, x.id, ["ray", "stop", "--force"])
                    if x.running:
                        await asyncio.to_thread(client.api.stop, x.id, timeout=30)
                    await asyncio.to_thread(client.api.remove_container, x.id, force=True)
                    removed.setdefault(x.node, []).append(x.name)
                    rec.message = f"{x.name} stopped and removed"
                except Exception as exc:
                    # a --rm container, or a launcher script's exit trap, may remove it under our feet
                    if not await _still_there(client, x.id):
                        removed.setdefault(x.node, []).append(x.name)
                        rec.message = f"{x.name} stopped (removed meanwhile)"
                        return
                    failed[x.node] = f"{type(exc).__name__}: {exc}"
                    rec.status, rec.message = FAIL, failed[x.node]

        # ... then every node at once
        await asyncio.gather(*(one(x) for x in head_first), return_exceptions=True)
        ok = not failed and not view.unreachable
        summary = f"stopped {sum(len(v) for v in removed.values())} container(s) on {', '.join(removed) or 'no node'}"
        if view.unreachable:
            summary += f"; unreachable (not stopped): {', '.join(view.unreachable)}"
        return ActionResult(self.name, ok, summary, data={"removed": removed, "failed": failed,
                                                          "unreachable": view.unreachable})
