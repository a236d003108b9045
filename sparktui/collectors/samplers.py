"""Self-rearming samplers for one connected node: memory, GPU, fabric links.

Each loop schedules its next sample only after the previous one finished, so samples never
overlap.  ``NodeUnreachable`` escapes (the connection is gone: the caller reconnects); any other
failure of a probe is reported in its sample and retried at the next turn.
"""

from __future__ import annotations

import asyncio
import logging
import time

from ..waiting import get_within
from ..model import Emit, NodePressure, GpuSample, LinkSample, MemorySample
from ..nodes.base import NodeError, NodeUnreachable, read_optional
from ..probes import gpu as gpu_probe
from ..probes import links as link_probe
from ..probes.memory import MEMINFO, PSI_CPU, PSI_IO, PSI_MEMORY, memory_info, some_avg10

log = logging.getLogger(__name__)
PSI_PERIOD_S = 1.9  # the kernel updates PSI's averages every 2 s: reading more often tells nothing new


async def memory_loop(node, name: str, emit: Emit, interval: float, meminfo_path: str = MEMINFO) -> None:
    """``meminfo_path``: the node's NodeConfig.meminfo_path, the one source doctor and validate read too.
    Each turn also reads the node's CPU and IO pressure (a node under pressure starts its ranks up
    slower: the stall detector allows them more silence), every other turn at 1 Hz: the kernel updates
    PSI every 2 s.  A kernel without PSI is asked once."""
    psi_ok = True
    pressure_at = 0.0
    while True:
        try:
            meminfo = (await node.read_file(meminfo_path)).decode("utf-8", "replace")
        except NodeUnreachable:
            raise
        except NodeError as exc:  # a slow read: try again next turn
            log.warning("%s: %s", name, exc)
            await asyncio.sleep(interval)
            continue
        psi = cpu = io = None
        if psi_ok:
            psi = await read_optional(node, PSI_MEMORY)
            psi_ok = psi is not None  # kernel without PSI: stop asking
        pressure = psi_ok and time.monotonic() - pressure_at >= PSI_PERIOD_S
        if pressure:
            pressure_at = time.monotonic()
            cpu, io = await read_optional(node, PSI_CPU), await read_optional(node, PSI_IO)
        try:
            emit(MemorySample(node=name, memory=memory_info(meminfo, psi)))
        except ValueError as exc:
            log.warning("%s: %s", name, exc)
        if pressure:
            emit(NodePressure(node=name, cpu=some_avg10(cpu), io=some_avg10(io), memory=some_avg10(psi)))
        await asyncio.sleep(interval)


class GpuLoop:
    """`nvidia-smi --query-gpu ... -l N`: one long-lived process instead of one per sample.

    Loop mode prints no separator between turns (checked on a real H200), so a turn is the burst
    of rows that arrives together: emitted once no row came for ``QUIET`` seconds.
    compute-apps prints nothing at all for zero processes, so it runs one-shot at a slower rate.
    """

    QUIET = 0.15
    ABSENT_RECHECK = 60.0

    def __init__(self, node, name: str, emit: Emit, interval: float, apps_interval: float) -> None:
        self.node, self.name, self.emit = node, name, emit
        self.interval = max(1, int(round(interval)))
        self.apps_interval = apps_interval
        self.apps_text = ""
        self.apps_rc: int | None = None

    async def run(self) -> None:
        while True:
            try:
                await self._turn()
            except NodeUnreachable:
                raise
            except NodeError as exc:  # e.g. nvidia-smi hung past its timeout
                self.emit(GpuSample(node=self.name, gpus=(), available=True, error=str(exc)))
                await asyncio.sleep(max(10.0, self.interval))

    async def _turn(self) -> None:
        res = await self.node.run(gpu_probe.QUERY_GPU, timeout=20)
        if res.returncode == 127:
            self.emit(GpuSample(node=self.name, gpus=(), available=False, error="nvidia-smi not found"))
            await asyncio.sleep(self.ABSENT_RECHECK)
            return
        await self._apps_once()
        sample = gpu_probe.gpu_sample(self.name, res.returncode, res.text, self.apps_rc, self.apps_text,
                                      res.err_text)
        self.emit(sample)
        if not res.ok or sample.error:
            await asyncio.sleep(max(10.0, self.interval))
            return
        apps = asyncio.create_task(self._apps_loop())
        try:
            await self._follow()
        finally:
            apps.cancel()
        await asyncio.sleep(self.interval)  # the loop process ended: start over

    async def _apps_once(self) -> None:
        r = await self.node.run(gpu_probe.QUERY_APPS, timeout=20)
        self.apps_rc, self.apps_text = r.returncode, r.text

    async def _apps_loop(self) -> None:
        while True:
            await asyncio.sleep(self.apps_interval)
            try:
                await self._apps_once()
            except NodeUnreachable:
                return  # the main loop notices too
            except NodeError as exc:
                log.debug("%s: compute-apps: %s", self.name, exc)

    async def _follow(self) -> None:
        q: asyncio.Queue[bytes | None] = asyncio.Queue()

        async def pump() -> None:
            try:
                async for line in self.node.stream([*gpu_probe.QUERY_GPU, "-l", str(self.interval)]):
                    q.put_nowait(line)
            finally:
                q.put_nowait(None)

        task = asyncio.create_task(pump())
        rows: list[str] = []
        try:
            while True:
                try:
                    item = await get_within(q, self.QUIET) if rows else await q.get()
                except asyncio.TimeoutError:
                    self._emit_rows(rows)
                    rows = []
                    continue
                if item is None:
                    break
                rows.append(item.decode("utf-8", "replace"))
            if rows:
                self._emit_rows(rows)
            await task  # re-raises NodeUnreachable from the stream
        finally:
            task.cancel()

    def _emit_rows(self, rows: list[str]) -> None:
        self.emit(gpu_probe.gpu_sample(self.name, 0, "\n".join(rows), self.apps_rc, self.apps_text))


async def links_loop(node, name: str, emit: Emit, interval: float) -> None:
    has_ibdev = True
    while True:
        try:
            res = await node.run(link_probe.IP_ADDR, timeout=20)
            rdma: dict[str, str] = {}
            if has_ibdev:
                ib = await node.run(link_probe.IBDEV2NETDEV, timeout=20)
                has_ibdev = ib.returncode != 127
                if ib.ok:
                    rdma = link_probe.parse_ibdev2netdev(ib.text)
        except NodeUnreachable:
            raise
        except NodeError as exc:
            log.warning("%s: links: %s", name, exc)
            await asyncio.sleep(interval)
            continue
        if res.ok:
            try:
                emit(LinkSample(node=name, links=tuple(link_probe.parse_ip_addr(res.text, rdma))))
            except ValueError as exc:
                log.warning("%s: %s", name, exc)
        elif res.returncode == 127:
            return  # no iproute2 on this node: nothing to show
        await asyncio.sleep(interval)
