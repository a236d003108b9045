"""Issue 30 item 3: a non-finite /metrics value is treated as absent, never reaching a consumer."""
import math

import pytest

from sparktui.probes import metrics


@pytest.mark.parametrize("v", ["+Inf", "-Inf", "NaN", "1e308"])
def test_non_finite_gauge_is_absent(v):
    snap = metrics.parse(f"vllm:num_requests_running {v}\nvllm:num_requests_waiting 2\n")
    assert snap.running is None  # absent, not a number no consumer can show
    for x in (getattr(snap, f) for f in snap.__dataclass_fields__):
        if isinstance(x, float):
            assert math.isfinite(x)
