"""The load-test runner against a real HTTP server on 127.0.0.1: the project's stand-in vLLM
(``sparktui.sim.standin_http``) in a ThreadingHTTPServer, streaming SSE like vLLM does."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from http.server import ThreadingHTTPServer
from types import SimpleNamespace

import pytest

from sparktui.actions.load_test import LoadRunner, LoadSpec
from sparktui.sim.standin_http import Engine, make_handler

KEY = "sk-test-load-4711"


class _Log:
    """The stand-in's log sink: the access lines are not what these tests look at."""

    vars = {"vllm_version": "0.0-test"}

    def line(self, text: str) -> None:
        pass

    def block(self, *a) -> None:
        pass


class Server:
    """The stand-in on an ephemeral port.  ``gate``: each stream waits there until ``parties`` streams
    are waiting together (a Barrier), so a wave of exactly N concurrent streams is needed to go on;
    ``hold``: streams wait until it is set.  ``peak`` is the most streams ever open at once."""

    def __init__(self, *, api_key: str | None = KEY, parties: int | None = None, hold: bool = False) -> None:
        args = SimpleNamespace(api_key=api_key, served_model_name=["tiny"], model_tag="tiny", max_model_len=512,
                               reasoning_parser="qwen3")
        self.engine = Engine(args, _Log(), "none")
        self.lock = threading.Lock()
        self.open = 0
        self.peak = 0
        self.streams = 0
        self.gate = threading.Barrier(parties) if parties else None
        self.release = threading.Event()
        if not hold:
            self.release.set()
        outer = self
        base = make_handler(self.engine)

        class Counting(base):  # type: ignore[misc, valid-type]
            def _stream(self, *a, **kw):
                with outer.lock:
                    outer.open += 1
                    outer.streams += 1
                    outer.peak = max(outer.peak, outer.open)
                try:
                    if outer.gate is not None:
                        outer.gate.wait(timeout=20)
                    outer.release.wait(timeout=30)
                    return super()._stream(*a, **kw)
                finally:
                    with outer.lock:
                        outer.open -= 1

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Counting)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> "Server":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.release.set()
        if self.gate is not None:
            self.gate.abort()
        self.httpd.shutdown()
        self.httpd.server_close()


async def test_m_requests_complete_with_reasoning_counted_as_tokens():
    with Server() as srv:
        r = await LoadRunner(srv.url, "tiny", KEY, LoadSpec(requests=10, concurrency=3)).run()
    s = r.summary
    assert s["completed"] == 10 and s["failed"] == 0 and srv.streams == 10
    assert sorted(x.index for x in r.records) == list(range(10))
    for rec in r.records:
        # the stand-in thinks first: its reasoning chunks are tokens, so chunks == usage's completion_tokens
        assert rec.output_tokens and rec.chunks == rec.output_tokens > 10
        assert rec.prompt_tokens > 0 and len(rec.itl) == rec.chunks - 1
        assert 0 < rec.ttft <= rec.latency
    assert s["total_output_tokens"] == sum(x.output_tokens for x in r.records)
    for m in ("ttft", "itl", "e2el"):
        assert s[f"p50_{m}_ms"] <= s[f"p90_{m}_ms"] <= s[f"p99_{m}_ms"]


@pytest.mark.parametrize("fields", ["reasoning_content", "reasoning"])
async def test_either_reasoning_field_counts(monkeypatch, fields):
    monkeypatch.setenv("SPARKTUI_STANDIN_REASONING_FIELDS", fields)
    with Server() as srv:
        r = await LoadRunner(srv.url, "tiny", KEY, LoadSpec(requests=2, concurrency=1)).run()
    assert all(x.ok and x.chunks == x.output_tokens for x in r.records)


async def test_concurrency_is_exactly_n():
    n = 4
    with Server(parties=n) as srv:  # a wave proceeds only with n streams open together
        r = await LoadRunner(srv.url, "tiny", KEY, LoadSpec(requests=3 * n, concurrency=n, timeout=60)).run()
    assert r.summary["completed"] == 3 * n, r.summary["errors"]
    assert srv.peak == n


async def test_duration_mode_stops_by_itself():
    with Server() as srv:
        t0 = time.monotonic()
        r = await LoadRunner(srv.url, "tiny", KEY, LoadSpec(duration=0.4, concurrency=2)).run()
        wall = time.monotonic() - t0
    s = r.summary
    assert s["completed"] >= 2 and s["failed"] == 0
    assert max(x.start for x in r.records) < 0.4  # nothing starts after the deadline
    assert wall < 10


async def test_stop_cancels_in_flight_and_keeps_what_finished():
    with Server(hold=True) as srv:
        seen = asyncio.Event()

        def progress(p):
            if p.in_flight == 3:
                seen.set()

        runner = LoadRunner(srv.url, "tiny", KEY, LoadSpec(requests=20, concurrency=3), on_progress=progress)
        task = asyncio.create_task(runner.run())
        await asyncio.wait_for(seen.wait(), 10)
        runner.stop()
        r = await asyncio.wait_for(task, 10)
    assert r.stopped and r.cancelled == 3 and r.records == []
    assert r.summary["completed"] == 0 and r.summary["cancelled"] == 3


async def test_connection_refused_is_an_error_kind():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # nothing listens there now
    r = await LoadRunner(f"http://127.0.0.1:{port}", "tiny", KEY, LoadSpec(requests=5, concurrency=2)).run()
    s = r.summary
    assert s["completed"] == 0 and s["failed"] == 5 and s["errors"] == {"connection": 5}
    assert "connect" in s["error_examples"]["connection"].lower()


async def test_wrong_key_is_http_401_and_the_key_never_shows():
    wrong = "sk-wrong-key-0000"
    with Server() as srv:
        r = await LoadRunner(srv.url, "tiny", wrong, LoadSpec(requests=4, concurrency=2)).run()
    s = r.summary
    assert s["errors"] == {"http_401": 4} and s["completed"] == 0
    text = repr(s) + repr(r.records)
    assert wrong not in text and KEY not in text


async def test_random_lengths_send_ignore_eos_and_max_tokens():
    with Server() as srv:
        spec = LoadSpec(requests=3, concurrency=3, random_input_len=40, random_output_len=5, seed=7)
        r = await LoadRunner(srv.url, "tiny", KEY, spec).run()
    # the stand-in cuts at max_tokens: every answer is exactly 5 tokens
    assert [x.output_tokens for x in r.records] == [5, 5, 5]
    # ~40 words of prompt (+ the stand-in's 4 per message)
    assert all(x.prompt_tokens == 44 for x in r.records)
    body = LoadRunner("http://x", "tiny", None, spec)._request(0)
    assert body["extra_body"] == {"ignore_eos": True} and body["max_tokens"] == 5
    assert body["messages"][0]["content"] == LoadRunner("http://x", "tiny", None, spec)._request(0)["messages"][0]["content"]


def test_bad_numbers_are_refused_in_one_line():
    for bad in (LoadSpec(requests=0), LoadSpec(concurrency=-1), LoadSpec(duration=0.0), LoadSpec(requests="x")):
        with pytest.raises(ValueError) as ei:
            bad.validate()
        assert "\n" not in str(ei.value)
