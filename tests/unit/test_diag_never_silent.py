"""Never silent on a failing log (issue 31): the structural detectors that name a failure whatever
its wording, each with a benign counterpart that must name nothing.

Failing lines are written in the real shape of each runtime's output (values changed); benign lines
come from the real healthy fixtures (tests/fixtures/vllm-cpu, tests/fixtures/nccl-2gpu/healthy.*,
tests/fixtures/proc) or from held-in healthy excerpts of the corpus.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sparktui.diagnosis import lineprefix
from sparktui.diagnosis import last_words
from sparktui.diagnosis.last_words import failure

from corpus_helpers import NCCL_2GPU, ROOT, diagnose_lines, fact_of, held_in, named

VLLM_CPU = ROOT / "tests" / "fixtures" / "vllm-cpu"


def _named(lines: list[str]) -> list[str]:
    return [f.id for f in diagnose_lines(lines) if f.severity != "info"]


def _window(lines: list[str]) -> list[tuple[int, str]]:
    return list(enumerate(lines, 1))


# ----------------------------------------------------------------------------- log levels by structure

@pytest.mark.parametrize("line, level", [
    # TensorFlow / XLA / absl C++ logging: "<date> <time>.<us>: <letter> <file>:<line>] "
    ("2023-03-02 08:11:40.120311: E external/xla/xla/pjrt/pjrt_stream_executor_client.cc:2468] Execution failed",
     "ERROR"),
    ("2023-03-02 08:11:39.004512: I external/xla/xla/service/service.cc:168] XLA service initialized", "INFO"),
    # Ray's core (spdlog): "C" is critical, "I" info
    ("[2024-05-01 09:00:03,118 C 212 212] node_manager.cc:1010: This node has been marked as dead.", "CRITICAL"),
    ("[2024-05-01 09:00:01,004 I 212 212] node_manager.cc:620: Sending Python GC request to 3 local workers", "INFO"),
])
def test_c_plus_plus_logger_letters_are_log_levels(line, level):
    sig, _ = lineprefix.split(line)
    assert sig.split("|")[1] == level


def test_gos_standard_logger_stamp_is_a_prefix_and_a_date_in_prose_is_not():
    # Go's log package (device plugins, the container toolkit): "2019/09/30 14:46:49 " and Lshortfile
    assert lineprefix.split("2019/09/30 14:46:49 Failed to start the device plugin.")[1] == \
        "Failed to start the device plugin."
    assert lineprefix.split("2021/04/02 10:01:02.123456 main.go:88: Loading NVML") == ("||main.go:88", "Loading NVML")
    assert lineprefix.split("2019/09/30 was the day we upgraded")[1] == "2019/09/30 was the day we upgraded"


def test_a_go_programs_last_failure_behind_its_stamp_is_not_silent():
    stamp = "2019/09/30 14:46:4{} "
    failing = [stamp.format(1) + "Loading NVML", stamp.format(2) + "Starting the plugin server.",
               stamp.format(3) + "Failed to start the plugin server."]
    assert _named(failing) == ["unrecognised_failure"]
    # the same program starting and serving: nothing
    healthy = failing[:2] + [stamp.format(3) + "Registered device plugin with Kubelet"]
    assert _named(healthy) == []


def test_pytest_failure_gutter_is_a_prefix_and_prose_starting_with_e_is_not():
    assert lineprefix.split("E           OSError: gpt3-tiny is not a local folder")[1] == \
        "OSError: gpt3-tiny is not a local folder"
    assert lineprefix.split("Every rank joined the group")[1] == "Every rank joined the group"


def test_an_exception_in_a_pytest_report_names_its_cause():
    lines = [">           raise RepositoryNotFoundError(message, response) from e",
             "E           huggingface_hub.errors.RepositoryNotFoundError: 404 Client Error. (Request ID: Root=1-6)",
             "E           ",
             "E           Repository Not Found for url: https://huggingface.co/org/no-such-model/resolve/main/config.json."]
    assert _named(lines) == ["model_path_missing"]


# ----------------------------------------------------------------------------- a native stack dump

RAY_DEATH = [
    "[2024-05-01 09:00:01,004 W 212 260] node_manager.cc:157: Last heartbeat was sent 7210 ms ago.",
    "[2024-05-01 09:00:03,118 C 212 212] node_manager.cc:170: This node has been marked as dead.",
    "*** StackTrace Information ***",
    *["    ray::SpdLogMessage::Flush()", "    ray::RayLog::~RayLog()"],
    *["    std::_Function_handler<>::_M_invoke()"] * 6,
    *["    boost::asio::detail::scheduler::run()", "    boost::asio::io_context::run()", "    main",
      "    __libc_start_main"],
]


def test_a_ray_node_reported_dead_above_its_stack_dump_is_a_lost_worker():
    # the frames push the fatal line out of the last ten: the dump is how it aborted, not its words
    assert _named(RAY_DEATH) == ["ray_worker_missing"]


def test_a_ray_log_of_info_lines_names_nothing():
    # Ray core's own INFO/WARNING lines (a lagging heartbeat it recovers from), no death
    assert _named([RAY_DEATH[0], "[2024-05-01 09:00:05,300 I 212 212] node_manager.cc:620: Sending Python GC "
                   "request to 3 local workers"]) == []
    assert failure(_window(RAY_DEATH[:1] + RAY_DEATH[3:])) is None  # frames without a fatal line above them


# ----------------------------------------------------------------------------- the runtime's error level + layout

def test_a_trtllm_layout_check_in_a_status_table_is_a_world_size_mismatch():
    lines = ["| tensorrt_llm | 1 | UNAVAILABLE: Internal: unexpected error when creating modelInstanceState: "
             "[TensorRT-LLM][ERROR] Assertion failed:  |",
             "|              |   | mpiSize == tp * pp (/app/tensorrt_llm/cpp/tensorrt_llm/runtime/worldConfig.cpp:80) |"]
    assert _named(lines) == ["world_size_mismatch"]


@pytest.mark.parametrize("line", [
    "[TensorRT-LLM][INFO] MPI size: 2, rank: 0",
    # vLLM's own layout line in a healthy run (tests/fixtures/vllm-cpu/serve.log's format)
    "INFO 11-30 23:02:10 [parallel_state.py:1200] world_size=2 rank=0 local_rank=0 distributed_init_method=env:// "
    "backend=gloo",
])
def test_layout_lines_that_check_nothing_name_nothing(line):
    assert fact_of(line) is None and failure([(1, line)]) is None


# ----------------------------------------------------------------------------- facts that stand alone

def test_a_native_extension_with_a_missing_symbol_is_a_broken_install_even_at_warning():
    # macOS's loader words it "Symbol not found"; vLLM logs the failed import as a warning and goes on
    lines = ["INFO 05-02 10:00:01 [cpu.py:40] Using Torch SDPA backend.",
             "WARNING 05-02 10:00:02 [_custom_ops.py:21] Failed to import from vllm._C with ImportError('dlopen("
             "/opt/vllm/vllm/_C.abi3.so, 0x0002): Symbol not found: __ZN3c1010TensorImpl4sizeEv')",
             "INFO 05-02 10:00:02 [parallel_state.py:967] rank 0 in world size 1 is assigned as DP rank 0"]
    got = [f for f in diagnose_lines(lines) if f.severity != "info"]
    assert [(f.id, f.severity) for f in got] == [("broken_install", "warning")]


def test_the_real_vllm_servers_logs_stay_clean():
    for name in ("serve.log", "serve_reason.log"):
        lines = (VLLM_CPU / name).read_text(encoding="utf-8").splitlines()
        assert [f.id for f in diagnose_lines(lines) if f.severity == "error"] == []
        assert last_words.silent_facts(_window(lines), {"broken_install", "nccl_ib_error", "cuda_oom"}) is None


def test_the_rdma_providers_failed_completion_ending_a_log_is_an_ib_error():
    lines = ["(LLMActor pid=4120, ip=10.0.0.2) update weight: model.norm.weight, dtype: torch.bfloat16",
             "(LLMActor pid=4121, ip=10.0.0.3) mlx5: gpu-node-7: got completion with error:"]
    assert _named(lines) == ["nccl_ib_error"]


def test_a_terminal_fact_in_a_log_that_shows_no_failure_is_a_warning_not_an_error():
    """Nothing in the log failed (no traceback, no ERROR line, no exit): the fact names its cause,
    as a warning.  An error here cried wolf on a healthy log (found by the frozen part's healthy count)."""
    lines = ["(LLMActor pid=4120, ip=10.0.0.2) update weight: model.norm.weight, dtype: torch.bfloat16",
             "(LLMActor pid=4121, ip=10.0.0.3) mlx5: gpu-node-7: got completion with error:"]
    assert [(f.id, f.severity) for f in diagnose_lines(lines) if f.severity != "info"] == [("nccl_ib_error", "warning")]


def test_a_verbs_library_probe_at_the_end_of_a_working_run_is_no_failure():
    # held-in healthy: "misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]" then the sweep
    assert named(held_in("b/nccl_nccl-tests_82_broadcast_socket_libibverbs_warn")) == []


def test_cma_free_above_its_total_is_the_kernels_broken_accounting():
    assert _named(["CmaTotal:              0 kB", "CmaFree:          812340 kB"]) == ["gb10_kernel_unsupported"]
    assert last_words.cma_broken(_window(["CmaTotal:        65536 kB", "CmaFree:         61440 kB"])) is None
    meminfo = (ROOT / "tests" / "fixtures" / "proc" / "meminfo").read_text(encoding="utf-8").splitlines()
    assert last_words.cma_broken(_window(meminfo)) is None and _named(meminfo) == []


# ----------------------------------------------------------------------------- NCCL by structure

def test_a_communicator_call_with_nested_arguments_that_failed_is_a_failed_init():
    lines = ["2023-03-02 08:11:40.120311: E external/xla/xla/pjrt/pjrt_stream_executor_client.cc:2468] Execution of "
             "replica 0 failed: INTERNAL: external/xla/xla/service/gpu/nccl_utils.cc:297:",
             " NCCL operation ncclCommInitRank(comm.get(), nranks, id, rank) failed: unhandled system error"]
    assert _named(lines)[0] == "nccl_comm_init_failed"


def test_the_healthy_two_gpu_run_names_no_failure():
    lines = (NCCL_2GPU / "healthy.rank0.log").read_text(encoding="utf-8").splitlines()
    assert [f.id for f in diagnose_lines(lines) if f.severity == "error"] == []


@pytest.mark.parametrize("line, failing", [
    # the net transport's connection setup returned an error (3: internal) up through transport/net.cc
    ("node1:5120:5190 [1] NCCL INFO transport/net.cc:687 -> 3", True),
    # a plugin's own probe falling back (net_ib.cc, net.h) is not it
    ("node1:5120:5120 [1] NCCL INFO transport/net_ib.cc:852 -> 3", False),
    ("node1:5120:5120 [1] NCCL INFO net.cc:120 -> 2", False),
])
def test_an_error_code_through_the_net_transport_is_a_failure(line, failing):
    assert (failure([(1, line)]) is not None) == failing


def test_an_nccl_error_while_its_communicator_was_set_up_is_a_failed_init():
    # NCCL's init lines (INFO), then a plugin's error nothing knows the words of, and the log stops
    lines = ["node3:801:801 [2] NCCL INFO Bootstrap : Using eth0:10.1.0.3<0>",
             "node3:801:801 [2] NCCL INFO NCCL version 2.18.5+cuda12.2",
             "node3:801:870 [2] NCCL INFO Channel 00/0 : 2[2] -> 3[3] [send] via NET/AWS Libfabric/0",
             "node3:801:870 [2] ofi_create_endpoint:312 NCCL WARN NET/OFI Could not open endpoint. RC: -22, ERROR: "
             "Invalid argument"]
    got = [f for f in diagnose_lines(lines) if f.severity != "info"]
    assert got[0].id == "nccl_comm_init_failed" and "Could not open endpoint" in got[0].title


@pytest.mark.parametrize("line, fid", [
    ("node3:801:870 [0] graph/rings.cc:38 NCCL WARN Error : ring 1 does not loop back to start (6 != 0)",
     "nccl_internal_error"),
    # the hardware discovery's files describe the machine: not an inconsistent graph
    ("node3:801:801 [0] graph/xml.cc:332 NCCL WARN Could not find real path of /sys/class/net/eth1/device", None),
])
def test_a_warn_from_ncclss_graph_search_is_an_internal_error(line, fid):
    assert fact_of(line) == fid


# ----------------------------------------------------------------------------- torch shapes

def test_a_traceback_quoted_with_an_indent_still_has_its_exception():
    # torchelastic's failure summary indents the child's traceback: the exception is the line
    # indented less than the frames
    lines = ["  traceback : Traceback (most recent call last):",
             '    File "/opt/venv/lib/python3.11/site-packages/torch/distributed/c10d_logger.py", line 79, in wrapper',
             "      return func(*args, **kwargs)",
             '    File "/opt/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", line 4100, in barrier',
             "      work = group.barrier(opts=opts)",
             "  RuntimeError: Detected mismatch between collectives on ranks. Rank 0 is running collective: "
             "CollectiveFingerPrint(SequenceNumber=4OpType=BARRIER), but Rank 1 is running collective: "
             "CollectiveFingerPrint(SequenceNumber=3OpType=BARRIER)."]
    assert _named(lines) == ["nccl_collective_mismatch"]


def test_an_indented_traceback_whose_frames_return_names_nothing():
    # the same layout, cut inside the frames: no exception line is invented from a code line
    lines = ["  traceback : Traceback (most recent call last):",
             '    File "/opt/app/main.py", line 12, in main',
             "      dist.barrier()"]
    got = failure(_window(lines))
    assert got is None or got.exc_class == ""


def test_a_watchdog_timeout_wrapped_onto_its_own_line_is_still_a_watchdog_timeout():
    lines = ["node-2 [stderr] [rank9]:[E101 10:11:12.000 ProcessGroupNCCL.cpp:607] [Rank 9] Watchdog caught "
             "collective operation timeout: ",
             "WorkNCCL(SeqNum=512, OpType=ALLGATHER, NumelIn=8, NumelOut=64, Timeout(ms)=600000) ran for 600021 "
             "milliseconds before timing out."]
    assert _named(lines)[0] == "nccl_watchdog_timeout"


def test_an_exceptions_shape_names_its_cause_without_a_traceback_head():
    line = "(EngineCore_DP0 pid=4410) AssertionError: local_world_size (8) must be less than or equal to the " \
           "number of visible devices (4)."
    assert _named([line]) == ["multinode_executor_misconfig"]


def test_an_exception_inside_a_json_error_record_is_read():
    lines = ["[ERROR] 2024-02-01 10:00:00,001 error_handler: {",
             '  "message": {',
             '    "message": "RendezvousConnectionError: The connection to the C10d store has failed. See inner '
             'exception for details.",']
    assert _named(lines) == ["rendezvous_timeout"]
    # a record with no exception in it stays the logger's own error
    got = failure(_window(["[ERROR] 2024-02-01 10:00:00,001 error_handler: {", '  "message": "disk almost full",']))
    assert got is not None and got.exc_class == "EngineError"


def test_a_log_ending_in_the_older_process_group_options_block_stops_in_nccl_init():
    lines = ["I1028 12:13:38.405865 632324 ProcessGroupNCCL.cpp:666] [Rank 0] ProcessGroupNCCL initialized with "
             "following options:", "NCCL_ASYNC_ERROR_HANDLING: 1", "NCCL_DESYNC_DEBUG: 0", "NCCL_BLOCKING_WAIT: 0",
             "TIMEOUT(ms): 5000"]
    assert _named(lines) == ["nccl_init_hang"]
    # the same block followed by training progress: the group works
    assert _named([*lines, "epoch 0 step 10 loss 2.31"]) == []


# ----------------------------------------------------------------------------- more failure shapes

@pytest.mark.parametrize("lines, failing", [
    # systemd's report of a unit's process: a non-zero status fails, success and a requested stop do not
    (["Dec 06 07:00:05 spark systemd[1]: vllm.service: Main process exited, code=exited, status=1/FAILURE"], True),
    (["Dec 06 07:00:05 spark systemd[1]: vllm.service: Main process exited, code=killed, status=9/KILL"], True),
    (["Dec 06 07:00:05 spark systemd[1]: vllm.service: Main process exited, code=exited, status=0/SUCCESS"], False),
    (["Dec 06 07:00:00 spark systemd[1]: Stopping vllm.service - vLLM server...",
      "Dec 06 07:00:05 spark systemd[1]: vllm.service: Main process exited, code=exited, status=1/FAILURE"], False),
    # mpirun's abort notice gives no number
    (["Primary job  terminated normally, but 1 process returned",
      "a non-zero exit code. Per user-direction, the job has been aborted."], True),
    # a C library's own error level (UCX), and its warning that is not one
    (["[1733468400.123456] [node1:1234:0] ucp_worker.c:1902 UCX ERROR failed to connect to 10.0.0.2:41000"], True),
    (["[1733468400.123456] [node1:1234:0] ucp_context.c:1081 UCX WARN network device 'mlx5_0:1' is not available"],
     False),
    # the GPU driver's Xid event, and its ordinary load notice
    (["[ 812.33] NVRM: Xid (PCI:000f:01:00): 31, pid=4410, name=python3, Ch 00000008, intr 10000000"], True),
    (["[    5.10] NVRM: loading NVIDIA UNIX Open Kernel Module for aarch64  580.95.05"], False),
])
def test_exit_statuses_library_errors_and_driver_events_are_failure_shapes(lines, failing):
    assert (failure(_window(lines)) is not None) == failing


@pytest.mark.parametrize("line, fid", [
    # a compiler driver's padded level, its message judged by the exception table (no code for sm_121)
    ("ptxas fatal   : Value 'sm_121a' is not defined for option 'gpu-name'", "broken_install"),
    # the container toolkit finding no NVML on the host: the driver's own library, so no GPU reaches the
    # container (the catalogue's no_gpu_visible line wins over the table's "cannot open shared object")
    ("nvidia-container-cli: initialization error: load library failed: libnvidia-ml.so.1: cannot open shared "
     "object file: no such file or directory: unknown.", "no_gpu_visible"),
    # ... and a library of the image itself, judged by the table
    ("nvidia-container-cli: initialization error: load library failed: libfoo.so.2: cannot open shared "
     "object file: no such file or directory: unknown.", "broken_install"),
    # the same tools' ordinary output
    ("ptxas info    : Used 40 registers, 384 bytes cmem[0]", None),
    ("nvidia-container-cli: no error; 1 device found", None),
])
def test_an_error_lines_message_is_judged_by_the_exception_table(line, fid):
    got = [f.id for f in diagnose_lines([line]) if f.severity != "info"]
    assert got == ([fid] if fid else [])


@pytest.mark.parametrize("line, fid", [
    ("[TensorRT-LLM][ERROR] Assertion failed: worldSize == tp * pp (/src/runtime/worldConfig.cpp:80)", "world_size_mismatch"),
    ("AssertionError: tp_size * pp_size == world_size must hold, got 8 and 4", "world_size_mismatch"),
    # the layout printed, nothing compared
    ("[TensorRT-LLM][INFO] world size 4, tp 2, pp 2", None),
])
def test_a_world_size_compared_with_tp_times_pp_either_way_round_is_the_layout_fact(line, fid):
    assert fact_of(line) == fid


def test_the_cuda_drivers_out_of_memory_status_is_an_oom_and_its_other_statuses_are_cuda_errors():
    assert _named(["RuntimeError: CUDA driver error: out of memory"]) == ["cuda_oom"]
    assert _named(["RuntimeError: CUDA driver error: invalid device context"]) == ["cuda_error"]


def _nvml_traceback(call: str) -> list[str]:
    return ["Traceback (most recent call last):", '  File "/opt/app/gpu_stats.py", line 41, in sample',
            f"    value = pynvml.{call}(handle)", "pynvml.NVMLError_NotSupported: Not Supported"]


def test_nvml_not_supported_while_asking_for_the_gpus_memory_is_the_gb10_limit_as_an_error():
    got = [(f.id, f.severity) for f in diagnose_lines(_nvml_traceback("nvmlDeviceGetMemoryInfo"))]
    assert got == [("gb10_memory_not_supported", "error")]


def test_nvml_not_supported_for_another_query_is_not_the_memory_limit():
    # the binding's per-status class still parses as an exception: reported, not as GB10's memory
    assert _named(_nvml_traceback("nvmlDeviceGetPowerUsage")) == ["unhandled_exception"]


@pytest.mark.parametrize("lines, fid", [
    # Kubernetes' words for a container killed at its memory limit, padded as kubectl prints them
    (["  Last State:     Terminated", "    Reason:       OOMKilled", "    Exit Code:    137"], "host_oom_killed"),
    (["NAME          READY   STATUS      RESTARTS   AGE", "vllm-head-0   0/1     OOMKilled   2          5m"],
     "host_oom_killed"),
    # docker inspect of a healthy container, and a pod that completed
    (['            "OOMKilled": false,'], None),
    (["    Reason:       Completed", "    Exit Code:    0"], None),
])
def test_kubernetes_oom_kills_are_host_oom(lines, fid):
    assert _named(lines) == ([fid] if fid else [])


# ----------------------------------------------------------------------------- errno numbers (issue 31 item 6)

@pytest.mark.parametrize("line, fid", [
    # Linux errno numbers: EHOSTUNREACH 113, ENETUNREACH 101 (no route: the wrong interface or subnet)
    ("RuntimeError: [c10d] connect to 10.1.0.2:29500 failed: errno: 113 - No route to host", "wrong_network_interface"),
    ("OSError: [Errno 101] Network is unreachable while connecting the TCPStore socket", "wrong_network_interface"),
    # 110 is ETIMEDOUT: the peer never answered, never a wrong interface
    ("RuntimeError: [c10d] socket connect to 10.1.0.2:29500 failed: errno: 110", "rendezvous_timeout"),
    ("torch.distributed.DistStoreError: TCPStore connect failed [Errno 110]", "rendezvous_timeout"),
])
def test_errno_numbers_name_their_own_cause(line, fid):
    assert fact_of(line) == fid


def test_an_errno_outside_any_socket_call_names_no_network_cause():
    # the same numbers in a line that is no socket/rendezvous call (a file read) are no network fact
    assert fact_of("OSError: [Errno 110] reading /data/shard-00113.bin took too long") is None


# ----------------------------------------------------------------------------- a log stopping in distributed init (item 5)

SGLANG_START = [
    "[2025-01-10 10:00:00 TP0] Attention backend not set. Use flashinfer backend by default.",
    "[2025-01-10 10:00:01 TP0] Init torch distributed begin.",
]


@pytest.mark.parametrize("last", [
    SGLANG_START[-1],
    "I0101 10:00:00.000000 1234 torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py:100] "
    "Connecting to the c10d store at 10.0.0.1:29400",
    "[2024-03-01 10:00:00,000] [INFO] [comm.py:637:init_distributed] Initializing TorchBackend in DeepSpeed with "
    "backend nccl",
])
def test_a_log_stopping_where_distributed_init_begins_is_attributed_to_the_rendezvous(last):
    got = [(f.id, f.severity) for f in diagnose_lines(["INFO starting the job", last]) if f.severity != "info"]
    assert got == [("rendezvous_timeout", "warning")]


def test_a_log_that_goes_on_past_distributed_init_names_nothing():
    lines = [*SGLANG_START, "[2025-01-10 10:00:03 TP0] Init torch distributed ends. mem usage=0.41 GB",
             "[2025-01-10 10:00:04 TP0] Load weight begin. avail mem=78.50 GB",
             "[2025-01-10 10:00:09 TP0] Load weight end. elapsed=5.02 s, type=LlamaForCausalLM, dtype=torch.bfloat16, "
             "avail mem=62.10 GB, mem usage=16.40 GB."]
    assert _named(lines) == []


# ----------------------------------------------------------------------------- teardown noise after the last words (item 1)

FAILED_RUN = ["INFO 01-10 10:00:00 [worker.py:10] loading the model",
              "Traceback (most recent call last):",
              '  File "/app/train.py", line 3, in <module>',
              "    main()",
              "RuntimeError: the step function found a tensor of the wrong rank"]
TEARDOWN = [
    *["[rank0]:[W515 07:06:42.829549331 ProcessGroupNCCL.cpp:1117] WARNING: process group has NOT been destroyed "
      "before it is being destructed. On normal program exit, the application should call "
      "destroy_process_group to ensure that any pending NCCL data transfers have finished in this process."] * 4,
    "/usr/lib/python3.12/multiprocessing/resource_tracker.py:254: UserWarning: resource_tracker: There appear to be "
    "2 leaked semaphore objects to clean up at shutdown",
    "  warnings.warn('resource_tracker: There appear to be %d '",
    "Exception ignored in: <function Pool.__del__ at 0x7f3a2c1d0>",
    "Traceback (most recent call last):",
    '  File "/usr/lib/python3.12/multiprocessing/pool.py", line 268, in __del__',
    "ValueError: I/O operation on closed file",
    "INFO:     Application shutdown complete.",
    "INFO:     Finished server process [12]",
]


def test_teardown_noise_after_the_failure_does_not_hide_its_last_words():
    got = failure(_window(FAILED_RUN + TEARDOWN))
    assert got is not None and got.exc_class == "RuntimeError" and "wrong rank" in got.message


def test_teardown_noise_alone_is_no_failure():
    # a run that finished and printed the same shutdown noise (an exception ignored in a destructor)
    assert failure(_window(["INFO 01-10 10:00:00 [worker.py:10] training finished", *TEARDOWN])) is None
    assert _named(["INFO 01-10 10:00:00 [worker.py:10] training finished", *TEARDOWN]) == []


# ----------------------------------------------------------------------------- command-line tools' failure lines (item 2)

@pytest.mark.parametrize("line, failing", [
    # lowercase levels of command-line tools (git, pip/setuptools)
    ("fatal: unable to access 'https://github.com/org/repo.git/': Could not resolve host: github.com", True),
    ("error: subprocess-exited-with-error", True),
    # the Docker CLI relaying the daemon's refusal
    ('docker: Error response from daemon: could not select device driver "" with capabilities: [[gpu]].', True),
    # a build toolchain giving up
    ("CMake Error at CMakeLists.txt:44 (find_package):", True),
    ("/src/csrc/attention.cu(118): error: identifier \"__nv_bfloat162\" is undefined", True),
    ("/src/csrc/ops.cpp:12:10: fatal error: cuda_runtime.h: No such file or directory", True),
    ("ninja: build stopped: subcommand failed.", True),
    ("make[2]: *** [CMakeFiles/_C.dir/build.make:76: CMakeFiles/_C.dir/csrc/cache.cu.o] Error 1", True),
    # prose and the tools' own benign lines
    ("error handling in the scheduler was reworked", False),
    ("errors: 0, warnings: 2", False),
    ("make: Nothing to be done for 'all'.", False),
    ("-- Build files have been written to: /src/build", False),
    ("[100%] Built target _C", False),
])
def test_command_line_tools_failure_lines_are_failure_shapes(line, failing):
    assert (failure([(1, "INFO building"), (2, line)]) is not None) is failing


@pytest.mark.parametrize("lines", [
    ["-- The CUDA compiler identification is NVIDIA 12.8.93",
     "/src/csrc/attention.cu(118): error: identifier \"__nv_bfloat162\" is undefined",
     "1 error detected in the compilation of \"/src/csrc/attention.cu\".",
     "ninja: build stopped: subcommand failed."],
    ["Collecting vllm==0.99.0",
     "ERROR: Could not find a version that satisfies the requirement vllm==0.99.0 (from versions: 0.9.1, 0.9.2)",
     "ERROR: No matching distribution found for vllm==0.99.0"],
])
def test_a_toolchain_or_pip_failure_ending_the_log_is_a_broken_install(lines):
    assert _named(lines) == ["broken_install"]


def test_a_build_that_finished_names_nothing():
    lines = ["-- Configuring done (4.1s)", "-- Generating done (0.1s)", "-- Build files have been written to: /src/build",
             "[ 50%] Building CUDA object CMakeFiles/_C.dir/csrc/cache.cu.o", "[100%] Built target _C",
             "Successfully installed vllm-0.9.2"]
    assert _named(lines) == []


# ----------------------------------------------------------------------------- causes by structure (item 7)

def _tb(frame: str, code: str, exc: str) -> list[str]:
    return ["Traceback (most recent call last):", f'  File "{frame}", line 10, in run', f"    {code}", exc]


@pytest.mark.parametrize("lines, fid", [
    # TensorRT's own error class for its engine deserializer
    (["[I] Loading engine from /models/x.plan",
      "[E] IRuntime::deserializeCudaEngine: Error Code 1: Serialization (Serialization assertion "
      "plan->header.magicTag == rt::kPLAN_MAGIC_TAG failed.)"], "trt_engine_version_mismatch"),
    # a name imported from transformers that the installed release lacks
    (_tb("/app/model.py", "from transformers import Qwen9Config",
         "ImportError: cannot import name 'Qwen9Config' from 'transformers' (/usr/lib/python3/dist-packages/"
         "transformers/__init__.py)"), "transformers_version_mismatch"),
    # SIGBUS in a DataLoader worker, and a bare "Bus error" death: /dev/shm ran out
    (_tb("/app/train.py", "for batch in loader:",
         "RuntimeError: DataLoader worker (pid 4242) is killed by signal: Bus error. It is possible that "
         "dataloader's workers are out of shared memory. Please try to raise your shared memory limit."),
     "shm_too_small"),
    (["INFO 01-10 10:00:00 [worker.py:10] loading the model", "Bus error (core dumped)"], "shm_too_small"),
    # a KV cache allocation that failed, in words no pattern has
    (_tb("/app/engine.py", "self.cache = allocate_cache(cfg)", "RuntimeError: failed to allocate KV cache: out of memory"),
     "kv_cache_oom"),
    # a Ray worker that could not register with its raylet
    (["2025-01-10 10:00:00,000\tINFO worker.py:1000 -- Connecting to existing Ray cluster at address: 10.0.0.1:6379",
      "IOError: [RayletClient] Unable to register worker with raylet. Failed to read data from the socket: End of file"],
     "ray_worker_register_failed"),
    # a socket timeout raised while connecting to the rendezvous store; torch's store network error
    (_tb("/app/dist.py", "store = TCPStore(host, port, world_size, is_master, timeout)", "TimeoutError: timed out"),
     "rendezvous_timeout"),
    (["torch.distributed.DistNetworkError: Socket Timeout"], "rendezvous_timeout"),
    # the CUDA multicast calls of NCCL's NVLS setup failing
    (["node1:100:200 [0] NCCL INFO NVLS multicast support is available on dev 0",
      "node1:100:200 [0] NCCL WARN Cuda failure 'operation not supported' cuMulticastCreate failed",
      "RuntimeError: NCCL error: unhandled cuda error: cuMulticastCreate failed with 'operation not supported'"],
     "nvls_multicast_failed"),
])
def test_causes_named_by_structure(lines, fid):
    assert _named(lines)[0] == fid


@pytest.mark.parametrize("lines, not_fid", [
    (["[I] [TRT] Loaded engine size: 120 MiB", "[I] [TRT] Deserialization required 12345 microseconds."],
     "trt_engine_version_mismatch"),
    # SGLang skipping a model it cannot import, and going on (logged below error level)
    (["[2026-04-09 20:05:20 TP0] Ignore import error when loading sglang.srt.models.x: cannot import name "
      "'XConfig' from 'transformers' (/usr/lib/python3/dist-packages/transformers/__init__.py)",
      "[2026-04-09 20:05:30 TP0] Load weight end. elapsed=5.02 s, type=LlamaForCausalLM, dtype=torch.bfloat16, "
      "avail mem=62.10 GB, mem usage=16.40 GB."], "transformers_version_mismatch"),
    # Ray listing what may have killed its raylet is no SIGBUS
    (["2022-12-20 22:02:13,602\tERROR agent.py:217 -- Raylet is terminated. Termination is unexpected. Possible "
      "reasons include: (1) SIGKILL by the user or system OOM killer, (2) Invalid memory access from Raylet causing "
      "SIGSEGV or SIGBUS, (3) Other termination signals."], "shm_too_small"),
    (["INFO 01-10 10:00:00 [gpu_worker.py:300] Available KV cache memory: 12.30 GiB",
      "INFO 01-10 10:00:01 [kv_cache_utils.py:800] GPU KV cache size: 100,000 tokens"], "kv_cache_oom"),
    # a timeout in a frame that talks to no rendezvous (an HTTP client)
    (_tb("/app/client.py", "data = sock.recv(4096)", "TimeoutError: timed out"), "rendezvous_timeout"),
    (["node1:100:200 [0] NCCL INFO NVLS multicast support is not available on dev 0"], "nvls_multicast_failed"),
])
def test_benign_counterparts_of_the_structural_causes_name_nothing_of_theirs(lines, not_fid):
    assert not_fid not in [f.id for f in diagnose_lines(lines) if f.severity == "error"]


# ----------------------------------------------------------------------------- a connect retried until the log stops (item 4)

@pytest.mark.parametrize("last, fid", [
    ("[W socket.cpp:558] [c10d] The client socket has failed to connect to [10.0.0.1]:29500 "
     "(errno: 111 - Connection refused).", "rendezvous_timeout"),
    ("[W socket.cpp:558] [c10d] The client socket has failed to connect to [10.0.0.1]:29500 "
     "(errno: 113 - No route to host).", "wrong_network_interface"),
    ("WARNING 01-10 10:00:00 [client.py:40] connect to 10.0.0.1:6379 failed: [Errno 110] Connection timed out; "
     "retrying in 5 s", "rendezvous_timeout"),
])
def test_a_connect_retried_until_the_log_stops_is_a_warning_naming_its_errno(last, fid):
    got = [f for f in diagnose_lines(["INFO 01-10 10:00:00 [worker.py:10] joining the group", last, last])
           if f.severity != "info"]
    assert [(f.id, f.severity) for f in got] == [(fid, "warning")]
    assert "retried" in " ".join(got[0].evidence)


def test_a_connect_retried_and_then_made_names_nothing():
    lines = ["[W socket.cpp:558] [c10d] The client socket has failed to connect to [10.0.0.1]:29500 "
             "(errno: 111 - Connection refused).",
             "[I socket.cpp:800] [c10d] The client socket has connected to [10.0.0.1]:29500 on [10.0.0.2]:41234.",
             "INFO 01-10 10:00:05 [parallel_state.py:1000] rank 0 in world size 2 is assigned as DP rank 0"]
    assert _named(lines) == []


def test_the_ipv6_probe_that_falls_back_to_ipv4_is_no_failed_connect():
    # torch tries IPv6 first; on a host without it the socket cannot be created (EAFNOSUPPORT) and it
    # goes on over IPv4: that warning ending an excerpt is no connect that failed
    line = ("[W socket.cpp:558] [c10d] The client socket cannot be initialized to connect to [localhost]:29500 "
            "(errno: 97 - Address family not supported by protocol).")
    assert _named(["INFO starting", line, line]) == []


# ----------------------------------------------------------------------------- an earlier failure, then the log went on (item 3)

BENIGN_TAIL = [f"INFO 01-10 10:00:{k:02d} [monitor.py:50] heartbeat {k}: 0 running, 0 waiting" for k in range(14)]


@pytest.mark.parametrize("failed", [
    # an ERROR its own logger printed, far above the last words
    ["ERROR 01-10 09:59:59 [loader.py:88] the shard index lists 12 files but 11 were found"],
    # an exception line (its traceback cut off) that nothing recognises
    ["SomeLibraryError: the plan could not be built", "INFO 01-10 09:59:59 [run.py:9] continuing"],
    # a helper process's death
    ["Segmentation fault (core dumped)"],
])
def test_an_earlier_failure_the_log_went_on_past_is_a_warning(failed):
    got = [(f.id, f.severity) for f in diagnose_lines(["INFO 01-10 09:59:58 [run.py:1] starting", *failed, *BENIGN_TAIL])
           if f.severity != "info"]
    assert got and all(sev == "warning" for _, sev in got)
    assert failure(_window(["INFO starting", *failed, *BENIGN_TAIL])) is None  # not the last words
    assert last_words.earlier_failure(_window(["INFO starting", *failed, *BENIGN_TAIL])) is not None


def test_a_librarys_inline_error_the_run_went_on_past_names_nothing():
    # a C library's own "file.c:N TAG ERROR" (a transport probe), then the program's normal output
    lines = ["[1566436851.063308] [gpu1:203583:0]    ucp_context.c:878  UCX  ERROR Exceeded transports/devices limit",
             *BENIGN_TAIL]
    assert _named(lines) == []


def test_an_earlier_failure_before_the_server_came_up_names_nothing_more():
    lines = ["ERROR 01-10 09:59:59 [loader.py:88] optional tokenizer file missing",
             *BENIGN_TAIL, "INFO:     Application startup complete."]
    assert all(f.severity != "error" for f in diagnose_lines(lines))
    assert last_words.earlier_failure(_window(lines)) is not None  # the shape is there; the diagnoser
    assert _named(lines) == []  # knows the service came up after it


# ----------------------------------------------------------------------------- a bare Python exception (item 8)

def test_a_bare_python_exception_ending_the_log_is_an_unhandled_exception():
    got = [f for f in diagnose_lines(["INFO 01-10 10:00:00 [run.py:1] starting",
                                      "somepkg.core.PlanBuilderError: the plan could not be built"])
           if f.severity != "info"]
    assert [(f.id, f.severity) for f in got] == [("unhandled_exception", "error")]
    assert "somepkg.core.PlanBuilderError" in " ".join(got[0].evidence)


@pytest.mark.parametrize("line", [
    # a C++ exception, an engine's own [E] line, a panic: failures, but no Python exception
    "  what():  the plan could not be built",
    "thread 'main' panicked at src/plan.rs:10:5: the plan could not be built",
])
def test_failures_that_are_no_python_exception_stay_unrecognised(line):
    assert _named(["INFO 01-10 10:00:00 [run.py:1] starting", line]) == ["unrecognised_failure"]


def test_a_python_exception_logged_as_a_warning_and_recovered_from_is_no_failure():
    assert _named(["WARNING 01-10 10:00:00 [run.py:1] retrying after somepkg.core.PlanBuilderError: busy",
                   "INFO 01-10 10:00:01 [run.py:2] plan built"]) == []


def test_an_error_while_serving_that_the_server_went_on_past_names_nothing():
    lines = ["INFO:     Application startup complete.",
             'INFO:     127.0.0.1:50312 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
             "ERROR 01-10 10:00:00 [serving_chat.py:200] Error in preprocessing prompt inputs",
             *BENIGN_TAIL]
    assert _named(lines) == []
