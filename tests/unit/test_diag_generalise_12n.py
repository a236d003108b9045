"""Issue 12 round n: an info fact that a program died of is an error (NVML cannot report the GB10's
memory, and the tool raised it); vLLM's pynccl failing to load libnccl is a broken install; UCX
connecting to docker's bridge address is the wrong interface; a log that stops after NCCL's Init
START is a suspected hang (a warning, as every phase a hand-cut excerpt may end in) unless a peer of
the same communicator completed its init.

Each rule is checked on held-in excerpts of the corpus (fed without our header lines) and on a
benign or failing counterpart.
"""

from __future__ import annotations

from pathlib import Path

from corpus_helpers import bare_findings, diagnose_lines


def ranked(rel: str, tmp_path: Path) -> list[str]:
    return [f.id for f in bare_findings(rel, tmp_path) if f.severity != "info"]


# ------------------------------------------------------------------ an info fact a program died of

def test_nvml_memory_query_raised_on_gb10_is_the_error(tmp_path):
    # NeMo RL's weight refit on a DGX Spark: NVML reports no memory, the trainer raises it
    got = [f for f in bare_findings("a/spark_nemorl_pr2203_nvml_meminfo_refit", tmp_path)
           if f.id == "gb10_memory_not_supported"]
    assert got and got[0].severity == "error"
    assert ranked("a/spark_nemorl_pr2203_nvml_meminfo_refit", tmp_path)[:1] == ["gb10_memory_not_supported"]


def test_nvidia_smi_not_supported_stays_a_fact(tmp_path):
    # the same fact in nvidia-smi's table is how a GB10 always looks: no error
    got = bare_findings("a/spark_inferencesnaps_143_vram_detection_gb10", tmp_path)
    assert [f.severity for f in got if f.id == "gb10_memory_not_supported"] == ["info"]
    assert not [f for f in got if f.severity == "error"]


def test_an_info_fact_on_a_log_line_is_not_promoted():
    # a logger's warning that it fell back to system memory names the same fact, raises nothing
    lines = ["2025-12-05 04:45:04 WARNING memory.py:86 failed to get device memory info v1: Not Supported"]
    assert not [f for f in diagnose_lines(lines) if f.severity == "error"]


def test_the_exception_and_the_table_are_raised_apart():
    # the table first (info), then the exception the tool died of: both stay, the error counts
    lines = [
        "| N/A   41C    P0             11W /  N/A  | Not Supported          |      0%      Default |",
        "RuntimeError: Failed to get free memory for device 0 (global index: 0): Not Supported",
    ]
    sev = sorted(f.severity for f in diagnose_lines(lines) if f.id == "gb10_memory_not_supported")
    assert sev == ["error", "info"]


# ------------------------------------------------------------------ vLLM's pynccl without libnccl

def test_pynccl_library_load_failure_is_a_broken_install(tmp_path):
    assert ranked("a/vllm_vllm_4257_libnccl_missing_init_device", tmp_path)[:1] == ["broken_install"]
    assert ranked("a/vllm_vllm_4294_ray_libnccl_load_failed", tmp_path)[:1] == ["broken_install"]


def test_pynccl_finding_its_library_is_no_fault():
    lines = [
        "INFO 04-22 15:53:32 utils.py:580] Found nccl from library libnccl.so.2",
        "INFO 04-22 15:53:32 pynccl.py:63] vLLM is using nccl==2.18.1",
    ]
    assert not [f for f in diagnose_lines(lines) if f.id == "broken_install"]


# ------------------------------------------------------------------ UCX to docker's bridge

def test_ucx_connect_to_the_docker_bridge_is_the_wrong_interface(tmp_path):
    assert ranked("b/nccl_nccl-tests_180_ucx_docker0_bridge_refused", tmp_path)[:1] == ["wrong_network_interface"]


def test_ucx_connect_to_a_routable_peer_is_not_an_interface_choice():
    lines = ["[1700554343.440877] [n1:7356 :0]            sock.c:323  UCX  ERROR   "
             "connect(fd=48, dest_addr=10.192.80.133:42887) failed: Connection refused"]
    assert not [f for f in diagnose_lines(lines) if f.id == "wrong_network_interface"]


# ------------------------------------------------------------------ Init START without COMPLETE

def test_an_excerpt_cut_after_init_start_is_a_suspicion(tmp_path):
    # a working 8-GPU run's NCCL init, pasted up to Init START: no error
    got = bare_findings("b/pytorch_automodel_3032_nccl_228_ib_gin_init", tmp_path)
    assert [f.severity for f in got if f.id == "nccl_init_hang"] == ["warning"]
    assert not [f for f in got if f.severity == "error"]


def test_a_rank_stuck_where_its_peer_completed_is_a_hang():
    lines = [
        "node-0:1:1 [0] NCCL INFO ncclCommInitRankConfig comm 0x55a rank 0 nranks 2 cudaDev 0 nvmlDev 0 "
        "busId 1000 commId 0x673ba095326ff9de - Init START",
        "node-0:2:2 [1] NCCL INFO ncclCommInitRankConfig comm 0x55b rank 1 nranks 2 cudaDev 1 nvmlDev 1 "
        "busId 2000 commId 0x673ba095326ff9de - Init START",
        "node-0:1:1 [0] NCCL INFO ncclCommInitRankConfig comm 0x55a rank 0 nranks 2 cudaDev 0 nvmlDev 0 "
        "busId 1000 commId 0x673ba095326ff9de - Init COMPLETE",
    ]
    got = [f for f in diagnose_lines(lines) if f.id == "nccl_init_hang"]
    assert got and got[0].severity == "error"


# ------------------------------------------------------------------ a report printed before its cause

def _inspect_then_import_error(gap: int) -> list[str]:
    # vLLM names the architecture it could not inspect, then the subprocess's own output follows
    head = ["ERROR 10-23 23:20:26 registry.py:272] Error in inspecting model architecture 'LlamaForCausalLM'"]
    filler = [f"ERROR 10-23 23:20:26 registry.py:272]   step {i} of the inspecting subprocess" for i in range(gap)]
    tail = ["ImportError: /usr/local/lib/python3.12/dist-packages/vllm/_C.abi3.so: undefined symbol: "
            "_ZN3c1013MessageLoggerC1EPKcii"]
    return head + filler + tail


def test_the_import_error_printed_after_the_inspection_failure_is_its_cause():
    got = [f.id for f in diagnose_lines(_inspect_then_import_error(60)) if f.severity != "info"]
    assert got[:2] == ["broken_install", "unsupported_architecture"]


def test_a_later_unrelated_crash_is_not_the_inspection_failures_cause():
    got = [f.id for f in diagnose_lines(_inspect_then_import_error(500)) if f.severity != "info"]
    assert got[:1] == ["unsupported_architecture"]


def test_the_held_in_registry_excerpts_keep_the_install_first(tmp_path):
    for rel in ("a/vllm_vllm_9624_registry_inspect_subprocess_failed", "a/vllm_vllm_9713_windows_registry_inspect"):
        assert ranked(rel, tmp_path)[:1] == ["broken_install"]
