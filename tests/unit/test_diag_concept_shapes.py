"""What a failure is about, read without the catalogue's exact sentences (issue 31): the exception
table's last-resort shapes on a failure line, the failure line above consequence last words, the
last lines read below error level when nothing failed by its shape, and three readings of shape
(a logger's "name - ERROR - " header, a program's own record after a long line, the kernel's older
OOM-killer wording).  Each with a benign counterpart.

The structural path is tested with the catalogue's line patterns switched off (``no_patterns``), as
``score_corpus.py --no-patterns`` does: a stand-in for wording no pattern knows.  Failing lines are
real lines of held-in corpus excerpts; benign ones are real lines of healthy runs or of the same
shape that say something else.
"""

from __future__ import annotations

import pytest

from sparktui.diagnosis import catalogue, lineprefix, paste
from sparktui.diagnosis.exc_shapes import default_shapes

from corpus_helpers import NCCL_2GPU, ROOT, diagnose_lines


@pytest.fixture
def no_patterns(monkeypatch):
    catalogue.default_catalogue()  # loaded (its examples checked) before its patterns are switched off
    monkeypatch.setattr(catalogue.Entry, "search", lambda self, line: None)


def _named(lines: list[str]) -> list[tuple[str, str, int | None]]:
    return [(f.id, f.severity, f.line) for f in diagnose_lines(lines) if f.severity != "info"]


# ------------------------------------------------------------------ last-resort message shapes

@pytest.mark.parametrize("message, fid", [
    ("[PG 5 Rank 0] Heartbeat monitor timed out! Process will be terminated after dumping debug info.",
     "nccl_watchdog_stuck"),
    ("[PG ID 0 PG GUID 0(default_pg) Rank 7] ProcessGroupNCCL's watchdog got stuck for 480 seconds without making "
     "progress in monitoring enqueued collectives.", "nccl_watchdog_stuck"),
    ("[Rank 1] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, "
     "subsequent GPU operations might run on corrupted/incomplete data.", "nccl_watchdog_timeout"),
    ("Timed out waiting for the allreduce of bucket 3", "nccl_watchdog_timeout"),
    ("Detected mismatch between collectives on ranks. Rank 0 is running collective: CollectiveFingerPrint("
     "OpType=ALLREDUCE), but Rank 1 is running collective: REDUCE.", "nccl_collective_mismatch"),
    ("MQLLMEngine is already dead, terminating server process", "engine_dead"),
    ("Engine core proc EngineCore_DP0 died unexpectedly, shutting down client.", "engine_dead"),
    ("alloc_tensor_range: failed to allocate CUDA0 buffer of size 151851674624", "cuda_oom"),
    ("The actor is dead because its worker process has died. Worker exit type: USER_ERROR Worker exit detail: "
     "Task was killed due to the node running low on memory.", "host_oom_killed"),
    ("The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR Worker exit detail: "
     "Worker unexpectedly exits with a connection error code 2.", "ray_worker_missing"),
    ("Raylet is terminated: ip=172.29.58.133, id=6ad361c6. Termination is unexpected.", "ray_worker_missing"),
    ("Couldn't reconnect to GCS server. The last attempted GCS server address was 10.42.0.44:43507",
     "ray_gcs_unreachable"),
    ("Failed to register worker 01000000ffffffffffffffffffffffffffffffffffffffffffffffff to Raylet. IOError: ",
     "ray_worker_register_failed"),
    ("Error: No available node types can fulfill resource request {'CPU': 1.0, 'GPU': 1.0}.",
     "ray_placement_group_stuck"),
    ("failed to start GRPC service: Unavailable - Socket '0.0.0.0:2222' already in use", "port_in_use"),
    ("Process: 444114 ExecStart=/usr/bin/nv-fabricmanager -c /usr/share/nvidia/nvswitch/fabricmanager.cfg "
     "(code=exited, status=1/FAILURE)", "gpu_fabric_not_ready"),
    ("docker: Error response from daemon: unknown or invalid runtime name: nvidia", "no_gpu_visible"),
    ("Failed to initialize NVML: Unknown Error", "no_gpu_visible"),
    ("terminate called after throwing an instance of 'c10::CUDAError'", "cuda_error"),
    ("Internal Error (Engine deserialization failed.)", "trt_engine_version_mismatch"),
    ("Gloo connectFullMesh failed with [../third_party/gloo/gloo/transport/tcp/pair.cc:144] no error",
     "wrong_network_interface"),
    ("Failed to load NCCL library from libnccl.so.2 .It is expected if you are not running on NVIDIA/AMD GPUs.",
     "broken_install"),
    ("Could not load library libcudnn_ops_infer.so.8. Error: libcudnn_ops_infer.so.8: cannot open shared object",
     "broken_install"),
    ("UCP API version is incompatible: required >= 1.20, actual 1.18.0", "broken_install"),
    ("No module named 'vllm._C'", "broken_install"),
    ("model weights not found in /models/llama-3-70b", "model_path_missing"),
    ("gguf_init_from_file: invalid magic characters 'ggjt'", "model_path_missing"),
    ("unable to get number of CUDA devices while building BackendConfigMap: (804) forward compatibility was "
     "attempted on non supported HW", "cuda_driver_too_old"),
    ("nvidia-docker | 2016/06/07 18:49:33 Error: unsupported CUDA version: driver 7.0 < image 7.5",
     "cuda_driver_too_old"),
    ("This kernel only supports sm100f.", "cuda_error"),
    ("ptxas /tmp/tmpjbxlnipm.ptx, line 180; error   : Feature '.bf16' requires .target sm_80 or higher",
     "dtype_unsupported_gpu"),
    ("[11/10/2023-06:30:40] [TRT] [E] 2: [virtualMemoryBuffer.cpp::resizePhysical::140] Error Code 2: OutOfMemory "
     "(no further information)", "cuda_oom"),
    ("[TRT] [W] Requested amount of GPU memory (24793579520 bytes) could not be allocated.", "cuda_oom"),
    ("ERROR (catatonit:2): failed to exec pid1: No such file or directory", "docker_entrypoint_error"),
    ("[FATAL tini (7)] exec /usr/local/bin/serve failed: No such file or directory", "docker_entrypoint_error"),
    ("Worker failed with error 'Could not find nvcc and default cuda_home='/usr/local/cuda' doesn't exist'",
     "broken_install"),
    ("The worker group startup timed out after 30.0 seconds waiting for 8 workers.", "ray_placement_group_stuck"),
    ("placement group bundle index 6 is invalid. Valid placement group indexes: 0-4", "ray_placement_group_stuck"),
])
def test_a_failure_message_names_what_it_is_about(message, fid):
    assert default_shapes().classify("", message) == fid


@pytest.mark.parametrize("message", [
    # what healthy runs print with the same nouns
    "ProcessGroupNCCL initialized with following options: NCCL_ASYNC_ERROR_HANDLING: 3, TIMEOUT(ms): 600000",
    "Watchdog thread started for process group 0",
    "llm_load_tensors:      CUDA0 buffer size =  3577.56 MiB",
    "Engine core started in 41.2 seconds",
    "Started a local Ray instance. View the dashboard at 127.0.0.1:8265",
    "Connected to GCS at 127.0.0.1:6379",
    "Gloo connectFullMesh completed in 12 ms",
    "Loaded NCCL library from libnccl.so.2",
    "model weights loaded from /models/llama-3-70b in 12.3 s",
    "Using the nv-fabricmanager service of the host",
    "| NVIDIA-SMI 580.95.05              Driver Version: 580.95.05      CUDA Version: 13.0     |",
    "Kernel supports sm_80, sm_90 and sm_121",
    "gguf magic and version checked",
    # a server's registry of loaded models is no model file
    "Model not found in the model list, uid: f593ad50-8e69-11ee-93cf-437b86dbc17b",
    "Feature 'bf16' enabled for target sm_90",
    "Worker group started in 4.2 seconds with 8 workers",
    "Found nvcc at /usr/local/cuda/bin/nvcc",
])
def test_the_same_nouns_in_a_healthy_line_name_none_of_those_causes(message):
    assert default_shapes().classify("", message) is None


# ------------------------------------------------------------------ the failure above the last words

NCCL_LOAD = ("ERROR 04-22 15:53:32 pynccl.py:44] Failed to load NCCL library from libnccl.so.2 .It is expected "
             "if you are not running on NVIDIA/AMD GPUs.")


def test_consequence_last_words_are_explained_by_the_failure_line_above_them(no_patterns):
    lines = [NCCL_LOAD, "INFO 04-22 15:53:33 worker.py:90] cleaning up", "worker exited with exit code 1"]
    assert _named(lines)[:1] == [("broken_install", "error", 1)]


def test_the_same_words_logged_at_info_above_them_explain_nothing(no_patterns):
    lines = [NCCL_LOAD.replace("ERROR", "INFO", 1), "INFO 04-22 15:53:33 worker.py:90] cleaning up",
             "worker exited with exit code 1"]
    assert [n[0] for n in _named(lines)] == ["unrecognised_failure"]


CUT_TRACEBACK = [
    "(EngineCore pid=829571) Process EngineCore:",
    "(EngineCore pid=829571) Traceback (most recent call last):",
    '(EngineCore pid=829571)   File "/home/thor2/vllm-main/vllm/v1/engine/core.py", line 1084, in run_engine_core',
    "(EngineCore pid=829571)     engine_core = EngineCoreProc(*args, engine_index=dp_rank, **kwargs)",
]


def test_a_plain_line_above_a_cut_traceback_names_what_failed(no_patterns):
    # a kernel built for other GPUs printing so, then the engine's traceback cut before its exception
    lines = ["This kernel only supports sm100f."] * 2 + CUT_TRACEBACK
    assert _named(lines)[:1] == [("cuda_error", "error", 2)]


def test_a_status_line_above_a_cut_traceback_names_nothing(no_patterns):
    lines = ["INFO 04-22 15:53:32 kernels.py:10] This kernel only supports sm100f, using the fallback"] + CUT_TRACEBACK
    assert [n[0] for n in _named(lines)] == ["unhandled_exception"]


# ------------------------------------------------------------------ the last lines below error level

UCX_WARN = ("[1748179345.114806] [beaker:3019122:0]     ucp_context.c:2257 UCX  WARN  UCP API version is "
            "incompatible: required >= 1.20, actual 1.18.0 (loaded from /home/u/local/ucx/lib/libucp.so.0)")


def test_a_log_that_ends_on_a_warning_naming_a_cause_is_not_silent(no_patterns):
    assert _named([UCX_WARN, "Backend UCX was instantiated"]) == [("broken_install", "warning", 1)]


def test_a_warning_naming_a_cause_is_read_before_a_persons_ctrl_c(no_patterns):
    # the person gave up on it: the echoed ^C and the prompt back are no part of its last lines
    lines = [UCX_WARN, "Backend UCX was instantiated"] + ["waiting for the backend"] * 9 + ["^C", "$ "]
    assert _named(lines)[:1] == [("broken_install", "warning", 1)]


@pytest.mark.parametrize("last", [
    # a status report at INFO (vLLM's KV cache size on a healthy start), a probe its caller goes on
    # past (NCCL looking for the verbs library, torch's client socket retrying), a fallback
    "INFO 06-02 11:03:56 [loggers.py:134] vllm cache_config_info with initialization after num_gpu_blocks is: 70688",
    "v100-gpu-5:9210:9210 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]",
    "[W socket.cpp:697] [c10d] The client socket has failed to connect to [node-1]:28133 (errno: 99).",
    "WARNING: UCP API version is incompatible, falling back to TCP",
])
def test_status_lines_probes_and_fallbacks_at_the_end_name_nothing(no_patterns, last):
    assert _named(["INFO starting", last]) == []


# ------------------------------------------------------------------ shapes of lines

def test_a_logger_header_without_a_time_gives_its_level():
    assert lineprefix.split("gpustack.worker.backends.vllm - ERROR - Failed to derive max model length: x") == \
        ("|ERROR|", "Failed to derive max model length: x")
    assert lineprefix.split("root - WARNING - disk almost full") == ("|WARNING|", "disk almost full")


@pytest.mark.parametrize("line", ["Some text - with dashes - here", "a - b", "vllm - the fast one - ERROR handling"])
def test_dashes_in_prose_are_no_logger_header(line):
    assert lineprefix.split(line) == ("", line)


PLATFORM_WARNING = ("WARNING: The requested image's platform (linux/amd64) does not match the detected host platform "
                    "(linux/arm64/v8) and no specific platform was requested")


def test_a_programs_own_record_after_a_long_line_is_no_wrapped_piece(no_patterns):
    lines = [PLATFORM_WARNING, "exec /bin/sh: exec format error"]
    assert paste.hard_wrap_width(lines) is None
    assert _named(lines) == [("unrecognised_failure", "error", 2)]


def test_a_line_broken_inside_a_word_is_still_a_wrap():
    width = len(PLATFORM_WARNING)
    lines = [PLATFORM_WARNING[:width - 4], PLATFORM_WARNING[width - 4:] + " and more"]
    assert paste.hard_wrap_width(lines) == width - 4


def test_the_older_kernels_oom_kill_wording_is_the_oom_killer(no_patterns):
    lines = ["[5193605.506952] [  62769]     0 62769     4382      411    77824        0          -998 cp",
             "[5193605.506956] Memory cgroup out of memory: Kill process 62685 (bash) score 0 or sacrifice child"]
    assert [n[0] for n in _named(lines)] == ["host_oom_killed"]
    # a process table of the kernel's report alone, the kill not in it: nothing
    assert _named(lines[:1]) == []


# ------------------------------------------------------------------ a launcher's SSH failure the job went past

SSH_REFUSED = "ssh: connect to host node2 port 22: Connection refused"


def _nccl_run() -> list[str]:
    return (NCCL_2GPU / "healthy.rank0.log").read_text(encoding="utf-8").splitlines()


def test_an_ssh_failure_the_job_never_got_past_is_the_failure():
    lines = _nccl_run()
    k = next(i for i, t in enumerate(lines) if "Init COMPLETE" in t)
    fs = [(f.id, f.severity) for f in diagnose_lines(lines[:k] + [SSH_REFUSED])]
    assert ("launcher_ssh_failed", "error") in fs


def test_an_ssh_failure_before_every_rank_completed_nccl_init_is_a_warning():
    # the real two-GPU run: its communicator completed init after the refused login, so the ranks started
    fs = [(f.id, f.severity) for f in diagnose_lines([SSH_REFUSED] + _nccl_run())]
    assert ("launcher_ssh_failed", "warning") in fs and not any(s == "error" for _, s in fs)


def test_a_c_librarys_failed_check_under_its_source_location_is_a_failure(no_patterns):
    line = "/opt/nvshmem/nvshmem/src/modules/transport/ibgda/ibgda.cpp:1889: NULL value cannot allocate mlx5dv_devx_uar"
    assert _named([line]) == [("unrecognised_failure", "error", 1)]
    # the same location reporting what it set up is no failure
    assert _named(["/opt/nvshmem/nvshmem/src/modules/transport/ibgda/ibgda.cpp:1889: allocated 8 queues"]) == []


# ------------------------------------------------------------------ the shell's "Killed", a hint how to stop

def test_the_shells_killed_after_a_progress_bar_is_the_oom_killers_signal(no_patterns):
    line = "Loading checkpoint shards:  38%|██████▊           | 3/8 [00:02<00:03,  1.28it/s]Killed"
    assert [n[0] for n in _named(["python knowledge_based_chatglm.py", line])] == ["host_oom_killed"]
    # the word inside a sentence is no report of a signal
    assert _named(["python x.py", "2 workers Killed earlier were restarted by the supervisor"]) == []


UVICORN = "INFO:     Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)"
ENGINE_GONE = ("(APIServer pid=1) ERROR 05-20 10:11:12 [core_client.py:562] Engine core proc EngineCore_DP0 died "
               "unexpectedly, shutting down client.")


def _serving() -> list[str]:
    lines = (ROOT / "tests" / "fixtures" / "vllm-cpu" / "serve.log").read_text(encoding="utf-8").splitlines()
    return lines[:next(i for i, t in enumerate(lines) if "Application startup complete" in t) + 1]


def test_an_engine_death_after_uvicorns_how_to_quit_hint_is_a_death():
    fs = [(f.id, f.severity) for f in diagnose_lines(_serving() + [UVICORN, ENGINE_GONE])]
    assert ("engine_dead", "error") in fs


def test_an_engine_death_after_a_real_stop_request_is_how_a_stop_looks():
    fs = [(f.id, f.severity) for f in diagnose_lines(_serving() + [UVICORN, "INFO:     Shutting down", ENGINE_GONE])]
    assert ("engine_dead", "info") in fs and not any(s == "error" for _, s in fs)
