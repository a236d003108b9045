"""The stand-in vLLM's /metrics against a real vLLM 0.32 capture: same families, types, HELP/TYPE
lines, labels and bucket boundaries, fed by real HTTP requests on 127.0.0.1 (openai client)."""

from __future__ import annotations

import asyncio
import json
import threading
import urllib.request
from http.server import ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace

import pytest
from prometheus_client.parser import text_string_to_metric_families

from sparktui.probes import metrics as metrics_probe
from sparktui.sim.standin_http import Engine, make_handler

CAPTURE = Path(__file__).resolve().parents[1] / "fixtures" / "vllm-cpu" / "metrics.txt"  # real vLLM 0.32
HISTOGRAMS = ("vllm:time_to_first_token_seconds", "vllm:e2e_request_latency_seconds",
              "vllm:inter_token_latency_seconds")
REQUIRED = {"vllm:num_requests_running": "gauge", "vllm:num_requests_waiting": "gauge",
            "vllm:kv_cache_usage_perc": "gauge", "vllm:prompt_tokens": "counter",
            "vllm:generation_tokens": "counter", "vllm:request_success": "counter",
            **{h: "histogram" for h in HISTOGRAMS}}


class _Log:
    vars = {"vllm_version": "0.32.0"}
    blocks: dict = {"blocks": {}, "standin": {}}

    def line(self, text):
        pass

    def block(self, *a, **kw):
        pass


class Server:
    """Engine + make_handler on a real ThreadingHTTPServer at 127.0.0.1:<free port>."""

    def __init__(self, fault: str = "", fields: str = "reasoning") -> None:
        args = SimpleNamespace(model_tag="/models/qwen", served_model_name=["qwen35"], max_model_len=4096,
                               api_key=None, reasoning_parser="qwen3")
        self.engine = Engine(args, _Log(), fault, fields=fields, fault_after=1)
        self.engine.exit = lambda code: None
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(self.engine))
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def metrics(self) -> str:
        with urllib.request.urlopen(self.url + "/metrics", timeout=10) as r:
            assert r.status == 200 and r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            return r.read().decode()

    def close(self) -> None:
        self.engine.stuck.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)


@pytest.fixture
def server():
    s = Server()
    yield s
    s.close()


def families(text: str) -> dict:
    return {f.name: f for f in text_string_to_metric_families(text) if f.name.startswith("vllm:")}


def header_lines(text: str, names: set[str]) -> list[str]:
    """`# HELP` / `# TYPE` lines of the given metric names (as written, `_total`/`_created` included)."""
    return [ln for ln in text.splitlines() if ln.startswith(("# HELP ", "# TYPE ")) and ln.split(" ")[2] in names]


def value(fam, sample: str, **labels) -> float:
    return sum(s.value for s in fam.samples
               if s.name == sample and all(s.labels.get(k) == v for k, v in labels.items()))


async def _requests(url: str, plain: int, streamed: int) -> list[int]:
    """Send the chats; return the completion tokens of each streamed one (from include_usage)."""
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=url + "/v1", api_key="none", max_retries=0)
    toks = []
    try:
        for i in range(plain):
            r = await client.chat.completions.create(model="qwen35", messages=[{"role": "user", "content": f"q {i}"}])
            assert r.choices[0].finish_reason == "stop"
        for i in range(streamed):
            stream = await client.chat.completions.create(
                model="qwen35", messages=[{"role": "user", "content": f"tell me {i} things"}], stream=True,
                stream_options={"include_usage": True})
            async for chunk in stream:
                if chunk.usage is not None:
                    toks.append(chunk.usage.completion_tokens)
    finally:
        await client.close()
    return toks


async def test_metrics_after_real_requests_match_the_real_capture(server):
    real_text = CAPTURE.read_text()
    real = families(real_text)
    plain, streamed = 3, 2
    n = plain + streamed
    stream_toks = await _requests(server.url, plain, streamed)
    assert len(stream_toks) == streamed and all(t > 1 for t in stream_toks)
    text = server.metrics()
    mine = families(text)

    # every family the stand-in writes exists in the real server's answer with the same type
    for name, fam in mine.items():
        assert name in real, f"{name} is not a vLLM 0.32 family"
        assert fam.type == real[name].type, name
    for name, kind in REQUIRED.items():
        assert mine[name].type == kind == real[name].type
        if kind != "gauge":  # counters and histograms come with their `_created` gauge
            assert mine[name + "_created"].type == real[name + "_created"].type == "gauge"
    # HELP/TYPE lines byte for byte, `_total` on the counter line and the `_created` gauge included
    names = {ln.split(" ")[2] for ln in text.splitlines() if ln.startswith("# ")}
    assert len(names) == 15 and header_lines(text, names) == header_lines(real_text, names)
    assert "# TYPE vllm:prompt_tokens_total counter" in text and "# TYPE vllm:prompt_tokens_created gauge" in text

    # same label names per sample name, and the same finished_reason values
    def label_sets(fams):
        return {(s.name, tuple(sorted(s.labels))) for f in fams.values() for s in f.samples}
    assert label_sets(mine) <= label_sets(real)
    reasons = lambda fams: {s.labels["finished_reason"] for s in fams["vllm:request_success"].samples}  # noqa: E731
    assert reasons(mine) == reasons(real) == {"stop", "length", "abort", "error", "repetition"}

    # histogram buckets: the real boundaries, cumulative, +Inf == count
    for h in HISTOGRAMS:
        bounds = lambda fam: [s.labels["le"] for s in fam.samples if s.name == h + "_bucket"]  # noqa: E731
        assert bounds(mine[h]) == bounds(real[h])
        counts = [s.value for s in mine[h].samples if s.name == h + "_bucket"]
        assert counts == sorted(counts) and counts[-1] == value(mine[h], h + "_count")

    # fed by the requests: one TTFT and one e2e per request, one ITL per streamed token after the first
    assert value(mine["vllm:time_to_first_token_seconds"], "vllm:time_to_first_token_seconds_count") == n
    assert value(mine["vllm:e2e_request_latency_seconds"], "vllm:e2e_request_latency_seconds_count") == n
    assert value(mine["vllm:inter_token_latency_seconds"], "vllm:inter_token_latency_seconds_count") == sum(
        t - 1 for t in stream_toks)
    assert value(mine["vllm:e2e_request_latency_seconds"], "vllm:e2e_request_latency_seconds_sum") > 0
    assert (value(mine["vllm:e2e_request_latency_seconds"], "vllm:e2e_request_latency_seconds_sum")
            >= value(mine["vllm:time_to_first_token_seconds"], "vllm:time_to_first_token_seconds_sum"))
    assert value(mine["vllm:request_success"], "vllm:request_success_total") == n
    assert value(mine["vllm:request_success"], "vllm:request_success_total", finished_reason="stop") == n
    assert value(mine["vllm:num_requests_running"], "vllm:num_requests_running") == 0
    assert value(mine["vllm:generation_tokens"], "vllm:generation_tokens_total") >= sum(stream_toks)

    # sparktui's own scrape parser reads the same numbers from it as from the real server
    snap = metrics_probe.parse(text)
    assert snap.request_success == n and snap.ttft.count == n and snap.e2e.count == n and snap.running == 0


async def test_running_counts_a_held_streaming_request():
    """A desync holds the request inside the engine: /metrics shows it running until it is released."""
    import aiohttp

    class Gate(threading.Event):
        def __init__(self):
            super().__init__()
            self.entered = threading.Event()

        def wait(self, timeout=None):
            self.entered.set()
            return super().wait(timeout)

    s = Server(fault="desync")
    gate = s.engine.stuck = Gate()
    try:
        async with aiohttp.ClientSession() as http:
            body = {"model": "qwen35", "messages": [{"role": "user", "content": "hi"}], "stream": True}
            task = asyncio.ensure_future(http.post(s.url + "/v1/chat/completions", json=body))
            assert await asyncio.to_thread(gate.entered.wait, 10)
            held = families(await asyncio.to_thread(s.metrics))
            assert value(held["vllm:num_requests_running"], "vllm:num_requests_running") == 1
            assert value(held["vllm:time_to_first_token_seconds"], "vllm:time_to_first_token_seconds_count") == 0
            gate.set()
            resp = await task
            chunks = [ln for ln in (await resp.text()).splitlines() if ln.startswith("data: {")]
            assert json.loads(chunks[1][6:])["choices"][0]["delta"].get("reasoning")
            done = families(await asyncio.to_thread(s.metrics))
        assert value(done["vllm:num_requests_running"], "vllm:num_requests_running") == 0
        assert value(done["vllm:request_success"], "vllm:request_success_total", finished_reason="stop") == 1
        assert value(done["vllm:time_to_first_token_seconds"], "vllm:time_to_first_token_seconds_count") == 1
    finally:
        s.close()


def test_values_are_written_like_prometheus_client():
    from prometheus_client.utils import floatToGoString

    from sparktui.sim.standin_http import go_float

    for v in (0.0, 1.0, 5.0, 113.0, 0.11030197143554688, 1796079775.6447468, 2560.0, 7680.0, 1e-7, float("inf")):
        assert go_float(v) == floatToGoString(v)
