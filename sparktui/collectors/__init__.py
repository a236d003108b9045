"""Event sources for real nodes (ssh, local): reachability, containers + logs, memory, GPU, links.

``NodeCollectors`` keeps one node connected forever: on loss it reports
``NodeReachability(reachable=False, since, retry_in)`` and reconnects with exponential backoff
(0.5 s doubling to 10 s; a cheap TCP probe of the SSH port cuts the wait short once the node is
back).  While connected it runs the samplers and the Docker watch side by side; log cursors live
here, so streams resume where they stopped after any reconnect.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Awaitable, Callable

from ..model import Emit, HostKeyOffer, NodeReachability
from ..nodes.base import HostKeyError, NodeError, port_open
from ..waiting import Backoff
from .docker_watch import BACKOFF_MAX, BACKOFF_MIN, DockerWatch, LogState
from .samplers import GpuLoop, links_loop, memory_loop
from .serving import serving_loop

if TYPE_CHECKING:
    from ..config import Config, NodeConfig
    from ..nodes.base import Node
    from ..sources import EventSource

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Intervals:
    memory: float = 1.0
    gpu: float = 2.0
    gpu_apps: float = 10.0
    links: float = 30.0
    reconcile: float = 30.0
    serving: float = 3.0  # /metrics of the head's API server
    serving_idle: float = 10.0  # while nothing listens on the serve port


def _offer(exc: HostKeyError) -> HostKeyOffer:
    return HostKeyOffer(exc.host, exc.fingerprint, exc.changed, exc.hint)


class NodeCollectors:
    def __init__(self, node: "Node", node_cfg: "NodeConfig", config: "Config | None" = None,
                 intervals: Intervals | None = None) -> None:
        self.node = node
        self.cfg = node_cfg
        self.config = config
        self.node_name = node_cfg.name
        self.intervals = intervals or Intervals()
        self.logs = LogState()
        self.docker: DockerWatch | None = None
        self._tasks: list[asyncio.Task] = []
        # set by a face that can ask a person (the TUI's HostKeyModal): awaited with the
        # HostKeyError, True = trust that exact key and reconnect now.  None: report and retry.
        self.host_key_prompt: Callable[[HostKeyError], Awaitable[bool]] | None = None
        self._asked: set[str] = set()  # fingerprints already refused: do not ask again

    async def run(self, emit: Emit) -> None:
        backoff = Backoff(BACKOFF_MIN, BACKOFF_MAX)
        down_since: float | None = None
        backend = self.cfg.backend
        while True:
            offer = None  # the host key facts a face shows a person, on the reachability event
            try:
                await self.node.connect()
            except HostKeyError as exc:
                error, delay = str(exc), BACKOFF_MAX  # needs a person: no point retrying fast
                offer = _offer(exc)
                if await self._ask(exc, emit, down_since or time.time()):
                    continue
            except NodeError as exc:
                error, delay = str(exc), backoff.next()
            else:
                backoff.reset()
                down_since = None
                emit(NodeReachability(node=self.node_name, reachable=True, backend=backend))
                reason = await self._connected(emit)
                down_since = time.time()
                emit(NodeReachability(node=self.node_name, reachable=False, since=down_since, error=reason,
                                      retry_in=0.0, backend=backend))
                await self._cleanup()
                continue
            down_since = down_since or time.time()
            emit(NodeReachability(node=self.node_name, reachable=False, since=down_since, error=error,
                                  retry_in=delay, backend=backend, host_key=offer))
            await self._wait_retry(delay)

    async def _ask(self, exc: HostKeyError, emit, since: float) -> bool:
        prompt = self.host_key_prompt
        if prompt is None or exc.fingerprint in self._asked:
            return False
        emit(NodeReachability(node=self.node_name, reachable=False, since=since, error=str(exc),
                              retry_in=None, backend=self.cfg.backend, host_key=_offer(exc)))
        try:
            yes = await prompt(exc)
        except Exception:
            log.exception("%s: host-key prompt failed", self.node_name)
            yes = False
        if not yes:
            self._asked.add(exc.fingerprint)
            return False
        try:  # NotSupported (a NodeError) from a backend that keeps no host keys
            await asyncio.to_thread(self.node.trust_offered_key, exc.fingerprint)
        except (NodeError, OSError) as err:
            log.warning("%s: could not record the host key: %s", self.node_name, err)
            return False
        return True

    def file_full(self, node: str, source: str) -> None:
        """(Engine.)  The session file of ``node``/``source`` takes no more lines: its follower
        need not be sent what it would skip (see ``LogFollower.file_full``)."""
        if node != self.node_name:
            return
        self.logs.full.add(source)
        if self.docker is not None:
            self.docker.file_full(source)

    async def _connected(self, emit) -> str:
        """Run every loop until the connection is lost; return why."""
        iv = self.intervals
        self.docker = DockerWatch(self.node, self.node_name, emit, self.logs, iv.reconcile)
        self._tasks = [
            asyncio.create_task(memory_loop(self.node, self.node_name, emit, iv.memory, self.cfg.meminfo_path),
                                name="memory"),
            asyncio.create_task(GpuLoop(self.node, self.node_name, emit, iv.gpu, iv.gpu_apps).run(), name="gpu"),
            asyncio.create_task(links_loop(self.node, self.node_name, emit, iv.links), name="links"),
            asyncio.create_task(self.docker.run(), name="docker"),
        ]
        cfg = self.config
        if cfg is not None and cfg.head.name == self.node_name:  # the API server listens on the head
            self._tasks.append(asyncio.create_task(
                serving_loop(self.node, self.node_name, emit, cfg.cluster.serve_host, cfg.cluster.serve_port,
                             api_key=cfg.api_key(), interval=iv.serving, idle_interval=iv.serving_idle),
                name="serving"))
        lost = asyncio.create_task(self.node.wait_lost(), name="lost")
        try:
            pending = set(self._tasks) | {lost}
            while True:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                if lost in done:
                    return self.node.last_error or "connection lost"
                for t in done:
                    exc = t.exception()
                    if isinstance(exc, NodeError):
                        # a sampler's channel failed: if the connection is really gone, `lost` fires
                        # at once; otherwise treat it as lost ourselves and reconnect
                        if not self.node.connected:
                            return str(exc)
                        await self.node.close()
                        return str(exc)
                    if exc is not None:
                        log.error("%s: %s sampler failed: %r", self.node_name, t.get_name(), exc)
        finally:
            lost.cancel()
            for t in self._tasks:
                t.cancel()

    async def _cleanup(self) -> None:
        """Let the cancelled loops finish (bounded: a stuck one must not delay the reconnect)."""
        if self._tasks:
            _, stuck = await asyncio.wait(self._tasks, timeout=5)
            for t in stuck:
                log.warning("%s: %s did not stop within 5 s", self.node_name, t.get_name())
        if self.docker is not None:
            await self.docker.close()
        self._tasks = []

    async def _wait_retry(self, delay: float) -> None:
        """Sleep ``delay`` but wake early when the node's SSH port accepts connections again."""
        if self.cfg.backend != "ssh":
            await asyncio.sleep(delay)
            return
        end = time.monotonic() + delay
        while (left := end - time.monotonic()) > 0:
            if await port_open(self.cfg.host, self.cfg.port or 22, min(left, 0.5)):
                return
            await asyncio.sleep(min(left, 0.5))

    async def close(self) -> None:
        for t in self._tasks:
            t.cancel()
        if self.docker is not None:
            await self.docker.close()
        await self.node.close()


def make_sources(config: "Config", nodes: dict[str, "Node"]) -> list["EventSource"]:
    """Collectors per node, plus a progress poller (RAS counts, vLLM /metrics) for the stall detector."""
    from ..probes.progress import ProgressSource

    sources: list["EventSource"] = [NodeCollectors(nodes[n.name], n, config) for n in config.nodes]
    head = config.head.name
    for n in config.nodes:
        # /metrics is read on the head itself (the API listens there), so no port is exposed to us
        url = f"http://127.0.0.1:{config.cluster.serve_port}/metrics" if n.name == head else None
        sources.append(ProgressSource(nodes[n.name], metrics_url=url))
    return sources
