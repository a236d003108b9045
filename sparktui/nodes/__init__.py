"""Node backends: ssh (asyncssh + docker over a forwarded socket), local (psutil), sim (demo).

Factories import backends lazily so that the CLI stays fast and the engine imports without them.

- ``make_node(cfg)``: a ``Node`` handle for IO (ssh/local).  Sim nodes come from a ``SimCluster``.
- ``make_sources(config, nodes)``: the event sources (collectors) for ssh/local nodes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..config import Config, NodeConfig
    from .base import EventSource, Node


def make_node(cfg: "NodeConfig") -> "Node":
    if cfg.backend == "ssh":
        from .ssh import SshNode

        return SshNode(cfg)
    if cfg.backend == "local":
        from .local import LocalNode

        return LocalNode(cfg)
    raise ValueError(f"node {cfg.name}: backend {cfg.backend!r} has no standalone node (use sparktui.sim)")


def make_sources(config: "Config", nodes: dict[str, "Node"]) -> list["EventSource"]:
    from ..collectors import NodeCollectors

    return [NodeCollectors(nodes[n.name], n, config) for n in config.nodes]
