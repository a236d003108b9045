"""The Node protocol every backend (ssh, local, sim) implements, and the event-source contract.

A *Node* is a handle for IO on one machine: run a command (argument list, never a shell string),
stream a command's output, read a file, reach its Docker Engine.  An *EventSource* turns a node
into typed events (model.py) for the engine: collectors for ssh/local, the simulation for sim.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING, AsyncIterator, Protocol, Sequence, runtime_checkable

if TYPE_CHECKING:  # docker is imported lazily: `sparktui --help` must stay fast
    import docker

    from ..model import Emit


class NodeError(Exception):
    """A node could not be reached or a command could not be started (not a non-zero exit)."""


class NodeUnreachable(NodeError):
    pass


class HostKeyError(NodeError):
    """The node's host key is unknown or changed.  ``fingerprint`` is what the server offered."""

    def __init__(self, node: str, host: str, fingerprint: str, changed: bool, hint: str = "") -> None:
        self.node = node
        self.host = host
        self.fingerprint = fingerprint
        self.changed = changed
        self.hint = hint
        what = "CHANGED" if changed else "unknown"
        super().__init__(f"{node}: host key of {host} is {what} ({fingerprint}); refusing to connect. {hint}".strip())


class NotSupported(NodeError):
    pass


@dataclass(frozen=True, slots=True)
class CommandResult:
    argv: tuple[str, ...]
    returncode: int
    stdout: bytes
    stderr: bytes

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    @property
    def text(self) -> str:
        return self.stdout.decode("utf-8", "replace")

    @property
    def err_text(self) -> str:
        return self.stderr.decode("utf-8", "replace")


def quote_argv(argv: Sequence[str]) -> str:
    """The one place a remote command line is made: always from an argument list."""
    return shlex.join([str(a) for a in argv])


@runtime_checkable
class Node(Protocol):
    name: str
    backend: str  # "ssh" | "local" | "sim"

    async def connect(self) -> None: ...

    async def run(self, argv: Sequence[str], *, timeout: float | None = 30.0, input: bytes | None = None,
                  check: bool = False) -> CommandResult: ...

    def stream(self, argv: Sequence[str]) -> AsyncIterator[bytes]:
        """Yield raw output lines (bytes, newline stripped) of a long-running command."""
        ...

    async def read_file(self, path: str) -> bytes: ...

    async def docker(self) -> "docker.DockerClient":
        """A docker SDK client bound to this node's Docker Engine (raises NotSupported on sim)."""
        ...

    async def close(self) -> None: ...

    # Optional: ``async open_tcp(host, port) -> (reader, writer)`` reaching host:port as the node sees
    # it (SSH direct-tcpip on ssh nodes).  Probes use it when present (e.g. NCCL RAS on 28028).
    # Optional: ``async local_port(host, port) -> (addr, port)``, an address on the operator's machine
    # reaching host:port as the node sees it (a local port forward on ssh nodes), for HTTP clients.


class EventSource(Protocol):
    """Produces events for one node until cancelled.  ``emit`` is thread-safe and non-blocking."""

    node_name: str

    async def run(self, emit: Emit) -> None: ...


async def port_open(host: str, port: int, timeout: float) -> bool:
    """Whether a TCP connect to host:port succeeds within ``timeout`` (nothing is sent)."""
    import asyncio

    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    except (OSError, asyncio.TimeoutError):
        return False
    writer.close()
    return True
