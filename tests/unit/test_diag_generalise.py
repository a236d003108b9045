"""Detectors that generalise beyond copied phrases (issue 12): exception shapes (class + message,
the chain's root first), the phase a log ends in, consequence ranking, the healthy trap.

Every case is a real excerpt: a held-in file of the corpus (tests/fixtures/corpus, never a held-out
one: ``score_corpus.part_of`` decides) or real lines quoted in the catalogue.
"""

from __future__ import annotations

import re
import tomllib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparktui.commands.diagnose import analyse
from sparktui.diagnosis.catalogue import default_catalogue
from sparktui.diagnosis.classifier import SourceScanner
from sparktui.diagnosis.end_phase import default_end_phases
from sparktui.diagnosis.exc_shapes import default_shapes, parse

from corpus_helpers import CORPUS, held_in, load_cases, named


def diagnose_lines(lines: list[str]) -> list:
    sc = SourceScanner("t")
    sc.feed(lines)
    sc.finish()
    from sparktui.diagnosis.ranking import rank_findings

    return rank_findings(sc.findings, default_catalogue())


# ------------------------------------------------------------------ exception shapes

@pytest.mark.parametrize("line, fid", [
    # a/spark_gpustack_4372: Triton's ptxas does not know sm_121a (GB10)
    ("torch._inductor.exc.InductorError: RuntimeError: Failed to run autotuning code block: No valid triton "
     "configs. PTXASError: PTXAS error: Internal Triton PTX codegen error", "broken_install"),
    # a/trtllm_trtllm_5510: another engine's wording of an unknown architecture
    ("ValueError: Unknown architecture for AutoModelForCausalLM: Qwen3ForCausalLM", "unsupported_architecture"),
    # a/vllm_vllm_5828: NCCL's error class in a worker's RuntimeError
    ("RuntimeError: NCCL Error 2: unhandled system error (run with NCCL_DEBUG=INFO for details)",
     "nccl_comm_init_failed"),
    # a/vllm_vllm_13946: no GPU in the container
    ("RuntimeError: Failed to infer device type", "no_gpu_visible"),
    # a/other_tgi_1067: TGI's own OOM wording
    ("RuntimeError: Not enough memory to handle 4096 prefill tokens. You need to decrease "
     "`--max-batch-prefill-tokens`", "cuda_oom"),
    # a/spark_miaai_glm53_2: Ray's memory monitor on a Spark (unified memory)
    ("ray.exceptions.OutOfMemoryError: 1 worker(s) were killed due to the node", "unified_memory_pressure"),
    # a/sglang_sglang_17460: a kernel library built against another torch
    ("ImportError: [sgl_kernel] CRITICAL: Could not load any common_ops library!", "broken_install"),
    # b/megatron_megatron-deepspeed_338: a store barrier that half the ranks never reached
    ("RuntimeError: Timed out initializing process group in store based barrier on rank: 5, for key: "
     "store_based_barrier_key:32 (world_size=8, worker_count=4, timeout=0:00:30)", "rendezvous_timeout"),
    # a/vllm_higgsaudio_123: a Hugging Face hub class, whatever its message says
    ("huggingface_hub.errors.RepositoryNotFoundError: 401 Client Error. (Request ID: Root=1-68a1df1f)",
     "model_path_missing"),
])
def test_exception_shape_names_the_cause(line, fid):
    assert default_shapes().classify_line(line) == fid


def test_exception_line_parse_and_non_exceptions():
    assert parse("torch.distributed.DistBackendError: NCCL error in: x.cpp:1, invalid usage") == (
        "torch.distributed.DistBackendError", "NCCL error in: x.cpp:1, invalid usage")
    assert parse("TimeoutError") == ("TimeoutError", "")
    # prose and log lines are no exception lines
    for text in ("Error: see above", "INFO 03-27 10:00:00 [core.py:1] Error in foo", "errors: 0",
                 "  File \"x.py\", line 1, in <module>", "NCCL INFO Connected all rings"):
        assert parse(text) is None, text


def test_ray_task_error_is_judged_by_the_class_it_wraps():
    assert parse("ray.exceptions.RayTaskError(OutOfMemoryError): ray::RayWorkerWrapper.execute_method() "
                 "(pid=1, ip=10.0.0.2)")[0] == "OutOfMemoryError"


def test_exception_quoted_inside_another_and_cpp_what():
    # vLLM V1's engine repeats a worker's exception inside its own; torch's C++ exceptions end in what()
    assert default_shapes().classify_line(
        "RuntimeError: Worker failed with error 'ImportError: libcudart.so.12: cannot open shared object file', "
        "please check the stack trace above for the root cause") == "broken_install"
    assert default_shapes().classify_line("  what():  CUDA error: out of memory") == "cuda_oom"


def test_other_engines_wording_of_an_unsupported_architecture():
    # SGLang's registry, and vLLM when the Transformers fallback cannot serve it either
    assert default_shapes().classify_line("ValueError: Unsupported architectures: Foo. Supported list: [1]") \
        == "unsupported_architecture"
    assert default_shapes().classify_line(
        "ValueError: FooForCausalLM has no vLLM implementation and the Transformers implementation is not "
        "compatible with vLLM.") == "unsupported_architecture"


def test_last_line_killed_is_a_kill():
    lines = ["INFO 03-27 10:01:00 [gpu_model_runner.py:2602] Starting to load model /models/qwen35...",
             "./run.sh: line 12: 48211 Killed                  python3 -m vllm.entrypoints.openai.api_server"]
    fs = diagnose_lines(lines)
    assert fs and fs[0].id == "host_oom_killed" and fs[0].severity == "error"


def test_log_ending_in_nccl_unwinding_is_named_by_the_code_when_nothing_else_is():
    # real return-code lines (held-in corpus): the code is ncclResult_t (2 system, 3 internal, 6 remote)
    eps = default_end_phases()
    assert eps.last_line([(1, "pytorchjob-worker-0:116:116 [3] NCCL INFO group.cc:106 -> 2")]) == \
        (1, "nccl_comm_init_failed")
    assert eps.last_line([(1, "H100-1:9821:9920 [1] NCCL INFO proxy.cc:858 -> 6 [Proxy Thread]")]) == \
        (1, "nccl_network_error")
    # the WARN before it already named the cause: the unwinding adds nothing
    assert eps.last_line([(1, "x:1:1 [0] NCCL INFO group.cc:106 -> 2")], explained=True) is None


def test_launcher_prefixes_do_not_hide_the_exception():
    # mpirun, srun/torchrun, pdsh and FastChat put their own prefix in front of every line
    assert parse("[1,0]<stderr>:RuntimeError: NCCL error") == ("RuntimeError", "NCCL error")
    assert parse("0: torch.OutOfMemoryError: CUDA out of memory")[0] == "torch.OutOfMemoryError"
    assert parse("2024-01-01 10:00:00 | ERROR | stderr | ValueError: y") == ("ValueError", "y")
    assert parse("Note: RuntimeError is raised") is None


def test_chain_root_is_named_before_its_consequence():
    # real lines (catalogue examples): the import failed, so the engine core never started
    lines = [
        "Traceback (most recent call last):",
        '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 1, in run_engine_core',
        "    import vllm._C",
        "ImportError: libcudart.so.12: cannot open shared object file: No such file or directory",
        "",
        "The above exception was the direct cause of the following exception:",
        "",
        "Traceback (most recent call last):",
        '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core_client.py", line 2, in __init__',
        "    raise RuntimeError(",
        "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): "
        "{'EngineCore_DP0': 1}",
        "INFO 03-27 10:00:00 [launcher.py:1] done",
    ]
    ids = [f.id for f in diagnose_lines(lines)]
    assert ids[:2] == ["broken_install", "engine_dead"], ids


def test_shape_table_ids_are_catalogue_ids():
    cat = default_catalogue()
    assert all(r.id in cat for r in default_shapes().rules)


# ------------------------------------------------------------------ the phase a log ends in

@pytest.mark.parametrize("case, fid", [
    ("b/nccl_nccl_634_init_hang_after_connected_rings", "nccl_init_hang"),  # stops after "Connected all rings"
    ("a/vllm_vllm_8058_hang_nccl_step_tp2", "nccl_init_hang"),  # stops at "Bootstrap : Using eno1"
    ("b/nccl_tinygrad-kernel-modules_45_allreduce_4090_stops", "suspected_hang"),  # mid nccl-tests sweep
    ("a/sglang_sglang_17157_dp_encoder_capture_hang", "suspected_hang"),  # during graph capture
])
def test_log_that_stops_inside_a_phase_is_a_suspected_hang(case, fid):
    fs = [f for f in analyse(held_in(case)).findings if f.id == fid]
    assert fs and fs[0].severity == "warning", [(f.id, f.severity) for f in analyse(held_in(case)).findings]
    assert "log ends during" in fs[0].title.lower()


def test_waiting_for_the_engine_core_is_a_phase():
    ph = default_end_phases().of_line(
        "(APIServer pid=1) INFO 03-27 10:00:30 [utils.py:850] Waiting for 1 local, 0 remote core engine proc(s) "
        "to start.")
    assert ph is not None and ph.finding == "suspected_hang"


@pytest.mark.parametrize("line", [
    "(APIServer pid=1) INFO:     Application startup complete.",
    '(APIServer pid=1) INFO:     127.0.0.1:50312 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
    "vm:572:572 [1] NCCL INFO comm 0x55d0 rank 1 nranks 2 cudaDev 0 busId 1000 - Destroy COMPLETE",
    "# Avg bus bandwidth    : 1.23456",
    "node:1:2 [0] NCCL INFO init.cc:1303 -> 2",  # an error being unwound: a failure, not a hang
])
def test_a_log_that_ends_serving_or_finished_is_not_in_a_phase(line):
    assert default_end_phases().of_line(line) is None


def test_healthy_nccl_log_ending_in_init_gets_no_error():
    # b/nccl_nccl-tests_29: a healthy excerpt cut after "Init COMPLETE" (the trap: only a warning)
    fs = analyse(held_in("b/nccl_nccl-tests_29_init_complete_32ranks")).findings
    assert not [f for f in fs if f.severity == "error"]


# ------------------------------------------------------------------ consequences rank below causes

@pytest.mark.parametrize("case, root", [
    # the NCCL WARN naming the cause is printed AFTER the Python traceback (stderr and stdout interleave)
    ("a/vllm_minimax01_42_nccl_shm_segment", "nccl_shm_error"),
    ("b/pytorch_nccl_1241_megatron_duplicate_gpu_invalid_usage", "duplicate_gpu_rank"),
    ("b/nccl_open-sora-plan_386_enqueue_cuda_oom", "cuda_oom"),
])
def test_comm_init_failure_ranks_below_the_cause_printed_after_it(case, root):
    ids = named(held_in(case))
    assert ids[0] == root and "nccl_comm_init_failed" in ids, ids


@pytest.mark.parametrize("gap, first", [(2, "broken_install"), (200, "cuda_error")])
def test_a_cause_printed_just_after_still_ranks_first(gap, first):
    from sparktui.diagnosis.ranking import rank_findings
    from sparktui.model import Finding

    fs = [Finding("cuda_error", "error", "t", source="s", line=10),
          Finding("broken_install", "error", "t", source="s", line=10 + gap)]
    assert rank_findings(fs, default_catalogue())[0].id == first


def test_consequence_entries_are_marked_in_the_catalogue():
    cat = default_catalogue()
    for fid in ("engine_dead", "ray_worker_missing", "worker_died", "rpc_timeout", "nccl_watchdog_timeout"):
        assert cat[fid].consequence, fid


# ------------------------------------------------------------------ new ids, healthy trap

def test_new_ids_of_the_corpus_are_catalogue_entries_with_advice():
    cat = default_catalogue()
    for md in (CORPUS / "a" / "_new_ids.md", CORPUS / "b" / "_new_ids.md"):
        for fid in re.findall(r"^- (\w+):", md.read_text(encoding="utf-8"), re.M):
            assert fid in cat, fid
            assert cat[fid].advice and cat[fid].explanation, fid


def test_every_held_in_healthy_excerpt_stays_clean():
    bad = []
    for case in load_cases(CORPUS):
        if case.part == "in" and case.healthy:
            errs = [f.id for f in analyse([str(p) for p in case.files]).findings if f.severity == "error"]
            if errs:
                bad.append((case.name, errs))
    assert not bad


@pytest.mark.parametrize("line", [
    # benign lines with alarming words: an NVLS capability probe, a libibverbs warning, a config dump
    "[0] h100clust-worker-1:227602:227667 [0] NCCL INFO NVLS multicast support is available on dev 0",
    "libibverbs: Warning: no userspace device-specific driver found for /sys/class/infiniband_verbs/uverbs0",
    "INFO 03-27 10:00:00 [config.py:1] error_on_invalid_config=False, raise_on_failure=False",
    "WARNING 03-27 10:00:00 [utils.py:1] ImportError('flash_attn') ignored: using the triton backend",
])
def test_benign_lines_give_no_error(line):
    assert not [f for f in diagnose_lines([line, "(APIServer pid=1) INFO:     Application startup complete."])
                if f.severity == "error"]


# ------------------------------------------------------------------ never an exception

@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=4096))
def test_arbitrary_bytes_never_raise(data):
    sc = SourceScanner("fuzz")
    sc.feed(data.split(b"\n"))
    sc.finish()
    for raw in data.split(b"\n")[:50]:
        text = raw.decode("utf-8", "replace")
        default_shapes().classify_line(text, text)
        default_end_phases().of_line(text)


# ------------------------------------------------------------------ the cause named first (data: a table)

NAMED_FIRST = tomllib.loads((CORPUS.parent / "named_first.toml").read_text(encoding="utf-8"))["case"]


@pytest.mark.parametrize("c", NAMED_FIRST, ids=[c["name"] for c in NAMED_FIRST])
def test_the_cause_is_named_first(c):
    assert named(held_in(c["case"]))[0] == c["first"], c.get("why", "")


# ------------------------------------------------------------------ ranks split inside one file

def test_one_file_with_two_ranks_names_both_ops_at_the_split():
    # b/pytorch_nccl_1409 (held-in): [rank7] and [rank3] watchdog lines interleaved in one log
    got = named(held_in("b/pytorch_nccl_1409_broadcast_vs_allreduce_mismatch"))
    assert got[0] == "nccl_collective_mismatch"
    dg = analyse(held_in("b/pytorch_nccl_1409_broadcast_vs_allreduce_mismatch"))
    f = next(f for f in dg.findings if f.id == "nccl_collective_mismatch")
    ev = " ".join(f.evidence)
    assert "80078" in ev and "BROADCAST" in ev and "ALLREDUCE" in ev
