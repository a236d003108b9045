"""Structure over wording (issue 31, the rule writer's pass): NCCL's result codes by number and by
the enum names other bindings print, NCCL WARN lines read by the subsystem that printed them (also
while a communicator init never completed), a log whose last line is NCCL's complaint, errno in
torch's ``code: -N, name: E...`` form and getaddrinfo's failures, any error class of torch's
elastic rendezvous, and two healthy shapes that must stay quiet: a traceback logged at WARNING and
recovered from, and a failure the server went on past (it came up and served).

Each detector has a benign counterpart.  Lines are real (quoted from held-in excerpts or the
fixtures) or built from the structure they carry; each comment says which.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sparktui.commands.diagnose import analyse
from sparktui.diagnosis.catalogue import default_catalogue
from sparktui.diagnosis.exc_shapes import default_shapes
from sparktui.diagnosis.last_words import facts

from corpus_helpers import bare_findings, diagnose_lines, named

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "nccl-2gpu"


def _errors(lines):
    return [f.id for f in diagnose_lines(lines) if f.severity == "error"]


def _fact(line):
    got = facts([(1, line)], default_catalogue().entries)
    return got[1] if got else None


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
    assert _errors([line])[:1] == [fid]


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
    assert _errors([line, "vm:607:607 [0] NCCL INFO Using network Socket"]) == []


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
    assert _fact(line) == fid


@pytest.mark.parametrize("line", [
    # NCCL's INFO level from the same subsystems (healthy.rank0.log, b/nccl_nccl_367 style)
    "vm:607:607 [0] NCCL INFO NET/Socket : Using [0]eth0:192.0.2.2<0>",
    "vm:607:607 [0] NCCL INFO NET/IB : No device found.",
    "vm:607:607 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via SHM/direct/direct",
])
def test_nccl_info_lines_of_those_subsystems_name_nothing(line):
    assert _fact(line) is None


def _ib_init(tmp_path, warn: str | None, complete: bool):
    """tests/fixtures/nccl-2gpu/healthy.rank0.log's first lines with its network lines replaced by
    the IB transport's, cut at Init START (or with Init COMPLETE after it)."""
    src = (FIX / "healthy.rank0.log").read_text(encoding="utf-8").splitlines()
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
    src = (FIX / "healthy.rank0.log").read_text(encoding="utf-8").splitlines()[:20]
    lines = src + ["g148:14937:69361 [0] misc/shmutils.cc:93 NCCL WARN Call to open failed: No such file or directory"]
    assert _errors(lines)[:1] == ["nccl_shm_error"]


def test_an_nccl_warn_followed_by_more_nccl_output_is_not_the_end(tmp_path):
    src = (FIX / "healthy.rank0.log").read_text(encoding="utf-8").splitlines()
    lines = src[:20] + ["g148:14937:69361 [0] misc/shmutils.cc:93 NCCL WARN Call to open failed: No such file"] + src[20:]
    assert _errors(lines) == []


def test_a_library_probe_warn_at_the_end_is_not_a_failure():
    # b/nccl_nccl_573's probe: NCCL goes on without libibverbs
    assert _errors(["n:1:1 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]"]) == []


# ----------------------------------------------------------------------------- errno and getaddrinfo


@pytest.mark.parametrize("line, fid", [
    # torch's DistNetworkError format: the errno as "code: -N, name: ENAME"
    ("torch.distributed.DistNetworkError: The server socket has failed to bind. port: 29500, useIpv6: false, "
     "code: -99, name: EADDRNOTAVAIL, message: cannot assign requested address", "wrong_network_interface"),
    ("torch.distributed.DistNetworkError: The client socket has failed to connect. code: -111", "rendezvous_timeout"),
    # getaddrinfo cannot resolve the rendezvous host
    ("socket.gaierror: [Errno -2] Name or service not known", "rendezvous_timeout"),
    ("ValueError: host node-0 for the rendezvous store: Temporary failure in name resolution", "rendezvous_timeout"),
])
def test_socket_failures_name_their_cause_by_errno(line, fid):
    assert _fact(line) == fid


@pytest.mark.parametrize("line", [
    "RuntimeError: worker exited with code 99",  # an exit status is no errno, and no socket
    "Process 12 finished with exit code 111 after the rendezvous",  # positive "code N" is an exit status
    "[W socket.cpp:401] [c10d] getaddrinfo failed for [node-0]: Name or service not known",  # c10d's retried notice
    "requests.get failed: Name or service not known",  # no socket/rendezvous context
])
def test_the_same_numbers_and_words_elsewhere_name_nothing(line):
    assert _fact(line) is None


def test_every_rendezvous_error_class_is_a_rendezvous_failure():
    sh = default_shapes()
    for cls in ("torch.distributed.elastic.rendezvous.api.RendezvousConnectionError",
                "torch.distributed.elastic.rendezvous.api.RendezvousStateError",
                "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError"):
        assert sh.classify(cls, "The connection to the C10d store has failed.") == "rendezvous_timeout", cls
    assert sh.classify("ConnectionError", "The connection to the store has failed.") is None


# ----------------------------------------------------------------------------- healthy shapes stay quiet

_TB = [
    "Traceback (most recent call last):",
    '  File "/usr/lib/python3.12/site-packages/app/plugins.py", line 40, in load',
    "    entry = manifest['entry_point']",
    "ValueError: plugin manifest has no entry point",
]


def test_a_traceback_logged_at_warning_and_recovered_from_is_no_failure():
    lines = ["INFO 06-04 22:38:30 [app.py:10] starting",
             "WARNING 06-04 22:38:31 [plugins.py:44] optional plugin failed to load, going on without it",
             *_TB,
             "INFO 06-04 22:38:32 [app.py:20] loaded 3 plugins"]
    fs = diagnose_lines(lines)
    assert _errors(lines) == []
    # still shown, as what it is
    assert [(f.id, f.severity) for f in fs if f.severity != "info"] == [("unhandled_exception", "warning")]


def test_the_same_traceback_ending_the_log_is_a_failure():
    lines = ["INFO 06-04 22:38:30 [app.py:10] starting",
             "WARNING 06-04 22:38:31 [plugins.py:44] optional plugin failed to load, going on without it", *_TB]
    assert _errors(lines) != []


def test_an_uncaught_traceback_after_an_info_line_stays_a_failure():
    # an uncaught exception's traceback follows whatever was logged last (INFO): nothing was handled
    lines = ["INFO 06-04 22:38:30 [app.py:10] starting", *_TB, "INFO 06-04 22:38:32 [atexit.py:1] cleaning up"]
    assert _errors(lines) != []


def test_a_failure_the_server_went_on_past_is_no_failure():
    lines = ["INFO 06-04 22:38:30 [app.py:10] starting", *_TB,
             "(APIServer pid=1) INFO 03-27 10:05:12 [api_server.py:1880] Starting vLLM API server 0 on http://0.0.0.0:8000",
             "INFO:     Application startup complete."]
    assert _errors(lines) == []


# ----------------------------------------------------------------------------- the rank that never joined the rendezvous
# vLLM's parallel_state line (the format of held-in vLLM excerpts): each rank announces world size
# and rank, then blocks in init_process_group until every rank has joined the store

_ENGINE = "INFO 08-31 09:50:40 llm_engine.py:174] Initializing an LLM engine (v0.5.4) with config: model='m'"


def _rdzv(rank, world=4, pid=""):
    return (f"{pid}DEBUG 08-31 09:50:46 parallel_state.py:845] world_size={world} rank={rank} local_rank={rank % 2} "
            "distributed_init_method=tcp://10.0.0.1:29500 backend=nccl")


def _logs(tmp_path, *parts):
    out = []
    for k, lines in enumerate(parts):
        p = tmp_path / f"node{k}.log"
        p.write_text("\n".join(lines) + "\n", encoding="utf-8")
        out.append(str(p))
    return out


def test_logs_stopped_in_the_rendezvous_name_the_rank_that_never_joined(tmp_path):
    paths = _logs(tmp_path, [_ENGINE, _rdzv(0), _rdzv(1, pid="(VllmWorkerProcess pid=9) ")], [_ENGINE, _rdzv(2)])
    f = next(f for f in analyse(paths).findings if f.severity != "info")
    assert (f.id, f.severity, f.title) == ("rendezvous_timeout", "error", "Rank(s) 3 of 4 never joined the rendezvous")


def test_one_log_alone_only_suspects_the_ranks_it_does_not_show(tmp_path):
    (f,) = [f for f in analyse(_logs(tmp_path, [_ENGINE, _rdzv(0), _rdzv(1)])).findings if f.severity != "info"]
    assert (f.id, f.severity) == ("rendezvous_timeout", "warning") and "2, 3 of 4" in f.title


def test_every_rank_in_the_rendezvous_names_no_absent_rank(tmp_path):
    paths = _logs(tmp_path, [_ENGINE, _rdzv(0), _rdzv(1)], [_ENGINE, _rdzv(2), _rdzv(3)])
    fs = [f for f in analyse(paths).findings if f.severity != "info"]
    assert fs and all(f.severity == "warning" and "never joined" not in f.title for f in fs)


def test_a_log_that_went_past_the_rendezvous_may_hold_the_missing_ranks(tmp_path):
    # node1 went on into NCCL init (its rendezvous line may be long gone from its last lines)
    nccl = (FIX / "healthy.rank1.log").read_text(encoding="utf-8").splitlines()[:14]
    paths = _logs(tmp_path, [_ENGINE, _rdzv(0), _rdzv(1)], [_ENGINE, *nccl])
    assert not [f for f in analyse(paths).findings if "never joined" in f.title]


# ----------------------------------------------------------------------------- allocation status codes


@pytest.mark.parametrize("line", [
    # the driver API's and ROCm's status names, in sentences no pattern has
    "RuntimeError: cuMemCreate returned CUDA_ERROR_OUT_OF_MEMORY for a 4096 MiB chunk",
    "RuntimeError: hipMalloc(&ptr, 8589934592) returned hipErrorOutOfMemory",
])
def test_allocation_status_codes_are_an_out_of_memory(line):
    assert _errors([line])[:1] == ["cuda_oom"]


def test_xla_resource_exhausted_is_an_out_of_memory():
    assert default_shapes().classify("jaxlib.xla_extension.XlaRuntimeError",
                                     "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 2.00GiB.") == "cuda_oom"


@pytest.mark.parametrize("line", [
    "INFO 06-04 22:38:31 [worker.py:1] CUDA_ERROR_OUT_OF_MEMORY handling: retry with a smaller chunk enabled",
    "RESOURCE_EXHAUSTED limits: 3 requests per second",
])
def test_the_same_names_in_a_notice_are_no_failure(line):
    assert _errors([line]) == []


# ----------------------------------------------------------------------------- the loader's and the op registry's words


@pytest.mark.parametrize("line", [
    # a/other_flashattention_867's line (no "ImportError:" before it), cut
    "/.local/lib/python3.10/site-packages/flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so: undefined symbol: "
    "_ZN2at4_ops15sum_IntList_out4callERKNS_6TensorEN3c1016OptionalArrayRefIlEEbSt8optional",
    # ld.so's wording for an executable, and an op namespace the build lacks
    "python3: symbol lookup error: /usr/lib/libnccl.so.2: undefined symbol: cudaGetDriverEntryPointByVersion",
    "RuntimeError: operator _C::rms_norm does not exist",
])
def test_loader_and_operator_facts_name_a_broken_install_anywhere_in_the_log(line):
    # followed by more output: a line pattern, not only the log's last words
    assert _errors([line, "INFO 06-04 22:38:32 [app.py:20] still starting"])[:1] == ["broken_install"]


@pytest.mark.parametrize("line", [
    "INFO 06-04 22:38:31 [x.py:1] checked 214 symbols: no undefined symbol in libfoo",
    "RuntimeError: the operator you asked for does not exist",  # no namespace::name
])
def test_the_same_words_without_the_structure_name_nothing(line):
    assert "broken_install" not in _errors([line, "INFO 06-04 22:38:32 [app.py:20] still starting"])


# ----------------------------------------------------------------------------- CUDA status enums


@pytest.mark.parametrize("line, fid", [
    # runtime (cudaError*) and driver API (CUDA_ERROR_*) statuses in sentences no pattern has
    ("RuntimeError: cudaMemcpyAsync returned cudaErrorLaunchTimeout", "cuda_error"),
    ("RuntimeError: cuModuleLoadData failed: CUDA_ERROR_NO_BINARY_FOR_GPU", "cuda_error"),
    ("RuntimeError: cudaGetDeviceCount returned cudaErrorNoDevice", "no_gpu_visible"),
    ("RuntimeError: cuInit failed: CUDA_ERROR_NO_DEVICE", "no_gpu_visible"),
    ("RuntimeError: cuInit failed: CUDA_ERROR_INSUFFICIENT_DRIVER", "cuda_driver_too_old"),
    ("RuntimeError: cuInit failed: CUDA_ERROR_SYSTEM_NOT_READY", "gpu_fabric_not_ready"),
    # the specific status wins over the generic one
    ("RuntimeError: cudaMallocAsync returned cudaErrorMemoryAllocation", "cuda_oom"),
])
def test_cuda_status_enums_name_their_cause(line, fid):
    assert _errors([line])[:1] == [fid]


@pytest.mark.parametrize("line", [
    # statuses that say nothing failed: polled for, or peer access already set up
    "DEBUG 06-04 22:38:31 [stream.py:1] event query: cudaErrorNotReady, polling again",
    "x.cc:12 cudaDeviceEnablePeerAccess returned cudaErrorPeerAccessAlreadyEnabled; continuing",
    "x.cc:12 cuCtxEnablePeerAccess: CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED; continuing",
])
def test_cuda_statuses_that_are_no_failure_name_nothing(line):
    assert _errors([line, "INFO 06-04 22:38:32 [app.py:20] still starting"]) == []
