"""Readings added from the 2026-12-07 late round of blind-gathered excerpts (issue 31): each names a
class of failure by its structure (the process that raised, the frame, a comparison between ranks,
a status a service reports), with a benign counterpart that must name nothing of it.

Failing lines are held-in corpus excerpts (fed without our header lines) or real lines from them;
benign ones are the real two-GPU NCCL run (tests/fixtures/nccl-2gpu/healthy.*), the real vLLM
server's output (tests/fixtures/vllm-cpu) or lines of the same shape that say something else.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sparktui.commands.diagnose import analyse
from sparktui.diagnosis import paste
from sparktui.diagnosis.exc_shapes import default_shapes

from corpus_helpers import NCCL_2GPU, ROOT, body, diagnose_lines, held_in, line_of, named


def _ids(lines: list[str]) -> list[str]:
    return [f.id for f in diagnose_lines(lines) if f.severity != "info"]


# ------------------------------------------------------------------ NCCL network plugins across ranks

PLUGIN_CASE = "b/nccl_nccl_1634_hpcx_net_plugin_on_some_nodes_only_hang"


def test_ranks_that_load_different_network_plugins_are_a_library_mismatch(tmp_path):
    lines = body(PLUGIN_CASE)
    assert _ids(lines)[:1] == ["nccl_library_mismatch"]


def _with_rank1_plugin(tmp_path: Path, plugin_line: str | None) -> list[str]:
    """The real healthy two-GPU run, rank 1's plugin line replaced (None: kept as NCCL printed it)."""
    out = []
    for name in ("healthy.rank0.log", "healthy.rank1.log"):
        text = (NCCL_2GPU / name).read_text(encoding="utf-8").splitlines(keepends=True)
        if name.endswith("rank1.log") and plugin_line is not None:
            k = next(i for i, t in enumerate(text) if "NET/Plugin: Could not find" in t)
            head = text[k].split(" NCCL INFO ")[0]
            text[k] = f"{head} NCCL INFO {plugin_line}\n"
        p = tmp_path / name
        p.write_text("".join(text), encoding="utf-8")
        out.append(str(p))
    return out


def test_the_same_plugin_on_every_rank_is_no_mismatch(tmp_path):
    # the real run: both ranks fall back to NCCL's internal transports
    ids = [f.id for f in analyse(_with_rank1_plugin(tmp_path, None)).findings]
    assert "nccl_library_mismatch" not in ids


def test_one_rank_on_a_plugin_the_other_without_is_a_mismatch(tmp_path):
    plugin = line_of(PLUGIN_CASE, "Plugin Path").split(" NCCL INFO ", 1)[1]
    ids = [f.id for f in analyse(_with_rank1_plugin(tmp_path, plugin)).findings]
    assert "nccl_library_mismatch" in ids


def test_a_plugin_named_by_its_file_on_one_rank_and_by_its_name_on_another_is_not_compared(tmp_path):
    # one process prints the file it loaded, another the name the plugin reports: nothing to compare
    d = diagnose_lines([
        "node1:11:11 [0] NCCL INFO Plugin Path : /opt/hpcx/nccl_rdma_sharp_plugin/lib/libnccl-net.so",
        "node2:22:22 [0] NCCL INFO NET/Plugin: Loaded net plugin NCCL RDMA Plugin (v6)",
    ])
    assert "nccl_library_mismatch" not in [f.id for f in d]


# ------------------------------------------------------------------ exception shapes by the raising frame

@pytest.mark.parametrize("rel, fid", [
    # transformers' CONFIG_MAPPING raising KeyError for a model type it does not know (traceback head cut)
    ("a/sglang_xinference_3471_transformers_lacks_qwen3_moe", "transformers_version_mismatch"),
    # an installed package failing in its own module body at import (an annotation this Python cannot take)
    ("a/vllm_phivan3008-meeting-translator_vllm_serve_log_flashinfer_array_subscript_typeerror", "broken_install"),
    # a failure raised inside vLLM's Transformers backend (no native implementation of the architecture)
    ("a/vllm_edward-lcl-feedback-distillation_vllm_server_log_gemma4_no_vllm_impl_tp_unsupported",
     "unsupported_architecture"),
])
def test_an_exception_is_read_by_the_frame_that_raised_it(rel, fid):
    assert named(held_in(rel))[:1] == [fid]


@pytest.mark.parametrize("cls, msg, frame", [
    # the same classes raised in a user's own script body, not an installed package
    ("TypeError", "type 'array.array' is not subscriptable", 'File "/home/me/run.py", line 55, in <module>'),
    # a ValueError (a bad argument) raised at import of an installed package: no shape of install
    ("ValueError", "bad env value", 'File "/usr/lib/python3/dist-packages/pkg/__init__.py", line 9, in <module>'),
    # a KeyError in transformers outside its model-type table
    ("KeyError", "'input_ids'", 'File "/usr/lib/python3/dist-packages/transformers/tokenization_utils_base.py", '
                                'line 240, in __getitem__'),
    # vLLM's own model files (a native implementation) raising a ValueError
    ("ValueError", "bad rope scaling", 'File "/usr/lib/python3/dist-packages/vllm/model_executor/models/llama.py", '
                                       'line 120, in __init__'),
])
def test_the_same_exceptions_under_other_frames_name_no_cause(cls, msg, frame):
    assert default_shapes().classify(cls, msg, frame) is None


# ------------------------------------------------------------------ message shapes

@pytest.mark.parametrize("line, fid", [
    ("RuntimeError: Version mismatch: The cluster was started with:", "broken_install"),
    ("AssertionError: The DP master node (ip: 127.0.0.1) is missing or dead", "ray_ip_mismatch"),
    ("NotImplementedError: Unsloth currently only works on NVIDIA GPUs and Intel GPUs.", "no_gpu_visible"),
])
def test_message_shapes(line, fid):
    assert default_shapes().classify_line(line) == fid


@pytest.mark.parametrize("line", [
    # a version string compared and found equal, or a mismatch of something else
    "RuntimeError: Shape mismatch: expected 4096, got 2048",
    # a master at a routable address that is missing: not the loopback reading
    "AssertionError: The DP master node (ip: 10.0.0.5) is missing or dead",
    # a GPU named as present
    "RuntimeError: This kernel requires compute capability 8.0",
])
def test_message_shapes_benign(line):
    assert default_shapes().classify_line(line) not in ("broken_install", "ray_ip_mismatch", "no_gpu_visible")


# ------------------------------------------------------------------ catalogue lines

@pytest.mark.parametrize("rel, fid", [
    ("a/triton_pytriton_1_grpc_port_already_in_use", "port_in_use"),
    ("a/triton_tensorrtllm_backend_59_paged_kv_cache_too_small_for_one_sequence", "kv_cache_oom"),
    ("b/nvbandwidth_nvbandwidth_61_ptx_built_newer_than_driver", "cuda_driver_too_old"),
    ("b/pytorch_pytorch_129749_fabricmanager_failed_driver_version_mismatch", "gpu_fabric_not_ready"),
    # the third batch's
    ("a/trtllm_gpustack_perf-lab-gpt-oss-120b-a100_wfp4a16_moe_unsupported_sm80", "dtype_unsupported_gpu"),
    ("a/sglang_gpustack_perf-lab-glm46-a100_fp8e4nv_unsupported_sm80", "dtype_unsupported_gpu"),
    ("b/accelerate_accelerate_troubleshooting_broadcast_shape_mismatch_across_ranks", "nccl_collective_mismatch"),
    ("b/megatron_bigscience_tr11-176b_chronicles_gpu_hardware_crash", "cuda_error"),
    ("b/nvidia-container-toolkit_cloud-native-docs_troubleshooting_nvml_unknown_error_daemon_reload", "no_gpu_visible"),
    ("b/pytorch_ml-engineering_nvidia-debug_uncorrectable_sram_ecc_gpu", "cuda_error"),
])
def test_held_in_excerpts_name_their_cause_first(rel, fid):
    assert named(held_in(rel))[:1] == [fid]


@pytest.mark.parametrize("line", [
    # a server that moves on to another port: a notice, not a failure
    "WARNING: Port 8000 is already in use, trying port 8001",
    # the KV cache line every vLLM start prints
    "INFO 11-29 19:11:29 [kv_cache_utils.py:1087] GPU KV cache size: 81,536 tokens",
    # the fabric manager running
    "     Active: active (running) since Mon 2024-07-01 14:43:57 UTC; 5s ago",
    "    Process: 444114 ExecStart=/usr/bin/nv-fabricmanager -c /usr/share/nvidia/nvswitch/fabricmanager.cfg (code=exited, status=0/SUCCESS)",
])
def test_the_benign_shapes_of_those_lines_name_none_of_them(line):
    assert not set(_ids([line])) & {"port_in_use", "kv_cache_oom", "cuda_driver_too_old", "gpu_fabric_not_ready"}


# ------------------------------------------------------------------ a table's wrapped last column

TABLE_CASE = "a/triton_ai-on-gke_272_tp2_engine_tritonserver_started_without_mpirun"


def test_a_status_wrapped_on_rows_of_blank_cells_is_read_whole():
    # Triton's model table cut "[TensorRT-LLM][ERRO" / "R] Assertion failed: mpiSize == tp * pp ..."
    assert named(held_in(TABLE_CASE))[:1] == ["world_size_mismatch"]
    lines = body(TABLE_CASE)
    assert paste.table_cells(lines)
    (joined,) = paste.join_cells(list(enumerate(lines, 1)))
    assert "[TensorRT-LLM][ERROR] Assertion failed: mpiSize == tp * pp" in joined[1]
    assert "runtime/worldConfig.cpp:80)" in joined[1]


def test_a_padded_piece_ends_a_word_and_other_rows_stay_rows():
    rows = ["| llama | 1 | UNAVAILABLE: Internal: engine load failed      |",
            "|       |   | while reading the plan                         |",
            "| bert  | 1 | READY                                          |"]
    assert [t for _, t in paste.join_cells(list(enumerate(rows, 1)))] == [
        "| llama | 1 | UNAVAILABLE: Internal: engine load failed while reading the plan                         |",
        rows[2]]


def test_right_aligned_values_under_blank_cells_are_no_wrapped_cell():
    # a real H200's nvidia-smi table: the third row of each GPU holds values right-aligned under
    # blank cells ("|        |        |     Disabled |")
    lines = (NCCL_2GPU / "watchdog.nvidia-smi.txt").read_text(encoding="utf-8").splitlines()
    assert any(t.startswith("|    ") and t.rstrip().endswith("Disabled |") for t in lines)
    assert not paste.table_cells(lines)
    assert paste.join_cells(list(enumerate(lines, 1))) == list(enumerate(lines, 1))


# ------------------------------------------------------------------ a traceback pasted without its indentation

def test_a_traceback_at_the_margin_is_read_as_one():
    # frames and code lines at column 0 (the paste lost the indentation): the last line is the exception
    assert named(held_in("b/ray_kiirkirjutaja_5_object_store_exceeds_dev_shm"))[:1] == ["shm_too_small"]


def test_a_real_traceback_reads_the_same_with_and_without_its_indentation():
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-c", "import json\ndef load(t):\n    return json.loads(t)\nload('{')"],
                         capture_output=True, text=True)
    real = run.stderr.splitlines()
    assert real[0].startswith("Traceback") and real[1].startswith("  File ")
    flat = [t.strip() for t in real]

    def read(lines):
        return [(f.id, f.line, f.title, tuple(map(str, f.evidence))[-1:]) for f in diagnose_lines(lines)
                if f.severity != "info"]

    got = read(real)
    assert got and got[0][1] == 13 and "JSONDecodeError" in got[0][3][0]
    assert [g[:3] for g in read(flat)] == [g[:3] for g in got]


# ------------------------------------------------------------------ the second batch's readings

@pytest.mark.parametrize("rel, fid", [
    ("a/dynamo_nixl_386_nixl_built_ucx_1_20_runs_ucx_1_18", "broken_install"),
    ("a/koboldcpp_koboldcpp_1362_cu11_build_no_device_code_for_gp100", "cuda_error"),
    ("a/koboldcpp_koboldcpp_610_v155_build_lacks_pascal_kernels", "cuda_error"),
    ("a/lmstudio_lmstudio-bug-tracker_711_corrupt_local_engine_extension", "broken_install"),
    ("a/ollama_ollama_6840_docker_no_nvidia_devices_detected", "no_gpu_visible"),
    ("a/sglang_fak_923_flashinfer_jit_ninja_not_installed", "broken_install"),
    ("a/vllm_vllm-project_13882_kv_cache_negative_8gb_rtx4060", "kv_cache_oom"),
    ("b/container-toolkit_nvidia-container-runtime_190_podman_gpus_flag_noop", "no_gpu_visible"),
    ("b/kubernetes_kubedirector_356_memory_cgroup_oom_container_limit", "host_oom_killed"),
    ("b/ray_ray_14535_docker_shm_size_not_set_ray_start_fails", "shm_too_small"),
])
def test_second_batch_held_in_excerpts_name_their_cause(rel, fid):
    assert fid in named(held_in(rel))


@pytest.mark.parametrize("line", [
    # a runtime finding its GPUs, and tools naming versions that fit
    "ggml_cuda_init: found 1 CUDA devices:",
    '  Device 0: NVIDIA GB10, compute capability 12.1, VMM: yes',
    'time=2024-09-17T15:04:08.215Z level=INFO source=types.go:107 msg="inference compute" id=GPU-1 library=cuda',
    "INFO 02-26 09:54:05 worker.py:267] the rest of the memory reserved for KV Cache is 12.05GiB.",
    "INFO 02-26 09:54:05 executor_base.py:111] # cuda blocks: 4096, # CPU blocks: 4681",
    "UCX  INFO  UCP API version is compatible: required >= 1.18, actual 1.18.0",
    "nvidia-smi found at /usr/bin/nvidia-smi",
    "Searching for nvidia-smi in $PATH",
])
def test_second_batch_benign_lines_name_nothing(line):
    assert not set(_ids([line])) & {"broken_install", "cuda_error", "no_gpu_visible", "kv_cache_oom", "host_oom_killed"}


def test_a_one_line_file_numbered_by_cat_is_read_and_a_line_starting_with_1_is_not():
    line = line_of("a/vllm_vllm_51712_ray_dp_master_ip_falls_back_to_loopback", "DP master")
    rx = paste.paste_prefix(["     1\t" + line])
    assert rx is not None and paste.strip_prefix(["     1\t" + line], rx) == [line]
    assert paste.paste_prefix(["1 rank of 2 joined"]) is None


# ------------------------------------------------------------------ a fabric wider than a /24

def test_one_interface_across_a_16_is_one_fabric_and_two_interfaces_on_two_nets_are_not():
    from sparktui.diagnosis import Diagnoser

    def subnets(a: str, b: str) -> list:
        dg = Diagnoser()
        dg.feed_lines("n1.log", [f"r7i4n1:77231:77231 [0] NCCL INFO Bootstrap : Using [0]{a}<0>"])
        dg.feed_lines("n2.log", [f"r8i5n2:15801:15801 [3] NCCL INFO Bootstrap : Using [0]{b}<0>"])
        dg.finish()
        return [f for f in dg.findings if f.id == "wrong_network_interface"]

    # a healthy 16-node run (bigscience, held-in): ib0 on every node, racks in their own /24 of 10.148/16
    assert subnets("ib0:10.148.0.76", "ib0:10.148.4.37") == []
    # the management port on one node, the fabric on the other
    assert len(subnets("enP7s7:10.148.0.76", "ib0:10.148.4.37")) == 1
    # one interface name, two unrelated networks
    assert len(subnets("eth0:10.148.0.76", "eth0:192.168.4.37")) == 1


# ------------------------------------------------------------------ the third batch's readings (its
# held-in excerpts are checked with the catalogue lines' above)

@pytest.mark.parametrize("line", [
    # an fp8 format a kernel supports, and a KV cache dtype named
    "Using fp8e4nv for the KV cache (supported on sm_89 and newer)",
    "INFO [model_runner.py:120] Using FP8 KV cache dtype fp8_e4m3",
    # shapes compared and equal
    "All shapes across devices match: [1, 5]",
    # NVML coming up
    "Initialized NVML: driver 580.95.05",
])
def test_third_batch_benign_lines_name_nothing(line):
    assert not set(_ids([line])) & {"dtype_unsupported_gpu", "nccl_collective_mismatch", "cuda_error", "no_gpu_visible"}


# ------------------------------------------------------------------ a Windows path as a program's tag

@pytest.mark.parametrize("path", [r"d:\a\koboldcpp\ggml\src\ggml-cuda\mmv.cu", "/a/koboldcpp/ggml/src/ggml-cuda/mmv.cu"])
def test_a_source_files_error_line_is_a_failure_whatever_the_path_looks_like(path):
    # ggml's "file:line: ERROR: ..." (held-in koboldcpp#1362 built on Windows), with the catalogue off:
    # the structure alone says the program failed, and the title keeps the message whole
    from sparktui.diagnosis import last_words as lw

    line = f"{path}:57: ERROR: CUDA kernel mul_mat_vec has no device code compatible with CUDA arch 500."
    got = lw.failure(list(enumerate(["ggml_cuda_init: found 1 CUDA devices:", line], 1)))
    assert got is not None and got.kind == "error line" and got.message.startswith("CUDA kernel mul_mat_vec")
    # a Windows path in a line that reports no failure
    assert lw.failure(list(enumerate(["ggml_cuda_init: found 1 CUDA devices:",
                                      rf"{path}:57: loaded 12 kernels"], 1))) is None
