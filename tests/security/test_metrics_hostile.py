"""Issue 30 item 3: a non-finite /metrics value is treated as absent, never reaching a consumer."""
import json
import math

import pytest

from sparktui.probes import metrics
from sparktui.session import to_jsonable
from sparktui.session_read import from_jsonable
from sparktui.tui.widgets.serving_stats import numbers


@pytest.mark.parametrize("v", ["+Inf", "-Inf", "NaN", "1e308"])
def test_non_finite_gauge_is_absent(v):
    snap = metrics.parse(f"vllm:num_requests_running {v}\nvllm:num_requests_waiting 2\n")
    assert snap.running is None  # absent, not a number no consumer can show
    for x in (getattr(snap, f) for f in snap.__dataclass_fields__):
        if isinstance(x, float):
            assert math.isfinite(x)


def test_a_dropped_value_shows_a_dash_with_a_note_that_survives_the_session_file():
    # a +Inf gauge and a 400-digit counter: both "–" on screen, and the note says which and why
    snap = metrics.parse("vllm:num_requests_running +Inf\nvllm:num_requests_waiting 2\n"
                         "vllm:request_success_total " + "9" * 400 + "\n")
    assert snap.running is None and snap.request_success is None and snap.waiting == 2
    assert snap.unusable == ("vllm:num_requests_running", "vllm:request_success_total")
    sample = metrics.serving_sample("spark1", snap, None)
    assert "num_requests_running" in sample.note and "request_success_total" in sample.note
    back = from_jsonable(json.loads(json.dumps(to_jsonable(sample), allow_nan=False)))
    assert back.note == sample.note and back.running is None
    line = numbers(sample).plain
    assert "run –" in line and "done –" in line and "NaN/Inf" in line


def test_a_clean_scrape_has_no_note():
    sample = metrics.serving_sample("spark1", metrics.parse("vllm:num_requests_running 1\n"), None)
    assert sample.note is None and "NaN" not in numbers(sample).plain
