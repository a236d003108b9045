"""Hypothesis over what reads a stranger's bytes from the API server: the ``/v1/models`` parser, the
SSE stream as ``prompt`` (``chat``) and ``load-test`` read it, and the read cap under any chunking.
Each may only answer, or raise its own one-line error; nothing it returns carries a control."""

from __future__ import annotations

import asyncio
import json
import re
import threading
import tracemalloc

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from hostile_http import HOSTILE, chunk, serve
from sparktui.actions.load_test import LoadRunner, LoadSpec
from sparktui.probes.api_guard import ReadCap, ServingError
from sparktui.probes.serving import ChatAnswer, chat, parse_models

CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
LINE_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")  # one line: not even a newline


def _one_line(exc: ServingError) -> None:
    assert str(exc) and not LINE_CONTROL.search(str(exc)), repr(str(exc))


scalars = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(1 << 70), max_value=1 << 70),
                    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12),
                    st.sampled_from(["", HOSTILE, "stop", "length", "m", "[DONE]"]))
values = st.one_of(scalars, st.recursive(scalars, lambda kids: st.one_of(
    st.lists(kids, max_size=3), st.dictionaries(st.sampled_from(
        ["data", "id", "model", "choices", "delta", "content", "reasoning", "finish_reason", "usage", "error",
         "message", "prompt_tokens", "completion_tokens", "tool_calls", "index", "function", "x"]), kids,
        max_size=4)), max_leaves=10))


# ------------------------------------------------------------------ /v1/models

@settings(max_examples=150, deadline=None)
@given(st.one_of(st.binary(max_size=200), values.map(lambda v: json.dumps(v).encode()),
                 st.lists(values, max_size=4).map(lambda d: json.dumps({"data": d}).encode()),
                 st.lists(st.one_of(st.text(max_size=12), values), max_size=4).map(
                     lambda ids: json.dumps({"data": [{"id": i} for i in ids]}).encode())))
@example(b"[" * 100_000)
@example(b'{"data": ' + b"[" * 100_000)
@example(b'{"data": [{"id": "\xff\xfe"}]}')
@example(json.dumps({"data": [{"id": f"m{HOSTILE}\n"}]}).encode())
def test_models_parser_answers_ids_or_its_own_one_line_error(body):
    try:
        ids = parse_models(body)
    except ServingError as exc:
        assert exc.kind == "malformed"
        _one_line(exc)
        return
    assert all(isinstance(i, str) and i and not LINE_CONTROL.search(i) for i in ids)


def test_models_parser_memory_is_bounded_by_the_body():
    # the worst a 1 MiB body (the cap) can do: very deep nesting, or the most ids it can hold
    many = b'{"data": [' + b",".join([b'{"id":"a"}'] * 95_000) + b"]}"
    for body in (b"[" * (1 << 20), b'{"data": ' + b"[" * (1 << 20), many):
        tracemalloc.start()
        try:
            parse_models(body)
        except ServingError:
            pass
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak < 64 << 20, peak


# ------------------------------------------------------------------ the SSE stream

def _event(v) -> bytes:
    return f"data: {json.dumps(v)}\n\n".encode()


events = st.one_of(
    st.builds(lambda c, r, f, m: _event(chunk(c, reasoning=r, finish=f, model=m)),
              st.one_of(st.none(), st.text(max_size=8), st.just(HOSTILE)), st.one_of(st.none(), st.text(max_size=8)),
              st.one_of(st.none(), st.sampled_from(["stop", "length", HOSTILE]), st.text(max_size=4)),
              st.sampled_from(["m", HOSTILE])),
    values.map(_event),
    st.binary(max_size=40),
    st.sampled_from([b": ping\n\n", b"data: [DONE]\n\n", b"\r\n\r\n", b"data:\n\n", b"event: x\n", b"data: {\n\n"]),
)
streams = st.lists(events, max_size=6).map(b"".join)


class _Stream:
    """One server for all examples: each POST answers the current example's bytes."""

    def __init__(self) -> None:
        self.body = b""
        self.lock = threading.Lock()

    def __call__(self, h) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Connection", "close")
        h.end_headers()
        h.wfile.write(self.body)


@pytest.fixture(scope="module")
def stream_server():
    s = _Stream()
    with serve(post=s) as url:
        yield url, s


def _check_answer(a: ChatAnswer) -> None:
    for name in ("model", "finish_reason"):
        v = getattr(a, name)
        assert v is None or not LINE_CONTROL.search(v), (name, v)
    for name in ("content", "reasoning"):
        v = getattr(a, name)
        assert v is None or not CONTROL.search(v), (name, v)
    for n in (a.prompt_tokens, a.completion_tokens, a.reasoning_tokens):
        assert n is None or (isinstance(n, int) and n >= 0)


PROPS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@PROPS
@given(body=streams)
def test_prompt_reads_any_stream_into_an_answer_or_one_line(stream_server, body):
    url, s = stream_server
    s.body = body
    try:
        a = asyncio.run(chat(url, "m", "hi", stream=True, timeout=5))
    except ServingError as exc:
        _one_line(exc)
        return
    _check_answer(a)


@PROPS
@given(body=streams)
def test_load_test_reads_any_stream_into_a_record(stream_server, body):
    url, s = stream_server
    s.body = body
    result = asyncio.run(LoadRunner(url, "m", None, LoadSpec(requests=1, concurrency=1, timeout=5)).run())
    (rec,) = result.records
    assert rec.ok or (rec.error_kind and rec.error is not None and not LINE_CONTROL.search(rec.error)), rec
    json.dumps(result.summary, allow_nan=False)  # numbers a JSON reader takes


# ------------------------------------------------------------------ the cap, however the bytes are cut

_SEPS = (b"\n\n", b"\r\r", b"\n\r\n")


def _trailing(data: bytes) -> int:
    ends = [i + len(sep) for sep in _SEPS if (i := data.rfind(sep)) >= 0]
    return len(data) - max(ends) if ends else len(data)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=30).map(lambda b: b.replace(b"\x00", b"\n")), max_size=20),
       st.integers(min_value=4, max_value=60))
def test_the_sse_cap_counts_the_same_however_the_stream_is_cut(chunks, limit):
    cap, seen = ReadCap("t", sse=True, limit=limit), b""
    for c in chunks:
        seen += c
        try:
            cap.feed(c)
        except ServingError as exc:
            assert exc.kind == "too_large" and _trailing(seen) > limit
            return
        assert _trailing(seen) <= limit  # what is held for the event never passes the limit unseen
