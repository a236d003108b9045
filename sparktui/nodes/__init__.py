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
    """Collectors per node, plus a progress poller (RAS counts, vLLM /metrics) for the stall detector."""
    from ..collectors import NodeCollectors
    from ..probes.progress import ProgressSource

    sources: list["EventSource"] = [NodeCollectors(nodes[n.name], n, config) for n in config.nodes]
    head = config.head.name
    for n in config.nodes:
        # /metrics is read on the head itself (the API listens there), so no port is exposed to us
        url = f"http://127.0.0.1:{config.cluster.serve_port}/metrics" if n.name == head else None
        sources.append(ProgressSource(nodes[n.name], metrics_url=url))
    return sources
