"""`scripts/bench loadtest`: the request rate our load-test client drives against a real server,
next to a plain httpx2 async loop streaming the same requests (same prompts, max_tokens, stream
options, concurrency).  The ratio says what the openai client + bookkeeping cost; >= 0.9 expected.

Server: --base-url/--api-key/--model (also as --opt=value), else $SPARKTUI_BENCH_BASE_URL,
$SPARKTUI_BENCH_API_KEY, $SPARKTUI_BENCH_MODEL; without a base URL the bench is skipped.
--requests (default 64) and --concurrency (default 8); median of --runs (default 5) alternating runs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _opts() -> argparse.Namespace:
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--base-url", default=os.environ.get("SPARKTUI_BENCH_BASE_URL"))
    p.add_argument("--api-key", default=os.environ.get("SPARKTUI_BENCH_API_KEY"))
    p.add_argument("--model", default=os.environ.get("SPARKTUI_BENCH_MODEL"))
    p.add_argument("--requests", type=int, default=64)
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--runs", type=int, default=5)
    return p.parse_known_args(sys.argv[1:])[0]


async def _ours(o, spec) -> float:
    from sparktui.actions.load_test import LoadRunner

    r = await LoadRunner(o.base_url, o.model, o.api_key, spec).run()
    assert r.summary["failed"] == 0, r.summary["errors"]
    return r.summary["request_throughput"]


async def _plain(o, spec) -> float:
    """The baseline: httpx2 streaming the same bodies, reading every SSE line, N tasks over a counter."""
    import httpx2

    from sparktui.actions.load_test import LoadRunner

    bodies = [LoadRunner(o.base_url, o.model, o.api_key, spec)._request(i) for i in range(spec.requests)]
    for b in bodies:
        b.pop("extra_body", None)
    headers = {"Authorization": f"Bearer {o.api_key}"} if o.api_key else {}
    url = o.base_url.rstrip("/").removesuffix("/v1") + "/v1/chat/completions"
    nxt = iter(range(spec.requests))
    ends: list[float] = []
    async with httpx2.AsyncClient(headers=headers, timeout=120) as http:
        t0 = time.perf_counter()

        async def worker() -> None:
            for i in nxt:
                async with http.stream("POST", url, json=bodies[i]) as resp:
                    resp.raise_for_status()
                    async for line in resp.aiter_lines():
                        if line.startswith("data: ") and line != "data: [DONE]":
                            json.loads(line[6:])
                ends.append(time.perf_counter() - t0)

        await asyncio.gather(*(worker() for _ in range(spec.concurrency)))
    return spec.requests / max(ends)


def main(args: list[str]) -> list[dict]:
    o = _opts()
    if not o.base_url or not o.model:
        return [{"what": "load-test client vs plain httpx2 (no --base-url/--model: skipped)", "value": None,
                 "unit": "", "budget": "-", "ok": None}]
    from sparktui.actions.load_test import LoadSpec

    spec = LoadSpec(requests=o.requests, concurrency=o.concurrency)
    # a test-bed server shares this machine's cores with the client: both clients run on the last core
    # only, so neither lands on the core a server thread is busy on by chance (on 2 cores that chance
    # alone swung the rate 3x between identical runs)
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) > 1:
        os.sched_setaffinity(0, {cores[-1]})
    ours, plain, cpu_ours, cpu_plain = [], [], [], []
    asyncio.run(_plain(o, spec))  # warm-up: prefix cache, connections
    for i in range(o.runs):  # alternate which goes first: the server's state drifts between runs
        pair = [(ours, cpu_ours, _ours), (plain, cpu_plain, _plain)]
        for out, cpu, fn in (pair if i % 2 == 0 else pair[::-1]):
            c0 = time.process_time()
            out.append(asyncio.run(fn(o, spec)))
            cpu.append((time.process_time() - c0) / spec.requests * 1000)
    mo, mp = statistics.median(ours), statistics.median(plain)
    what = f"{o.requests} req x{o.concurrency}"
    return [
        {"what": f"load-test client req/s ({what})", "value": mo, "unit": "req/s", "budget": "-", "ok": None},
        {"what": f"plain httpx2 loop req/s ({what})", "value": mp, "unit": "req/s", "budget": "-", "ok": None},
        {"what": "ratio load-test / plain", "value": mo / mp, "unit": "", "budget": ">= 0.9", "ok": mo / mp >= 0.9},
        {"what": "load-test client CPU per request", "value": statistics.median(cpu_ours), "unit": "ms",
         "budget": "-", "ok": None},
        {"what": "plain httpx2 loop CPU per request", "value": statistics.median(cpu_plain), "unit": "ms",
         "budget": "-", "ok": None},
    ]
