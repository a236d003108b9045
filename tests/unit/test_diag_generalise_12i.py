"""Issue 12, the weak causes: structure over phrases for broken installs, world-size mismatches and
NCCL communicator init failures.

Each detector is checked on a held-in excerpt of the corpus, fed WITHOUT our header lines (a header's
cause line can name the error itself), and, where a healthy log could trip it, on a real benign line.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sparktui.diagnosis.catalogue import default_catalogue
from sparktui.diagnosis.classifier import SourceScanner
from sparktui.diagnosis.exc_shapes import default_shapes
from sparktui.diagnosis.ranking import rank_findings

from corpus_helpers import held_in, read_header


def body(rel: str) -> list[str]:
    """The log lines of a held-in excerpt, without the header."""
    (path,) = held_in(rel)
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    return lines[len(read_header(Path(path))):]


def named(lines: list[str]) -> list[str]:
    sc = SourceScanner("t")
    sc.feed(lines)
    sc.finish()
    return [f.id for f in rank_findings(sc.findings, default_catalogue()) if f.severity != "info"]


# ------------------------------------------------------------------ broken installs

def test_torch_ops_namespace_without_the_op_is_a_broken_install():
    # vLLM installed without its compiled ops: torch.ops._C has no silu_and_mul
    assert named(body("a/vllm_docext_22_opnamespace_silu_and_mul"))[:1] == ["broken_install"]


def test_undefined_symbol_inside_an_import_warning_is_a_broken_install():
    # vLLM logs the failed import of its _C extension as a WARNING with the ImportError's repr
    assert named(body("a/vllm_vllm_5501_c_abi3_undefined_symbol_warning"))[:1] == ["broken_install"]


# ------------------------------------------------------------------ world size

def test_a_bare_divisibility_check_of_the_world_size_is_a_world_size_mismatch():
    # "AssertionError: 4 is not divisible by 8": the frames above it check world_size vs ep_size
    assert named(body("b/deepspeed_fambench_103_moe_ep8_on_4_gpus"))[:1] == ["world_size_mismatch"]


def test_the_same_numbers_without_a_world_size_in_the_code_name_nothing():
    # the shape needs the checking code to be about ranks: a batch-size assertion is no launch problem
    shapes = default_shapes()
    assert shapes.classify_line("AssertionError: 4 is not divisible by 8",
                                context="assert args.batch_size % len(devices) == 0") is None
    assert shapes.classify_line("AssertionError: 4 is not divisible by 8",
                                context="_ensure_divisibility(world_size, expert_parallel_size_)") \
        == "world_size_mismatch"


def test_a_group_rank_outside_the_world_size_is_a_world_size_mismatch():
    # a 2x2 device mesh (ranks 0-3) built on a two-GPU launch
    assert named(body("b/pytorch_colossalai_2910_mesh_4_ranks_on_2_gpus"))[:1] == ["world_size_mismatch"]


@pytest.mark.parametrize("line, fid", [
    ("RuntimeError: expected 8 ranks but got 4", "world_size_mismatch"),
    ("RuntimeError: expected 8 ranks but got 8", None),  # the numbers agree: nothing to name
    ("ValueError: requires 2 GPUs but only 1 found", None),  # GPUs, not launched ranks
])
def test_ranks_expected_against_ranks_found_compare_the_numbers(line, fid):
    assert default_shapes().classify_line(line) == fid


# ------------------------------------------------------------------ NCCL communicator init

def test_ncclresult_trace_out_of_init_names_the_failed_communicator_init():
    # NCCL's return-code trace ("bootstrap.cc:270 -> 2 ... init.cc:1303 -> 2"): whatever the framework
    lines = body("b/nccl_nccl_1016_k8s_net1_connect_abort")
    assert any(" -> 2" in ln for ln in lines)
    assert "nccl_comm_init_failed" in named(lines)


def test_a_failed_proxy_connect_during_transport_setup_is_a_failed_init():
    # the only error evidence of this excerpt is the proxy's "Failed to execute operation Connect"
    assert "nccl_comm_init_failed" in named(body("b/nccl_nccl-tests_188_socket_finalize_wrong_type"))


def test_a_benign_return_code_outside_init_names_nothing():
    # pytorch#68893 (a run that works): NCCL tries the veth's PCI path and carries on
    lines = ["ip-172-31-92-218:4760:4837 [0] NCCL INFO Could not find real path of /sys/class/net/vethe2e6725/device",
             "ip-172-31-92-218:4760:4837 [0] NCCL INFO include/net.h:19 -> 2",
             "ip-172-31-92-218:4760:4837 [0] NCCL INFO CUDA Dev 0[0], Socket NIC distance :  PHB SYS"]
    assert "nccl_comm_init_failed" not in named(lines)


def test_a_log_cut_inside_the_parallel_group_setup_is_a_failed_communicator_init():
    # gpustack#2023: the frames stop in init_model_parallel_group, no exception line left
    assert named(body("a/gpustack_gpustack_2023_crosshost_vllm_pp_group_nccl"))[:1] == ["nccl_comm_init_failed"]


# ------------------------------------------------------------------ healthy traps of this batch

@pytest.mark.parametrize("rel", [
    "b/megatron_megatronlm_1541_destroy_pg_warning_after_training_healthy",
    "b/pytorch_opensloth_17_destroy_process_group_warning_healthy",
    "b/pytorch_examples_1387_tensor_parallel_example_pg_warning_healthy",
    "a/vllm_club3090_922_sampling_params_override_warning_healthy",
    "a/vllm_vllm_12569_v1_gpu_blocks_max_concurrency_healthy",
    "b/nccl_nccl-tests_293_allreduce_table_small_sizes_healthy",
])
def test_alarming_words_of_a_working_run_raise_no_error(rel):
    sc = SourceScanner("t")
    sc.feed(body(rel))
    sc.finish()
    assert [f.id for f in sc.findings if f.severity == "error"] == []


@pytest.mark.parametrize("line", [
    # flexeval#49: vLLM's _C built on a newer glibc than Ubuntu 20.04's, logged as a warning
    "WARNING 07-24 21:16:52 _custom_ops.py:14] Failed to import from vllm._C with ImportError(\"/usr/lib/"
    "x86_64-linux-gnu/libc.so.6: version `GLIBC_2.32' not found (required by /usr/local/lib/python3.10/"
    "dist-packages/vllm/_C.abi3.so)\")",
])
def test_an_abi_version_the_image_lacks_is_a_broken_install(line):
    assert named([line])[:1] == ["broken_install"]
