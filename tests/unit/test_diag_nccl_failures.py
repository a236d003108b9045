"""NCCL's own failures, named from their structure: a communicator init that failed or never
completed (the frames of a cut traceback, the return-code trace, Init START without COMPLETE),
ncclResult_t codes by number and by enum name, WARN lines read by the subsystem that printed them,
and a log that ends on NCCL's complaint.

Each detector is checked on a held-in excerpt of the corpus (fed without our header lines) or a real
line, and on a benign or near-miss counterpart that must stay quiet.
"""

from __future__ import annotations

import pytest

from sparktui.commands.diagnose import analyse
from sparktui.diagnosis.catalogue import default_catalogue
from sparktui.diagnosis.exc_shapes import default_shapes

from corpus_helpers import (
    NCCL_2GPU, bare_findings, body, diagnose_lines, fact_of, held_in, line_errors, line_of, named, scan_named)

# ------------------------------------------------------------------ NCCL communicator init

def test_ncclresult_trace_out_of_init_names_the_failed_communicator_init():
    # NCCL's return-code trace ("bootstrap.cc:270 -> 2 ... init.cc:1303 -> 2"): whatever the framework
    lines = body("b/nccl_nccl_1016_k8s_net1_connect_abort")
    assert any(" -> 2" in ln for ln in lines)
    assert "nccl_comm_init_failed" in scan_named(lines)


def test_a_failed_proxy_connect_during_transport_setup_is_a_failed_init():
    # the only error evidence of this excerpt is the proxy's "Failed to execute operation Connect"
    assert "nccl_comm_init_failed" in scan_named(body("b/nccl_nccl-tests_188_socket_finalize_wrong_type"))


def test_a_benign_return_code_outside_init_names_nothing():
    # pytorch#68893 (a run that works): NCCL tries the veth's PCI path and carries on
    lines = ["ip-172-31-92-218:4760:4837 [0] NCCL INFO Could not find real path of /sys/class/net/vethe2e6725/device",
             "ip-172-31-92-218:4760:4837 [0] NCCL INFO include/net.h:19 -> 2",
             "ip-172-31-92-218:4760:4837 [0] NCCL INFO CUDA Dev 0[0], Socket NIC distance :  PHB SYS"]
    assert "nccl_comm_init_failed" not in scan_named(lines)


def test_a_log_cut_inside_the_parallel_group_setup_is_a_failed_communicator_init():
    # gpustack#2023: the frames stop in init_model_parallel_group, no exception line left
    assert scan_named(body("a/gpustack_gpustack_2023_crosshost_vllm_pp_group_nccl"))[:1] == ["nccl_comm_init_failed"]


# ------------------------------------------------------------------ communicator creation, frames only

def test_a_stack_cut_below_the_comm_init_frame_is_a_comm_init_failure():
    # vLLM's workers print the stack through PyNcclCommunicator -> ncclCommInitRank -> NCCL_CHECK
    # and the excerpt stops before the exception line: the frame above the checker says what failed
    assert "nccl_comm_init_failed" in scan_named(body("a/vllm_akash_543_rank0_pynccl_comminitrank"))
    assert "nccl_comm_init_failed" in scan_named(body("a/vllm_vllm_10626_groupcoordinator_pynccl_init"))


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
    assert "nccl_comm_init_failed" not in scan_named(lines)


# ------------------------------------------------------------------ an NCCL error while creating a communicator

def _nim_stack(error: str, header: bool = True) -> list[str]:
    """The real stack of the NIM excerpt (vLLM creating its pynccl communicator at worker init),
    its exception line replaced by ``error``: the frames say what was being done, whatever class."""
    lines = body("a/vllm_nccl_1567_nim_pynccl_init_unhandled_cuda")
    at = next(i for i, t in enumerate(lines) if t.startswith("RuntimeError: NCCL error"))
    return (["Traceback (most recent call last):"] if header else []) + lines[:at] + [error]


def test_an_internal_error_raised_under_the_comm_init_frames_names_comm_init_too():
    got = scan_named(_nim_stack("RuntimeError: NCCL error: internal error - please report this issue to the NCCL developers"))
    assert got[:1] == ["nccl_internal_error"]  # the class it names stays first
    assert "nccl_comm_init_failed" in got


def test_an_internal_error_under_the_comm_init_frames_with_the_traceback_header_cut():
    got = scan_named(_nim_stack("RuntimeError: NCCL error: internal error - please report this issue to the NCCL developers",
                           header=False))
    assert got[:1] == ["nccl_internal_error"]
    assert "nccl_comm_init_failed" in got


def test_an_error_the_catalogue_lists_as_a_cause_of_comm_init_failure_stays_alone():
    # a network error in init explains the failed creation (caused_by): no second finding for it
    got = scan_named(_nim_stack("RuntimeError: NCCL error: remote process exited or there was a network error"))
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


# ----------------------------------------------------------------------------- NCCL

def test_comm_init_with_arguments_and_a_cause_names_both():
    got = named(held_in("b/nccl_marin_7018_jax_comminitrankconfig_no_socket_interface"))
    assert got[0] == "wrong_network_interface"
    line = line_of("b/nccl_marin_7018_jax_comminitrankconfig_no_socket_interface", "ncclCommInitRankConfig(")
    assert default_catalogue().match(line).id == "nccl_comm_init_failed"


def test_net_connection_closed_by_remote_peer_any_socket_function():
    # NCCL 2.14's "Net :" wording (not socketProgress) of a peer that went away
    line = line_of("b/nccl_nccl_795_broken_pipe_remote_crash", "Net : Connection closed by remote peer")
    assert default_catalogue().match(line).id == "nccl_network_error"


def test_internal_error_with_socket_recv_last_error():
    got = named(held_in("b/nccl_nccl_1546_barrier_internal_socket_recv_failed"))
    assert got[0] == "nccl_internal_error"


# ----------------------------------------------------------------------------- ncclResult_t codes


@pytest.mark.parametrize("line, fid", [
    # CuPy's NcclError prints the enum's C name (a/vllm_vllm_19613's exception line)
    ("cupy_backends.cuda.libs.nccl.NcclError: NCCL_ERROR_SYSTEM_ERROR: unhandled system error (run with "
     "NCCL_DEBUG=INFO for details)", "nccl_comm_init_failed"),
    # the enum name alone (a binding that prints no message after it)
    ("cupy_backends.cuda.libs.nccl.NcclError: NCCL_ERROR_INTERNAL_ERROR", "nccl_internal_error"),
    ("cupy_backends.cuda.libs.nccl.NcclError: NCCL_ERROR_REMOTE_ERROR", "nccl_network_error"),
    # a binding that prints only the number
    ("RuntimeError: NCCL Error 3: internal check failed", "nccl_internal_error"),
    ("RuntimeError: NCCL error 6", "nccl_network_error"),
    ("RuntimeError: NCCL error 2", "nccl_comm_init_failed"),
    # b/nccl_nccl-tests_188: the return-code trace reaching proxy.cc with 3
    ("user:16901:16967 [2] NCCL INFO proxy.cc:1377 -> 3", "nccl_internal_error"),
])
def test_nccl_result_codes_name_their_cause_by_number_and_enum_name(line, fid):
    assert line_errors([line])[:1] == [fid]


@pytest.mark.parametrize("line", [
    # tests/fixtures/nccl-2gpu/healthy.rank0.log: the IB plugin's probe returns 3, NCCL uses sockets
    # (as a log's very last line it would be an unwinding error: end_phases.toml)
    "vm:607:607 [0] NCCL INFO transport/net_ib.cc:852 -> 3",
    # a version, not a code
    "vm:607:607 [0] NCCL INFO NCCL version 2.28.9+cuda13.0",
    "NCCL error 2.5 s after start",  # a number that is not an integer code
    "ncclResult 0",  # success
])
def test_nccl_numbers_that_are_no_error_code_name_nothing(line):
    assert line_errors([line, "vm:607:607 [0] NCCL INFO Using network Socket"]) == []


def test_the_internal_error_code_ranks_above_the_comm_init_failure_it_caused(tmp_path):
    # b/nccl_nccl-tests_188 as a user's log comes (its header names the error): before, the generic
    # comm-init failure came first
    got = [f.id for f in bare_findings("b/nccl_nccl-tests_188_socket_finalize_wrong_type", tmp_path)
           if f.severity != "info"]
    assert got[0] == "nccl_internal_error" and "nccl_comm_init_failed" in got


# ----------------------------------------------------------------------------- NCCL WARN by subsystem


@pytest.mark.parametrize("line, fid", [
    # b/nccl_nccl_1589's first WARN (the shared-memory utilities' source file, no "/dev/shm" on the line)
    ("g148:14937:69361 [0] misc/shmutils.cc:93 NCCL WARN Call to open failed: No such file or directory",
     "nccl_shm_error"),
    # the NET/IB tag on a soft-RoCE (rxe) device's failure, in words no pattern has
    ("n1:40:41 [0] NCCL WARN NET/IB : rxe0:1 could not create the completion queue", "nccl_ib_error"),
    # the socket transport's source file, in words no pattern has
    ("n1:40:41 [0] misc/socket.cc:50 NCCL WARN socketPollConnect: peer went quiet", "nccl_network_error"),
    # a socket WARN carrying an errno names the errno's cause, not the socket
    ("n1:40:41 [0] misc/socket.cc:50 NCCL WARN socketStartConnect: Connect to 10.0.0.2<4000> failed : "
     "Cannot assign requested address", "wrong_network_interface"),
])
def test_nccl_warn_names_its_subsystem(line, fid):
    assert fact_of(line) == fid


@pytest.mark.parametrize("line", [
    # NCCL's INFO level from the same subsystems (healthy.rank0.log, b/nccl_nccl_367 style)
    "vm:607:607 [0] NCCL INFO NET/Socket : Using [0]eth0:192.0.2.2<0>",
    "vm:607:607 [0] NCCL INFO NET/IB : No device found.",
    "vm:607:607 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via SHM/direct/direct",
])
def test_nccl_info_lines_of_those_subsystems_name_nothing(line):
    assert fact_of(line) is None


def _ib_init(tmp_path, warn: str | None, complete: bool):
    """tests/fixtures/nccl-2gpu/healthy.rank0.log's first lines with its network lines replaced by
    the IB transport's, cut at Init START (or with Init COMPLETE after it)."""
    src = (NCCL_2GPU / "healthy.rank0.log").read_text(encoding="utf-8").splitlines()
    keep = [ln for ln in src[:14] if "NET" not in ln and "network" not in ln and "net_ib" not in ln]
    lines = keep[:-1] + ["vm:607:607 [0] NCCL INFO NET/IB : Using [0]rxe0:1/RoCE [RO]; OOB eth0:192.0.2.2<0>",
                         "vm:607:607 [0] NCCL INFO Using network IB", keep[-1]]
    if warn:
        lines.append(warn)
    if complete:
        lines += [ln for ln in src if "Init COMPLETE" in ln][:1] + src[-3:]
    p = tmp_path / "rank0.log"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return [str(p)]


_IB_WARN = "vm:607:700 [0] NCCL WARN NET/IB : rxe0:1 could not create the completion queue"


def test_a_hang_in_init_with_an_ib_warn_names_the_rdma_failure(tmp_path):
    got = named(_ib_init(tmp_path, _IB_WARN, complete=False))
    assert got[0] == "nccl_ib_error" and "nccl_init_hang" in got


def test_the_same_hang_without_a_transport_warn_stays_a_hang(tmp_path):
    assert "nccl_ib_error" not in named(_ib_init(tmp_path, None, complete=False))


def test_an_ib_warn_in_an_init_that_completed_is_no_error(tmp_path):
    # the WARN is followed by Init COMPLETE and the job's own output: NCCL went on
    fs = analyse(_ib_init(tmp_path, _IB_WARN, complete=True)).findings
    assert not [f for f in fs if f.severity == "error"]


# ----------------------------------------------------------------------------- a log ending on NCCL's WARN


def test_a_log_whose_last_line_is_an_nccl_warn_is_not_silent(tmp_path):
    # b/nccl_nccl_1589 without its line that names /dev/shm: the paste stops at shmutils' WARN
    src = (NCCL_2GPU / "healthy.rank0.log").read_text(encoding="utf-8").splitlines()[:20]
    lines = src + ["g148:14937:69361 [0] misc/shmutils.cc:93 NCCL WARN Call to open failed: No such file or directory"]
    assert line_errors(lines)[:1] == ["nccl_shm_error"]


def test_an_nccl_warn_followed_by_more_nccl_output_is_not_the_end(tmp_path):
    src = (NCCL_2GPU / "healthy.rank0.log").read_text(encoding="utf-8").splitlines()
    lines = src[:20] + ["g148:14937:69361 [0] misc/shmutils.cc:93 NCCL WARN Call to open failed: No such file"] + src[20:]
    assert line_errors(lines) == []


def test_a_library_probe_warn_at_the_end_is_not_a_failure():
    # b/nccl_nccl_573's probe: NCCL goes on without libibverbs
    assert line_errors(["n:1:1 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]"]) == []
