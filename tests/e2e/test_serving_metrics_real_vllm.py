"""Serving metrics against the REAL vLLM (CPU build, tiny model, launched with an API key by the
``real_serving`` fixture): the scrape, and the head node's poll loop through its SSH connection,
count exactly the requests this test sends.

A reused bed (SPARKTUI_REALVLLM_BED) may serve other sessions' tests at the same moment, and the
server cannot tell their requests from ours: a window where the count is off is measured again
(ATTEMPTS); a scrape that miscounts is off in every window and still fails."""

from __future__ import annotations

import asyncio

import pytest

from sparktui.collectors.serving import serving_loop
from sparktui.config import load_config
from sparktui.model import ServingSample
from sparktui.nodes import make_node
from sparktui.probes import metrics

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1800)]  # a cold bed + first launch take minutes

N = 32  # the load test size
ATTEMPTS = 3


async def _send(serving, n: int, concurrency: int = 8) -> tuple[int, int]:
    """n chat completions through the openai client, behind the API key; (prompt, completion) tokens."""
    import openai

    client = openai.AsyncOpenAI(base_url=serving.base_url + "/v1", api_key=serving.api_key, max_retries=0,
                                timeout=120)
    gate = asyncio.Semaphore(concurrency)

    async def one(i: int):
        async with gate:
            r = await client.chat.completions.create(
                model=serving.model, max_tokens=4 + i % 5, temperature=0,
                messages=[{"role": "user", "content": f"request {i}"}])
            return r.usage.prompt_tokens, r.usage.completion_tokens

    try:
        usages = await asyncio.gather(*(one(i) for i in range(n)))
    finally:
        await client.close()
    return sum(p for p, _ in usages), sum(c for _, c in usages)


async def _load_test(serving, n: int, concurrency: int = 8) -> int:
    """`sparktui load-test --requests n --concurrency 8 --json`: the issue's check; its output tokens."""
    import json
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "sparktui", "load-test", "--config", str(serving.config), "--requests", str(n),
        "--concurrency", str(concurrency), "--json", cwd=str(root), env=serving.env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 300)
    assert proc.returncode == 0, err.decode()[-2000:]
    result = json.loads(out)
    assert result["completed"] == n and result["failed"] == 0
    return result["total_output_tokens"]


async def test_scrape_counts_the_requests_sent(real_serving):
    seen = []
    for _ in range(ATTEMPTS):
        before = await metrics.scrape(real_serving.base_url, 10, api_key=real_serving.api_key)
        assert before.vllm_series > 0 and before.request_success is not None
        prompt, completion = await _send(real_serving, N)
        after = await metrics.scrape(real_serving.base_url, 10, api_key=real_serving.api_key)
        got = (after.request_success - before.request_success, after.prompt_tokens - before.prompt_tokens,
               after.generation_tokens - before.generation_tokens)
        seen.append(got)
        if got == (N, prompt, completion):
            break
    else:
        pytest.fail(f"(requests, prompt, generation) deltas {seen}, sent {(N, prompt, completion)}")
    r = metrics.rates(before, 0.0, after, 1.0)
    assert r.finished == N and r.ttft_mean is not None and r.ttft_mean > 0 and r.e2e_mean >= r.ttft_mean


async def test_head_loop_over_ssh_reports_the_load(real_serving):
    config = load_config(real_serving.config)
    head = config.head
    node = make_node(head)
    samples: list[ServingSample] = []
    arrived = asyncio.Event()

    def emit(ev) -> None:
        samples.append(ev)
        arrived.set()

    async def until(pred, what: str, timeout: float = 60) -> ServingSample:
        async def wait():
            while True:
                hit = next((s for s in samples if pred(s)), None)
                if hit is not None:
                    return hit
                arrived.clear()
                await arrived.wait()
        try:
            return await asyncio.wait_for(wait(), timeout)
        except asyncio.TimeoutError:
            pytest.fail(f"{what}: not within {timeout} s; last samples {samples[-3:]}")

    await node.connect()
    # the serve port as the head sees it, through a forward on its SSH connection (not base_url)
    loop = asyncio.create_task(serving_loop(node, head.name, emit, config.cluster.serve_host,
                                            config.cluster.serve_port, api_key=config.api_key(), interval=0.5))
    try:
        first = await until(lambda s: s.up, "first sample from the head")
        assert first.error is None and first.requests_total is not None
        seen = []
        for _ in range(ATTEMPTS):
            mark = len(samples)
            base = samples[-1].requests_total  # the latest count before sending
            completion = await _load_test(real_serving, N)
            done = await until(lambda s: s.up and s.requests_total is not None and s.requests_total >= base + N
                               and any(x is s for x in samples[mark:]), f"{N} more finished requests")
            # the interval rates of the samples in between add up to the same N and tokens
            end = next(i for i, s in enumerate(samples) if s is done)
            window = [s for s in samples[mark:end + 1] if s.up and s.interval_s]
            got = (done.requests_total - base, round(sum(s.requests_ps * s.interval_s for s in window), 6),
                   round(sum(s.generation_tps * s.interval_s for s in window), 6))
            seen.append(got)
            if got == (N, N, completion):
                break
        else:
            pytest.fail(f"(total delta, sum of rates, generated) {seen}; sent {N} requests, {completion} tokens")
        assert any(s.ttft_mean is not None for s in window)
    finally:
        loop.cancel()
        await node.close()
