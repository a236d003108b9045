"""The Node base every backend (ssh, local, sim) derives from, its optional abilities declared.

A *Node* is a handle for IO on one machine: run a command (argument list, never a shell string),
stream a command's output, read a file, reach its Docker Engine.  The event-source contract the
engine consumes lives in the core (sparktui/sources.py); it is re-exported here for the backends.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, AsyncIterator, ClassVar, Sequence

from ..sources import Emit, EventSource  # noqa: F401  (re-exported: backends and collectors import them here)

if TYPE_CHECKING:  # docker and asyncio are imported lazily: `sparktui --help` must stay fast
    import asyncio

    import docker


class NodeError(Exception):
    """A node could not be reached or a command could not be started (not a non-zero exit)."""


class NodeUnreachable(NodeError):
    pass


async def read_optional(node, path: str) -> str | None:
    """A file the node's kernel may lack (/proc/pressure/* without PSI): its text, or None.  An
    unreachable node still raises: that is no missing file."""
    try:
        return (await node.read_file(path)).decode("utf-8", "replace")
    except NodeUnreachable:
        raise
    except NodeError:
        return None


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


class Node:
    """What every backend (ssh, local, sim) is: the required calls, then each optional ability
    declared here with the answer of a backend that lacks it (as harlequin's adapter protocol does),
    so callers call it directly instead of probing with ``getattr``.  A backend that has an ability
    overrides the method and, where callers choose another path without it, sets its flag."""

    name: str
    backend: str  # "ssh" | "local" | "sim"

    # -- declared abilities: callers branch on these flags, never on whether a method exists
    opens_tcp: ClassVar[bool] = False  # ``open_tcp`` reaches host:port as the node sees it
    relays_logs: ClassVar[bool] = False  # ``open_log_stream`` may hand back a relayed container log
    # ``local_port`` hands back a forward that lives only as long as this process (say so with the URL)
    forwards_ports: ClassVar[bool] = False
    last_error: str | None = None  # why the connection was last lost (connection-holding backends)

    # -- required
    async def connect(self) -> None:
        raise NotImplementedError

    async def run(self, argv: Sequence[str], *, timeout: float | None = 30.0, input: bytes | None = None,
                  check: bool = False) -> CommandResult:
        raise NotImplementedError

    def stream(self, argv: Sequence[str]) -> AsyncIterator[bytes]:
        """Yield raw output lines (bytes, newline stripped) of a long-running command."""
        raise NotImplementedError

    async def read_file(self, path: str) -> bytes:
        raise NotImplementedError

    async def docker(self) -> "docker.DockerClient":
        """A docker SDK client bound to this node's Docker Engine (raises NotSupported on sim)."""
        raise NotImplementedError

    async def close(self) -> None:
        raise NotImplementedError

    # -- optional, with the default of a backend without them
    @property
    def connected(self) -> bool:
        """Whether the connection is up; a backend without one is always connected."""
        return True

    async def wait_lost(self) -> None:
        """Return when the current connection is gone; a backend without one never loses it."""
        import asyncio

        await asyncio.Event().wait()

    def trust_offered_key(self, fingerprint: str) -> None:
        """Record the host key the node offered (after the operator said yes).  Blocking."""
        raise NotSupported(f"{self.name}: the {self.backend} backend keeps no host keys")

    async def open_tcp(self, host: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """(reader, writer) to host:port as the node sees it (SSH direct-tcpip on ssh nodes), e.g.
        NCCL RAS on 28028.  Only where ``opens_tcp``."""
        raise NotSupported(f"{self.name}: the {self.backend} backend opens no TCP connections")

    async def local_port(self, host: str, port: int) -> tuple[str, int]:
        """An address on the operator's machine reaching host:port as the node sees it (a local port
        forward on ssh nodes), for HTTP clients."""
        raise NotSupported(f"{self.name}: this node backend cannot reach its serve port")

    async def open_log_stream(self, path: str, tty: bool) -> Any:
        """A container's log (the Engine's answer to ``GET path``) relayed by the node, or None: the
        caller then reads the Engine's socket.  Only where ``relays_logs``."""
        return None


async def port_open(host: str, port: int, timeout: float) -> bool:
    """Whether a TCP connect to host:port succeeds within ``timeout`` (nothing is sent)."""
    import asyncio

    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    except (OSError, asyncio.TimeoutError):
        return False
    writer.close()
    return True
