"""Shapes of failure from tools outside the Python stack (issue 31): a JVM's stack trace, a localised
program's error level, pip's resolver, nvidia-smi -q, CUTLASS's status, a Python logger's header
inside a Ray actor's prefix; each with a benign counterpart it must not fire on.

The lines follow the tools' real formats (the JVM's "Caused by:" chain and "... N more", pip's
"X requires Y, but you have Y Z which is incompatible.", nvidia-smi -q's "FB Memory Usage" section
as a GB10 prints it, per nvtop's GB10 report); CUTLASS's lines are verbatim from a held-in case.
"""

from __future__ import annotations

from sparktui.diagnosis import last_words as lw
from sparktui.diagnosis import lineprefix
from sparktui.diagnosis.exc_shapes import parse

from corpus_helpers import body, diagnose_lines, fact_of


def _w(lines: list[str]) -> list[tuple[int, str]]:
    return list(enumerate(lines, 1))


def _ids(lines: list[str]) -> dict[str, str]:
    return {f.id: f.severity for f in diagnose_lines(lines)}


# ----------------------------------------------------------------------------- the JVM

JVM_CHAIN = [
    "INFO  Worker - starting on port 7077",
    'Exception in thread "main" java.lang.RuntimeException: the worker could not start',
    "\tat org.example.cluster.Worker.start(Worker.java:88)",
    "\tat org.example.Main.main(Main.java:31)",
    "Caused by: java.io.FileNotFoundException: /models/config.json (No such file or directory)",
    "\tat java.base/java.io.FileInputStream.open0(Native Method)",
    "\tat org.example.cluster.Loader.read(Loader.java:20)",
    "\t... 2 more",
]


def test_jvm_chain_names_its_root_cause_not_the_wrapper():
    got = lw.failure(_w(JVM_CHAIN))
    assert got is not None and got.kind == "exception"
    assert got.exc_class == "java.io.FileNotFoundException" and got.line == 5
    assert not got.weak


def test_jvm_thread_head_parses_as_the_exception():
    assert parse('Exception in thread "main" java.lang.IllegalStateException: no head') == \
        ("java.lang.IllegalStateException", "no head")
    assert parse("Caused by: java.net.ConnectException: Connection refused") == \
        ("java.net.ConnectException", "Connection refused")


def test_jvm_heap_exhaustion_is_not_the_gpu_running_out():
    lines = ["INFO loading", "java.lang.OutOfMemoryError: Java heap space",
             "\tat java.base/java.util.Arrays.copyOf(Arrays.java:3512)"]
    got = _ids(lines)
    assert "cuda_oom" not in got and any(s == "error" for s in got.values()), got
    # a GPU's own OutOfMemoryError still is
    assert "cuda_oom" in _ids(["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."])


def test_jvm_exception_handled_and_logged_on_is_no_failure():
    # the stack a logger printed for an exception it caught, then the program went on
    lines = ["WARN  Client - connect failed, retrying in 5 s",
             "java.net.ConnectException: Connection refused",
             "\tat org.example.cluster.Client.connect(Client.java:142)",
             "\t... 3 more",
             "INFO  Client - connected to the head",
             *(f"INFO  Worker - task {k} done" for k in range(lw.LAST))]
    assert lw.failure(_w(lines)) is None
    # the same stack as the log's last words is its failure
    assert lw.failure(_w(lines[:4])).exc_class == "java.net.ConnectException"


# ----------------------------------------------------------------------------- a localised error level

def test_localised_error_level_is_an_error_line():
    got = lw.failure(_w(["INFO 加载模型权重", "错误：无法连接到服务器，连接被拒绝"]))
    assert got is not None and got.kind == "error line"


def test_localised_word_for_error_inside_a_metric_is_nothing():
    # "错误率" is an error *rate*: a metric, not a level
    assert lw.failure(_w(["INFO 加载模型权重", "错误率：0.1%", "完成"])) is None


# ----------------------------------------------------------------------------- pip's resolver

PIP = ["ERROR: pip's dependency resolver does not currently take into account all the packages that are "
       "installed. This behaviour is the source of the following dependency conflicts.",
       "vllm 0.6.3 requires transformers>=4.45.2, but you have transformers 4.40.0 which is incompatible.",
       "Successfully installed vllm-0.6.3"]


def test_pip_conflict_on_transformers_names_the_mismatch():
    assert fact_of(PIP[1]) == "transformers_version_mismatch"
    assert _ids(PIP).get("transformers_version_mismatch") == "error"  # pip's own ERROR level


def test_pip_conflict_on_another_package_is_a_broken_install_warning():
    lines = ["Collecting vllm", "vllm 0.6.3 requires torch==2.4.0, but you have torch 2.5.1 which is incompatible.",
             "Successfully installed vllm-0.6.3"]
    assert fact_of(lines[1]) == "broken_install"
    assert _ids(lines).get("broken_install") == "warning"


def test_pip_requirement_satisfied_is_nothing():
    lines = ["Requirement already satisfied: transformers>=4.45.2 in /usr/lib/python3/dist-packages (from vllm) (4.46.0)",
             "Successfully installed vllm-0.6.3"]
    assert fact_of(lines[0]) is None
    assert not {i: s for i, s in _ids(lines).items() if s != "info"}


# ----------------------------------------------------------------------------- nvidia-smi -q

def _smi_q(total: str) -> list[str]:
    return ["==============NVSMI LOG==============", "GPU 0000000F:01:00.0",
            "    Product Name                          : NVIDIA GB10",
            "    FB Memory Usage",
            f"        Total                             : {total}",
            f"        Used                              : {'N/A' if total == 'N/A' else '0 MiB'}",
            "    BAR1 Memory Usage",
            "        Total                             : N/A"]


def test_smi_query_without_fb_total_is_the_gb10_fact():
    got = lw.gpu_memory_unreported(_w(_smi_q("N/A")))
    assert got is not None and got[0] == 5 and "FB Memory Usage" in got[1]
    assert _ids(_smi_q("N/A")).get("gb10_memory_not_supported") == "info"


def test_smi_query_of_a_discrete_gpu_is_nothing():
    # BAR1's Total is N/A on many machines: only the framebuffer's section counts
    assert lw.gpu_memory_unreported(_w(_smi_q("81559 MiB"))) is None


# ----------------------------------------------------------------------------- CUTLASS's status

def test_cutlass_internal_error_is_a_build_without_this_gpu():
    lines = body("a/spark_vllm_43367_cutlass_fp8_blockscaled_120a_gb10")
    bad = next(ln for ln in lines if "cutlass error" in ln)
    ok = next(ln for ln in lines if "passes" in ln)
    assert fact_of(bad) == "broken_install"
    assert fact_of(ok) is None
    assert _ids(lines).get("broken_install") == "warning"  # the log shows no failure of its own


# ----------------------------------------------------------------------------- a logger inside a Ray actor

def test_python_logger_header_after_a_ray_actor_prefix_gives_the_level():
    line = ("(RayWorkerWrapper pid=1234, ip=127.0.0.2) 2023-04-28 13:16:52,511\tWARNING services.py:1780 -- "
            "WARNING: The object store is using /tmp instead of /dev/shm because /dev/shm has only 67108864 bytes "
            "available. This will harm performance!")
    sig, rest = lineprefix.split(lineprefix.clean(line))
    assert sig.split("|")[1] == "WARNING" and rest.startswith("WARNING: The object store")
    # the small /dev/shm it reports is a warning there, not an error
    assert _ids([line, "(RayWorkerWrapper pid=1234, ip=127.0.0.2) INFO worker.py:1553 -- Started"]) \
        .get("shm_too_small") == "warning"
    # an actor's output that starts with a number is still its output
    assert lineprefix.split("(pid=12) 12 items loaded") == ("pid=12||", "12 items loaded")


def test_ray_object_store_with_a_large_dev_shm_is_nothing():
    line = ("2026-03-01 21:22:53,038 WARNING services.py:2137 -- WARNING: The object store is using /tmp instead "
            "of /dev/shm because /dev/shm has only 1073618944 bytes available. This will harm performance!")
    assert "shm_too_small" not in _ids([line])


# ----------------------------------------------------------------------------- what a cut traceback was doing

def _cut_traceback(frame: str) -> list[str]:
    return ["Traceback (most recent call last):",
            '  File "/usr/lib/python3/site-packages/torch/distributed/elastic/agent/server/api.py", line 881, in _invoke_run',
            "    num_nodes_waiting = rdzv_handler.num_nodes_waiting()",
            frame]


def test_traceback_cut_in_the_rendezvous_store_call_is_the_rendezvous():
    lines = _cut_traceback('  File "/usr/lib/python3/site-packages/torch/distributed/elastic/rendezvous/'
                           'c10d_rendezvous_backend.py", line 115, in _call_store')
    assert _ids(lines).get("rendezvous_timeout") == "error"


def test_traceback_cut_elsewhere_in_the_agent_is_no_rendezvous():
    lines = _cut_traceback('  File "/usr/lib/python3/site-packages/torch/distributed/elastic/agent/server/api.py", '
                           'line 700, in _monitor_workers')
    got = _ids(lines)
    # (a Python traceback cut before its exception line is Python's unhandled exception)
    assert "rendezvous_timeout" not in got and got.get("unhandled_exception") == "error", got


# ----------------------------------------------------------------------------- TensorRT's None engine

def test_none_engine_from_tensorrt_is_the_engine_that_did_not_load():
    got = _ids(["[12/07/2026-10:00:00] [TRT] [I] Loaded engine size: 120 MiB",
                "AttributeError: 'NoneType' object has no attribute 'create_execution_context'"])
    assert got.get("trt_engine_version_mismatch") == "error", got
    other = _ids(["AttributeError: 'NoneType' object has no attribute 'shape'"])
    assert "trt_engine_version_mismatch" not in other and other, other


# ----------------------------------------------------------------------------- the layout, NVLS, the KV cache

def test_world_size_against_tp_times_pp_with_values_between():
    for line in ("RuntimeError: MPI size 1 != TP size 2 * PP size 1",
                 "ValueError: world_size (4) is not equal to tensor_parallel_size (2) * pipeline_parallel_size (1)",
                 "AssertionError: world_size must equal to tp_size * pp_size"):
        assert fact_of(line) == "world_size_mismatch", line
    # a layout printed as a fact, or a world bigger than tp*pp (data parallel), is no mismatch
    for line in ("INFO world_size=2 tp_size=2 pp_size=1", "INFO world size 8, tp*pp 2, data parallel 4"):
        assert fact_of(line) is None, line


def test_any_nccl_warn_of_the_nvls_transport_is_nvls():
    line = "spark1:1:2 [0] transport/nvls.cc:166 NCCL WARN Cuda failure 2 'system not yet initialized'"
    assert fact_of(line) == "nvls_multicast_failed"
    # NCCL noting that the GPU has no NVLS is how every GB10 starts
    assert fact_of("spark1:1:2 [0] NCCL INFO NVLS multicast support is not available on dev 0") is None


def test_kv_cache_shortage_in_another_engines_words():
    assert "kv_cache_oom" in _ids(["INFO loading weights", "AssertionError: Not enough memory for KV cache, try reducing --num-pages"])
    # the KV cache's size reported on a healthy start is nothing
    got = _ids(["INFO 12-07 10:00:00 [kv_cache_utils.py:1087] GPU KV cache size: 143,632 tokens",
                "INFO 12-07 10:00:00 [kv_cache_utils.py:1091] Maximum concurrency for 4,096 tokens per request: 35.07x"])
    assert "kv_cache_oom" not in got, got


# ----------------------------------------------------------------------------- a dtype a wrapper's logger warns of

def test_dtype_the_gpu_lacks_at_warning_before_the_wrapper_gives_up():
    lines = ["2025-10-01 10:00:00 | WARNING | model_runner | Bfloat16 is only supported on GPUs with compute "
             "capability of at least 8.0. Your Tesla T4 GPU has compute capability 7.5.", "Exiting."]
    assert _ids(lines).get("dtype_unsupported_gpu") == "warning"


def test_dtype_the_gpu_lacks_with_a_fallback_is_nothing():
    lines = ["2025-10-01 10:00:00 | WARNING | model_runner | bf16 is not supported on this GPU (compute "
             "capability 7.5), falling back to fp16", "INFO model loaded", "INFO serving on :8000"]
    assert "dtype_unsupported_gpu" not in _ids(lines)


# ----------------------------------------------------------------------------- /dev/shm as a paste shows it

DF_HEAD = ["$ df -h", "Filesystem      Size  Used Avail Use% Mounted on", "overlay         1.8T  800G  1.0T  45% /"]


def test_small_dev_shm_in_df_mount_or_inspect_is_shm_too_small():
    for row in ("shm              64M     0   64M   0% /dev/shm",  # df -h
                "shm                65536       0     65536   0% /dev/shm",  # df: 1K blocks
                "shm on /dev/shm type tmpfs (rw,nosuid,nodev,noexec,relatime,size=65536k,inode64)",  # mount
                "shm on /dev/shm type tmpfs (rw,nosuid,nodev,noexec,relatime,size=67108864)",  # mount, in bytes
                '            "ShmSize": 67108864,'):  # docker inspect
        assert _ids([*DF_HEAD, row]).get("shm_too_small") == "warning", row


def test_large_dev_shm_or_host_ipc_is_nothing():
    assert "shm_too_small" not in _ids([*DF_HEAD, "tmpfs            32G  1.2G   31G   4% /dev/shm"])
    # a container that shares the host's IPC keeps the 64 MiB ShmSize in its config, unused
    assert "shm_too_small" not in _ids(['            "IpcMode": "host",', '            "ShmSize": 67108864,'])


def test_torch_dump_signal_after_a_collective_timeout_is_the_watchdog():
    line = ("[rank3]:[E606 09:09:08.172519935 ProcessGroupNCCL.cpp:1987] [PG ID 0 PG GUID 0(default_pg) Rank 3] "
            "Received a dump signal due to a collective timeout from this local rank and we will try our best to "
            "dump the debug info. Last enqueued NCCL work: 1, last completed NCCL work: -1.")
    assert _ids([line]).get("nccl_watchdog_timeout") == "error"
    # the flight recorder's own notes on a healthy dump request say nothing of a timeout
    assert "nccl_watchdog_timeout" not in _ids(
        ["[rank0]:[I606 09:09:08.1 ProcessGroupNCCL.cpp:1400] [PG ID 0 PG GUID 0(default_pg) Rank 0] "
         "ProcessGroupNCCL initialization options: size: 2, global rank: 0, TIMEOUT(ms): 600000"])
