"""Ordering: most severe and most causal first (catalogue caused_by / consequence_of)."""

from __future__ import annotations

from sparktui.diagnosis import Diagnoser

ENGINE_DEAD = "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause."
RPC = "ERROR 09-06 04:14:11 [core.py:640] TimeoutError: RPC call to execute_model timed out."
OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.17 GiB."
SOCKET = "vm:607:607 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] [send] via NET/Socket/0"
ZERO = ["Traceback (most recent call last):", '  File "a.py", line 1, in <module>', "    f()",
        "ZeroDivisionError: division by zero"]


def order(sources: dict[str, list[str]]) -> list[str]:
    dg = Diagnoser()
    for name, lines in sources.items():
        dg.feed_lines(name, lines)
    dg.finish()
    return [f.id for f in dg.findings]


def test_root_cause_before_consequence_across_sources():
    # the API server's log says the engine died; the worker's log holds the cause
    assert order({"api.log": [ENGINE_DEAD], "worker.log": [OOM]}) == ["cuda_oom", "engine_dead"]
    assert order({"core.log": [RPC, ENGINE_DEAD]}) == ["rpc_timeout", "engine_dead"]


def test_a_cause_that_comes_later_in_the_same_log_is_not_the_cause():
    # socket closed AFTER the watchdog fired: the peer exiting, listed after the timeout
    wd = ("[rank0]:[E1129 19:11:59.7 ProcessGroupNCCL.cpp:689] [Rank 0] Watchdog caught collective operation "
          "timeout: WorkNCCL(SeqNum=2, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=25000) ran for 25006 "
          "milliseconds before timing out.")
    closed = "[2026-11-29 19:12:35] vm:697:788 [0] misc/socket.cc:72 NCCL WARN socketProgress: Connection closed by remote peer "
    assert order({"r0.log": [wd, closed]}) == ["nccl_watchdog_timeout", "nccl_network_error"]
    assert order({"r0.log": [closed, wd]}) == ["nccl_network_error", "nccl_watchdog_timeout"]


def test_errors_before_warnings_and_named_before_generic():
    got = order({"a.log": [SOCKET] + ZERO + ["", OOM]})
    assert got == ["cuda_oom", "unhandled_exception", "nccl_socket_transport"]


def test_a_hang_the_ranks_wait_in_ranks_below_the_rank_that_failed_to_join():
    # the drill wrong-gloo-interface: spark2's rank names its interface, then the live stall rule sees no
    # rank progress; the wait is the consequence, whichever source raised it and whatever its severity
    from sparktui.diagnosis.catalogue import default_catalogue
    from sparktui.diagnosis.ranking import rank_findings
    from sparktui.model import Finding

    cause = Finding(id="wrong_network_interface", severity="error", title="wrong interface", source="spark2/c",
                    node="spark2", line=120)
    hang = Finding(id="suspected_hang", severity="error", title="no progress on any rank for 11 s", source="",
                   node="", line=None)
    for given in ([cause, hang], [hang, cause]):
        assert [f.id for f in rank_findings(given, default_catalogue())] == ["wrong_network_interface", "suspected_hang"]
    # alone, a hang is still first over a warning that explains nothing about it
    other = Finding(id="torch_arch_warning", severity="warning", title="arch", source="spark1/c", node="spark1", line=3)
    assert rank_findings([other, hang], default_catalogue())[0].id == "suspected_hang"
