"""Node backends: ssh (asyncssh + docker over a forwarded socket), local (psutil), sim (demo).

Factories import backends lazily so that the CLI stays fast and the engine imports without them.

- ``make_node(cfg)``: a ``Node`` handle for IO (ssh/local).  Sim nodes come from a ``SimCluster``.
- the event sources for ssh/local nodes: ``sparktui.collectors.make_sources`` (collectors sit above nodes).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..config import NodeConfig
    from .base import Node


def make_node(cfg: "NodeConfig") -> "Node":
    if cfg.backend == "ssh":
        from .ssh import SshNode

        return SshNode(cfg)
    if cfg.backend == "local":
        from .local import LocalNode

        return LocalNode(cfg)
    raise ValueError(f"node {cfg.name}: backend {cfg.backend!r} has no standalone node (use sparktui.sim)")
