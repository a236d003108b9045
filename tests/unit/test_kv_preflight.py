"""The launch's preflight for the CPU build's KV cache (``VLLM_CPU_KVCACHE_SPACE``, GiB per rank)
against the node's MemAvailable, judged on a real /proc/meminfo (tests/fixtures/proc/meminfo) and on
this machine's own.  vLLM refuses the same request only after its imports and the weights."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparktui.actions.checks.fit import cpu_kv_request, kv_over_memory, parse_meminfo
from sparktui.units import GIB

MEMINFO = parse_meminfo((Path(__file__).parents[1] / "fixtures" / "proc" / "meminfo").read_text())
AVAIL_GIB = MEMINFO["MemAvailable"] / GIB


@pytest.mark.parametrize("env", [
    {},  # not set: vLLM's default (4 GiB) and its own error apply
    {"VLLM_CPU_KVCACHE_SPACE": "1"},  # the bed's value
    {"VLLM_CPU_KVCACHE_SPACE": str(int(AVAIL_GIB) - 1)},  # just below what is free
    {"VLLM_CPU_KVCACHE_SPACE": "0"},  # 0: vLLM picks its own
    {"VLLM_CPU_KVCACHE_SPACE": "lots"},  # not a number: vLLM's own error says it
])
def test_a_kv_cache_that_fits_or_is_not_ours_to_judge_passes(env):
    assert kv_over_memory(env, MEMINFO) is None


def test_a_kv_cache_larger_than_memavailable_is_refused_with_both_figures():
    asked = int(AVAIL_GIB) + 2
    why = kv_over_memory({"VLLM_CPU_KVCACHE_SPACE": str(asked)}, MEMINFO)
    assert why is not None and f"VLLM_CPU_KVCACHE_SPACE={asked}" in why and "MemAvailable" in why
    assert cpu_kv_request({"VLLM_CPU_KVCACHE_SPACE": "1.5"}) == int(1.5 * GIB)


def test_this_machines_meminfo_judges_the_drills_request():
    mi = parse_meminfo(Path("/proc/meminfo").read_text())
    total_gib = mi["MemTotal"] // GIB
    assert kv_over_memory({"VLLM_CPU_KVCACHE_SPACE": str(4 * max(1, total_gib))}, mi)
    assert kv_over_memory({"VLLM_CPU_KVCACHE_SPACE": "1"}, mi) is None
