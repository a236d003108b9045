"""py-spy on a node: ``py-spy dump --pid P --json`` through the node handle (argument lists only).

py-spy must be on the node's PATH (inside a container it needs SYS_PTRACE; from the host it can
attach to container processes as root).  Its absence is reported, not raised.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..nodes.base import NodeError

if TYPE_CHECKING:
    from ..nodes.base import Node

PYSPY = "py-spy"


def dump_argv(pid: int, native: bool = False) -> list[str]:
    argv = [PYSPY, "dump", "--pid", str(pid), "--json"]
    if native:
        argv.insert(4, "--native")
    return argv


async def dump(node: "Node", pid: int, *, timeout: float = 30.0, native: bool = False) -> tuple[str, str]:
    """(raw output, error).  The raw output is what the bundle keeps and the verdict parses."""
    try:
        res = await node.run(dump_argv(pid, native), timeout=timeout)
    except NodeError as exc:
        return "", str(exc)
    if res.returncode == 127:
        return "", "py-spy is not installed on this node"
    if not res.ok:
        lines = [l.strip() for l in (res.err_text + "\n" + res.text).splitlines() if l.strip()]
        # py-spy prints "Error: ..." first and a backtrace after it: the first line is the reason
        reason = next((l for l in lines if l.startswith("Error")), lines[0] if lines else "")
        return "", f"py-spy exited {res.returncode}: {reason[:200]}"
    return res.text, ""
