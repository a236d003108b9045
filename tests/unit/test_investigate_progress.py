"""The progress poller feeding the stall detector: RAS counts and vLLM /metrics through a node."""

from __future__ import annotations

import asyncio

from aiohttp import web

from sparktui.config import parse_config
from sparktui.diagnosis.stall import StallDetector
from sparktui.nodes.local import LocalNode
from sparktui.probes.progress import ProgressSource, parse_metrics

from test_investigate_action import FakeRas

METRICS = """# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{engine="0",model_name="qwen"}} {running}
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{{engine="0",model_name="qwen"}} 0.0
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{{engine="0",model_name="qwen"}} {tokens}
"""


def test_parse_metrics_sums_label_sets():
    text = METRICS.format(running=1.0, tokens=10.0) + 'vllm:generation_tokens_total{engine="1",model_name="qwen"} 5.0\n'
    m = parse_metrics(text)
    assert m["vllm:generation_tokens_total"] == 15.0 and m["vllm:num_requests_running"] == 1.0


async def test_poll_reads_ras_and_metrics_over_the_node():
    state = {"running": 1.0, "tokens": 100.0}

    async def metrics(_req):
        return web.Response(text=METRICS.format(**state), content_type="text/plain")

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    cfg = parse_config('[cluster]\nname = "t"\n[[node]]\nname = "here"\nbackend = "local"\n')
    try:
        async with FakeRas(["desync_ras.t20"]) as ras:
            src = ProgressSource(LocalNode(cfg.nodes[0]), ras_port=ras.port,
                                 metrics_url=f"http://127.0.0.1:{port}/metrics")
            first = await src.poll()
            assert sorted((s.source, s.value) for s in first if s.source.startswith("ras")) == [
                ("ras 0x8520ecc8bdb3f238 rank 0", 51.0), ("ras 0x8520ecc8bdb3f238 rank 1", 50.0)]
            (tok,) = [s for s in first if s.source == "metrics generation tokens"]
            assert tok.value == 100.0 and tok.busy is True
            now = [0.0]
            det = StallDetector(clock=lambda: now[0])
            for s in first:
                det.feed(s)
            state["tokens"] = 160.0
            for s in await src.poll():
                det.feed(s)
            assert det.last_progress == 0.0  # tokens moved: progress
            state["running"] = 0.0  # idle server: frozen counters are no hang
            for s in await src.poll():
                det.feed(s)
            now[0] = 100.0
            assert list(det.tick(100.0)) == []
    finally:
        await runner.cleanup()
