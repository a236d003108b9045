"""Issue 12 round k: NCCL communicator creation named by the frames of a cut traceback, world sizes
compared as numbers in any wording, the address of a wrong interface, and a job asking a cluster
for more GPUs than it has.

Each rule is checked on a held-in excerpt of the corpus (fed without our header lines) and on a
benign negative that must stay quiet.
"""

from __future__ import annotations

from sparktui.diagnosis.exc_shapes import default_shapes

from test_diag_generalise_12i import body, named


# ------------------------------------------------------------------ communicator creation, frames only

def test_a_stack_cut_below_the_comm_init_frame_is_a_comm_init_failure():
    # vLLM's workers print the stack through PyNcclCommunicator -> ncclCommInitRank -> NCCL_CHECK
    # and the excerpt stops before the exception line: the frame above the checker says what failed
    assert "nccl_comm_init_failed" in named(body("a/vllm_akash_543_rank0_pynccl_comminitrank"))
    assert "nccl_comm_init_failed" in named(body("a/vllm_vllm_10626_groupcoordinator_pynccl_init"))


def test_the_comm_init_frame_rule_names_no_other_frame():
    shapes = default_shapes()
    init = 'File "/x/vllm/distributed/device_communicators/pynccl_wrapper.py", line 244, in ncclCommInitRank'
    assert shapes.classify_frame(init) == "nccl_comm_init_failed"
    # the same checker reached from a collective during serving is not communicator creation
    run = 'File "/x/vllm/distributed/device_communicators/pynccl_wrapper.py", line 281, in ncclAllReduce'
    assert shapes.classify_frame(run) is None


def test_a_cut_stack_inside_a_collective_names_nothing():
    lines = [
        '  File "/x/vllm/distributed/device_communicators/pynccl.py", line 120, in all_reduce',
        '    self.nccl.ncclAllReduce(buffer_type(in_tensor.data_ptr()),',
        '  File "/x/vllm/distributed/device_communicators/pynccl_wrapper.py", line 281, in ncclAllReduce',
        '    self.NCCL_CHECK(self._funcs["ncclAllReduce"](sendbuff, recvbuff, count,',
    ]
    assert "nccl_comm_init_failed" not in named(lines)


# ------------------------------------------------------------------ world size as numbers

def test_a_checkpoint_size_against_the_world_size_in_prose_is_a_world_size_mismatch():
    assert named(body("b/pytorch_llama_551_checkpoint_mp1_world_size_4"))[:1] == ["world_size_mismatch"]
    assert named(body("b/pytorch_llama_228_mp1_world_size_4_elastic_failed"))[:1] == ["world_size_mismatch"]


def test_a_process_count_that_must_equal_the_world_size_is_a_world_size_mismatch():
    assert named(body("b/pytorch_nanotron_250_replicas_8_world_size_4"))[:1] == ["world_size_mismatch"]


def test_a_runtime_assertion_on_its_mpi_size_is_a_world_size_mismatch():
    assert named(body("a/trtllm_qwentrtllm_123_mpisize_tp_pp"))[:1] == ["world_size_mismatch"]


def test_equal_world_sizes_or_no_world_size_name_nothing():
    shapes = default_shapes()
    # the same number on both sides is no mismatch
    assert shapes.classify_line("AssertionError: Loading a checkpoint for MP=4 but world size is 4") != "world_size_mismatch"
    # two different numbers that are not about the world size
    assert shapes.classify_line("ValueError: batch of 8 but only 4 prompts") != "world_size_mismatch"
    # an assertion that passed is not printed; one on another size is not about ranks
    assert shapes.classify_line("RuntimeError: Assertion failed: vocabSize == 32000") != "world_size_mismatch"


# ------------------------------------------------------------------ interface address

def test_a_refused_connect_to_the_docker_bridge_address_is_a_wrong_interface():
    assert named(body("b/ompi_horovod_310_btl_tcp_connect_docker0"))[:1] == ["wrong_network_interface"]


def test_a_refused_connect_to_a_real_peer_address_is_no_interface_finding():
    line = ("[u10][[38971,1],2][btl_tcp_endpoint.c:796:mca_btl_tcp_endpoint_complete_connect] "
            "connect() to 172.30.160.7 failed: Connection refused (111)")
    assert "wrong_network_interface" not in named([line])
    # docker's bridge named in a healthy interface listing is not a connection attempt
    assert named(["docker0   Link encap:Ethernet  HWaddr 02:42:a9:9e:3d:33",
                  "          inet addr:172.17.0.1  Bcast:0.0.0.0  Mask:255.255.0.0"]) == []


# ------------------------------------------------------------------ GPUs asked of a cluster

def test_more_gpus_requested_than_the_cluster_has_is_a_placement_problem():
    assert "ray_placement_group_stuck" in named(body("b/ray_nemorl_271_requested_16_gpus_only_8"))


def test_as_many_gpus_available_as_requested_names_nothing():
    assert named(["Requested 8 GPUs, but only 8 are available in the cluster."]) == []


# ------------------------------------------------------------------ an NCCL error while creating a communicator

def _nim_stack(error: str, header: bool = True) -> list[str]:
    """The real stack of the NIM excerpt (vLLM creating its pynccl communicator at worker init),
    its exception line replaced by ``error``: the frames say what was being done, whatever class."""
    lines = body("a/vllm_nccl_1567_nim_pynccl_init_unhandled_cuda")
    at = next(i for i, t in enumerate(lines) if t.startswith("RuntimeError: NCCL error"))
    return (["Traceback (most recent call last):"] if header else []) + lines[:at] + [error]


def test_an_internal_error_raised_under_the_comm_init_frames_names_comm_init_too():
    got = named(_nim_stack("RuntimeError: NCCL error: internal error - please report this issue to the NCCL developers"))
    assert got[:1] == ["nccl_internal_error"]  # the class it names stays first
    assert "nccl_comm_init_failed" in got


def test_an_internal_error_under_the_comm_init_frames_with_the_traceback_header_cut():
    got = named(_nim_stack("RuntimeError: NCCL error: internal error - please report this issue to the NCCL developers",
                           header=False))
    assert got[:1] == ["nccl_internal_error"]
    assert "nccl_comm_init_failed" in got


def test_an_error_the_catalogue_lists_as_a_cause_of_comm_init_failure_stays_alone():
    # a network error in init explains the failed creation (caused_by): no second finding for it
    got = named(_nim_stack("RuntimeError: NCCL error: remote process exited or there was a network error"))
    assert got == ["nccl_network_error"]


def test_an_nccl_error_under_serving_frames_or_a_timeout_in_init_is_no_comm_init_failure():
    shapes = default_shapes()
    serving = ['File "/x/vllm/v1/worker/gpu_model_runner.py", line 1500, in execute_model',
               'File "/x/vllm/distributed/device_communicators/pynccl.py", line 130, in all_reduce']
    assert shapes.during("RuntimeError: NCCL error: internal error", serving) == []
    init = ['File "/x/vllm/worker/worker.py", line 300, in init_worker_distributed_environment']
    assert shapes.during("torch.distributed.DistBackendError: [1] is setting up NCCL communicator and "
                         "timed out after 600000 ms", init) == []
    # a non-NCCL error while initialising (a bad argument) is not an NCCL failure
    assert shapes.during("ValueError: invalid literal for int() with base 10: 'x'", init) == []


# ------------------------------------------------------------------ wordings of a missing interface

def test_an_interface_that_does_not_exist_is_a_wrong_interface_in_several_wordings():
    # iproute2 (a launch script reading the fabric address), a launcher's own check, an *_IFNAME
    for line in ['Device "enp1s0f0np0" does not exist.',
                 "ValueError: interface eth1 does not exist",
                 "RuntimeError: GLOO_SOCKET_IFNAME eth0 not found"]:
        assert named([line])[:1] == ["wrong_network_interface"], line


def test_an_ifname_that_is_set_or_a_missing_file_names_no_interface():
    # (a log that stops in NCCL init is a suspected hang, a warning of its own)
    assert "wrong_network_interface" not in named(
        ["node1:581:581 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to enp1s0f1np1"])
    assert "wrong_network_interface" not in named(['FileNotFoundError: Path "/models/x" does not exist'])


# ------------------------------------------------------------------ the fingerprint comparison's second half

def test_the_differing_aspects_alone_are_a_collective_mismatch():
    lines = body("b/pytorch_simpletuner_2712_allgather_vs_reduce")
    # the report's first half cut (a wrapped or clipped line): what differs still says it
    cut = [t.split(").Collectives differ", 1)[1] if ").Collectives differ" in t else t for t in lines]
    cut = ["Collectives differ" + t if t.startswith(" in the following") else t for t in cut]
    assert not any("Detected mismatch" in t for t in cut)
    assert named(cut)[:1] == ["nccl_collective_mismatch"]
    assert named(["NCCL INFO Collectives will use the ring algorithm"]) == []


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
    assert named(["ExternalError: Nccl error(2), unhandled system error."])[:1] == ["nccl_comm_init_failed"]
    assert named(["Nccl error handling enabled"]) == []
