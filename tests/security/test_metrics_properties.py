"""Hypothesis over the `/metrics` parser (`probes/metrics.parse`), which reads a stranger's bytes: whatever
the server sends, the result is a snapshot whose every number is finite (a value nothing downstream can
show, or that `events.jsonl` would refuse, never gets through) or the parser's own one-line
`MetricsError`; never another exception, and in time bounded by the text (issue 30, "Also")."""

from __future__ import annotations

import math
import time

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparktui.probes.metrics import Histogram, MetricsError, MetricsSnapshot, parse

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

NAMES = ["vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
         "vllm:gpu_cache_usage_perc", "vllm:prompt_tokens_total", "vllm:prompt_tokens", "vllm:generation_tokens_total",
         "vllm:request_success_total", "vllm:time_to_first_token_seconds_bucket",
         "vllm:time_to_first_token_seconds_count", "vllm:time_to_first_token_seconds_sum",
         "vllm:e2e_request_latency_seconds_bucket", "vllm:e2e_request_latency_seconds_count",
         "vllm:e2e_request_latency_seconds_sum", "vllm:inter_token_latency_seconds_bucket",
         "vllm:inter_token_latency_seconds_count", "vllm:inter_token_latency_seconds_sum", "process_cpu_seconds_total"]
NUMBERS = ["0", "1", "-1", "2.5", "1e300", "-1e300", "1e308", "1.7976931348623157e308", "1e309", "-1e400", "NaN",
           "nan", "+Inf", "-Inf", "Inf", "inf", "-0", "0x10", "1_000", "", "abc", "1e-400", "9" * 400]
LABEL_VALUES = ["0.1", "1", "+Inf", "-Inf", "NaN", "nan", "abc", "", "1e309", "a\\nb", 'q\\"', "\x1b[2J"]

values = st.one_of(st.sampled_from(NUMBERS), st.floats().map(repr), st.integers().map(str))
labels = st.dictionaries(st.sampled_from(["le", "engine", "model_name", "finished_reason", "x"]),
                         st.one_of(st.sampled_from(LABEL_VALUES), st.text(max_size=6)), max_size=3)


@st.composite
def sample_line(draw) -> str:
    name = draw(st.one_of(st.sampled_from(NAMES), st.text(max_size=12)))
    lab = draw(labels)
    inner = ",".join(f'{k}="{v}"' for k, v in lab.items())
    ts = draw(st.sampled_from(["", " 1700000000000", " -1", " x"]))
    return f"{name}{{{inner}}} {draw(values)}{ts}" if lab or draw(st.booleans()) else f"{name} {draw(values)}{ts}"


comment = st.builds(lambda n, t: f"# TYPE {n} {t}", st.sampled_from(NAMES + ["vllm:x"]),
                    st.sampled_from(["gauge", "counter", "histogram", "summary", "untyped", "info", "bogus"]))
lines = st.lists(st.one_of(sample_line(), comment, st.just("# HELP vllm:x help"), st.just(""), st.text(max_size=20)),
                 max_size=25)


def _check(text: str) -> None:
    t = time.perf_counter()
    try:
        snap = parse(text)
    except MetricsError as exc:
        msg = str(exc)
        assert exc.kind == "parse"
        assert msg and "\n" not in msg and "\r" not in msg and len(msg) <= 300, repr(msg)
    else:
        assert isinstance(snap, MetricsSnapshot)
        for f in snap.__dataclass_fields__:
            v = getattr(snap, f)
            if isinstance(v, Histogram):
                assert math.isfinite(v.count) and math.isfinite(v.sum), (f, v)
                for le, c in v.buckets:
                    assert math.isfinite(c) and not math.isnan(le), (f, v)
            elif isinstance(v, float):
                assert math.isfinite(v), (f, v)
    # bounded: a few KB of text is parsed (or refused, naming its line) in well under a second
    assert time.perf_counter() - t < 1.0


@SETTINGS
@given(st.binary(max_size=2000))
def test_any_bytes(data):
    _check(data.decode("utf-8", "replace"))  # as scrape() decodes the body


@SETTINGS
@given(lines, st.booleans())
def test_prometheus_shaped_text_with_any_values(ls, final_newline):
    _check("\n".join(ls) + ("\n" if final_newline else ""))


@st.composite
def histogram_text(draw) -> str:
    """One histogram whole (buckets, _count, _sum): the parser keeps it, so its buckets are checked."""
    base = draw(st.sampled_from(["vllm:time_to_first_token_seconds", "vllm:e2e_request_latency_seconds",
                                 "vllm:inter_token_latency_seconds"]))
    les = draw(st.lists(st.one_of(st.sampled_from(["0.1", "1", "+Inf", "-Inf", "NaN", "nan", "1e309", "-0"]),
                                  st.floats().map(repr)), min_size=1, max_size=6))
    out = [f'{base}_bucket{{le="{le}"}} {draw(values)}' for le in les]
    out += [f"{base}_count {draw(values)}", f"{base}_sum {draw(values)}"]
    return "\n".join(draw(st.permutations(out))) + "\n"


@SETTINGS
@given(histogram_text())
def test_a_histogram_with_any_bounds_and_counts(text):
    _check(text)


def test_a_bucket_bound_nothing_can_use_is_dropped():
    snap = parse('vllm:time_to_first_token_seconds_bucket{le="NaN"} 3\n'
                 'vllm:time_to_first_token_seconds_bucket{le="-Inf"} 1\n'
                 'vllm:time_to_first_token_seconds_bucket{le="+Inf"} 4\n'
                 "vllm:time_to_first_token_seconds_count 4\nvllm:time_to_first_token_seconds_sum 2\n")
    assert snap.ttft == Histogram(4.0, 2.0, ((math.inf, 4.0),))


def test_a_four_hundred_digit_count_is_absent_not_a_traceback():
    # the parser hands an integer over as an int, and float() of a huge int raises OverflowError
    snap = parse("vllm:num_requests_running " + "9" * 400 + "\nvllm:num_requests_waiting 2\n")
    assert snap.running is None and snap.waiting == 2.0
