"""Collective mismatches across ranks: watchdog lines, Flight Recorder dumps, RAS counts both ways,
and ``investigate --offline`` on a plain folder of mixed files (issue 12, items 2-4)."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from sparktui.cli import main
from sparktui.commands.diagnose import analyse
from sparktui.diagnosis import collectives, flight_recorder, ras
from sparktui.diagnosis.evidence import read_bundle
from sparktui.diagnosis.verdict import decide

FX = Path(__file__).parents[1] / "fixtures"
PAIR = FX / "mismatch-2rank"
CAP = FX / "nccl-2gpu"


# --------------------------------------------------------------------------- watchdog lines


def test_work_fields_are_read_by_name_in_any_order():
    line = ("[PG ID 0 PG GUID 0(default_pg) Rank 3] Watchdog caught collective operation timeout: "
            "WorkNCCL(OpType=BROADCAST, SeqNum=161, Timeout(ms)=600000, NumelOut=8, NumelIn=8, Extra=x) ran for 1 milliseconds")
    op = collectives.op_from_line(line)
    assert (op.rank, op.seq, op.op, op.numel_in, op.numel_out, op.pg) == (3, 161, "BROADCAST", 8, 8, "0")
    from sparktui.diagnosis.nccl_lines import parse_watchdog_line

    w = parse_watchdog_line("[rank3]:[E1201 10:00:00.1 ProcessGroupNCCL.cpp:1] " + line)
    assert (w.kind, w.rank, w.seq, w.op, w.numel_in, w.timeout_ms, w.ran_ms, w.pg) == \
        ("timeout", 3, 161, "BROADCAST", 8, 600000, 1, "0")
    other = parse_watchdog_line("[Rank 2] Work WorkNCCL(SeqNum=9, OpType=ALLGATHER, NumelIn=4, NumelOut=8) timed out")
    assert (other.kind, other.rank, other.seq, other.op) == ("work", 2, 9, "ALLGATHER")


def test_fr_v1_seq_id_is_read():
    d = _dump(PAIR / "optype" / "nccl_trace_rank_1")
    for e in d["entries"]:
        e["seq_id"] = e.pop("collective_seq_id")
    assert [o.seq for o in flight_recorder.collective_ops(d, 1)] == [1, 2]


def test_real_watchdog_line_parses():
    line = (CAP / "watchdog.rank0.log").read_text().splitlines()[81]
    op = collectives.op_from_line(line)
    assert (op.rank, op.seq, op.op, op.numel_in) == (0, 2, "ALLREDUCE", 1048576)


@pytest.mark.parametrize("pair,what,op1", [("optype", "op type", "BROADCAST"), ("size", "size", "ALLREDUCE")])
def test_diagnose_rank_logs_names_the_split(pair, what, op1):
    dg = analyse([str(PAIR / pair / "rank0.log"), str(PAIR / pair / "rank1.log")])
    (mm,) = dg.summary()["mismatches"]
    assert mm["seq"] == 2 and mm["what"] == what
    assert (mm["a"]["rank"], mm["a"]["op"], mm["b"]["rank"], mm["b"]["op"]) == (0, "ALLREDUCE", 1, op1)
    top = dg.findings[0]
    assert top.id == "nccl_collective_mismatch"
    assert "#2" in top.title and "rank 0 ran ALLREDUCE" in top.title and f"rank 1 ran {op1}" in top.title
    # a split is not a lagging rank
    assert not any("behind" in f.title.lower() for f in dg.findings)


def test_diagnose_single_rank_logs_give_no_mismatch():
    dg = analyse([str(CAP / "watchdog.rank0.log"), str(CAP / "watchdog.rank1.log")])
    assert dg.summary()["mismatches"] == []
    assert dg.summary()["behind"]  # the real capture: rank 1 never reached SeqNum 2


def test_diagnose_same_ops_no_mismatch(tmp_path):
    text = (PAIR / "optype" / "rank0.log").read_text()
    (tmp_path / "a.log").write_text(text)
    (tmp_path / "b.log").write_text(text.replace("[rank0]:", "[rank1]:").replace("Rank 0]", "Rank 1]"))
    dg = analyse([str(tmp_path / "a.log"), str(tmp_path / "b.log")])
    assert dg.summary()["mismatches"] == []


# --------------------------------------------------------------------------- Flight Recorder dumps


def _dump(path: Path) -> dict:
    return flight_recorder.decode(path.read_bytes())


def test_fr_dumps_are_torch_shaped():
    d = _dump(PAIR / "optype" / "nccl_trace_rank_1")
    assert {"version", "pg_config", "pg_status", "entries"} <= set(d)
    ops = flight_recorder.collective_ops(d, 1, "x")
    assert [(o.seq, o.op, o.numel_in, o.pg, o.state) for o in ops] == [
        (1, "nccl:all_reduce", 1048576, "0", "completed"), (2, "nccl:broadcast", 1048576, "0", "scheduled")]
    assert ops[-1].frame.startswith("worker (nccl_capture.py:")


@pytest.mark.parametrize("pair,what", [("optype", "op type"), ("size", "size")])
def test_fr_dumps_alone_give_r4_with_both_ops(tmp_path, pair, what):
    for r in (0, 1):
        shutil.copy(PAIR / pair / f"nccl_trace_rank_{r}", tmp_path / f"nccl_trace_rank_{r}")
    ((name, ev),) = read_bundle(tmp_path)
    v = decide(ev)
    assert v.rule == "R4" and "nccl_collective_mismatch" in v.finding_ids
    d = v.details
    assert (d["seq"], d["a"], d["b"], d["what"], d["source"]) == (2, 0, 1, what, "Flight Recorder")
    assert "split at #2" in v.title and "on rank 0" in v.title and "on rank 1" in v.title
    if pair == "optype":
        assert "nccl:all_reduce" in d["op_a"] and "nccl:broadcast" in d["op_b"]
    else:
        assert "1048576 elements" in d["op_a"] and "524288 elements" in d["op_b"]


def test_fr_json_form_and_fr_trace_names(tmp_path):
    # torch's JSON dump (_dump_nccl_trace_json) carries the same keys; process_group as a list
    for r in (0, 1):
        d = _dump(PAIR / "optype" / f"nccl_trace_rank_{r}")
        (tmp_path / f"job.fr_trace_{r}").write_text(json.dumps(d))
    ((_, ev),) = read_bundle(tmp_path)
    v = decide(ev)
    assert v.rule == "R4" and v.details["seq"] == 2 and "nccl:broadcast" in v.details["op_b"]


def test_fr_matching_dumps_are_not_a_mismatch():
    d0 = _dump(CAP / "watchdog.fr_trace_0")
    d1 = _dump(CAP / "watchdog.fr_trace_1")
    ops = flight_recorder.collective_ops(d0, 0) + flight_recorder.collective_ops(d1, 1)
    assert collectives.mismatches(ops) == []


def test_fr_unpickler_still_refuses_classes(tmp_path):
    class Evil:
        def __reduce__(self):
            return (os.system, ("true",))

    (tmp_path / "nccl_trace_rank_0").write_bytes(pickle.dumps({"entries": [Evil()], "version": "2.10"}))
    (tmp_path / "rank0.log").write_text("[rank0]: hello\n")
    ((_, ev),) = read_bundle(tmp_path)  # the dump is skipped with a note; the log still counts
    assert not ev.nodes[0].fr_traces and any("refused" in n for n in ev.read_notes)


# --------------------------------------------------------------------------- RAS, both directions


def _comm(name: str) -> ras.RasComm:
    (comm,) = ras.parse((PAIR / "ras" / name).read_text()).comms
    return comm


def test_real_desync_ras_is_one_direction_only():
    for name in ("desync_ras.t20.ras.json", "desync_ras.t50.ras.json", "desync_ras.t20.ras.txt"):
        (comm,) = ras.parse((CAP / name).read_text()).comms
        assert ras.op_split(comm) is None
        op, skew, lag, _ = ras.skew_of(comm)
        assert (op, skew, lag) == ("AllReduce", True, (1,))


@pytest.mark.parametrize("name", ["optype_ras.t50.ras.json", "optype_ras.t50.ras.txt"])
def test_ras_split_both_directions(name):
    sp = ras.op_split(_comm(name))
    assert (sp.a, sp.op_a, sp.counts_a, sp.b, sp.op_b, sp.counts_b) == (0, "AllReduce", (161, 160), 1, "Broadcast", (1, 0))
    assert sp.totals == (161, 161) and sp.at_most == 161


def test_ras_split_opposite_direction():
    # the same story with the ranks' roles swapped: rank 0 issued the broadcast
    comm = _comm("optype_ras.t50.ras.json")
    swapped = ras.RasComm(hash=comm.hash, size=2, ranks=tuple(
        ras.RasRank(rank=1 - r.rank, pid=r.pid, counts=r.counts) for r in comm.ranks))
    sp = ras.op_split(swapped)
    assert (sp.a, sp.op_a, sp.b, sp.op_b) == (0, "Broadcast", 1, "AllReduce")


def test_ras_pair_verdict_is_split_not_lagging_rank():
    ((_, ev),) = read_bundle(PAIR / "ras")
    v = decide(ev)
    assert v.rule == "R4" and v.details["source"] == "RAS"
    assert v.title.startswith("Collective mismatch: split at #161 or before: AllReduce on rank 0 vs Broadcast on rank 1")
    assert "behind" not in v.title
    assert any("at or before #161" in line for lines in v.evidence.values() for line in lines)


def test_ras_text_two_blocks_keep_both_ops_per_rank():
    comm = _comm("optype_ras.t20.ras.txt")
    assert [dict(r.counts) for r in comm.ranks] == [{"AllReduce": 161, "Broadcast": 0},
                                                    {"AllReduce": 160, "Broadcast": 1}]


# --------------------------------------------------------------------------- a plain folder, any mix


def _plain_folder(d: Path) -> Path:
    shutil.copy(PAIR / "optype" / "rank0.log", d / "node1-stdout.txt")  # rank from its [rank0]: lines
    shutil.copy(PAIR / "optype" / "rank1.log", d / "node2-stdout.txt")
    shutil.copy(PAIR / "optype" / "nccl_trace_rank_0", d / "nccl_trace_rank_0")
    shutil.copy(PAIR / "optype" / "nccl_trace_rank_1", d / "dump_from_rank1.bin")  # kind from content
    shutil.copy(CAP / "watchdog.pyspy.rank0.txt", d / "pyspy-rank0.txt")
    shutil.copy(CAP / "desync_ras.t20.pyspy.rank1.json", d / "stack_rank1.json")
    shutil.copy(PAIR / "ras" / "optype_ras.t20.ras.txt", d / "ras_status")
    shutil.copy(CAP / "watchdog.nvidia-smi.txt", d / "smi.out")
    (d / "notes.md").write_text("what I saw\n")
    return d


def test_plain_folder_reads_every_kind(tmp_path):
    ((name, ev),) = read_bundle(_plain_folder(tmp_path))
    n = ev.nodes[0]
    assert sorted(n.logs) == ["rank 0", "rank 1"]
    assert sorted(n.fr_traces) == ["rank 0", "rank 1"]
    assert sorted(s.key for s in n.pyspy) == ["rank 0", "rank 1"]
    assert [s.key for s in n.ras] == ["text"] and len(n.gpu) == 1
    assert sorted(w.rank for w in n.workers) == [0, 1]


def test_investigate_offline_plain_folder(tmp_path, capsys):
    rc = main(["investigate", "--offline", str(_plain_folder(tmp_path)), "--json"])
    out = json.loads(capsys.readouterr().out)
    v = out["verdict"]
    assert rc == 1 and v["rule"] == "R4" and "nccl_collective_mismatch" in v["finding_ids"]
    assert v["details"]["seq"] == 2 and "nccl:all_reduce" in v["title"] and "nccl:broadcast" in v["title"]


def test_plain_folder_with_nothing_usable_is_exit_2(tmp_path, capsys):
    (tmp_path / "blob.bin").write_bytes(b"\x00\x01\x02" * 100)
    rc = main(["investigate", "--offline", str(tmp_path)])
    assert rc == 2 and "no file there is a rank log" in capsys.readouterr().err


def test_capture_folders_unchanged(capsys):
    # the capture folder still gives one verdict per prefix (its nvidia-smi table now read as GPU rows)
    rc = main(["investigate", "--offline", str(CAP), "--json"])
    out = json.loads(capsys.readouterr().out)
    names = [b["name"] for b in out["bundles"]]
    assert "watchdog" in names and "desync_ras" in names and rc == 1


# --------------------------------------------------------------------------- live: the debug-info pipe


def _pipe_rank(setup: str, dump: str, seconds: int) -> str:
    """The source of a stand-in torch rank: ``setup`` opens the debug-info pipe as ``fd`` (as torch
    holds it: a non-blocking reader), then for ``seconds`` each poke at the pipe runs ``dump``."""
    return f"""
import os, pickle, sys, time
{setup.strip()}
end = time.time() + {seconds}
while time.time() < end:
    try:
        got = os.read(fd, 64)
    except BlockingIOError:
        got = b""
    if got:
{textwrap.indent(dump.strip(), " " * 8)}
    time.sleep(0.1)
"""


_FAKE_RANK = _pipe_rank(r"""
pipe = os.environ["TORCH_NCCL_DEBUG_INFO_PIPE_FILE"] + os.environ["RANK"] + ".pipe"
os.mkfifo(pipe)
fd = os.open(pipe, os.O_RDONLY | os.O_NONBLOCK)
print("ready", flush=True)
""", r"""
data = {"version": "2.10", "pg_config": {}, "pg_status": {}, "entries": [
    {"collective_seq_id": 7, "profiling_name": "nccl:broadcast", "state": "scheduled",
     "input_sizes": [[4]], "output_sizes": [[4]], "process_group": ("0", "default_pg")}]}
with open(os.environ["TORCH_FR_DUMP_TEMP_FILE"] + os.environ["RANK"], "wb") as fh:
    fh.write(pickle.dumps(data))
""", 30)

def test_frdump_probe_writes_the_pipe_and_reads_the_dump(tmp_path):
    from sparktui.probes import procfs

    env = dict(os.environ, RANK="1", TORCH_NCCL_DEBUG_INFO_PIPE_FILE=str(tmp_path / "frpipe_"),
               TORCH_FR_DUMP_TEMP_FILE=str(tmp_path / "fr_"), TORCH_FR_BUFFER_SIZE="2000")
    p = subprocess.Popen([sys.executable, "-c", _FAKE_RANK], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        t = time.time()
        res = procfs.frdump([p.pid], wait=8)
        (item,) = res["dumps"]
        assert item["triggered"] and item["rank"] == 1 and "data" in item, item
        assert time.time() - t < 8.5
        import base64

        d = flight_recorder.decode(base64.b64decode(item["data"]))
        assert flight_recorder.collective_ops(d, 1)[0].op == "nccl:broadcast"
    finally:
        p.kill()
        p.wait()


def test_frdump_probe_without_a_reader_is_bounded(tmp_path):
    from sparktui.probes import procfs

    env = dict(os.environ, RANK="0", TORCH_NCCL_DEBUG_INFO_PIPE_FILE=str(tmp_path / "frpipe_"),
               TORCH_FR_DUMP_TEMP_FILE=str(tmp_path / "fr_"), TORCH_FR_BUFFER_SIZE="2000")
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], env=env)
    try:
        time.sleep(0.3)
        t = time.time()
        (item,) = procfs.frdump([p.pid], wait=1)["dumps"]
        assert not item["triggered"] and "error" in item and time.time() - t < 3
    finally:
        p.kill()
        p.wait()


_ARMED_RANK = _pipe_rank(r"""
print(open(sys.argv[1]).read(), end="", flush=True)
rank = os.environ["RANK"]
pipe = os.environ["TORCH_NCCL_DEBUG_INFO_PIPE_FILE"] + rank + ".pipe"
os.mkfifo(pipe)
fd = os.open(pipe, os.O_RDONLY | os.O_NONBLOCK)
open(pipe + ".ready", "w").close()
entries = [{"collective_seq_id": s, "profiling_name": "nccl:all_reduce", "state": "completed",
            "input_sizes": [[1048576]], "output_sizes": [[1048576]], "process_group": ("0", "default_pg")}
           for s in range(1, 151)]
entries.append({"collective_seq_id": 151, "profiling_name": "nccl:all_reduce" if rank == "0" else "nccl:broadcast",
                "state": "started", "input_sizes": [[1048576]], "output_sizes": [[1048576]],
                "process_group": ("0", "default_pg"),
                "frames": [{"name": "step", "filename": "/app/train.py", "line": 40 + int(rank)}]})
""", r"""
with open(os.environ["TORCH_FR_DUMP_TEMP_FILE"] + rank, "wb") as fh:
    fh.write(pickle.dumps({"version": "2.10", "pg_config": {"0": {"name": "0", "desc": "default_pg"}},
                           "pg_status": {"0": {"last_enqueued_collective": 151,
                                               "last_completed_collective": 150}},
                           "entries": entries}))
""", 120)

async def test_live_investigation_takes_fr_dumps_through_the_pipe(tmp_path):
    """Two armed stand-in ranks (real processes, real FIFOs, the pipe protocol torch uses): the
    investigation pokes each pipe, reads the dumps back, and the verdict names the split."""
    import asyncio

    from sparktui.actions.base import ActionContext
    from sparktui.actions.investigate import InvestigateAction
    from sparktui.config import parse_config
    from sparktui.nodes.local import LocalNode

    run = tmp_path / "run"
    run.mkdir()
    procs = []
    for rank in (0, 1):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT="1",
                   TORCH_NCCL_DEBUG_INFO_PIPE_FILE=str(run / "frpipe_"), TORCH_FR_DUMP_TEMP_FILE=str(run / "fr_"),
                   TORCH_FR_BUFFER_SIZE="2000", NCCL_DEBUG="INFO")
        log = open(run / f"worker_rank{rank}.log", "w")
        procs.append(subprocess.Popen([sys.executable, "-c", _ARMED_RANK, str(CAP / f"desync_ras.rank{rank}.log")],
                                      stdout=log, stderr=subprocess.STDOUT, env=env))
    try:
        async def ready():
            while not all((run / f"frpipe_{r}.pipe.ready").exists() for r in (0, 1)):
                await asyncio.sleep(0.05)
        await asyncio.wait_for(ready(), 20)
        cfg = parse_config('[cluster]\nname = "t"\n[[node]]\nname = "here"\nbackend = "local"\n')
        action = InvestigateAction(interval=1.0, run_dir=str(run), ras_port=1, gpu_samples=1, use_pyspy=False,
                                   pids={"here": [p.pid for p in procs]}, bundle=str(tmp_path / "bundle"))
        events = []
        await action.run(ActionContext(cfg, {"here": LocalNode(cfg.nodes[0])}, emit=events.append))
    finally:
        for p in procs:
            p.kill()
            p.wait()
    assert sorted(action.evidence.nodes[0].fr_traces) == ["rank 0", "rank 1"]
    assert any(e.message.startswith("Flight Recorder: dumps from rank 0, rank 1") for e in events)
    v = action.verdict
    assert v.rule == "R4" and v.details["seq"] == 151 and v.details["source"] == "Flight Recorder"
    assert "nccl:all_reduce" in v.details["op_a"] and "nccl:broadcast" in v.details["op_b"]
    assert "step (train.py:40)" in v.next_action and "step (train.py:41)" in v.next_action
    ((_, ev),) = read_bundle(tmp_path / "bundle")  # the dumps travel in the bundle: the replay agrees
    assert decide(ev).details["seq"] == 151


async def test_read_only_investigation_does_not_poke_the_pipe(tmp_path):
    from sparktui.actions.base import ActionContext
    from sparktui.actions.investigate import InvestigateAction
    from sparktui.config import parse_config
    from sparktui.nodes.local import LocalNode

    env = dict(os.environ, RANK="0", TORCH_NCCL_DEBUG_INFO_PIPE_FILE=str(tmp_path / "frpipe_"),
               TORCH_FR_DUMP_TEMP_FILE=str(tmp_path / "fr_"), TORCH_FR_BUFFER_SIZE="2000")
    os.mkfifo(tmp_path / "frpipe_0.pipe")
    reader = os.open(tmp_path / "frpipe_0.pipe", os.O_RDONLY | os.O_NONBLOCK)  # as torch holds it
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env=env)
    try:
        cfg = parse_config('[cluster]\nname = "t"\n[[node]]\nname = "here"\nbackend = "local"\n')
        action = InvestigateAction(interval=0.5, ras_port=1, gpu_samples=1, use_pyspy=False, pids={"here": [p.pid]})
        await action.run(ActionContext(cfg, {"here": LocalNode(cfg.nodes[0])}, emit=lambda e: None, read_only=True))
        try:
            poked = os.read(reader, 64)
        except BlockingIOError:
            poked = b""
    finally:
        os.close(reader)
        p.kill()
        p.wait()
    assert not action.evidence.nodes[0].fr_traces and poked == b""


def test_frdump_ignores_an_earlier_runs_dump(tmp_path):
    from sparktui.probes import procfs

    old = tmp_path / "fr_0"
    old.write_bytes(pickle.dumps({"entries": [], "version": "2.10"}))
    os.utime(old, (time.time() - 3600, time.time() - 3600))
    env = dict(os.environ, RANK="0", TORCH_FR_DUMP_TEMP_FILE=str(tmp_path / "fr_"))
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], env=env)
    try:
        time.sleep(0.3)
        (item,) = procfs.frdump([f"{p.pid}:0"], wait=1, trigger=False)["dumps"]
        assert "data" not in item and "earlier run" in item["error"]
        old.write_bytes(old.read_bytes())  # rewritten now: this process's dump
        (item,) = procfs.frdump([str(p.pid)], wait=1, trigger=False)["dumps"]
        assert "data" in item
    finally:
        p.kill()
        p.wait()


def test_exact_mismatch_outranks_the_peer_it_killed():
    """A size mismatch can end in an NCCL error and a rank exiting: the split is the cause, the dead
    peer its consequence."""
    from sparktui.diagnosis.evidence import Evidence, NodeEvidence, Worker

    n = NodeEvidence(node="gpuhost", workers=[Worker(pid=11, rank=0, alive=True), Worker(pid=12, rank=1, alive=False)])
    n.logs = {f"rank {r}": (PAIR / "size" / f"rank{r}.log").read_text().splitlines() for r in (0, 1)}
    n.fr_traces = {f"rank {r}": (PAIR / "size" / f"nccl_trace_rank_{r}").read_bytes() for r in (0, 1)}
    v = decide(Evidence(nodes=[n]))
    assert v.rule == "R4" and v.details["what"] == "size" and v.details["seq"] == 2
    assert any("is gone: it ended after the split" in line for line in v.evidence["gpuhost"])
    n.fr_traces = {}
    n.logs["rank 1"] = (CAP / "watchdog.rank1.log").read_text().splitlines()  # no split left to name
    assert decide(Evidence(nodes=[n])).rule == "R1"


def test_plain_folder_of_node_folders(tmp_path):
    """What a user of two Sparks has: one folder per node, each with its rank's files."""
    for node, r in (("spark1", 0), ("spark2", 1)):
        (tmp_path / node).mkdir()
        shutil.copy(PAIR / "optype" / f"rank{r}.log", tmp_path / node / "vllm.log")
        shutil.copy(PAIR / "optype" / f"nccl_trace_rank_{r}", tmp_path / node / f"nccl_trace_rank_{r}")
    ((_, ev),) = read_bundle(tmp_path)
    assert [n.node for n in ev.nodes] == ["spark1", "spark2"]
    v = decide(ev)
    assert v.rule == "R4" and v.details["seq"] == 2 and set(v.evidence) == {"spark1", "spark2"}


def test_nvidia_smi_q_and_table_forms():
    from sparktui.diagnosis.samples import parse_gpu_csv

    q = parse_gpu_csv((FX / "nvidia-smi" / "h200.nvidia-smi-q.txt").read_text())
    assert [(g.index, g.util, g.power_w) for g in q] == [(0, 0.0, 126.45), (1, 0.0, 81.4)]
    table = parse_gpu_csv((CAP / "watchdog.nvidia-smi.txt").read_text())
    assert [(g.index, g.util, g.power_w, g.mem_mib) for g in table] == [(0, 100.0, 123.0, 1011.0), (1, 0.0, 125.0, 1011.0)]
    # GB10 prints no memory figure (unified memory): that field stays unknown, the rest is read
    gb10 = (CAP / "watchdog.nvidia-smi.txt").read_text().replace("1011MiB / 143771MiB", "Not Supported      ")
    assert [(g.util, g.mem_mib) for g in parse_gpu_csv(gb10)] == [(100.0, None), (0.0, None)]
    from sparktui.diagnosis.plain_dir import sniff

    assert sniff("x", (FX / "nvidia-smi" / "h200.nvidia-smi-q.txt").read_bytes()[:4096]) == "gpu"


def test_op_spellings_and_size_free_ops():
    n = collectives.norm_op
    assert n("nccl:all_reduce") == n("ALLREDUCE") == n("AllReduce") == "allreduce"
    assert n("nccl:_all_gather_base") == n("_ALLGATHER_BASE") == n("all_gather_into_tensor") == "allgather"
    a = collectives.CollOp(rank=0, seq=3, op="nccl:all_to_all", numel_in=8, numel_out=8)
    b = collectives.CollOp(rank=1, seq=3, op="ALLTOALL", numel_in=6, numel_out=10)  # uneven splits are legal
    assert collectives.mismatches([a, b]) == []
    c = collectives.CollOp(rank=1, seq=3, op="ALLGATHER", numel_in=6, numel_out=12)
    (m,) = collectives.mismatches([a, c])
    assert m.what == "op type" and "rank 0 ran nccl:all_to_all" in m.title


def test_watchdog_stack_names_the_issuing_line(tmp_path):
    for r in (0, 1):
        shutil.copy(PAIR / "optype" / f"rank{r}.log", tmp_path / f"rank{r}.log")
    ((_, ev),) = read_bundle(tmp_path)
    v = decide(ev)
    assert v.details["source"] == "watchdog" and "worker (nccl_capture.py:39)" in v.next_action


def _fr_blob(op151: str) -> bytes:
    entries = [{"collective_seq_id": s, "profiling_name": "nccl:all_reduce", "state": "completed",
                "input_sizes": [[1048576]], "output_sizes": [[1048576]], "process_group": ("0", "default_pg")}
               for s in range(1, 151)]
    entries.append({"collective_seq_id": 151, "profiling_name": op151, "state": "started", "input_sizes": [[1048576]],
                    "output_sizes": [[1048576]], "process_group": ("0", "default_pg")})
    return pickle.dumps({"version": "2.10", "pg_config": {}, "pg_status": {}, "entries": entries}, protocol=2)


def test_frdump_reads_this_runs_dumps_left_in_the_run_dir(tmp_path):
    from sparktui.probes import procfs

    (tmp_path / "nccl_host_123.log").write_text("x\n")
    (tmp_path / "fr_1").write_bytes(_fr_blob("nccl:broadcast"))  # a rank that died after dumping
    (tmp_path / "fr_2").write_bytes(_fr_blob("nccl:broadcast"))
    os.utime(tmp_path / "fr_2", (time.time() - 7200, time.time() - 7200))  # an earlier run's
    (tmp_path / "fr_x").write_bytes(b"not a rank")
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"],
                         env=dict(os.environ, RANK="0", TORCH_FR_DUMP_TEMP_FILE=str(tmp_path / "fr_")))
    try:
        time.sleep(0.3)
        items = {d["rank"]: d for d in procfs.frdump([str(p.pid)], wait=1, trigger=False, run_dir=str(tmp_path))["dumps"]}
    finally:
        p.kill()
        p.wait()
    assert sorted(items) == [0, 1, 2]
    assert "data" in items[1] and items[1]["pid"] is None
    assert "not from this run" in items[2]["error"] and "data" not in items[0]


async def test_live_investigation_reads_a_dead_ranks_dump(tmp_path):
    """Rank 1 died after its dump (an NCCL error on a size mismatch ends so); rank 0 is alive and
    armed: its dump comes through the pipe, rank 1's from the run folder, and the split is named."""
    import asyncio

    from sparktui.actions.base import ActionContext
    from sparktui.actions.investigate import InvestigateAction
    from sparktui.config import parse_config
    from sparktui.nodes.local import LocalNode

    run = tmp_path / "run"
    run.mkdir()
    (run / "fr_1").write_bytes(_fr_blob("nccl:broadcast"))
    env = dict(os.environ, RANK="0", WORLD_SIZE="2", TORCH_NCCL_DEBUG_INFO_PIPE_FILE=str(run / "frpipe_"),
               TORCH_FR_DUMP_TEMP_FILE=str(run / "fr_"), TORCH_FR_BUFFER_SIZE="2000", NCCL_DEBUG="INFO")
    log = open(run / "worker_rank0.log", "w")
    p = subprocess.Popen([sys.executable, "-c", _ARMED_RANK, str(CAP / "desync_ras.rank0.log")], stdout=log,
                         stderr=subprocess.STDOUT, env=env)
    try:
        async def ready():
            while not (run / "frpipe_0.pipe.ready").exists():
                await asyncio.sleep(0.05)
        await asyncio.wait_for(ready(), 20)
        cfg = parse_config('[cluster]\nname = "t"\n[[node]]\nname = "here"\nbackend = "local"\n')
        action = InvestigateAction(interval=0.5, run_dir=str(run), ras_port=1, gpu_samples=1, use_pyspy=False,
                                   pids={"here": [p.pid]})
        await action.run(ActionContext(cfg, {"here": LocalNode(cfg.nodes[0])}, emit=lambda e: None))
    finally:
        p.kill()
        p.wait()
    assert sorted(action.evidence.nodes[0].fr_traces) == ["rank 0", "rank 1"]
    v = action.verdict
    assert v.rule == "R4" and v.details["seq"] == 151 and "nccl:broadcast" in v.details["op_b"]


def test_frdump_writes_only_fifos_and_returns_only_dumps(tmp_path):
    from sparktui.probes import procfs

    (tmp_path / "frpipe_0.pipe").write_text("")  # a regular file where the FIFO should be
    (tmp_path / "fr_0").write_text("root:x:0:0\n")  # named like a dump, but not one
    env = dict(os.environ, RANK="0", TORCH_NCCL_DEBUG_INFO_PIPE_FILE=str(tmp_path / "frpipe_"),
               TORCH_FR_DUMP_TEMP_FILE=str(tmp_path / "fr_"), TORCH_FR_BUFFER_SIZE="2000")
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], env=env)
    try:
        time.sleep(0.3)
        (item,) = procfs.frdump([str(p.pid)], wait=1)["dumps"]
    finally:
        p.kill()
        p.wait()
    assert not item["triggered"] and (tmp_path / "frpipe_0.pipe").read_text() == ""
    assert "data" not in item and "not a Flight Recorder dump" in item["error"]
