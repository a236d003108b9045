"""More failures read by structure (issue 31): a SIGKILL however its parent words it, a manager
killing for memory, env's "No such file" for a #! program, bare ``Exception:`` and classes of a
package's errors module, a stop someone asked for as the log's last words, and message shapes
(an engine's version against the runtime's, a KV cache counted at zero, an RPC that got no answer,
the rendezvous timing out, a model class said unsupported, a parallel size beyond this node's
GPUs), a numbered native stack cut from the last words and read for an engine's deserialisation,
a failure that names nothing while NCCL sets up, a Python traceback cut before its exception, a
planned memory peak above the memory available on unified memory, the GPU runtime or its hook
failing as a container starts; and a virtual interface among NCCL's socket interfaces, which is no
error by itself.  Each with a benign counterpart it must not fire on.

The lines follow the tools' real formats: Python's ``<Signals.SIGKILL: 9>``, Go's ``signal:
killed``, Kubernetes' eviction message, torch's c10d store messages, Ray's list of "common causes"
of a dead worker (which names the OOM killer as one possibility among others).
"""

from __future__ import annotations

import pytest

from sparktui.diagnosis import last_words as lw
from sparktui.diagnosis.exc_shapes import default_shapes, parse

from corpus_helpers import body, diagnose_lines

CTX = "INFO 12-01 10:00:00 [model_runner.py:100] Loading model weights took 30.1 GB"


def _ids(lines: list[str]) -> dict[str, str]:
    return {f.id: f.severity for f in diagnose_lines(lines)}


def _w(lines: list[str]) -> list[tuple[int, str]]:
    return list(enumerate(lines, 1))


# ----------------------------------------------------------------------------- SIGKILL and memory kills

@pytest.mark.parametrize("line", [
    "Worker died with <Signals.SIGKILL: 9>",
    "signal: killed",
    "    Exit Code:    137",
    "subprocess.CalledProcessError: Command '['python', 'serve.py']' returned non-zero exit status -9.",
    "ERROR: Container killed due to memory usage",
])
def test_a_sigkill_or_a_kill_for_memory_is_the_oom_killer(line):
    got = _ids([CTX, line])
    assert got.get("host_oom_killed") == "error", got


def test_a_list_of_possible_causes_that_names_the_oom_killer_is_not_an_oom_kill():
    # Ray's report of a dead worker lists what might have killed it; the death is Ray's finding
    lines = [CTX, "The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR",
             "Worker exit detail: Worker unexpectedly exits with a connection error code 2. End of file. "
             "Some common causes include: (1) the process was killed by the OOM killer due to high memory usage, "
             "(2) ray stop --force was called"]
    assert "host_oom_killed" not in _ids(lines)
    assert lw.facts(_w(["(1) the process was killed by the OOM killer due to high memory usage,"]),
                    ["host_oom_killed"], quiet=True) is None


def test_a_sigkill_sent_after_a_shutdown_request_is_the_stop():
    lines = [CTX, "INFO 12-01 10:00:05 [api_server.py:1] Received SIGTERM, shutting down",
             "WARNING 12-01 10:00:35 [api_server.py:1] workers did not exit in 30 s, sending SIGKILL"]
    got = _ids(lines)
    assert not any(s in ("error", "warning") for s in got.values()), got


def test_the_oom_killer_enabled_notice_is_nothing():
    lines = [CTX, "INFO 12-01 10:00:01 [ray_utils.py:1] Ray's memory monitor (OOM killer) is enabled: threshold 0.95"]
    assert not any(s in ("error", "warning") for s in _ids(lines).values())


# ----------------------------------------------------------------------------- env's not found

def test_env_not_finding_the_interpreter_is_a_broken_install():
    got = _ids([CTX, "/usr/bin/env: 'python': No such file or directory"])
    assert "broken_install" in got, got


def test_env_not_finding_a_file_mid_log_is_nothing():
    lines = [CTX, "/usr/bin/env: 'python': No such file or directory",
             "INFO 12-01 10:00:02 [launcher.py:1] falling back to python3",
             "INFO 12-01 10:00:03 [api_server.py:1] Starting vLLM API server on http://0.0.0.0:8000"]
    assert "broken_install" not in _ids(lines)


# ----------------------------------------------------------------------------- exception classes

def test_bare_exception_and_an_errors_module_class_parse():
    assert parse("Exception: init_process_group timed out") == ("Exception", "init_process_group timed out")
    assert parse("zmq.error.Again: Resource temporarily unavailable") == \
        ("zmq.error.Again", "Resource temporarily unavailable")
    assert parse("requests.exceptions.ConnectTimeout: x") == ("requests.exceptions.ConnectTimeout", "x")
    # a capitalised word after a plain module path is not a class
    assert parse("errors.Summary: 3 warnings") == ("errors.Summary", "3 warnings")
    assert parse("Summary: 3 warnings") is None


# ----------------------------------------------------------------------------- message shapes

@pytest.mark.parametrize("line, fid", [
    ("RuntimeError: Engine was built with TensorRT-LLM 0.12.0 but the runtime is 0.15.0; please rebuild the engine",
     "trt_engine_version_mismatch"),
    ("AssertionError: The tensorrt_llm version of the engine (0.9.0) does not match the installed version (0.10.0)",
     "trt_engine_version_mismatch"),
    ("RuntimeError: [TensorRT-LLM][ERROR] Assertion failed: The number of blocks in the KV cache pool is 0.",
     "kv_cache_oom"),
    ("TimeoutError: Timed out waiting for RPC response after 300s", "rpc_timeout"),
    ("zmq.error.Again: Resource temporarily unavailable", "rpc_timeout"),
    ("RuntimeError: Worker failed to respond within 60 seconds (collective_rpc timeout)", "rpc_timeout"),
    ("TimeoutError: The server socket has timed out while trying to connect to (node1, 5000) after 300 seconds",
     "rendezvous_timeout"),
    ("Exception: init_process_group timed out: waiting for 1 of 2 ranks to join", "rendezvous_timeout"),
    ("NotImplementedError: Architecture Gemma9ForCausalLM not supported", "unsupported_architecture"),
    ("KeyError: 'model type deepseek_v99 not supported'", "unsupported_architecture"),
    ("ValueError: Tensor parallel size (4) cannot be larger than the number of available GPUs (2).",
     "multinode_executor_misconfig"),
    ("RuntimeError: run on 2 nodes but the distributed executor backend is mp", "multinode_executor_misconfig"),
    ("AttributeError: 'Qwen2Config' object has no attribute 'rope_theta'", "transformers_version_mismatch"),
    ("RuntimeError: unable to write to file </torch_123_456_0>: No space left on device (28)", "shm_too_small"),
])
def test_message_shapes_name_their_cause(line, fid):
    assert default_shapes().classify_line(line) == fid
    assert _ids([CTX, line]).get(fid) == "error"


@pytest.mark.parametrize("line", [
    "RuntimeError: TensorRT engine built for 0.12.0 loaded fine",  # no mismatch said
    "INFO kv cache usage 0.0%",
    "ValueError: max_model_len 4096 is 0 tokens more than needed",
    "ValueError: Qwen2ForCausalLM does not support LoRA adapters of rank 512",  # a feature, not the model
    "RuntimeError: timeout must be positive",
    "AttributeError: 'NoneType' object has no attribute 'shape'",
    "OSError: [Errno 28] No space left on device: '/data/checkpoints/x.pt'",  # a disk, not /dev/shm
])
def test_message_shapes_leave_other_messages_alone(line):
    assert default_shapes().classify_line(line) not in {
        "trt_engine_version_mismatch", "kv_cache_oom", "rpc_timeout", "rendezvous_timeout",
        "multinode_executor_misconfig", "transformers_version_mismatch", "shm_too_small"}


# ----------------------------------------------------------------------------- a stop on request

@pytest.mark.parametrize("last", [
    "Received signal 15 (SIGTERM), shutting down",
    "Gracefully stopping... (press Ctrl+C again to force)",
    "Terminated",
    "^C",
])
def test_a_log_that_ends_on_a_stop_request_says_so_as_info(last):
    got = _ids([CTX, "INFO 12-01 10:00:02 [api_server.py:1] Starting vLLM API server on http://0.0.0.0:8000", last])
    assert got.get("shutdown_requested") == "info", got
    assert not any(s in ("error", "warning") for s in got.values()), got


def test_a_failure_after_the_stop_request_is_the_failure():
    lines = [CTX, "Received signal 15 (SIGTERM), shutting down", "Traceback (most recent call last):",
             '  File "/x.py", line 1, in <module>', "RuntimeError: CUDA error: an illegal memory access was encountered"]
    got = _ids(lines)
    assert lw.stopped_on_request(_w(lines)) is None
    assert any(s == "error" for s in got.values()), got


def test_python_source_naming_the_signal_is_no_stop_request():
    # held-in a/vllm_open_instruct_1302_serve_http_off_main_thread behind one more prefix (compose's):
    # the traceback quotes "loop.add_signal_handler(signal.SIGINT," and that code line, read on its
    # own, made the failure "after a shutdown request" (failing_stress: silent under four prefixes)
    assert not lw.is_shutdown_request("    loop.add_signal_handler(signal.SIGINT,")
    assert lw.is_shutdown_request("Received signal 15 (SIGTERM), shutting down")
    lines = ["vllm-1  | " + t for t in body("a/vllm_open_instruct_1302_serve_http_off_main_thread")]
    assert _ids(lines).get("unhandled_exception") == "error"


def test_a_log_that_ends_serving_has_no_stop():
    lines = [CTX, "INFO:     Application startup complete.",
             'INFO:     127.0.0.1:5000 - "POST /v1/chat/completions HTTP/1.1" 200 OK']
    assert lw.stopped_on_request(_w(lines)) is None
    assert "shutdown_requested" not in _ids(lines)


# ----------------------------------------------------------------------------- native stacks, phases, plans

TRT_STACK = [
    "[TensorRT-LLM][ERROR] tensorrt_llm::common::TllmException: [TensorRT-LLM][ERROR] Assertion failed: d == a + length "
    "(/app/tensorrt_llm/cpp/tensorrt_llm/plugins/gptAttentionCommon/gptAttentionCommon.cpp:418)",
    "1       0x7fff5fed512f /opt/tritonserver/backends/tensorrtllm/libnvinfer_plugin_tensorrt_llm.so.9(+0x4512f) [0x7fff5fed512f]",
    "2       0x7fff5ff41846 tensorrt_llm::plugins::GPTAttentionPluginCommon::GPTAttentionPluginCommon(void const*, unsigned long) + 870",
    "3       0x7fff5ff58932 tensorrt_llm::plugins::GPTAttentionPluginCreator::deserializePlugin(char const*, void const*, unsigned long) + 50",
] + [f"{k}       0x7fff1afef8a6 /usr/local/tensorrt/lib/libnvinfer.so.9(+0x10d68a6) [0x7fff1afef8a6]" for k in range(4, 12)]


def test_a_numbered_native_stack_is_cut_and_a_deserialising_frame_names_the_engine():
    got = lw.failure(_w(TRT_STACK))
    assert got is not None and got.line == 1
    assert _ids(TRT_STACK).get("trt_engine_version_mismatch") == "error"


def test_a_numbered_stack_through_other_frames_names_no_engine():
    lines = [TRT_STACK[0], *(line.replace("deserializePlugin", "enqueue") for line in TRT_STACK[1:])]
    assert "trt_engine_version_mismatch" not in _ids(lines)


SGL_NCCL = [f"[2025-02-23 06:02:12 TP{k}] sglang is using nccl==2.21.5" for k in range(4)]


def test_a_cut_traceback_while_nccl_sets_up_is_a_suspected_failed_init():
    got = _ids([*SGL_NCCL, "[2025-02-23 06:04:22 TP3] Scheduler hit an exception: Traceback (most recent call last):"])
    assert got.get("nccl_comm_init_failed") == "warning", got


def test_an_exception_that_names_itself_while_nccl_sets_up_is_that_exception():
    got = _ids([*SGL_NCCL, "[2025-02-23 06:04:22 TP3] Scheduler hit an exception: Traceback (most recent call last):",
                '  File "/sglang/srt/managers/scheduler.py", line 9, in run', "ValueError: bad tokenizer path"])
    assert "nccl_comm_init_failed" not in got and got.get("unhandled_exception") == "error", got


def test_a_traceback_cut_before_its_exception_is_an_unhandled_exception():
    lines = [CTX, "ERROR 03-08 07:47:52 [multiproc_executor.py:800] WorkerProc failed to start.",
             "ERROR 03-08 07:47:52 [multiproc_executor.py:800] Traceback (most recent call last):",
             'ERROR 03-08 07:47:52 [multiproc_executor.py:800]   File "/opt/vllm/x.py", line 771, in worker_main']
    assert _ids(lines).get("unhandled_exception") == "error"


def test_a_ctrl_c_traceback_after_an_error_line_does_not_make_it_python():
    lines = [CTX, "ERROR 03-08 07:47:52 [x.py:1] disk quota low", "^CTraceback (most recent call last):",
             '  File "/usr/lib/python3.10/threading.py", line 1116, in _wait_for_tstate_lock', "KeyboardInterrupt"]
    assert lw.traceback_after(_w(lines), 2) is False


UNIFIED_PLAN = [
    "[CUDA] device 0: NVIDIA GB10, 130.7 GB VRAM, sm_121",
    "[CUDA] integrated/unified memory: expert tier shares physical RAM;",
    "       RAM budget snapshot reduced by 65.00 GB -> MemAvailable=59.0 GB",
]


def test_a_planned_peak_above_the_available_memory_on_unified_memory_is_pressure():
    got = _ids([*UNIFIED_PLAN, "[RAM_GB=100.0] cap raised 8->25: budget allows it (projected peak 98.5 GB)"])
    assert got.get("unified_memory_pressure") == "warning", got


def test_a_planned_peak_within_the_available_memory_is_nothing():
    got = _ids([*UNIFIED_PLAN, "[RAM_GB=50.0] cap raised 8->12: budget allows it (projected peak 48.5 GB)"])
    assert "unified_memory_pressure" not in got, got
    # and a discrete GPU's numbers say nothing of unified memory
    assert lw.memory_overplanned(_w(["free memory: 20 GB", "projected peak 30 GB"])) is None


def test_an_error_line_the_log_went_on_past_is_judged_by_the_message_shapes():
    lines = ["Error: 12 unresolved kernel lookup(s) for (qwen3-27b, sm_121, nvfp4)", "Mode:      solo",
             *(f"  Setting {k}:      value {k}" for k in range(12))]
    assert _ids(lines).get("broken_install") == "warning"


# ----------------------------------------------------------------------------- containers and interfaces

@pytest.mark.parametrize("line", [
    "docker: Error response from daemon: unknown or invalid runtime name: nvidia",
    "docker: Error response from daemon: failed to create task for container: failed to create shim task: OCI runtime "
    "create failed: runc create failed: unable to start container process: error during container init: error running "
    "hook #0: error running hook: exit status 1, stdout: , stderr: Auto-detected mode as 'csv': unknown.",
])
def test_the_gpu_runtime_or_its_hook_failing_is_no_gpu_not_the_entrypoint(line):
    got = _ids([line])
    assert got.get("no_gpu_visible") == "error" and "docker_entrypoint_error" not in got, got


def test_an_entrypoint_runc_could_not_exec_stays_the_entrypoint():
    got = _ids(["docker: Error response from daemon: failed to create task for container: failed to create shim task: "
                "OCI runtime create failed: runc create failed: unable to start container process: exec: \"vllm\": "
                "executable file not found in $PATH: unknown."])
    assert "docker_entrypoint_error" in got and "no_gpu_visible" not in got, got


def test_a_virtual_interface_among_nccls_socket_interfaces_is_no_error_by_itself():
    # NCCL lists every socket interface it found, whichever network carries the data (IB, or one
    # host): a veth among them is no failure unless something failed (a healthy run showed one)
    line = ("ip-172-31-0-137:14605:14673 [0] NCCL INFO NET/Socket : Using [0]ens5:172.31.0.137<0> "
            "[1]veth75fa783:fe80::14ad:64ff:fe64:b31e%veth75fa783<0>")
    got = _ids(["ip-172-31-0-137:14605:14605 [0] NCCL INFO NCCL version 2.21.5+cuda12.4", line,
                "ip-172-31-0-137:14605:14673 [0] NCCL INFO Using network IB"])
    assert not any(s == "error" for s in got.values()), got


# ----------------------------------------------------------------------------- warnings that are facts

@pytest.mark.parametrize("lines, fid", [
    (["WARNING: The following packages are not compatible: vllm 0.6.0 requires torch==2.4.0, but torch 2.5.1 is installed",
      "INFO: Started server process [1]"], "broken_install"),
    (["WARNING: sglang 0.4.0 requires transformers>=4.48, but transformers 4.45.2 is installed",
      "INFO: Started server process [1]"], "transformers_version_mismatch"),
    (["[TensorRT-LLM][WARNING] The engine was built with a different version of TensorRT-LLM (0.12.0) than the "
      "runtime (0.13.0); this may cause errors", "[TensorRT-LLM][INFO] Loaded engine size: 4000 MiB"],
     "trt_engine_version_mismatch"),
])
def test_a_version_conflict_printed_as_a_warning_is_a_warning_of_its_cause(lines, fid):
    assert _ids(lines).get(fid) == "warning"


@pytest.mark.parametrize("line", [
    "INFO: vllm 0.6.0 requires torch==2.4.0 and torch 2.4.0 is installed",
    "[TensorRT-LLM][INFO] The engine was built with TensorRT-LLM 0.13.0, the runtime's own version",
])
def test_a_requirement_that_is_met_is_nothing(line):
    assert not any(s in ("error", "warning") for s in _ids([line, "INFO: Started server process [1]"]).values())


# --------------------------------------------------------------------------- Ray's placement groups
# The formats: Ray's GetTimeoutError ("Get timed out: some object(s) not ready.") raised out of a
# framework's wait for its placement groups (NeMo-RL's virtual_cluster.py, skypilot#7257), Ray's
# autoscaler notice for a request no node can take, vLLM's Ray executor on a node without a GPU.
_PG_FRAMES = ["Traceback (most recent call last):",
              '  File "/root/sky_workdir/nemo-rl/nemo_rl/distributed/virtual_cluster.py", line 330, in _create_placement_groups_internal',
              "    ray.get(",
              '  File "/x/ray/_private/worker.py", line 2000, in get',
              "    raise value"]


def test_a_timeout_while_waiting_for_placement_groups_is_the_placement_group():
    got = _ids(_PG_FRAMES + ["ray.exceptions.GetTimeoutError: Get timed out: some object(s) not ready."])
    assert got.get("ray_placement_group_stuck") == "error"
    assert default_shapes().classify("TimeoutError", "Timed out after 180 seconds waiting for placement groups to be ready") \
        == "ray_placement_group_stuck"


def test_a_timeout_under_other_frames_or_another_error_under_them_is_no_placement_group():
    other = [_PG_FRAMES[0], '  File "/x/train.py", line 10, in fetch_batch', "    ray.get(",
             "ray.exceptions.GetTimeoutError: Get timed out: some object(s) not ready."]
    assert "ray_placement_group_stuck" not in _ids(other)
    assert "ray_placement_group_stuck" not in _ids(_PG_FRAMES + ["KeyError: 'num_gpus'"])


def test_ray_waiting_for_resources_as_the_last_words_is_a_suspected_placement_group():
    notice = ("(autoscaler +1m) Warning: The following resource request cannot be scheduled right now: {'GPU': 1.0, "
              "'CPU': 1.0}. This is likely due to all cluster resources being claimed by actors. Consider creating "
              "fewer actors or adding more nodes to this Ray cluster.")
    assert _ids([CTX, notice]).get("ray_placement_group_stuck") == "warning"
    # the request met after all: the run goes on
    assert "ray_placement_group_stuck" not in _ids([CTX, notice, CTX])


def test_vllms_ray_executor_on_a_node_without_a_gpu_is_no_gpu_visible():
    line = ("ValueError: Current node has no GPU available. current_node_resource={'CPU': 8.0}. vLLM engine cannot "
            "start without GPU. Make sure you have at least 1 GPU available in a node current_node_id='abc' "
            "current_ip='10.0.0.1'.")
    assert default_shapes().classify("ValueError", line.split(": ", 1)[1]) == "no_gpu_visible"
    assert default_shapes().classify("ValueError", "Current node has 2 GPUs available") is None
