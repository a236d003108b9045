"""Self-rearming scrape of the serving node's ``/metrics`` (runs for the head node only).

The API is reached as the node sees it (``probes.serving.endpoint``: a local port forward on the
node's SSH connection), so no port has to be exposed to the operator's machine.  Each turn starts
after the previous one finished.  While nothing listens (no server yet, or it stopped) the loop
polls at the slower ``idle_interval`` and emits a "not serving" sample only when the reason changes,
so an idle cluster neither floods the session nor the log.  ``NodeUnreachable`` escapes.
"""

from __future__ import annotations

import asyncio
import logging
import time

from ..model import Emit, ServingSample
from ..nodes.base import NodeUnreachable
from ..probes import metrics
from ..probes.serving import ServingError, endpoint

log = logging.getLogger(__name__)


async def serving_loop(node, name: str, emit: Emit, host: str, port: int, *, api_key: str | None = None,
                       interval: float = 3.0, idle_interval: float = 10.0, timeout: float = 5.0) -> None:
    prev: tuple[metrics.MetricsSnapshot, float] | None = None
    last: tuple[bool, str | None] | None = None  # (up, error) of the last sample without numbers
    while True:
        try:
            base = await endpoint(node, host, port)
            snap = await metrics.scrape(base, timeout, api_key=api_key)
        except ServingError as exc:
            # endpoint() folds node errors into ServingError; a lost connection must still reach
            # NodeCollectors, which reconnects
            if isinstance(exc.__context__, NodeUnreachable):
                raise exc.__context__ from None
            up, error = False, str(exc)
        except metrics.MetricsError as exc:
            # an HTTP status or unparsable text: a server answers, it just gives no numbers
            up, error = exc.kind in ("http", "parse"), str(exc)
        else:
            t = time.monotonic()
            r = metrics.rates(prev[0], prev[1], snap, t) if prev else None
            if last is not None:
                log.info("%s: serving metrics available", name)
            emit(metrics.serving_sample(name, snap, r))
            prev, last = (snap, t), None
            await asyncio.sleep(interval)
            continue
        prev = None  # a server that comes back is a fresh start: no rate across the gap
        if (up, error) != last:
            if last is None or last[0] != up:
                log.info("%s: %s", name, "serving, but no metrics: " + error if up else "not serving: " + error)
            emit(ServingSample(node=name, up=up, error=error))
            last = (up, error)
        await asyncio.sleep(idle_interval)


class ServingSource:
    """``serving_loop`` as an event source of its own, for a cluster without NodeCollectors (the demo)."""

    def __init__(self, node, host: str, port: int, *, api_key: str | None = None, interval: float = 3.0,
                 idle_interval: float = 5.0) -> None:
        self.node, self.node_name = node, node.name
        self.host, self.port, self.api_key = host, port, api_key
        self.interval, self.idle_interval = interval, idle_interval

    async def run(self, emit: Emit) -> None:
        await serving_loop(self.node, self.node_name, emit, self.host, self.port, api_key=self.api_key,
                           interval=self.interval, idle_interval=self.idle_interval)
