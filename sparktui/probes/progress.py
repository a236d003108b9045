"""Progress counters polled from a node for the stall detector: NCCL RAS collective counts per
rank, and vLLM's generated-token counter with its running/waiting gauges from ``/metrics``.

An EventSource (``node_name``, ``async run(emit)``): add one per ssh/local node beside its
collectors.  It emits ``diagnosis.stall.ProgressSample``; counters that move are progress, and
``busy=False`` (no request running or waiting) tells the detector that silence is normal.
"""

from __future__ import annotations

import asyncio
import re
from typing import TYPE_CHECKING

from ..diagnosis import ras as ras_parse
from ..diagnosis.stall import ProgressSample
from ..nodes.base import NodeError
from . import ras as ras_client
from . import workers

if TYPE_CHECKING:
    from ..model import Emit
    from ..nodes.base import Node

_METRIC = re.compile(r"^(vllm:(?:generation_tokens_total|num_requests_running|num_requests_waiting))(?:\{[^}]*\})?\s+(\S+)",
                     re.M)


def parse_metrics(text: str) -> dict[str, float]:
    """Sum of each vLLM series we watch over its label sets (Prometheus text format)."""
    out: dict[str, float] = {}
    for name, value in _METRIC.findall(text):
        try:
            out[name] = out.get(name, 0.0) + float(value)
        except ValueError:
            continue
    return out


class ProgressSource:
    def __init__(self, node: "Node", *, interval: float = 5.0, ras_port: int = ras_client.DEFAULT_PORT,
                 metrics_url: str | None = None) -> None:
        self.node = node
        self.node_name = node.name
        self.interval = interval
        self.ras_port = ras_port
        self.metrics_url = metrics_url  # e.g. http://127.0.0.1:8000/metrics on the head node

    async def poll(self) -> list[ProgressSample]:
        out: list[ProgressSample] = []
        st = ras_parse.parse(await workers.ras_status(self.node, port=self.ras_port, timeout=3))
        for c in st.comms:
            for r in c.ranks:
                out.append(ProgressSample(self.node_name, f"ras {c.hash} rank {r.rank}", float(r.total)))
        if self.metrics_url:
            try:
                res = await self.node.run(["curl", "-s", "-m", "3", self.metrics_url], timeout=10)
            except NodeError:
                res = None
            if res is not None and res.ok:
                m = parse_metrics(res.text)
                if "vllm:generation_tokens_total" in m:
                    queued = m.get("vllm:num_requests_running", 0) + m.get("vllm:num_requests_waiting", 0)
                    out.append(ProgressSample(self.node_name, "metrics generation tokens",
                                              m["vllm:generation_tokens_total"], busy=queued > 0))
        return out

    async def run(self, emit: "Emit") -> None:
        while True:  # self-rearming: the next poll starts after this one ended
            try:
                for sample in await self.poll():
                    emit(sample)
            except NodeError:
                pass  # reachability is the collectors' business; try again next round
            await asyncio.sleep(self.interval)
