"""The verdict rules over the real captures (fixtures/nccl-2gpu) and the real device runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sparktui.diagnosis.evidence import Evidence, NodeEvidence, Worker, read_bundle, write_bundle
from sparktui.diagnosis.verdict import decide

FIX = Path(__file__).parents[1] / "fixtures"
CAP = FIX / "nccl-2gpu"
DEV = FIX / "device-runs"


def verdict_of(prefix: str):
    ((_, ev),) = read_bundle(CAP / prefix)
    return decide(ev)


def test_desync_ras_names_rank1_lagging():
    v = verdict_of("desync_ras")
    assert v.rule == "R4" and v.problem and v.finding_ids[0] == "nccl_collective_mismatch"
    assert v.details["lagging"] == [1] and v.details["op"] == "AllReduce" and v.details["seq"] == 51
    lines = "\n".join(v.evidence["local"])
    assert "frozen across polls" in lines and "rank 0=51, rank 1=50" in lines
    assert "rank 1: py-spy (frozen): sleep in worker (nccl_capture2.py:43)" in lines
    assert v.confidence >= 0.9


def test_busy_ras_is_healthy():
    v = verdict_of("busy_ras")
    assert v.rule == "healthy" and not v.problem and v.exit_code == 0
    assert v.finding_ids == []


def test_watchdog_is_desync_at_seqnum_2():
    v = verdict_of("watchdog")
    assert v.rule == "R4" and v.details["seq"] == 2 and v.details["lagging"] == [1]
    assert "nccl_collective_mismatch" in v.finding_ids and "nccl_watchdog_timeout" in v.finding_ids
    text = "\n".join(v.evidence["local"])
    assert "Flight Recorder: last enqueued 2, completed 1, pending nccl:all_reduce #2 (scheduled)" in text
    assert "Flight Recorder: last enqueued 1" in text
    # the later "Connection closed by remote peer" is a consequence, not a dead peer
    assert v.rule != "R1"


def test_init_hang_is_rendezvous_with_rank1_missing():
    v = verdict_of("init_hang")
    assert v.rule == "R2" and "nccl_init_hang" in v.finding_ids and "rendezvous_timeout" in v.finding_ids
    assert "rank 1 never joined" in v.title


def test_bad_ifname_is_bootstrap_interface():
    v = verdict_of("bad_ifname")
    assert v.rule == "R2" and "wrong_network_interface" in v.finding_ids


def test_socket_transport_is_always_reported_as_latent():
    v = verdict_of("desync_ras")
    assert "nccl_socket_transport" in [i["id"] for i in v.latent]


def test_precedence_dead_peer_beats_desync():
    ((_, ev),) = read_bundle(CAP / "desync_ras")
    ev.nodes[0].workers = [Worker(pid=926, rank=0, alive=True), Worker(pid=927, rank=1, alive=False)]
    v = decide(ev)
    assert v.rule == "R1" and "rank 1" in v.title


def test_env_difference_is_r7():
    ev = Evidence(nodes=[NodeEvidence(node="a", workers=[Worker(pid=1, rank=0, env={"NCCL_SOCKET_IFNAME": "enp1s0f1np1",
                                                                                   "MASTER_ADDR": "10.0.0.1"})]),  # data only, never contacted
                         NodeEvidence(node="b", workers=[Worker(pid=2, rank=1, env={"NCCL_SOCKET_IFNAME": "eth0",
                                                                                   "MASTER_ADDR": "10.0.0.1"})])])  # data only, never contacted
    v = decide(ev)
    (item,) = [i for i in v.latent if i["id"] == "nccl_env_mismatch"]
    assert item["evidence"] == ["NCCL_SOCKET_IFNAME: a/rank 0=enp1s0f1np1 | b/rank 1=eth0"]


def test_bundle_round_trip_gives_the_same_verdict(tmp_path):
    ((_, ev),) = read_bundle(CAP / "desync_ras")
    before = decide(ev)
    write_bundle(ev, tmp_path / "b", verdict=before.to_json())
    ((_, again),) = read_bundle(tmp_path / "b")
    after = decide(again)
    assert (after.rule, after.finding_ids, after.details) == (before.rule, before.finding_ids, before.details)


DEVICE_MODES = {"desync": ("R4", "nccl_collective_mismatch"), "never_start": ("R2", "nccl_init_hang"),
                "killed": ("R1", None), "killed_survivor": ("R1", None), "healthy": ("healthy", None),
                "stuck_kernel": ("R5", "gpu_kernel_stuck")}


@pytest.mark.parametrize("mode", sorted(DEVICE_MODES))
def test_device_run_replays_offline_to_the_live_verdict(mode):
    """Bundles written by `sparktui investigate --bundle` on two real H200s, replayed offline."""
    rule, fid = DEVICE_MODES[mode]
    live = json.loads((DEV / mode / "bundle" / "verdict.json").read_text())
    summary = json.loads((DEV / mode / "summary.json").read_text())
    ((_, ev),) = read_bundle(DEV / mode / "bundle")
    v = decide(ev)
    assert live["rule"] == rule == v.rule
    assert summary["ok"] is True
    if fid:
        assert fid in v.finding_ids
    if mode == "desync":
        assert v.details["lagging"] == [1]
    if mode in ("killed", "killed_survivor"):
        assert "rank 1" in v.title
    if mode == "never_start":
        assert v.details["missing"] == [1]
    if mode != "healthy":
        # the hang budgets, as measured on the device: suspected <= 15 s, verdict <= 60 s
        assert summary["hang_to_suspected_s"] is not None and summary["hang_to_verdict_s"] is not None
    else:
        assert summary["false_alarm"] is False and v.exit_code == 0


def test_oom_kill_in_kernel_log_is_a_dead_peer():
    ((_, ev),) = read_bundle(CAP / "desync_ras")
    ev.nodes[0].dmesg = ["[Sun Nov 29 19:21:40 2026] Out of memory: Killed process 927 (python3) total-vm:1234kB"]
    v = decide(ev)
    assert v.rule == "R1" and v.finding_ids[0] == "host_oom_killed"
    assert any("dmesg: " in line for line in v.evidence["local"])


def test_an_oom_kill_that_hit_no_rank_is_not_a_dead_peer():
    """The host's kernel log keeps kills of other jobs (seen on this machine: a test's own 22 GB
    python3); a kill of a pid that is none of the ranks', while every rank lives, is not evidence."""
    ((_, ev),) = read_bundle(CAP / "desync_ras")
    ranks = {w.pid for n in ev.nodes for w in n.workers}
    other = max(ranks | {1}) + 1000
    ev.nodes[0].dmesg = [f"[Tue Dec  1 06:58:40 2026] Out of memory: Killed process {other} (python3) "
                         "total-vm:23242564kB, anon-rss:22074680kB"]
    v = decide(ev)
    assert v.rule == "R4" and "host_oom_killed" not in v.finding_ids
    ev.nodes[0].dmesg = [f"[Tue Dec  1 06:58:40 2026] Out of memory: Killed process {other} (VLLM::Worker_TP1) "
                         "total-vm:1234kB"]
    assert decide(ev).rule == "R1"  # a worker-named victim is a rank even when its pid was not seen


@pytest.mark.parametrize("mode,what,op_b,state", [
    ("optype_mismatch", "op type", "nccl:broadcast (1048576 elements, Float)", "hung"),
    ("size_mismatch", "size", "nccl:all_reduce (524288 elements, Float)", "corrupt"),
])
def test_device_mismatch_runs_name_both_ops_at_the_split(mode, what, op_b, state):
    """Two H200s, rank 0 all_reduce at collective #151 and rank 1 something else (device script modes),
    the Flight Recorder dumped live through its debug-info pipe: the live verdict and its offline replay
    name both ranks' ops and #151.  The size mismatch did not hang (NCCL does not check counts): the
    verdict says the job runs on with wrong results, not that neither rank can finish."""
    live = json.loads((DEV / mode / "bundle" / "verdict.json").read_text())
    summary = json.loads((DEV / mode / "summary.json").read_text())
    ((_, ev),) = read_bundle(DEV / mode / "bundle")
    v = decide(ev)
    assert summary["ok"] is True and live["rule"] == v.rule == "R4"
    assert v.details["seq"] == live["details"]["seq"] == 151
    assert (v.details["a"], v.details["b"], v.details["what"]) == (0, 1, what)
    assert v.details["op_a"] == "nccl:all_reduce (1048576 elements, Float)" and v.details["op_b"] == op_b
    assert v.details["source"] == "Flight Recorder" and v.state == state
    assert "nccl_collective_mismatch" in v.finding_ids


def test_live_flight_recorder_dumps_of_a_healthy_job_are_no_lagging_rank():
    """The healthy mode with live Flight Recorder dumps: the two dumps were taken 30 collectives apart
    (1450 vs 1480) while the counts moved.  Live, that was called 'rank 0 behind' (the false alarm this
    run found); replayed after the fix it is healthy."""
    live = json.loads((DEV / "healthy_live_fr" / "bundle" / "verdict.json").read_text())
    ((_, ev),) = read_bundle(DEV / "healthy_live_fr" / "bundle")
    v = decide(ev)
    assert live["rule"] == "R4"  # what the live run said before the fix: kept as recorded
    assert v.rule == "healthy" and not v.problem, v.title
    # and live, after the fix (a second device call): healthy with both ranks' dumps in the bundle
    live = json.loads((DEV / "healthy_fr" / "bundle" / "verdict.json").read_text())
    names = {p.name for p in (DEV / "healthy_fr" / "bundle").rglob("*fr_trace_*")}
    assert live["rule"] == "healthy" and {"ev.fr_trace_0", "ev.fr_trace_1"} <= names
