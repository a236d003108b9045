"""The local backend: this machine, through asyncio subprocesses (argument lists) and the filesystem.

Used for a one-node setup (sparktui running on the Spark itself) and by tests.  Docker goes to the
local Engine socket named by ``cfg.docker_socket``.
"""

from __future__ import annotations

import asyncio
import os
from typing import TYPE_CHECKING, AsyncIterator, Sequence

from ..transport.threads import in_thread
from .base import CommandResult, Node, NodeError, NotSupported

if TYPE_CHECKING:
    import docker

    from ..config import NodeConfig


class LocalNode(Node):
    backend = "local"
    opens_tcp = True

    def __init__(self, cfg: "NodeConfig") -> None:
        self.cfg = cfg
        self.name = cfg.name
        self._docker: "docker.DockerClient | None" = None
        self._procs: set[asyncio.subprocess.Process] = set()

    async def connect(self) -> None:  # nothing to open; kept for the protocol
        return None

    async def run(self, argv: Sequence[str], *, timeout: float | None = 30.0, input: bytes | None = None,
                  check: bool = False) -> CommandResult:
        args = [str(a) for a in argv]
        try:
            proc = await asyncio.create_subprocess_exec(
                *args, stdin=asyncio.subprocess.PIPE if input is not None else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        except (FileNotFoundError, PermissionError) as exc:
            # same shape as a shell's "command not found" so callers treat both backends alike
            res = CommandResult(tuple(args), 127, b"", f"{args[0]}: {exc.strerror}".encode())
            if check:
                raise NodeError(f"{self.name}: {args[0]}: {exc.strerror}") from None
            return res
        try:
            out, err = await asyncio.wait_for(proc.communicate(input), timeout)
        except asyncio.TimeoutError:
            proc.kill()
            await proc.wait()
            raise NodeError(f"{self.name}: {args[0]} timed out after {timeout:.0f} s") from None
        except asyncio.CancelledError:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
            raise
        res = CommandResult(tuple(args), proc.returncode if proc.returncode is not None else -1, out, err)
        if check and not res.ok:
            raise NodeError(f"{self.name}: {args[0]} exited {res.returncode}: {res.err_text.strip()[:200]}")
        return res

    async def stream(self, argv: Sequence[str]) -> AsyncIterator[bytes]:
        args = [str(a) for a in argv]
        try:
            proc = await asyncio.create_subprocess_exec(
                *args, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT, limit=1 << 20)
        except (FileNotFoundError, PermissionError) as exc:
            raise NodeError(f"{self.name}: {args[0]}: {exc.strerror}") from None
        self._procs.add(proc)
        try:
            assert proc.stdout is not None
            while True:
                line = await proc.stdout.readline()
                if not line:
                    break
                yield line.rstrip(b"\n").rstrip(b"\r")
        finally:
            self._procs.discard(proc)
            if proc.returncode is None:
                proc.kill()
                await proc.wait()

    async def open_tcp(self, host: str, port: int):
        """(reader, writer) to host:port (the same call SshNode makes over its connection)."""
        return await asyncio.open_connection(host, port)

    async def local_port(self, host: str, port: int) -> tuple[str, int]:
        """host:port is already reachable from here (the same call SshNode answers with a forward)."""
        return host, port

    async def read_file(self, path: str) -> bytes:
        def _read() -> bytes:
            with open(path, "rb") as fh:
                return fh.read()

        try:
            return await asyncio.to_thread(_read)
        except OSError as exc:
            raise NodeError(f"{self.name}: cannot read {path}: {exc.strerror}") from None

    async def docker(self) -> "docker.DockerClient":
        if self._docker is None:
            sock = self.cfg.docker_socket
            if not os.path.exists(sock):
                raise NotSupported(f"{self.name}: no Docker socket at {sock}")
            import docker  # lazily: it is slow to import

            def _make() -> "docker.DockerClient":
                return docker.DockerClient(base_url="unix://" + sock, timeout=30)

            self._docker = await in_thread(_make)
        return self._docker

    async def close(self) -> None:
        for proc in list(self._procs):
            if proc.returncode is None:
                proc.kill()
        if self._docker is not None:
            try:
                self._docker.close()
            except Exception:
                pass
            self._docker = None
