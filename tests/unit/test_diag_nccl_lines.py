"""The public NCCL line parser (used by the investigator too) and the per-rank tracker."""

from __future__ import annotations

from pathlib import Path

from sparktui.diagnosis import parse_nccl_line
from sparktui.diagnosis.nccl_lines import parse_watchdog_line, strip_line_prefix
from sparktui.diagnosis.nccl_ranks import RankTracker, compare_ranks

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "nccl-2gpu"


def test_envelope_fields_and_kinds_on_real_lines():
    p = parse_nccl_line("vm:607:607 [0] NCCL INFO ncclCommInitRankConfig comm 0x1db76f30 rank 0 nranks 2 cudaDev 0 "
                        "nvmlDev 0 busId 60 commId 0xe94d259688cfeb1c - Init COMPLETE")
    assert (p.host, p.pid, p.tid, p.dev, p.level, p.kind) == ("vm", 607, 607, 0, "INFO", "comm")
    assert p.data["comm_id"] == "0xe94d259688cfeb1c" and p.data["phase"] == "COMPLETE" and p.rank == 0
    w = parse_nccl_line("[2026-11-29 19:12:35] vm:697:788 [0] misc/socket.cc:72 NCCL WARN socketProgress: "
                        "Connection closed by remote peer ")
    assert (w.ts, w.src_file, w.src_line, w.level, w.kind) == ("2026-11-29 19:12:35", "misc/socket.cc", 72, "WARN",
                                                               "peer_closed")
    c = parse_nccl_line("vm:607:607 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] [send] via NET/Socket/0")
    assert c.kind == "channel" and c.data["net_kind"] == "Socket" and c.data["direction"] == "send"
    v = parse_nccl_line("vm:607:607 [0] NCCL INFO NCCL version 2.28.9+cuda13.0")
    assert v.kind == "version" and v.data == {"version": "2.28.9", "cuda": "13.0"}


def test_ray_prefix_docker_timestamp_and_ansi():
    line = ("2026-01-01T00:00:00.123456789Z \x1b[36m(RayWorkerWrapper pid=581, ip=192.168.100.12)\x1b[0m "  # log text only
            "spark2:581:600 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA\r")
    p = parse_nccl_line(line)
    assert (p.actor, p.actor_pid, p.actor_ip, p.host) == ("RayWorkerWrapper", 581, "192.168.100.12", "spark2")  # parsed, never contacted
    assert p.data["net_kind"] == "IB" and p.data["gdr"] == "/GDRDMA"
    ib = parse_nccl_line("node1:581:581 [0] NCCL INFO NET/IB : Using [0]rocep1s0f1:1/RoCE [1]roceP2p1s0f1:1/RoCE [RO]; "
                         "OOB enp1s0f1np1:192.168.100.11<0>")  # log text only
    assert ib.kind == "net_ib" and ib.data["ifname"] == "enp1s0f1np1" and "roceP2p1s0f1" in ib.data["devices"]
    assert parse_nccl_line(b"x:1:2 [0] NCCL WARN Call to ibv_modify_qp failed with 22 Invalid argument, on dev").kind \
        == "ib_modify_qp"
    assert strip_line_prefix("(EngineCore_DP0 pid=96) hello\r\n") == "hello"


def test_not_nccl_and_garbage():
    for text in ("", "NCCL", "hello world", "NCCL INFO without envelope", "\x00\xff", "a:b:c NCCL INFO x",
                 "x" * 100_000 + " NCCL INFO"):
        assert parse_nccl_line(text) is None
    assert parse_nccl_line("h:1:2 [0] NCCL INFO " + "y" * 50_000).kind == "other"


def test_watchdog_lines():
    w = parse_watchdog_line("[rank0]:[E1129 19:11:59.745394709 ProcessGroupNCCL.cpp:689] [Rank 0] Watchdog caught "
                            "collective operation timeout: WorkNCCL(SeqNum=2, OpType=ALLREDUCE, NumelIn=1048576, "
                            "NumelOut=1048576, Timeout(ms)=25000) ran for 25006 milliseconds before timing out.")
    assert (w.kind, w.rank, w.seq, w.op, w.timeout_ms) == ("timeout", 0, 2, "ALLREDUCE", 25000)
    f = parse_watchdog_line("[rank0]:[E1129 19:12:00.754984827 ProcessGroupNCCL.cpp:2303] [PG ID 0 PG GUID 0(default_pg) "
                            "Rank 0]  failure detected by watchdog at work sequence id: 2 PG status: last enqueued "
                            "work: 2, last completed work: 1")
    assert (f.kind, f.rank, f.seq, f.last_enqueued, f.last_completed) == ("failure", 0, 2, 2, 1)
    assert parse_watchdog_line("nothing to see") is None


def _tracker(name: str) -> RankTracker:
    t = RankTracker(name)
    for i, line in enumerate((FIX / name).read_text().split("\n"), 1):
        p = parse_nccl_line(line)
        if p:
            t.feed(p, i, line)
        w = parse_watchdog_line(line)
        if w:
            t.feed_watchdog(w, i, line)
    return t


def test_rank_tracker_on_healthy_rank():
    t = _tracker("healthy.rank1.log")
    j = t.to_json()
    assert (j["rank"], j["version"], j["transport"]) == (1, "2.28.9", "NET/Socket")
    assert j["comms"][0]["init"] == "COMPLETE" and j["comms"][0]["rings_connected"]
    assert len(j["comms"][0]["channels"]) == 4
    assert "Closing env plugin" in j["last_nccl_line"]


def test_init_started_on_one_rank_only_is_behind():
    r0 = _tracker("healthy.rank0.log")
    lines = (FIX / "healthy.rank1.log").read_text().split("\n")
    cut = next(i for i, ln in enumerate(lines) if "Init START" in ln) + 3
    r1 = RankTracker("r1")
    for i, line in enumerate(lines[:cut], 1):
        p = parse_nccl_line(line)
        if p:
            r1.feed(p, i, line)
    behind = compare_ranks([r0, r1])
    assert [(b.rank, b.kind) for b in behind] == [(1, "init")]
    assert compare_ranks([r0, _tracker("healthy.rank1.log")]) == []


def test_bootstrap_on_different_subnets_is_flagged():
    from sparktui.diagnosis import Diagnoser

    dg = Diagnoser()
    dg.feed_lines("spark1.log", ["spark1:10:10 [0] NCCL INFO Bootstrap: Using [0]enp1s0f1np1:192.168.100.11<0>"])  # log text only
    dg.feed_lines("spark2.log", ["spark2:20:20 [0] NCCL INFO Bootstrap : Using eno1:10.1.2.3<0>"])  # log text only
    dg.finish()
    f = [f for f in dg.findings if f.id == "wrong_network_interface"]
    assert len(f) == 1 and "different subnets" in f[0].title
    assert any("10.1.2.3" in e for e in f[0].evidence) and any("192.168.100.11" in e for e in f[0].evidence)  # data only, never contacted


def test_coll_opcount_flood_names_the_lower_rank():
    from sparktui.diagnosis import Diagnoser

    def rank_log(rank, pid, comm, last_op):
        lines = [f"h{rank}:{pid}:{pid} [{rank}] NCCL INFO ncclCommInitRank comm {comm} rank {rank} nranks 2 cudaDev "
                 f"{rank} nvmlDev {rank} busId 1000 commId 0xabc - Init COMPLETE"]
        lines += [f"h{rank}:{pid}:{pid} [{rank}] NCCL INFO AllReduce: opCount {op:x} sendbuff 0x7f0 recvbuff 0x7f0 "
                  f"count 1048576 datatype 7 op 0 root 0 comm {comm} [nranks=2] stream 0x5" for op in range(last_op + 1)]
        return lines

    dg = Diagnoser()
    dg.feed_lines("r0.log", rank_log(0, 100, "0x11", 5000))
    dg.feed_lines("r1.log", rank_log(1, 200, "0x22", 4999))
    dg.finish()
    behind = dg.summary()["behind"]
    assert [(b["rank"], b["source"]) for b in behind] == [(1, "r1.log")]
    assert "0x1387" in behind[0]["reason"] and "0x1388" in behind[0]["reason"]
    ranks = {r["rank"]: r["comms"][0]["max_op_count"] for r in dg.summary()["nccl"]}
    assert ranks == {0: 5000, 1: 4999}


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_REAL = (FIX / "watchdog.rank0.log").read_text().split("\n")[:90]


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.text(max_size=400), st.binary(max_size=400),
                 st.tuples(st.sampled_from(_REAL), st.text(max_size=30), st.integers(0, 200)).map(
                     lambda t: t[0][:t[2]] + t[1] + t[0][t[2]:])))
def test_parsers_never_raise(text):
    p = parse_nccl_line(text)
    assert p is None or p.level in ("INFO", "WARN", "TRACE", "CALL", "ERROR", "ABORT")
    parse_watchdog_line(text if isinstance(text, str) else text.decode("utf-8", "replace"))
