"""load_stats: vllm bench serve's definitions and field names, checked by hand and against numpy."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparktui.actions.load_stats import RequestRecord, latency_plot, percentile, summarize, table_rows


def test_percentile_linear_interpolation_by_hand():
    xs = [4.0, 1.0, 3.0, 2.0]  # unsorted on purpose
    assert percentile(xs, 50) == pytest.approx(2.5)
    assert percentile(xs, 90) == pytest.approx(3.7)  # rank 0.9 * 3 = 2.7 -> 3 + 0.7 * (4 - 3)
    assert percentile(xs, 99) == pytest.approx(3.97)
    assert percentile(xs, 0) == 1.0 and percentile(xs, 100) == 4.0
    assert percentile([7.0], 99) == 7.0
    assert percentile([], 50) == 0.0  # as np.percentile(values or 0, p)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(min_value=0, max_value=1e4, allow_nan=False), min_size=1, max_size=60),
       st.sampled_from([0, 1, 25, 50, 90, 95, 99, 99.9, 100]))
def test_percentile_matches_numpy(values, p):
    np = pytest.importorskip("numpy")
    assert percentile(values, p) == pytest.approx(float(np.percentile(values, p)), rel=1e-9, abs=1e-9)


def _ok(i, start, ttft, itl, out_tokens, prompt=10):
    lat = ttft + sum(itl)
    return RequestRecord(index=i, start=start, ok=True, ttft=ttft, itl=list(itl), latency=lat, prompt_tokens=prompt,
                         output_tokens=out_tokens, chunks=len(itl) + 1)


def test_summary_definitions_by_hand():
    recs = [
        _ok(0, 0.0, 0.100, [0.010, 0.020, 0.030], 4),   # e2el 0.160, tpot (0.160-0.100)/3 = 0.020
        _ok(1, 0.1, 0.200, [0.040], 2),                  # e2el 0.240, tpot 0.040
        _ok(2, 0.2, 0.300, [], 1),                       # one token: no TPOT, no ITL
        RequestRecord(index=3, start=0.3, ok=False, latency=5.0, error_kind="timeout", error="timed out"),
        RequestRecord(index=4, start=0.4, ok=False, latency=0.01, error_kind="http_401", error="Error code: 401"),
        RequestRecord(index=5, start=0.5, ok=False, latency=0.01, error_kind="timeout", error="timed out"),
    ]
    s = summarize(recs, duration=2.0, max_concurrency=4)
    assert s["completed"] == 3 and s["failed"] == 3
    assert s["total_output_tokens"] == 7 and s["total_input_tokens"] == 30
    assert s["request_throughput"] == pytest.approx(1.5)
    assert s["output_throughput"] == pytest.approx(3.5)
    assert s["total_token_throughput"] == pytest.approx(18.5)
    # TTFT over the successful requests only: the failed 5 s timeout is not a latency
    assert s["mean_ttft_ms"] == pytest.approx(200.0)
    assert s["median_ttft_ms"] == pytest.approx(200.0) and s["p50_ttft_ms"] == pytest.approx(200.0)
    assert s["p99_ttft_ms"] == pytest.approx(298.0)
    assert s["std_ttft_ms"] == pytest.approx(math.sqrt(((-100) ** 2 + 0 + 100 ** 2) / 3))  # population std
    # ITL pooled over requests
    assert s["mean_itl_ms"] == pytest.approx(25.0)
    assert s["median_itl_ms"] == pytest.approx(25.0)
    # TPOT only for requests with more than one output token
    assert s["mean_tpot_ms"] == pytest.approx(30.0)
    assert s["p50_tpot_ms"] == pytest.approx(30.0)
    # E2EL: 160, 240, 300 ms
    assert s["mean_e2el_ms"] == pytest.approx(700.0 / 3)
    assert s["p90_e2el_ms"] == pytest.approx(288.0)
    assert s["max_concurrency"] == 4 and s["duration"] == 2.0
    assert s["errors"] == {"timeout": 2, "http_401": 1}
    assert list(s["errors"]) == ["timeout", "http_401"]  # most frequent first
    assert s["error_examples"]["http_401"] == "Error code: 401"


def test_field_names_are_vllm_bench_serves():
    s = summarize([_ok(0, 0.0, 0.1, [0.01], 2)], 1.0, max_concurrency=1)
    for name in ("duration", "completed", "failed", "total_input_tokens", "total_output_tokens",
                 "request_throughput", "output_throughput", "total_token_throughput", "max_concurrency"):
        assert name in s
    for m in ("ttft", "tpot", "itl", "e2el"):
        for stat in ("mean", "median", "std", "p50", "p90", "p99"):
            assert f"{stat}_{m}_ms" in s


def test_usage_missing_counts_token_chunks_and_all_failed_reads_zero():
    r = RequestRecord(index=0, start=0.0, ok=True, ttft=0.1, itl=[0.01, 0.01], latency=0.12, chunks=3)
    assert summarize([r], 1.0)["total_output_tokens"] == 3
    s = summarize([RequestRecord(index=0, start=0.0, error_kind="connection", error="refused")], 0.5)
    assert s["completed"] == 0 and s["failed"] == 1 and s["p99_e2el_ms"] == 0.0 and s["request_throughput"] == 0.0
    assert s["errors"] == {"connection": 1}


def test_table_rows_and_plot():
    recs = [_ok(i, i * 0.1, 0.05 + i * 0.01, [0.01] * 3, 4) for i in range(10)]
    s = summarize(recs, 1.5)
    rows = dict(table_rows(s))
    assert list(rows) == ["TTFT", "TPOT", "ITL", "E2EL"]
    assert rows["TTFT"][0] == pytest.approx(s["mean_ttft_ms"]) and rows["E2EL"][-1] == pytest.approx(s["p99_e2el_ms"])
    text = latency_plot(recs, 60, 12, color=False)
    if text:  # plotext installed
        assert "\x1b[" not in text and "E2EL ms" in text and "TTFT ms" in text
        assert len(text.splitlines()) == 12
    assert latency_plot([RequestRecord(index=0, start=0.0, error_kind="timeout")], 60, 12) == ""


# ------------------------------------------------------------------ the text report of a load test with nothing completed
def test_a_load_test_with_nothing_completed_prints_dashes_not_zeros():
    from sparktui.commands.load_test import text_report

    failed = summarize([RequestRecord(index=i, start=0.0, error_kind="http", error="400 Bad Request")
                        for i in range(3)], 0.5, max_concurrency=1)
    assert failed["mean_ttft_ms"] == 0.0  # the JSON keeps vllm bench serve's shape
    report = text_report(failed, "http://127.0.0.1:1/v1", "")
    rows = [ln for ln in report.splitlines() if ln.split()[:1] in (["TTFT"], ["TPOT"], ["ITL"], ["E2EL"])]
    assert len(rows) == 4
    for ln in rows:
        assert "0.0" not in ln and ln.split()[1:] == ["–"] * 5, ln
    from sparktui.actions.load_stats import table_cells  # the TUI's table reads the same cells

    ok = summarize([RequestRecord(index=0, start=0.0, ok=True, ttft=0.05, latency=0.2, itl=[0.01, 0.01], output_tokens=3,
                                  prompt_tokens=4)], 1.0, max_concurrency=1)
    assert dict(table_cells(ok))["TTFT"][0] == "50.0"
