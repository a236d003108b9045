"""Where the cluster's OpenAI-compatible API is, for prompts, metrics and load tests.

The base URL comes from ``$SPARKTUI_API_BASE``, else ``cluster.api_base``, else the head node's serve
port: straight to ``http://<head host>:<serve_port>`` when the operator's machine reaches it, else a
local port forward on the head node's existing connection (``probes.serving.endpoint``).  The model
is the one ``/v1/models`` lists (the configured ``served_model`` when it is among them).  The API key
is read from the environment variable the config names and never stored.  No Textual here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping

from ..config import Config
from ..nodes.base import Node, port_open
from ..probes.serving import ServerInfo, ServingError, endpoint, server_info

API_BASE_ENV = "SPARKTUI_API_BASE"


@dataclass(frozen=True)
class Target:
    base_url: str
    model: str
    api_key: str | None
    node: str  # the node serving it ("" for an explicit base URL)
    via: str  # "direct" | "forward" | "configured"
    version: str = ""
    models: tuple[str, ...] = ()

    def __repr__(self) -> str:  # the key never reaches a log or a traceback
        return f"Target({self.base_url!r}, model={self.model!r}, via={self.via!r})"


def configured_base(config: Config) -> str | None:
    base = os.environ.get(API_BASE_ENV) or config.cluster.api_base
    return base.rstrip("/").removesuffix("/v1") if base else None


async def base_url(config: Config, nodes: Mapping[str, Node], *, connect_timeout: float = 1.0) -> tuple[str, str, str]:
    """(base URL, node, via) of the cluster's API, without asking it anything yet."""
    explicit = configured_base(config)
    if explicit:
        return explicit, "", "configured"
    c = config.cluster
    head = config.head
    # a wildcard bind is reachable at the head's own address; a loopback bind only from the node itself
    host = head.host if c.serve_host in ("0.0.0.0", "::", "") else c.serve_host
    loopback = host.startswith("127.") or host in ("localhost", "::1")
    if head.backend == "ssh" and host and not loopback and await port_open(host, c.serve_port, connect_timeout):
        return f"http://{host}:{c.serve_port}", head.name, "direct"
    node = nodes.get(head.name)
    if node is None:
        raise ServingError(f"{head.name}: no connection to the head node to reach its serve port", kind="unreachable")
    return await endpoint(node, c.serve_host, c.serve_port), head.name, "forward"


def keep_forward_command(config: Config, node_name: str = "", local_port: int | None = None) -> str:
    """The ``ssh -N -L LOCAL:HOST:PORT user@node`` line that keeps the API reachable on this machine
    after sparktui exits (its own forward lives on its connection and goes with it)."""
    import shlex

    c = config.cluster
    n = next((x for x in config.nodes if x.name == node_name), config.head)
    target = "127.0.0.1" if c.serve_host in ("0.0.0.0", "::", "") else c.serve_host
    argv = ["ssh", "-N", "-L", f"{local_port or c.serve_port}:{target}:{c.serve_port}"]
    if n.port:
        argv += ["-p", str(n.port)]
    if n.identity_file:
        argv += ["-i", n.identity_file]
    if n.ssh_config:
        argv += ["-F", n.ssh_config]
    argv.append(f"{n.user}@{n.host}" if n.user else n.host)
    return shlex.join(argv)


def forward_note(config: Config, node_name: str, url: str) -> str:
    """What to say beside a URL that is a temporary forward."""
    port = config.cluster.serve_port
    return (f"{url} is a temporary forward through {node_name}'s ssh connection: it closes when this command "
            f"exits; to keep the API at http://127.0.0.1:{port}, run: {keep_forward_command(config, node_name)}")


def configured_model(config: Config) -> str:
    """The name the server is told to serve: ``--served-model-name`` in serve_args, else served_model."""
    args = list(config.cluster.serve_args)
    for i, a in enumerate(args):
        if a == "--served-model-name" and i + 1 < len(args):
            return args[i + 1]
        if a.startswith("--served-model-name="):
            return a.split("=", 1)[1]
    return config.cluster.served_model


def pick_model(config: Config, models: tuple[str, ...]) -> str:
    """The configured name when the server lists it, else the first it lists."""
    for w in (configured_model(config), config.cluster.served_model):
        if w and w in models:
            return w
    return models[0]


async def resolve(config: Config, nodes: Mapping[str, Node], *, timeout: float = 10.0,
                  model: str | None = None) -> Target:
    """The cluster's API with its model: raises ServingError (one line) when it does not answer."""
    url, node, via = await base_url(config, nodes)
    key = config.api_key()
    info: ServerInfo = await server_info(url, api_key=key, timeout=timeout)
    if not info.models:
        what = "is not healthy" if not info.healthy else "lists no model"
        raise ServingError(f"{url}: the server {what} (/v1/models empty)", kind="no_model")
    chosen = model or pick_model(config, info.models)
    return Target(url, chosen, key, node, via, info.version, info.models)
