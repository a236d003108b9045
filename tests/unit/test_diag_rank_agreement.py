"""Ranks that do not agree: world sizes and rank counts compared as numbers in any wording, a
parallel layout the GPUs cannot hold, NCCL's rank against nranks, and collectives that differ
(Gloo's size check between two ranks, the differing aspects of a fingerprint comparison).

Each rule is checked on a held-in excerpt of the corpus (fed without our header lines) or a real
line, and on a counterpart whose numbers agree or count other things.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sparktui.diagnosis.exc_shapes import default_shapes

from corpus_helpers import body, part_of, scan_named

# ------------------------------------------------------------------ world size

def test_a_bare_divisibility_check_of_the_world_size_is_a_world_size_mismatch():
    # "AssertionError: 4 is not divisible by 8": the frames above it check world_size vs ep_size
    assert scan_named(body("b/deepspeed_fambench_103_moe_ep8_on_4_gpus"))[:1] == ["world_size_mismatch"]


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
    assert scan_named(body("b/pytorch_colossalai_2910_mesh_4_ranks_on_2_gpus"))[:1] == ["world_size_mismatch"]


@pytest.mark.parametrize("line, fid", [
    ("RuntimeError: expected 8 ranks but got 4", "world_size_mismatch"),
    ("RuntimeError: expected 8 ranks but got 8", None),  # the numbers agree: nothing to name
    ("ValueError: requires 2 GPUs but only 1 found", None),  # GPUs, not launched ranks
])
def test_ranks_expected_against_ranks_found_compare_the_numbers(line, fid):
    assert default_shapes().classify_line(line) == fid


# ------------------------------------------------------------------ NCCL's rank against nranks

def test_nccl_invalid_rank_requested_is_a_world_size_mismatch():
    # --world-size 4 with processes for 8 GPUs: ranks 5-7 ask for "7/4", outside the communicator
    assert scan_named(body("b/other_hybrik_47_world_size_4_eight_gpus_invalid_rank"))[:1] == ["world_size_mismatch"]


def test_ranks_inside_their_communicator_name_no_world_size_mismatch():
    # the real two-GPU capture that initialises NCCL normally ("rank 0 nranks 2", Init COMPLETE)
    log = Path(__file__).resolve().parents[1] / "fixtures" / "nccl-2gpu" / "healthy.rank0.log"
    assert "world_size_mismatch" not in scan_named(log.read_text(encoding="utf-8").splitlines())


# ------------------------------------------------------------------ world size as numbers

def test_a_checkpoint_size_against_the_world_size_in_prose_is_a_world_size_mismatch():
    assert scan_named(body("b/pytorch_llama_551_checkpoint_mp1_world_size_4"))[:1] == ["world_size_mismatch"]
    assert scan_named(body("b/pytorch_llama_228_mp1_world_size_4_elastic_failed"))[:1] == ["world_size_mismatch"]


def test_a_process_count_that_must_equal_the_world_size_is_a_world_size_mismatch():
    assert scan_named(body("b/pytorch_nanotron_250_replicas_8_world_size_4"))[:1] == ["world_size_mismatch"]


def test_a_runtime_assertion_on_its_mpi_size_is_a_world_size_mismatch():
    assert scan_named(body("a/trtllm_qwentrtllm_123_mpisize_tp_pp"))[:1] == ["world_size_mismatch"]


def test_equal_world_sizes_or_no_world_size_name_nothing():
    shapes = default_shapes()
    # the same number on both sides is no mismatch
    assert shapes.classify_line("AssertionError: Loading a checkpoint for MP=4 but world size is 4") != "world_size_mismatch"
    # two different numbers that are not about the world size
    assert shapes.classify_line("ValueError: batch of 8 but only 4 prompts") != "world_size_mismatch"
    # an assertion that passed is not printed; one on another size is not about ranks
    assert shapes.classify_line("RuntimeError: Assertion failed: vocabSize == 32000") != "world_size_mismatch"


# ------------------------------------------------------------------ rank counts against parallel sizes

def test_a_rank_count_against_a_parallel_size_as_numbers_is_a_world_size_mismatch():
    shapes = default_shapes()
    for line in ["AssertionError: nranks 2 != mpi size 4",
                 "RuntimeError: The number of ranks (1) is less than the tensor parallel size (2)",
                 "ValueError: tensor_parallel_size (8) is larger than the number of visible GPUs (2)"]:
        assert shapes.classify_line(line) == "world_size_mismatch", line


def test_equal_counts_or_counts_of_other_things_are_no_world_size_mismatch():
    shapes = default_shapes()
    assert shapes.classify_line("AssertionError: nranks 4 != mpi size 4") != "world_size_mismatch"
    assert shapes.classify_line("ValueError: num_ranks 4 but got batch 8 for tensor") != "world_size_mismatch"


def test_an_nccl_error_in_mixed_case_is_still_seen():
    # Paddle prints "Nccl error(2), unhandled system error": the literal gate must not hide it
    assert scan_named(["ExternalError: Nccl error(2), unhandled system error."])[:1] == ["nccl_comm_init_failed"]
    assert scan_named(["Nccl error handling enabled"]) == []


# ----------------------------------------------------------------------------- parallel layout

def test_world_size_vs_local_gpus_is_an_executor_misconfiguration():
    # vllm#15217 (a case named into the held-in part): -pp 2 over two nodes with the local executor
    assert part_of("vllm_vllm_15217_world_size_exceeds_local_gpus") == "in"
    assert default_shapes().classify_line(
        "RuntimeError: please ensure that world_size (2) is less than than max local gpu count (1)") \
        == "multinode_executor_misconfig"


# ------------------------------------------------------------------ Gloo's size check between ranks

def test_gloo_message_longer_than_the_posted_buffer_is_a_collective_mismatch():
    # rank 0 all_reduces a tensor of another shape than the others: Gloo compares the two sizes
    assert scan_named(body("b/pytorch_nccl_1394_gloo_allreduce_shape_differs")) == ["nccl_collective_mismatch"]


def test_gloo_size_check_with_equal_numbers_is_no_mismatch():
    # the shape compares the numbers: the same size on both sides is some other fault
    line = ("what():  [enforce fail at /opt/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:446] "
            "op.preamble.length <= op.nbytes. 128000 vs 128000")
    assert default_shapes().classify_line(line) is None


# ------------------------------------------------------------------ the fingerprint comparison's second half

def test_the_differing_aspects_alone_are_a_collective_mismatch():
    lines = body("b/pytorch_simpletuner_2712_allgather_vs_reduce")
    # the report's first half cut (a wrapped or clipped line): what differs still says it
    cut = [t.split(").Collectives differ", 1)[1] if ").Collectives differ" in t else t for t in lines]
    cut = ["Collectives differ" + t if t.startswith(" in the following") else t for t in cut]
    assert not any("Detected mismatch" in t for t in cut)
    assert scan_named(cut)[:1] == ["nccl_collective_mismatch"]
    assert scan_named(["NCCL INFO Collectives will use the ring algorithm"]) == []


def test_a_during_rule_whose_example_does_not_match_is_refused():
    from sparktui.diagnosis.exc_shapes import ShapeError, parse_shapes

    bad = """
[[during]]
id = "nccl_comm_init_failed"
message = ['NCCL']
frame = ['in init_process_group']
examples = [["RuntimeError: NCCL error: internal error", 'File "x.py", line 1, in all_reduce']]
"""
    try:
        parse_shapes(bad, "t.toml", {"nccl_comm_init_failed"})
    except ShapeError as exc:
        assert "during #1" in str(exc)
    else:
        raise AssertionError("a during rule whose example does not match was accepted")
