"""What a working run prints stays quiet, and the level a line was logged at counts: alarming words
of healthy runs, a traceback logged at WARNING and recovered from, a failure the server went on
past, an error entry on an info or warning line; and the other way round, an info fact that a
program died of is the error.

Healthy cases are held-in excerpts of the corpus or real lines; each has a failing counterpart.
"""

from __future__ import annotations

import pytest

from sparktui.commands.diagnose import analyse
from sparktui.diagnosis.catalogue import CatalogueError, parse_catalogue
from sparktui.diagnosis.classifier import SourceScanner

from corpus_helpers import (
    CATALOGUE_ENTRY, bare_errors, bare_findings, body, diagnose_lines, held_in, line_errors, ranked, scan_named)

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
    assert scan_named([line])[:1] == ["broken_install"]


# ----------------------------------------------------------------------------- the healthy trap

def test_benign_nccl_plugin_probes_and_vllm_warnings_stay_clean():
    for rel in ("b/nccl_nccltests_321_plugin_symbol_probe_alltoall", "b/nccl_nccl_352_no_plugin_all_reduce_perf_ok",
                "b/nccl_nccl_226_question_multinode_socket_logs", "a/vllm_vllm_20707_startup_kv_cache_sampling_warning"):
        assert not [f for f in analyse(held_in(rel)).findings if f.severity == "error"], rel


# ------------------------------------------------------------------ the level a line was logged at

def _scan(cat, lines: list[str]):
    from sparktui.diagnosis.classifier import SourceScanner

    sc = SourceScanner("t", catalogue=cat)
    sc.feed(lines)
    sc.finish()
    return [(f.id, f.severity) for f in sc.findings]


def test_an_error_entry_on_an_info_or_warning_line_is_a_warning_and_an_error_line_still_counts():
    cat = parse_catalogue(CATALOGUE_ENTRY + "patterns = ['out of memory']\nprefilter = ['out of memory']\n")
    info = "INFO 08-07 00:12:04 model_runner.py:984] If you are running out of memory, lower it."
    warn = "2021-01-20 16:57:03,655 WARNING services.py:1628 -- the run went out of memory once"
    err = "ERROR 08-07 00:12:09 worker.py:12] CUDA out of memory"
    assert _scan(cat, [info]) == [("x", "warning")]
    assert _scan(cat, [warn]) == [("x", "warning")]
    # the quiet sighting does not swallow the error line of the same id that follows it
    assert _scan(cat, [info, err]) == [("x", "warning"), ("x", "error")]
    assert _scan(cat, [err]) == [("x", "error")]


def test_info_lines_and_warning_lines_keep_a_failure_that_its_source_reports_below_error():
    cat = parse_catalogue(CATALOGUE_ENTRY + "patterns = ['boom']\nprefilter = ['boom']\ninfo_lines = true\n")
    assert _scan(cat, ["INFO 01-01 00:00:00 a.py:1] boom"]) == [("x", "error")]
    assert _scan(cat, ["WARNING 01-01 00:00:00 a.py:1] boom"]) == [("x", "warning")]
    with pytest.raises(CatalogueError, match="true or false"):
        parse_catalogue(CATALOGUE_ENTRY + "patterns = ['a']\nprefilter = ['a']\nwarning_lines = 'yes'\n")


def test_failures_their_sources_log_below_error_stay_errors(tmp_path):
    # Ray's core worker logs the tasks it fails for a dead actor at I; vLLM logs the failed import
    # of its compiled ops at WARNING; Ray logs a GCS it cannot reach at WARNING while it retries
    assert bare_errors("b/ray_ray_18586_actor_dead_core_worker_log", tmp_path)[:1] == ["ray_worker_missing"]
    assert bare_errors("b/ray_ray_44112_skein_worker_ip_no_raylet", tmp_path)[:1] == ["ray_ip_mismatch"]
    assert bare_errors("a/vllm_vllm_5501_c_abi3_undefined_symbol_warning", tmp_path)[:1] == ["broken_install"]
    assert bare_errors("b/ray_ray_29412_raylet_terminated_unexpectedly", tmp_path)[:1] == ["ray_worker_missing"]


# ------------------------------------------------------------------ an info fact a program died of

def test_nvml_memory_query_raised_on_gb10_is_the_error(tmp_path):
    # NeMo RL's weight refit on a DGX Spark: NVML reports no memory, the trainer raises it
    got = [f for f in bare_findings("a/spark_nemorl_pr2203_nvml_meminfo_refit", tmp_path)
           if f.id == "gb10_memory_not_supported"]
    assert got and got[0].severity == "error"
    assert ranked("a/spark_nemorl_pr2203_nvml_meminfo_refit", tmp_path)[:1] == ["gb10_memory_not_supported"]


def test_nvidia_smi_not_supported_stays_a_fact(tmp_path):
    # the same fact in nvidia-smi's table is how a GB10 always looks: no error
    got = bare_findings("a/spark_inferencesnaps_143_vram_detection_gb10", tmp_path)
    assert [f.severity for f in got if f.id == "gb10_memory_not_supported"] == ["info"]
    assert not [f for f in got if f.severity == "error"]


def test_an_info_fact_on_a_log_line_is_not_promoted():
    # a logger's warning that it fell back to system memory names the same fact, raises nothing
    lines = ["2025-12-05 04:45:04 WARNING memory.py:86 failed to get device memory info v1: Not Supported"]
    assert not [f for f in diagnose_lines(lines) if f.severity == "error"]


def test_the_exception_and_the_table_are_raised_apart():
    # the table first (info), then the exception the tool died of: both stay, the error counts
    lines = [
        "| N/A   41C    P0             11W /  N/A  | Not Supported          |      0%      Default |",
        "RuntimeError: Failed to get free memory for device 0 (global index: 0): Not Supported",
    ]
    sev = sorted(f.severity for f in diagnose_lines(lines) if f.id == "gb10_memory_not_supported")
    assert sev == ["error", "info"]


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
    assert line_errors(lines) == []
    # still shown, as what it is
    assert [(f.id, f.severity) for f in fs if f.severity != "info"] == [("unhandled_exception", "warning")]


def test_the_same_traceback_ending_the_log_is_a_failure():
    lines = ["INFO 06-04 22:38:30 [app.py:10] starting",
             "WARNING 06-04 22:38:31 [plugins.py:44] optional plugin failed to load, going on without it", *_TB]
    assert line_errors(lines) != []


def test_an_uncaught_traceback_after_an_info_line_stays_a_failure():
    # an uncaught exception's traceback follows whatever was logged last (INFO): nothing was handled
    lines = ["INFO 06-04 22:38:30 [app.py:10] starting", *_TB, "INFO 06-04 22:38:32 [atexit.py:1] cleaning up"]
    assert line_errors(lines) != []


def test_a_failure_the_server_went_on_past_is_no_failure():
    lines = ["INFO 06-04 22:38:30 [app.py:10] starting", *_TB,
             "(APIServer pid=1) INFO 03-27 10:05:12 [api_server.py:1880] Starting vLLM API server 0 on http://0.0.0.0:8000",
             "INFO:     Application startup complete."]
    assert line_errors(lines) == []
