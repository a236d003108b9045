"""The ssh backend: one asyncssh connection per node, reused for every command, file read and the
node's Docker Engine (its socket forwarded over the same connection).

Host keys are checked against known_hosts (the node's ``known_hosts``, else ssh config's
UserKnownHostsFile/GlobalKnownHostsFile, else the OpenSSH defaults), always passed to asyncssh
explicitly: left to itself, asyncssh turns checking off on ``UserKnownHostsFile none``, which
sparktui refuses instead.  ProxyJump hops are opened here for the same reason.  A key nobody
vouched for stops the connection during key exchange, before any credential is sent, and raises
``HostKeyError`` with its SHA256 fingerprint;
``trust_offered_key()`` records it after an explicit yes (the TUI's prompt).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import shutil
import tempfile
import time
from typing import TYPE_CHECKING, AsyncIterator, Sequence

import asyncssh

from . import hostkeys
from ..transport.docker_http import RelayedLogStream, split_head
from ..transport.threads import in_thread
from .base import CommandResult, HostKeyError, Node, NodeError, NodeUnreachable, NotSupported, quote_argv

if TYPE_CHECKING:
    import docker

    from ..config import NodeConfig

# OpenSSH's MaxSessions is 10 a connection: commands, the SFTP session, the log relays, one spare
log = logging.getLogger(__name__)
MAX_CHANNELS = 6
MAX_RELAYS = 2  # containers whose logs come relayed at once; more read the forwarded socket


def identity_problem(cfg: "NodeConfig") -> str | None:
    """Why ``identity_file`` cannot be used (missing, unreadable, not a key), else None."""
    path = cfg.identity_file
    if not path:
        return None
    path = os.path.expanduser(path)
    try:
        asyncssh.read_private_key(path)
    except FileNotFoundError:
        return f"identity_file {path} does not exist"
    except IsADirectoryError:
        return f"identity_file {path} is a directory"
    except PermissionError:
        return f"identity_file {path} is not readable (permission denied)"
    except asyncssh.KeyEncryptionError:
        return None  # passphrase-protected: the agent may hold it
    except (asyncssh.KeyImportError, ValueError, UnicodeDecodeError) as exc:
        return f"identity_file {path} is not a private key ({exc})"
    except OSError as exc:
        return f"identity_file {path}: {exc.strerror}"
    return None


class _Client(asyncssh.SSHClient):
    def __init__(self, node: "SshNode") -> None:
        self._node = node

    def validate_host_public_key(self, host: str, addr: str, port: int, key: asyncssh.SSHKey) -> bool:
        # only reached when known_hosts did not vouch for the key: remember it, then refuse
        self._node.offered_key = hostkeys.classify(key, host, addr, port, self._node._store)
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._node._on_lost(self, exc)


class SshNode(Node):
    backend = "ssh"
    opens_tcp = True
    relays_logs = True
    forwards_ports = True

    def __init__(self, cfg: "NodeConfig", *, keepalive_interval: float = 15.0, keepalive_count: int = 3,
                 connect_timeout: float = 10.0) -> None:
        self.cfg = cfg
        self.name = cfg.name
        self.keepalive_interval = keepalive_interval
        self.keepalive_count = keepalive_count
        self.connect_timeout = connect_timeout
        self.offered_key: hostkeys.OfferedKey | None = None
        self.last_error: str | None = None
        self.connect_seconds: float | None = None  # the last successful handshake (bench)
        self._conn: asyncssh.SSHClientConnection | None = None
        self._client: _Client | None = None
        self._lost = asyncio.Event()
        self._lock = asyncio.Lock()
        self._channels = asyncio.Semaphore(MAX_CHANNELS)
        self._sftp: asyncssh.SFTPClient | None = None
        self._sftp_broken = False
        self._docker: "docker.DockerClient | None" = None
        self._docker_listener: asyncssh.SSHListener | None = None
        self._docker_dir: str | None = None
        self._forwards: dict[tuple[str, int], asyncssh.SSHListener] = {}
        self._store: hostkeys.TrustStore | None = None
        self._relays = 0  # log relays open now
        self._no_relay = False  # the node cannot run one (no python3): never try again

    # ------------------------------------------------------------------ connection
    @property
    def connected(self) -> bool:
        return self._conn is not None

    def _options(self, paths: list[str], store: hostkeys.TrustStore) -> dict:
        cfg = self.cfg
        opts: dict = {
            "keepalive_interval": self.keepalive_interval,
            "keepalive_count_max": self.keepalive_count,
            "connect_timeout": self.connect_timeout,
        }
        if cfg.user:
            opts["username"] = cfg.user
        if cfg.port:
            opts["port"] = cfg.port
        if cfg.identity_file:
            opts["client_keys"] = [os.path.expanduser(cfg.identity_file)]
        # the same config files the trust store was resolved from (no second default lookup)
        opts["config"] = paths
        # explicit, never None: a missing file trusts nothing (every key is then "unknown")
        opts["known_hosts"] = store.asyncssh_arg()
        return opts

    def _resolve(self, host: str, port: int | None, user: str | None, known_hosts: str | None,
                 paths: list[str], where: str = ""):
        """(ssh config for host, its trust store); CheckingOff / ValueError / OSError on bad config."""
        conf = hostkeys.read_ssh_config(paths, host, port, user)
        return conf, hostkeys.trust_store(known_hosts, paths, conf, where or host)

    async def _jumps(self, paths: list[str], conf, depth: int = 0) -> asyncssh.SSHClientConnection | None:
        """Open ssh config's ProxyJump chain with checked host keys; asyncssh would open it with the
        config's known_hosts, which may be none (the jump host then unverified)."""
        jump = conf.get("ProxyJump") if conf is not None else None
        if not jump:
            return None
        if depth > 4:
            raise NodeError(f"{self.name}: ProxyJump chain deeper than 4 hops (a loop in ssh config?)")
        conn: asyncssh.SSHClientConnection | None = None
        try:
            for hop in str(jump).split(","):
                user, _, hostport = hop.strip().rpartition("@")
                host, port = hostport, None
                if ":" in hostport:
                    host, _, p = hostport.rpartition(":")
                    port = int(p)
                hconf, store = self._resolve(host, port, user or None, None, paths, f"jump host {host}")
                prev = conn if conn is not None else await self._jumps(paths, hconf, depth + 1)
                try:
                    conn = await asyncssh.connect(host, port or (), username=user or (), config=paths,
                                                  known_hosts=store.asyncssh_arg(), tunnel=prev or (),
                                                  connect_timeout=self.connect_timeout)
                except asyncssh.HostKeyNotVerifiable as exc:
                    if prev is not None:
                        prev.close()
                    raise NodeError(f"{self.name}: jump host {host}: {exc} (check its key, then add it to "
                                    f"{store.write_to})") from None
                conn.set_tunnel(prev)  # closing the last hop closes the chain
        except BaseException:
            if conn is not None:
                conn.close()
            raise
        return conn

    async def connect(self) -> None:
        async with self._lock:
            if self._conn is not None:
                return
            self.offered_key = None
            t0 = time.monotonic()
            client_holder: list[_Client] = []

            def factory() -> _Client:
                c = _Client(self)
                client_holder.append(c)
                return c

            where = self.cfg.host + (f":{self.cfg.port}" if self.cfg.port else "")
            paths = hostkeys.ssh_config_paths(self.cfg.ssh_config)
            tunnel = None
            ok = False
            try:
                conf, self._store = self._resolve(self.cfg.host, self.cfg.port, self.cfg.user,
                                                  self.cfg.known_hosts, paths)
                tunnel = await asyncio.wait_for(self._jumps(paths, conf), self.connect_timeout + 5)
                conn = await asyncio.wait_for(
                    asyncssh.connect(self.cfg.host, client_factory=factory, tunnel=tunnel or (),
                                     **self._options(paths, self._store)),
                    self.connect_timeout + 5)
                conn.set_tunnel(tunnel)
                ok = True
            except hostkeys.CheckingOff as exc:
                self.last_error = str(exc)
                fix = ("remove that setting from the ssh config" if "jump host" in str(exc) else
                       'remove that setting, or set known_hosts = "~/.ssh/known_hosts" for this node in the cluster config')
                raise NodeError(f"{self.name}: {exc}; refusing to connect to an unverified host (hint: {fix})") from None
            except asyncssh.ConfigParseError as exc:
                self.last_error = str(exc)
                raise NodeError(f"{self.name}: ssh config: {exc}") from None
            except asyncssh.HostKeyNotVerifiable as exc:
                k = self.offered_key
                if k is None:
                    self.last_error = str(exc)
                    raise NodeError(f"{self.name}: {exc}") from None
                raise HostKeyError(self.name, where, k.fingerprint, k.changed, hostkeys.hint(k)) from None
            except asyncssh.PermissionDenied as exc:
                self.last_error = f"permission denied ({exc.reason})"
                raise NodeUnreachable(f"{self.name}: {where}: login refused: {exc.reason}") from None
            except (asyncssh.KeyImportError, asyncssh.KeyEncryptionError) as exc:
                raise NodeError(f"{self.name}: identity_file {self.cfg.identity_file}: {exc}") from None
            except ValueError as exc:  # e.g. a ProxyJump port that is not a number
                self.last_error = str(exc)
                raise NodeError(f"{self.name}: {exc}") from None
            except (OSError, asyncssh.Error, asyncio.TimeoutError) as exc:
                reason = str(exc) or type(exc).__name__
                self.last_error = reason
                raise NodeUnreachable(f"{self.name}: cannot connect to {where}: {reason}") from None
            finally:
                if tunnel is not None and not ok:
                    tunnel.close()
            self.connect_seconds = time.monotonic() - t0
            self._conn = conn
            self._client = client_holder[-1] if client_holder else None
            self._lost = asyncio.Event()
            self._sftp = None
            self._sftp_broken = False
            self.last_error = None

    def _on_lost(self, client: _Client, exc: Exception | None) -> None:
        if client is not self._client:
            return  # an older connection's late callback
        self._conn = None
        self._client = None
        self._sftp = None
        self.last_error = str(exc) if exc else "connection closed"
        self._lost.set()
        self._drop_docker()
        self._drop_forwards()

    async def wait_lost(self) -> None:
        """Return when the current connection is gone (immediately if there is none)."""
        if self._conn is None:
            return
        await self._lost.wait()

    async def _ensure(self) -> asyncssh.SSHClientConnection:
        if self._conn is None:
            await self.connect()
        conn = self._conn
        if conn is None:
            raise NodeUnreachable(f"{self.name}: not connected")
        return conn

    def trust_offered_key(self, fingerprint: str) -> None:
        """Write the key the server offered to known_hosts; only the one the operator saw."""
        k = self.offered_key
        if k is None or k.fingerprint != fingerprint:
            raise NodeError(f"{self.name}: no offered host key with fingerprint {fingerprint}")
        hostkeys.trust(k)

    # ------------------------------------------------------------------ commands
    async def run(self, argv: Sequence[str], *, timeout: float | None = 30.0, input: bytes | None = None,
                  check: bool = False) -> CommandResult:
        args = tuple(str(a) for a in argv)
        conn = await self._ensure()
        async with self._channels:
            try:
                r = await conn.run(quote_argv(args), check=False, timeout=timeout, input=input, encoding=None)
            except (asyncssh.TimeoutError, asyncio.TimeoutError):
                raise NodeError(f"{self.name}: {args[0]} timed out after {timeout:.0f} s") from None
            except (asyncssh.Error, OSError) as exc:
                raise NodeUnreachable(f"{self.name}: {args[0]}: {exc}") from None
        rc = r.exit_status if r.exit_status is not None else -1
        res = CommandResult(args, rc, _bytes(r.stdout), _bytes(r.stderr))
        if check and not res.ok:
            raise NodeError(f"{self.name}: {args[0]} exited {rc}: {res.err_text.strip()[:200]}")
        return res

    async def stream(self, argv: Sequence[str]) -> AsyncIterator[bytes]:
        conn = await self._ensure()
        async with self._channels:
            try:
                proc = await conn.create_process(quote_argv(argv), encoding=None, stderr=asyncssh.STDOUT)
            except (asyncssh.Error, OSError) as exc:
                raise NodeUnreachable(f"{self.name}: {argv[0]}: {exc}") from None
            try:
                async for line in proc.stdout:
                    yield line.rstrip(b"\n").rstrip(b"\r")
            except (asyncssh.Error, OSError) as exc:
                raise NodeUnreachable(f"{self.name}: {argv[0]}: {exc}") from None
            finally:
                proc.close()

    async def open_log_stream(self, path: str, tty: bool) -> RelayedLogStream | None:
        """The Engine's answer to ``GET path`` (a container's log) relayed in blocks by a small
        program on the node (transport/node_relay.py) over a channel of its own; None when the node has
        no python3, every relay slot is taken, or the relay got no answer (the caller then reads the
        forwarded Docker socket)."""
        if self._no_relay or self._relays >= MAX_RELAYS:
            return None
        conn = await self._ensure()
        self._relays += 1
        done = False

        def close() -> None:
            nonlocal done
            if not done:
                done = True
                self._relays -= 1
                proc.close()

        argv = ["python3", "-c", _relay_source(), self.cfg.docker_socket, path, "tty" if tty else "plain"]
        try:
            proc = await conn.create_process(quote_argv(argv), encoding=None, stderr=asyncssh.DEVNULL)
        except (asyncssh.Error, OSError) as exc:
            self._relays -= 1
            raise NodeUnreachable(f"{self.name}: log relay: {exc}") from None
        got = b""
        try:
            while (parts := split_head(got)) is None and len(got) <= 65536:
                data = await _bounded(proc.stdout.read(65536), self.connect_timeout)
                if not data:
                    break
                got += data
        except (asyncssh.Error, OSError, asyncio.TimeoutError):
            parts = None
        except BaseException:
            close()
            raise
        if parts is None:
            close()
            try:
                await _bounded(proc.wait_closed(), 2.0)
            except (asyncssh.Error, OSError, asyncio.TimeoutError):
                pass
            if proc.exit_status == 127:  # the shell found no python3
                self._no_relay = True
                log.info("%s: no python3 on the node: container logs come through the forwarded socket", self.name)
            return None
        return RelayedLogStream(proc.stdout, close, parts[0], parts[1], tell=proc.stdin.write)

    async def open_tcp(self, host: str, port: int):
        """(reader, writer) to host:port as seen from the node, over this connection (direct-tcpip)."""
        conn = await self._ensure()
        try:
            return await conn.open_connection(host, port)
        except (asyncssh.Error, OSError) as exc:
            raise NodeError(f"{self.name}: cannot connect to {host}:{port} on the node: {exc}") from None

    async def local_port(self, host: str, port: int) -> tuple[str, int]:
        """A loopback address on THIS machine that reaches host:port as the node sees it: a local port
        forward on the node's connection (one per target, kept until close), for HTTP clients such
        as the openai client that want an address, not a stream."""
        key = (host, port)
        listener = self._forwards.get(key)
        if listener is None:
            conn = await self._ensure()
            try:
                listener = await conn.forward_local_port("127.0.0.1", 0, host, port)
            except (asyncssh.Error, OSError) as exc:
                raise NodeError(f"{self.name}: cannot forward a local port to {host}:{port}: {exc}") from None
            self._forwards[key] = listener
        return "127.0.0.1", listener.get_port()

    async def read_file(self, path: str, timeout: float = 10.0) -> bytes:
        """Read over the connection's SFTP session: no process is spawned per read."""
        conn = await self._ensure()
        if self._sftp is None and not self._sftp_broken:
            try:
                self._sftp = await asyncio.wait_for(conn.start_sftp_client(), timeout)
            except (asyncssh.Error, OSError, asyncio.TimeoutError):
                self._sftp_broken = True  # no sftp subsystem: fall back to cat
        if self._sftp is None:
            res = await self.run(["cat", "--", path], timeout=timeout)
            if not res.ok:
                raise NodeError(f"{self.name}: cannot read {path}: {res.err_text.strip()}")
            return res.stdout
        try:
            return await _bounded(_sftp_read(self._sftp, path), timeout)
        except asyncssh.SFTPError as exc:
            raise NodeError(f"{self.name}: cannot read {path}: {exc.reason}") from None
        except (asyncssh.Error, OSError, asyncio.TimeoutError) as exc:
            raise NodeUnreachable(f"{self.name}: reading {path}: {exc or 'timed out'}") from None

    # ------------------------------------------------------------------ docker
    async def docker(self) -> "docker.DockerClient":
        conn = await self._ensure()
        if self._docker is not None:
            return self._docker
        import docker  # lazily: slow to import

        self._docker_dir = tempfile.mkdtemp(prefix="sparktui-")  # 0700: only we reach the socket
        local = os.path.join(self._docker_dir, "docker.sock")
        try:
            self._docker_listener = await conn.forward_local_path(local, self.cfg.docker_socket)
        except (asyncssh.Error, OSError) as exc:
            self._drop_docker()
            raise NodeUnreachable(f"{self.name}: cannot forward {self.cfg.docker_socket}: {exc}") from None

        def _make() -> "docker.DockerClient":
            return docker.DockerClient(base_url="unix://" + local, timeout=30)

        try:
            client = await in_thread(_make)
        except docker.errors.DockerException as exc:
            self._drop_docker()
            raise NotSupported(f"{self.name}: no Docker Engine at {self.cfg.docker_socket} ({_short(exc)})") from None
        if self._conn is not conn:  # lost while we were connecting
            client.close()
            raise NodeUnreachable(f"{self.name}: connection lost")
        self._docker = client
        return client

    def _drop_forwards(self) -> None:
        for listener in self._forwards.values():
            listener.close()
        self._forwards.clear()

    def _drop_docker(self) -> None:
        if self._docker is not None:
            try:
                self._docker.close()
            except Exception:
                pass
        self._docker = None
        if self._docker_listener is not None:
            self._docker_listener.close()
            self._docker_listener = None
        if self._docker_dir:
            shutil.rmtree(self._docker_dir, ignore_errors=True)
            self._docker_dir = None

    async def close(self) -> None:
        conn = self._conn
        self._drop_docker()
        self._drop_forwards()
        self._conn = None
        self._client = None
        if conn is not None:
            conn.close()
            try:
                await asyncio.wait_for(conn.wait_closed(), 5)
            except (asyncio.TimeoutError, Exception):
                pass


async def _bounded(coro, timeout: float):
    """``wait_for`` without its 3.11 pitfalls: the inner task's late exception is always retrieved
    (no "never retrieved" noise when the connection drops mid-read) and a cancel is never lost."""
    task = asyncio.ensure_future(coro)
    try:
        done, _ = await asyncio.wait({task}, timeout=timeout)
    except asyncio.CancelledError:
        task.cancel()
        task.add_done_callback(_retrieve)
        raise
    if not done:
        task.cancel()
        task.add_done_callback(_retrieve)
        raise asyncio.TimeoutError
    return task.result()


def _retrieve(task: "asyncio.Future") -> None:
    if not task.cancelled():
        task.exception()


async def _sftp_read(sftp: "asyncssh.SFTPClient", path: str) -> bytes:
    # /proc files report size 0, so read fixed chunks until EOF instead of trusting stat
    chunks = []
    async with sftp.open(path, "rb", block_size=0) as fh:  # 0: plain serial reads
        while True:
            b = await fh.read(65536)
            if not b:
                break
            chunks.append(b)
    return b"".join(chunks)


@functools.lru_cache(maxsize=1)
def _relay_source() -> str:
    from importlib.resources import files

    return files("sparktui.transport").joinpath("node_relay.py").read_text(encoding="utf-8")


def _bytes(x: object) -> bytes:
    if x is None:
        return b""
    if isinstance(x, str):
        return x.encode()
    return bytes(x)  # type: ignore[arg-type]


def _short(exc: Exception) -> str:
    return str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
