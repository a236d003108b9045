"""Never silent on wording nobody has seen (issue 31): the structural readings of a log's last words,
each with a benign counterpart, a real healthy line or log it must not fire on.

Failing lines are verbatim from held-in corpus cases (named in a comment); benign ones from held-in
healthy cases or the real vLLM CPU logs (tests/fixtures/vllm-cpu).  Most tests call last_words'
functions directly, so a catalogue pattern that knows the same wording cannot hide the detector.

A reading of structure alone (no catalogue pattern, no Python exception or traceback, no level
field of its own at ERROR/FATAL/CRITICAL) is weaker evidence: its finding is a warning.  Each such
reading asserts ``weak`` and, diagnosed with the catalogue's patterns off (``no_patterns``, as
``score_corpus.py --no-patterns``), that what it names is a warning.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sparktui.diagnosis import catalogue as _cat
from sparktui.diagnosis import last_words as lw
from sparktui.diagnosis.catalogue import default_catalogue

from corpus_helpers import ROOT, body, diagnose_lines, fact_of, held_in, line_of, named

VLLM_CPU = ROOT / "tests" / "fixtures" / "vllm-cpu"
IDS = default_catalogue().entries


def _w(lines: list[str]) -> list[tuple[int, str]]:
    return list(enumerate(lines, 1))


def _serve_tail(n: int = 12) -> list[str]:
    return (VLLM_CPU / "serve.log").read_text(encoding="utf-8").splitlines()[-n:]


@pytest.fixture
def no_patterns(monkeypatch):
    """The catalogue's line patterns off: what the structural readings name alone."""
    default_catalogue()  # loaded (its examples checked) before its patterns are switched off
    monkeypatch.setattr(_cat.Entry, "search", lambda self, line: None)


def _severities(lines: list[str]) -> dict[str, str]:
    """{id: severity} of the error and warning findings of ``lines`` fed as one source."""
    return {f.id: f.severity for f in diagnose_lines(lines) if f.severity != "info"}


def _warned(lines: list[str], fid: str | None = None) -> None:
    """``lines`` diagnosed: a warning (``fid``'s when given), and no error."""
    got = _severities(lines)
    assert got and "error" not in got.values(), got
    assert fid is None or got.get(fid) == "warning", got


# ----------------------------------------------------------------------------- prefixes lineprefix leaves

@pytest.mark.parametrize("rel, kind, cls", [
    # horovodrun's "[1]<stderr>:" tag
    ("b/pytorch_ignite_3466_horovod_comminit_unhandled_cuda", "exception", "RuntimeError"),
    # a bare time of day before the exception
    ("a/spark_localinferencelab_827_sample_tokens_timeout", "exception", "TimeoutError"),
    # a launcher's "[vllm]: " before torch's "[rank0]:": the log ends inside the traceback, on its raise
    ("a/vllm_akash_543_rank0_pynccl_comminitrank", "traceback", "RuntimeError"),
])
def test_last_words_behind_prefixes_lineprefix_does_not_read(rel, kind, cls):
    got = lw.failure(_w(body(rel)))
    assert got is not None and got.kind == kind and got.exc_class == cls
    # a Python exception (or its traceback) says it failed, whatever prefix is before it
    assert not got.weak


@pytest.mark.parametrize("prefix", ["[runner]: ", "23:02:54 "])
def test_a_level_word_found_only_behind_a_peeled_prefix_is_a_warning(prefix, no_patterns):
    # (made-up wording) a level word that only leads the message once a launcher's name or a time
    # of day is peeled off: structure alone
    lines = [prefix + "INFO starting the widget", prefix + "ERROR widget frobnication gave up"]
    got = lw.failure(_w(lines))
    assert got is not None and got.weak
    _warned(lines, "unrecognised_failure")
    # the same line with its level leading it, as every reading before these read it: an error
    assert _severities([ln[len(prefix):] for ln in lines]) == {"unrecognised_failure": "error"}


@pytest.mark.parametrize("prefix", ["[1]<stderr>:", "[vllm]: ", "23:02:54 "])
def test_a_healthy_servers_tail_behind_those_prefixes_is_no_failure(prefix):
    # tests/fixtures/vllm-cpu/serve.log: served, then stopped
    assert lw.failure(_w([prefix + ln for ln in _serve_tail()])) is None


def test_an_actors_prefix_with_nothing_after_it_is_a_blank_line():
    # a/spark_vllm_29469_docker_0112_ptxas_sm121a: the ptxas error, then a dump padded with bare
    # "(EngineCore_DP0 pid=93)" lines that pushed it out of the last words
    got = lw.failure(_w(body("a/spark_vllm_29469_docker_0112_ptxas_sm121a")))
    assert got is not None and "sm_121a" in got.message
    # the same bare prefixes after a healthy server's last lines add no failure
    assert lw.failure(_w([*_serve_tail(), "(APIServer pid=5328)", "(APIServer pid=5328)"])) is None


# ----------------------------------------------------------------------------- native stacks

def test_torchs_cpp_frames_after_the_failure_are_how_it_aborted():
    # b/nccl_deepep_106_ib_completion_error_5_multinode: ncclRemoteError, then "frame #1: ..."
    got = lw.failure(_w(body("b/nccl_deepep_106_ib_completion_error_5_multinode")))
    assert got is not None and "ncclRemoteError" in got.text
    assert got.weak  # a status enum on a line with no level: structure alone


def test_frames_after_a_warning_are_no_failure():
    # b/pytorch_heat_1003_daso_errno97_warnings_only (healthy): c10d's IPv6 warning, with frames under it
    warn = body("b/pytorch_heat_1003_daso_errno97_warnings_only")[-1]
    frames = ["frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x57 (0x7f in /x/libc10.so)",
              "frame #1: <unknown function> + 0x10a (0x7f in /x/libtorch_cpu.so)"]
    assert lw.failure(_w([warn, *frames])) is None


# ----------------------------------------------------------------------------- C status enums, failed calls

@pytest.mark.parametrize("rel", [
    "b/nccl_marin_7018_jax_comminitrankconfig_no_socket_interface",  # "ncclCommInitRankConfig(...) failed:"
    "b/nccl_nccl-tests_12_driver_insufficient_for_runtime",  # "Cuda failure common.cu:891 '...'", then nvidia-smi
    "b/ompi_horovod_310_btl_tcp_connect_docker0",  # "connect() to 172.17.0.1 failed: ...", then ifconfig
])
def test_failed_c_calls_and_status_enums_on_lines_without_a_level_are_failures(rel, no_patterns):
    got = lw.failure(_w(body(rel)))
    assert got is not None and got.kind == "error line"
    # structure alone: a warning, whatever names it
    assert got.weak
    _warned(body(rel))


def test_a_line_that_says_it_failed_wins_over_structure_alone():
    # (made-up wording) a failed C call, then an ERROR line: the ERROR line is the last words (an
    # error, as before these readings); a cut traceback's frames likewise
    got = lw.failure(_w(["zzq_open(peer=3) failed", "ERROR widget gave up"]))
    assert got is not None and not got.weak and got.line == 2
    got = lw.failure(_w(["Traceback (most recent call last):", '  File "x.py", line 3, in <module>',
                         "    zzq_open(peer=3) failed"]))
    assert got is not None and got.kind == "traceback" and not got.weak


def test_a_warning_of_structure_alone_does_not_quiet_another_sources_failure(no_patterns):
    # (made-up wording) one source's status enum names its cause as a warning; another source's
    # ERROR line is still an error
    from sparktui.diagnosis.diagnoser import Diagnoser

    d = Diagnoser()
    d.feed_lines("a", ["starting", "zzq: cudaGetDeviceCount gave cudaErrorNoDevice"])
    d.feed_lines("b", ["starting", "ERROR widget frobnication gave up"])
    d.finish()
    got = {f.id: f.severity for f in d.findings if f.severity != "info"}
    assert got == {"no_gpu_visible": "warning", "unrecognised_failure": "error"}


@pytest.mark.parametrize("rel, needle", [
    # nccl-2gpu/healthy (NCCL's INFO level): a plugin probe's return code
    (None, "vm:608:608 [1] NCCL INFO transport/net_ib.cc:852 -> 3"),
    # b/nccl_fastsocket_4_max_retry_then_connected_healthy: NCCL's INFO notes of retried connects
    ("b/nccl_fastsocket_4_max_retry_then_connected_healthy", None),
])
def test_statuses_nccl_prints_at_info_are_no_failure(rel, needle):
    lines = [needle] if rel is None else body(rel)
    assert lw.failure(_w(lines)) is None


# ----------------------------------------------------------------------------- deaths

def test_the_kernels_oom_killer_is_a_death_and_its_fact(no_patterns):
    # a/other_dockerforlinux_1001_kernel_oom_container
    lines = body("a/other_dockerforlinux_1001_kernel_oom_container")
    got = lw.failure(_w(lines))
    assert got is not None and got.kind == "process death" and got.weak
    assert fact_of(lines[0]) == "host_oom_killed"
    # the killer's words alone (no pattern): a warning
    _warned(lines, "host_oom_killed")
    # tests/fixtures/vllm-cpu/serve.log: a whole healthy server names nothing like it
    assert not [f for f in diagnose_lines((VLLM_CPU / "serve.log").read_text(encoding="utf-8").splitlines())
                if f.id == "host_oom_killed"]


def test_a_death_logged_below_error_level_is_a_warning(no_patterns):
    # b/ray_ray_29412_raylet_terminated_unexpectedly: a WARNING, then Ray's state dump
    lines = body("b/ray_ray_29412_raylet_terminated_unexpectedly")
    got = lw.failure(_w(lines))
    assert got is not None and got.quiet and got.kind == "process death"
    _warned(lines)


def test_a_death_inferred_from_its_words_is_a_warning(no_patterns):
    # (made-up wording) "terminated unexpectedly" on a line with no level: structure alone
    lines = ["starting the widget daemon", "the widget daemon terminated unexpectedly"]
    got = lw.failure(_w(lines))
    assert got is not None and got.kind == "process death" and got.weak
    _warned(lines, "unrecognised_failure")
    # a fatal signal says it died by itself: an error, as before
    assert _severities(["starting the widget daemon", "the widget daemon was killed by signal 11"]) \
        == {"unrecognised_failure": "error"}


def test_a_death_warning_the_program_went_on_past_is_no_failure():
    # b/ray_ray_8000_worker_died_warning_on_exit_success_healthy: the warning, then "success!"
    assert lw.failure(_w(body("b/ray_ray_8000_worker_died_warning_on_exit_success_healthy"))) is None


def test_an_info_line_starting_with_aborted_is_no_death():
    # a/vllm_vllm_2484_aborted_requests_info_healthy: vLLM aborts requests a client dropped
    assert lw.failure(_w(body("a/vllm_vllm_2484_aborted_requests_info_healthy"))) is None
    assert lw.failure(_w(["Aborted (core dumped)"])) is not None


# ----------------------------------------------------------------------------- NCCL's WARN before a paste

def test_ncclss_last_warn_before_a_commands_pasted_output_is_the_last_words(no_patterns):
    # b/nccl_nccl_769_gid_index_1_linklocal_timeout: the WARN, then `ibv_devinfo` pasted under it
    lines = body("b/nccl_nccl_769_gid_index_1_linklocal_timeout")
    got = lw.failure(_w(lines))
    assert got is not None and got.weak  # NCCL may have gone on where the paste does not show it
    assert lw.facts(_w(lines), IDS)[1] == "nccl_ib_error"
    _warned(lines, "nccl_ib_error")
    # the WARN as the log's very last line (the paste, or the process, stops there): as before, not weak
    warn = next(ln for ln in lines if "NCCL WARN" in ln)
    got = lw.failure(_w([*lines[:lines.index(warn)], warn]))
    assert got is not None and not got.weak


def test_a_probes_warn_before_other_output_is_no_failure():
    # b/nccl_nccl-tests_82_broadcast_socket_libibverbs_warn (healthy): the verbs library probe NCCL
    # goes on past; then a command's output (b/nccl_nccl_769's ibv_devinfo)
    probe = next(ln for ln in body("b/nccl_nccl-tests_82_broadcast_socket_libibverbs_warn") if "NCCL WARN" in ln)
    lines = [probe, *body("b/nccl_nccl_769_gid_index_1_linklocal_timeout")[2:]]
    assert lw.failure(_w(lines)) is None


# ----------------------------------------------------------------------------- facts by structure

@pytest.mark.parametrize("rel, needle, fid", [
    # the CUDA runtime's fixed strerror for cudaErrorInsufficientDriver
    ("b/nccl_nccl-tests_12_driver_insufficient_for_runtime", "Cuda failure", "cuda_driver_too_old"),
    # a CUDA driver API symbol missing from the driver's library (logged at INFO by ollama)
    ("a/ollama_ollama_6604_driver_too_old_0xc0000139", "cuCtxCreate_v3", "cuda_driver_too_old"),
    # exit status 127
    ("a/ollama_ollama_6541_runner_exit_status_127", "exit status", "broken_install"),
    # a failed ibv_* call, NCCL's words around it cut by the paste
    ("b/nccl_nccl_769_gid_index_1_linklocal_timeout", "ibv_modify_qp", "nccl_ib_error"),
])
def test_facts_that_name_a_cause_by_structure(rel, needle, fid):
    line = next(ln for ln in body(rel) if needle in ln)
    got = lw.facts([(1, line)], IDS, quiet=True)
    assert got is not None and got[1] == fid
    assert lw.inferred_fact(got[2])  # structure alone
    # without the facts of structure alone the line names nothing, or another cause (nccl_nccl_769's
    # line also carries an errno: ETIMEDOUT)
    other = lw.facts([(1, line)], IDS, quiet=True, inferred=False)
    assert other is None or other[1] != fid


def test_a_fact_of_structure_alone_is_a_warning_unless_the_last_words_say_more(no_patterns):
    # a/ollama_ollama_6604_driver_too_old_0xc0000139: the missing driver symbol, logged at INFO
    _warned(body("a/ollama_ollama_6604_driver_too_old_0xc0000139"), "cuda_driver_too_old")
    # a/ollama_ollama_6541_runner_exit_status_127: the exit status is the last words (an error
    # before these readings, unrecognised): the fact names it, still an error
    assert _severities(body("a/ollama_ollama_6541_runner_exit_status_127")) == {"broken_install": "error"}


@pytest.mark.parametrize("line", [
    # tests/fixtures/vllm-cpu/serve.log: the engine's own healthy start-up
    *[ln for ln in (VLLM_CPU / "serve.log").read_text(encoding="utf-8").splitlines()[:60]],
])
def test_a_healthy_start_up_states_none_of_those_facts(line):
    got = lw.facts([(1, line)], IDS, quiet=True)
    assert got is None or got[1] not in ("cuda_driver_too_old", "broken_install", "nccl_ib_error", "host_oom_killed")


def test_a_sigbus_whose_native_stack_runs_through_nccl_is_ncclss_shared_memory():
    # held-in a/triton_hugectr_backend_42_sigbus_ncclgroupend_shm: UCX's signal handler reports the bus
    # error, its backtrace runs through ncclGroupEnd (the container's /dev/shm was Docker's default)
    lines = body("a/triton_hugectr_backend_42_sigbus_ncclgroupend_shm")
    got = lw.facts(_w(lines), IDS)
    assert got is not None and got[1] == "nccl_shm_error" and "Caught signal 7" in got[3]
    assert [f.id for f in diagnose_lines(lines) if f.severity != "info"][:1] == ["nccl_shm_error"]
    # the same bus error with the NCCL frames taken out: a shared-memory mapping of some other program
    other = [t for t in lines if "nccl" not in t]
    got = lw.facts(_w(other), IDS)
    assert got is not None and got[1] == "shm_too_small"


def test_ncclss_frames_without_a_bus_error_state_no_shared_memory_fact():
    # the backtrace alone (a crash of another kind, a native stack printed for a hang)
    frames = [t for t in body("a/triton_hugectr_backend_42_sigbus_ncclgroupend_shm") if "Caught signal" not in t]
    got = lw.facts(_w(frames), IDS)
    assert got is None or got[1] not in ("nccl_shm_error", "shm_too_small")


# a GPU the driver lost, as nvidia-smi says it before the table of the GPUs it still has (a report of a
# llama.cpp crash on four GPUs, 2026-08, found with the code search: "=== current GPU state ===" is
# the reporter's own echo), and as the kernel's Xid 79 says it
_GPU_LOST = ["=== current GPU state ===",
             "Unable to determine the device handle for GPU1: 0000:34:00.0: Unknown Error",
             "Thu Aug 27 18:05:38 2026       "]


def test_a_gpu_the_driver_lost_is_a_cuda_error_even_with_output_after_it(no_patterns):
    got = lw.facts(_w(_GPU_LOST), IDS, quiet=True)
    assert got is not None and got[1] == "cuda_error"
    # nvidia-smi's table of the GPUs it still has goes on after it: nothing failed in its own words,
    # the fact still speaks (a warning: structure alone)
    assert _severities(_GPU_LOST + ["+" + "-" * 89 + "+"]) == {"cuda_error": "warning"}
    # the kernel's words for it
    xid = "[Mon Jan  1 10:00:00 2026] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python3, GPU has fallen off the bus."
    assert lw.facts([(1, xid)], IDS, quiet=True)[1] == "cuda_error"


@pytest.mark.parametrize("line", [
    "Unable to determine the device handle for GPU1: 0000:34:00.0: Not Found",  # another status: no claim
    "If nvidia-smi prints 'Unable to determine the device handle', check the BIOS",
    "NVRM: Xid (PCI:0000:3b:00): 13, Graphics Exception",
])
def test_other_device_handle_words_are_no_lost_gpu(line):
    got = lw.facts([(1, line)], IDS, quiet=True)
    assert got is None or got[2] != lw._GPU_LOST_WHY


@pytest.mark.parametrize("rel", ["a/k8s_device_plugin_139_nvml_default_runtime_not_nvidia",
                                 "a/llamacpp_llama_cpp_python_1882_container_without_gpus_flag"])
def test_the_drivers_own_libraries_out_of_reach_is_no_gpu_visible(rel):
    # NVML or libcuda not loadable: the container got no NVIDIA runtime (the image ships neither)
    assert named(held_in(rel))[:1] == ["no_gpu_visible"]


def test_a_toolkit_library_out_of_reach_is_still_a_broken_install():
    line = "ImportError: libcudart.so.12: cannot open shared object file: No such file or directory"
    assert [f.id for f in diagnose_lines([line]) if f.severity != "info"][:1] == ["broken_install"]


def test_a_notice_that_no_driver_is_in_reach_is_no_gpu_visible_at_warning_level():
    # held-in a/localai_localai_2117_k8s_pod_missing_runtimeclass_nvidia: LocalAI's entrypoint found no
    # nvidia-smi in a pod without the NVIDIA runtime class, said GPU acceleration will not be
    # available, and went on on the CPU: a warning, and not the entrypoint's fault
    lines = body("a/localai_localai_2117_k8s_pod_missing_runtimeclass_nvidia")
    assert _severities(lines) == {"no_gpu_visible": "warning"}


@pytest.mark.parametrize("line", ["GPU acceleration is not enabled or supported. Defaulting to CPU.",
                                  "INFO: GPU support is available"])
def test_a_cpu_default_or_gpu_available_notice_is_nothing(line):
    assert not [f for f in diagnose_lines([line, *_serve_tail()]) if f.severity != "info"]
    assert lw.facts([(1, line)], IDS, quiet=True, whys=lw.QUIET_FACT_WHYS) is None


def test_the_quiet_pass_by_why_reads_no_other_fact():
    # held-in b/pytorch_pytorch_77523_errno97_ipv6_then_rendezvous_complete: torch's IPv6 attempt logged
    # at [W] before its IPv4 one succeeds; the pass that reads warnings for the no-driver notice must
    # not read this errno as a network fact (healthy_stress found it doing so)
    line = line_of("b/pytorch_pytorch_77523_errno97_ipv6_then_rendezvous_complete", "errno: 97")
    assert lw.facts([(1, line)], IDS, quiet=True) is not None  # the errno is a fact when asked for all
    assert lw.facts([(1, line)], IDS, quiet=True, whys=lw.QUIET_FACT_WHYS) is None


def test_an_nvidia_containers_banner_naming_a_newer_driver_is_a_driver_too_old():
    # held-in a/triton_server_2225_container_needs_newer_driver: NGC's entrypoint banner at ERROR level,
    # then the server goes on starting (it finds no CUDA later)
    lines = body("a/triton_server_2225_container_needs_newer_driver")
    assert named(held_in("a/triton_server_2225_container_needs_newer_driver"))[:1] == ["cuda_driver_too_old"]
    got = lw.facts(_w(lines), IDS)
    assert got is not None and got[1] == "cuda_driver_too_old" and "was built for NVIDIA Driver Release" in got[3]


def test_an_nvidia_containers_banner_of_a_fitting_driver_is_nothing():
    # the same banner's other lines, as every NGC container prints them
    head = [t for t in body("a/triton_server_2225_container_needs_newer_driver")[:12] if "Driver" not in t
            and "version" not in t]
    assert not [f for f in diagnose_lines([*head, *_serve_tail()]) if f.severity != "info"]


def test_a_kv_cache_that_holds_less_than_one_request_is_kv_cache_oom():
    # a/vllm_vllm_10517_max_seq_len_kv: "Maximum concurrency for 29000 tokens per request: 0.82x"
    got = lw.kv_too_small(_w(body("a/vllm_vllm_10517_max_seq_len_kv")))
    assert got is not None and got[1] == "kv_cache_oom"
    # a/sglang_sglang_7691_rocm_negative_profiled_tokens: a negative profiled budget
    assert lw.kv_too_small(_w(body("a/sglang_sglang_7691_rocm_negative_profiled_tokens"))) is not None
    # tests/fixtures/vllm-cpu/serve.log: "... Maximum concurrency for 512 tokens per request: 4096.00x"
    assert lw.kv_too_small(_w((VLLM_CPU / "serve.log").read_text(encoding="utf-8").splitlines())) is None


# ----------------------------------------------------------------------------- a log that stops waiting

@pytest.mark.parametrize("rel, fid", [
    # Ray's core: a connect to the GCS that failed, no errno
    ("b/ray_ray_59110_start_address_localhost_resolved", "ray_gcs_unreachable"),
    # the same warning again and again while `ray start` retries
    ("b/ray_ray_23611_windows_unable_to_connect_gcs_localhost", "ray_gcs_unreachable"),
    # half its retries spent (5 of 6)
    ("b/ray_nemorl_271_requested_16_gpus_only_8", "ray_placement_group_stuck"),
])
def test_a_log_that_stops_waiting_is_named_by_what_it_awaited(rel, fid):
    got = lw.stopped_waiting(_w(body(rel)), IDS)
    assert got is not None and got[1] == fid


@pytest.mark.parametrize("rel", [
    # a slow start-up still polling (10 of 100 attempts)
    "a/vllm_instructlab_2092_waiting_for_server_attempts",
    # a server's metrics lines, the same line again and again ("Pending: 0 reqs")
    "a/vllm_vllm_7540_specdec_metrics",
    # c10d's [W] notices of an IPv6 connect it retries over IPv4
    "b/pytorch_heat_1003_daso_errno97_warnings_only",
])
def test_healthy_waits_and_loops_are_not_a_stop(rel):
    assert lw.stopped_waiting(_w(body(rel)), IDS) is None


def test_a_stopped_wait_is_a_warning_when_nothing_else_spoke():
    # b/ray_ray_59110 fed whole: whatever names it, it is a warning or an error, never silence
    got = [f for f in diagnose_lines(body("b/ray_ray_59110_start_address_localhost_resolved")) if f.severity != "info"]
    assert got


def test_the_fact_sets_keyed_by_their_why_name_facts_that_exist():
    # _INFERRED_WHY and _TERMINAL_WHY select _FACTS rows by their why text: a why reworded in one
    # place only would drop a fact out of its set without a word
    whys = {why for _, _, why in lw._FACTS}
    assert lw._INFERRED_WHY <= whys, lw._INFERRED_WHY - whys
    assert lw._TERMINAL_WHY <= whys, lw._TERMINAL_WHY - whys


# ----------------------------------------------------------------------------- nvidia-smi's CSV over two lines

NVSMI = ROOT / "tests" / "fixtures" / "nvidia-smi"


def test_a_csv_row_without_memory_values_is_the_gb10_fact_from_the_fields_above_it():
    # held-in spark_marimo_6822: the command names the fields, the row under it gives [N/A]
    lines = body("a/spark_marimo_6822_query_gpu_csv_na")
    got = lw.gpu_memory_unreported(_w(lines))
    assert got is not None and got[0] == 2 and "memory.total as [N/A]" in got[1]
    assert {f.id: f.severity for f in diagnose_lines(lines)} == {"gb10_memory_not_supported": "info"}
    # the header form (`--format=csv`): the fields are read from the header row
    header = ["index, name, memory.total [MiB], memory.used [MiB], memory.free [MiB]",
              "0, NVIDIA GB10, [N/A], [N/A], [N/A]"]
    assert lw.gpu_memory_unreported(_w(header))[0] == 2


def test_csv_rows_with_numbers_or_other_columns_are_nothing():
    from sparktui.probes.gpu import QUERY_GPU

    # a real H200's rows under the query that asked for them (tests/fixtures/nvidia-smi, captured)
    for rows in ("h200.query-gpu.busy.txt", "h200.query-gpu.idle.txt"):
        lines = [" ".join(QUERY_GPU), *(NVSMI / rows).read_text().splitlines()]
        assert lw.gpu_memory_unreported(_w(lines)) is None
        assert not diagnose_lines(lines)
    # [N/A] in a column that is not memory (a GB10's power.limit), or a row of another width
    assert lw.gpu_memory_unreported(_w(["nvidia-smi --query-gpu=index,power.limit,memory.used --format=csv",
                                        "0, [N/A], 2679"])) is None
    assert lw.gpu_memory_unreported(_w(["nvidia-smi --query-gpu=index,memory.used --format=csv",
                                        "the total is [N/A], see above, twice"])) is None


# ----------------------------------------------------------------------------- a fact on the failure's own line

def test_an_info_fact_on_the_line_a_program_failed_with_is_what_it_died_of():
    # held-in spark_dradriver_1073 (after corpus round 4): a Go program's last words, "Error: ... error
    # getting memory info for device 0: Not Supported": the GB10 fact, not an unrecognised failure
    line = ("Error: error creating driver: error enumerating all possible devices: error enumerating allocatable "
            "devices: error visiting devices: error visiting device: error getting info for GPU 0: error getting "
            "memory info for device 0: Not Supported")
    got = {f.id: f.severity for f in diagnose_lines(["I0423 20:52:13.460578       1 main.go:208] shutdown", line])}
    assert got == {"gb10_memory_not_supported": "error"}, got


def test_the_same_fact_in_a_healthy_log_stays_info():
    # held-in spark_nvitop_208 (healthy): NVML's NOT_SUPPORTED and nvidia-smi's [N/A] rows, no failure
    lines = body("a/spark_nvitop_208_nvml_not_supported_gb10_healthy")
    assert {f.id: f.severity for f in diagnose_lines(lines)} == {"gb10_memory_not_supported": "info"}


# ----------------------------------------------------------------------------- a shell's "not found" as the last line

def _shell(argv: list[str], tmp_path: Path) -> str:
    """The line a real shell prints for a command it cannot find (its own words, run here)."""
    import subprocess

    r = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, env={"PATH": "/usr/bin:/bin"}, timeout=30)
    assert r.returncode == 127, r
    return r.stderr.strip().splitlines()[-1]


def test_a_log_that_ends_on_the_shells_not_found_names_what_was_missing(tmp_path, no_patterns):
    script = tmp_path / "entrypoint.sh"
    script.write_text('#!/bin/sh\nexec "$@"\n')
    script.chmod(0o755)
    missing = _shell(["/bin/sh", "-c", "vllm serve /models/x"], tmp_path)  # dash: "/bin/sh: 1: vllm: not found"
    option = _shell([str(script), "--model", "/models/x"], tmp_path)  # "...entrypoint.sh: 2: exec: --model: not found"
    bash = _shell(["bash", "-c", "torchrun --nproc-per-node 2 x.py"], tmp_path)  # "bash: line 1: torchrun: command not found"
    for line, fid in ((missing, "broken_install"), (option, "docker_entrypoint_error"), (bash, "broken_install")):
        got = lw.facts(_w(["starting the server", line]), IDS, terminal=True)
        assert got is not None and got[1] == fid and lw.inferred_fact(got[2]), (line, got)
        _warned(["starting the server", line], fid)  # structure alone: a warning


def test_the_shells_not_found_with_the_log_going_on_is_nothing(tmp_path):
    # a probe for an optional tool, then a real vLLM server's start (tests/fixtures/vllm-cpu)
    line = _shell(["bash", "-c", "nvidia-smi -L"], tmp_path)
    assert lw.facts(_w([line, *_serve_tail()]), IDS, terminal=True) is None
    assert lw.facts(_w([line, *_serve_tail()]), IDS, quiet=True) is None
    assert not [f for f in diagnose_lines([line, *_serve_tail()]) if f.severity != "info"]
    # held-in sglang_softthinking_10: py-spy missing while a hang is dumped; the hang is still the cause
    assert named(held_in("a/sglang_softthinking_10_watchdog_sigquit"))[0] == "suspected_hang"


def _python(args: list[str], tmp_path: Path) -> str:
    """The last line a real CPython prints when it cannot start what it was given (run here)."""
    import subprocess
    import sys

    r = subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=tmp_path, timeout=30)
    assert r.returncode != 0, r
    return r.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize("args", [["/workspace/serve.py"], ["-m", "vllm_not_installed_here"]])
def test_a_log_that_ends_on_pythons_not_found_is_a_broken_install(args, tmp_path, no_patterns):
    line = _python(args, tmp_path)
    got = lw.facts([(1, line)], IDS, terminal=True)
    assert got is not None and got[1] == "broken_install"
    assert _severities(["starting the server", line]) == {"broken_install": "warning"}


def test_pythons_not_found_with_the_log_going_on_is_nothing(tmp_path):
    # a helper script that is absent, then a real vLLM server's start: the server runs
    line = _python(["/workspace/prestart.py"], tmp_path)
    assert lw.facts(_w([line, *_serve_tail()]), IDS, terminal=True) is None
    assert not [f for f in diagnose_lines([line, *_serve_tail()]) if f.severity != "info"]


def test_an_error_level_after_a_components_tag_is_an_error_line():
    # held-in a/sglang_sglang_17460_sgl_kernel_cpu_torch_mismatch: the log's last ten lines, a paste
    # of the end (its ImportError is above them)
    tail = body("a/sglang_sglang_17460_sgl_kernel_cpu_torch_mismatch")[-10:]
    got = lw.failure(_w(tail))
    assert got is not None and got.kind == "error line" and got.message.startswith("Could not load any common_ops")
    assert [f.id for f in diagnose_lines(tail) if f.severity != "info"]


# spdlog's default record, "[time] [logger] [level] message", as its README prints it: a C++ runtime's
# lowercase level in brackets, with the logger's name or without
@pytest.mark.parametrize("line", ["[2014-10-31 23:46:59.678] [my_logger] [error] Some error message with arg: 1",
                                  "[2014-10-31 23:46:59.678] [critical] Support for int: 42"])
def test_spdlogs_lowercase_error_levels_are_error_lines(line):
    got = lw.failure(_w(["[2014-10-31 23:46:59.677] [my_logger] [info] Some message", line]))
    assert got is not None and got.kind == "error line"
    assert [f.id for f in diagnose_lines([line])] == ["unrecognised_failure"]


@pytest.mark.parametrize("line", ["[2014-10-31 23:46:59.678] [my_logger] [warning] Easy padding in numbers like 08",
                                  "[2014-10-31 23:46:59.678] [info] Welcome to spdlog!"])
def test_spdlogs_lower_levels_are_nothing(line):
    assert lw.failure(_w([line])) is None
    assert not [f for f in diagnose_lines([line]) if f.severity != "info"]


@pytest.mark.parametrize("line", ["[stats] error rate 0.0", "[x] errors: 0", "[vllm] INFO: fine",
                                  "[Gloo] Rank 0 is connected to 1 peer ranks. Expected number of connected peer ranks is : 1"])
def test_a_tag_before_words_that_are_no_error_level_is_nothing(line):
    assert lw.read_line(*lw._body(line)) is None


@pytest.mark.parametrize("rel", ["a/spark_inferencesnaps_143_vram_detection_gb10",
                                 "a/spark_k8sdeviceplugin_1482_gb10_nvidia_smi_not_supported"])
def test_nvidia_smis_table_with_no_memory_in_its_column_is_the_gb10_fact(rel, no_patterns):
    got = lw.gpu_memory_unreported(_w(body(rel)))
    assert got is not None and "Memory-Usage as Not Supported" in got[1]
    assert "gb10_memory_not_supported" in [f.id for f in diagnose_lines(body(rel))]


def test_nvidia_smis_table_of_a_discrete_gpu_is_nothing():
    # a real H200 table (the two-GPU capture's nvidia-smi): MiB in the Memory-Usage column
    table = (ROOT / "tests" / "fixtures" / "nccl-2gpu" / "watchdog.nvidia-smi.txt").read_text().splitlines()
    assert lw.gpu_memory_unreported(_w(table)) is None
    # N/A in another column of the same rows (fan, power cap, MIG) is no memory fact either
    assert any("N/A" in t for t in table)


def test_tensorrts_error_record_without_its_loggers_tag_is_an_error_line(no_patterns):
    # held-in a/other_samtensorrt_2_provided_engine_232_on_trt_8_4: TensorRT's "N: [where] Error Code N: ..."
    lines = body("a/other_samtensorrt_2_provided_engine_232_on_trt_8_4")
    got = lw.failure(_w(lines))
    assert got is not None and got.kind == "error line" and got.message.startswith("Serialization")
    assert _severities(lines)


@pytest.mark.parametrize("line", ["see Error Code 4: in the TensorRT docs", "[runtime.cpp::f::50] no Error Code here"])
def test_error_code_words_outside_tensorrts_record_are_nothing(line):
    assert lw.read_line(*lw._body(line)) is None


def test_a_parenthesised_tag_before_an_error_level_is_an_error_line(no_patterns):
    # held-in a/vllm_vllm_8908_tp16_placement_group_waiting: Ray's autoscaler, its colour codes spelled out
    lines = body("a/vllm_vllm_8908_tp16_placement_group_waiting")
    line = next(t for t in lines if "No available node types" in t).replace("ESC[33m", "").replace("ESC[0m", "")
    assert lw.read_line(*lw._body(line))[0] == "error line"
    assert lw.read_line(*lw._body("(note) errors: none")) is None


# --------------------------------------------------------------------------- a plain failure statement last

@pytest.mark.parametrize("line", [
    "Unable to load the model from /models/x: no config.json",
    "Could not connect to 10.0.0.2:29500",
    "Timed out waiting for the server to become healthy after 600 seconds",
    # a named part failing, a status word, a script's failure mark
    "The API server could not bind to 0.0.0.0:8000",
    "An unexpected error occurred while loading the model",
    "Status: FAILED",
    "\u274c Model load failed: out of memory",  # a script's cross mark
    "\u2717 vllm serve exited",
    "[FAIL] health check did not pass",
    "*** ERROR *** engine died",
    "==> ERROR: build failed",
])
def test_a_plain_failure_statement_as_the_logs_last_line_is_an_error_line(line, no_patterns):
    lines = _serve_tail()[:6] + [line]
    got = lw.failure(_w(lines))
    assert got is not None and got.weak and got.line == len(lines) and got.kind == "error line"
    fs = diagnose_lines(lines)
    assert fs and fs[0].id == "unrecognised_failure" and fs[0].severity == "warning", fs


@pytest.mark.parametrize("line, fid", [
    ("Failed to initialize NVML: Unknown Error", "no_gpu_visible"),  # nvidia-smi in a container that lost its GPU
    ("EngineCore failed to start.", "engine_dead"),  # vLLM's engine process, before its RuntimeError
])
def test_a_plain_failure_statement_about_a_known_thing_names_it_as_a_warning(line, fid, no_patterns):
    # the same weak last words, their message about what the exception table knows (its last-resort shapes)
    fs = diagnose_lines(_serve_tail()[:6] + [line])
    assert fs and fs[0].id == fid and fs[0].severity == "warning", fs


@pytest.mark.parametrize("line", [
    "Failed to create oneDNN linear, fallback to torch linear",  # the real vLLM CPU build, at WARNING, bare here
    "Timed out waiting for peer, retrying (1/5)",
    "Could not find a GPU, using the CPU instead",
    "Failed requests:                         0",  # vLLM's bench serve result table
    "Cannot",
])
def test_the_statement_with_a_way_on_or_not_a_statement_is_nothing(line):
    assert lw.failure(_w(_serve_tail()[:6] + [line])) is None


def test_the_statement_before_more_output_or_below_error_level_is_nothing():
    tail = _serve_tail()[:6]
    # the program went on after it: only the log's very last line is read this way
    assert lw.failure(_w(tail + ["Failed to initialize NVML: Unknown Error", "GPU 0: NVIDIA GB10"])) is None
    assert lw.failure(_w(tail + ["WARNING 12-01 10:00:02 [x.py:1] Failed to load plugin foo: not found"])) is None


@pytest.mark.parametrize("line", [
    "\u2705 Model loaded",  # a check mark: the script's success
    "Status: RUNNING",
    "[PASS] health check",
    "The API server could not bind to :: (IPv6 off), using 0.0.0.0 instead",
    "No error occurred",
])
def test_their_healthy_neighbours_are_nothing(line):
    assert lw.failure(_w(_serve_tail()[:6] + [line])) is None


def test_a_cross_mark_that_a_check_mark_follows_is_nothing():
    # a script waiting for a server: what it printed last is its answer
    assert lw.failure(_w(_serve_tail()[:6] + ["\u274c not ready yet (attempt 3)", "\u2705 ready"])) is None


@pytest.mark.parametrize("rows", [
    ["CONTAINER ID   IMAGE   COMMAND   CREATED   STATUS   PORTS   NAMES",
     'a1b2c3d4e5f6   vllm/vllm-openai:v0.11.0   "vllm serve"   2 minutes ago   Exited (1) 1 minute ago      vllm'],
    ["NAME     READY   STATUS             RESTARTS      AGE", "vllm-0   0/1     CrashLoopBackOff   5 (2m ago)    10m"],
    ["  Warning  BackOff  2m (x40 over 12m)  kubelet  Back-off restarting failed container vllm in pod vllm-0_default(1234)"],
])
def test_a_container_manager_showing_a_failed_container_is_structure_alone(rows, no_patterns):
    lines = _serve_tail()[:6] + rows
    got = lw.failure(_w(lines))
    assert got is not None and got.weak and got.kind == "non-zero exit", got


@pytest.mark.parametrize("row", [
    'a1b2c3d4e5f6   vllm/vllm-openai:v0.11.0   "vllm serve"   2 minutes ago   Exited (0) 1 minute ago      vllm',
    'a1b2c3d4e5f6   vllm/vllm-openai:v0.11.0   "vllm serve"   2 minutes ago   Up 2 minutes      vllm',
    "vllm-0   1/1     Running   0          10m",
])
def test_a_container_that_ended_well_or_runs_is_nothing(row):
    assert lw.failure(_w(_serve_tail()[:6] + [row])) is None


def test_jupyters_record_at_its_error_level_is_an_error_line_and_at_warning_nothing():
    lines = _serve_tail()[:6]
    got = lw.failure(_w(lines + ["[E 2024-05-01 10:00:00.123 ServerApp] Uncaught exception GET /api/kernels"]))
    assert got is not None and not got.weak
    assert lw.failure(_w(lines + ["[W 2024-05-01 10:00:00.123 ServerApp] Notebook x is not trusted"])) is None


def test_nvidia_smis_answer_with_no_gpu_is_no_gpu_visible():
    fs = diagnose_lines(["$ nvidia-smi", "No devices were found"])
    assert fs and fs[0].id == "no_gpu_visible", fs
    # the same words inside another sentence are not nvidia-smi's answer
    assert "no_gpu_visible" not in [f.id for f in diagnose_lines(["INFO scan: No devices were found on bus 3, rescanning"])]
