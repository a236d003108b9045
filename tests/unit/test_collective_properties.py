"""Hypothesis: the new readers (WorkNCCL fields, Flight Recorder entries as collectives, the plain
folder's sniffing, the nvidia-smi table, RAS counts compared both ways) never raise on arbitrary input."""

from __future__ import annotations

import pickle
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparktui.diagnosis import collectives, flight_recorder, plain_dir, ras
from sparktui.diagnosis.evidence import BundleError, read_bundle
from sparktui.diagnosis.nccl_lines import parse_watchdog_line
from sparktui.diagnosis.samples import parse_gpu_csv, parse_smi_table
from sparktui.diagnosis.verdict import decide

FX = Path(__file__).parents[1] / "fixtures"
PAIR = FX / "mismatch-2rank"
CAP = FX / "nccl-2gpu"

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

WORK = ("[PG ID 0 PG GUID 0(default_pg) Rank 1] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=161, OpType=BROADCAST, NumelIn=1048576, NumelOut=1048576, Timeout(ms)=600000)")
# text near the shapes the parsers look for, so the draws reach past the cheap rejects
near = st.one_of(
    st.text(max_size=4096),
    st.builds(lambda a, b, i: (WORK[:i] + a + WORK[i:] + b)[:4096], st.text(max_size=200), st.text(max_size=200),
              st.integers(min_value=0, max_value=len(WORK))),
    st.lists(st.sampled_from(["WorkNCCL(", "SeqNum=", "OpType=", "NumelIn=", "=", ", ", ")", "(", "ms", "Rank 3]",
                              "[rank2]:", "-1", "99999999999999999999", "x"]), max_size=400).map("".join),
)


@SETTINGS
@given(text=near)
def test_work_line_parsers_never_raise(text):
    f = collectives.parse_work(text)
    assert f is None or all(isinstance(k, str) and isinstance(v, str) for k, v in f.items())
    op = collectives.op_from_line(text)
    assert op is None or isinstance(op.seq, int)
    w = parse_watchdog_line(text)
    assert w is None or w.kind in ("timeout", "failure", "dump", "work")


ops = st.builds(collectives.CollOp, rank=st.integers(0, 3), seq=st.integers(0, 5),
                op=st.sampled_from(["ALLREDUCE", "nccl:all_reduce", "nccl:broadcast", "", "_ALLGATHER_BASE", "x:"]),
                numel_in=st.one_of(st.none(), st.integers(0, 10)), numel_out=st.one_of(st.none(), st.integers(0, 10)),
                dtype=st.sampled_from(["", "Float", "Half"]), pg=st.sampled_from(["", "0", "1"]))


@SETTINGS
@given(items=st.lists(ops, max_size=30))
def test_mismatches_never_raise_and_name_two_ranks(items):
    for m in collectives.mismatches(items):
        assert m.a.rank != m.b.rank and m.a.seq == m.b.seq == m.seq and m.what and m.title


FR_BASE = flight_recorder.decode((PAIR / "optype" / "nccl_trace_rank_1").read_bytes())
scalars = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(1 << 70), max_value=1 << 70),
                    st.floats(allow_nan=True), st.text(max_size=12))
values = st.recursive(scalars, lambda kids: st.one_of(st.lists(kids, max_size=4), st.tuples(kids, kids),
                                                      st.dictionaries(st.text(max_size=8), kids, max_size=4)),
                      max_leaves=10)
ENTRY_KEYS = sorted(FR_BASE["entries"][-1])


@SETTINGS
@given(key=st.sampled_from(ENTRY_KEYS + ["entries"]), value=values, which=st.integers(0, 1))
def test_fr_entries_any_value_in_any_field(key, value, which):
    doc = pickle.loads(pickle.dumps(FR_BASE))
    if key == "entries":
        doc["entries"] = value
    else:
        doc["entries"][which][key] = value
    out = flight_recorder.collective_ops(flight_recorder.decode(pickle.dumps(doc)), 1, "x")
    assert all(isinstance(o.seq, int) and isinstance(o.op, str) for o in out)


@SETTINGS
@given(name=st.text(max_size=40), head=st.binary(max_size=4096))
def test_sniff_and_rank_helpers_never_raise(name, head):
    assert plain_dir.sniff(name, head, head) in ("", "fr", "ras", "pyspy", "gpu", "threads", "log")
    r = plain_dir.rank_from_name(name)
    assert r is None or r >= 0
    text = head.decode("utf-8", "replace")
    assert plain_dir.rank_from_log(text) is None or plain_dir.rank_from_log(text) >= 0
    plain_dir.time_of(name, 0)


SMI = (CAP / "watchdog.nvidia-smi.txt").read_text()
SMI_Q = (FX / "nvidia-smi" / "h200.nvidia-smi-q.txt").read_text()[:3500]


@SETTINGS
@given(cut=st.integers(0, len(SMI)), junk=st.text(max_size=300))
def test_smi_table_never_raises(cut, junk):
    q = cut % len(SMI_Q)
    for text in (SMI[:cut] + junk + SMI[cut:], junk, "NVIDIA-SMI 5\n" + junk, SMI_Q[:q] + junk + SMI_Q[q:],
                 "==NVSMI LOG==\nGPU x\n" + junk):
        rows = parse_smi_table(text)
        assert all(isinstance(r.index, int) for r in rows)
        parse_gpu_csv(text)


counts = st.dictionaries(st.sampled_from(["AllReduce", "Broadcast", "AllGather", "x"]), st.integers(0, 300), max_size=4)


@SETTINGS
@given(per_rank=st.lists(counts, min_size=0, max_size=4), text=st.text(max_size=2000))
def test_ras_split_never_raises(per_rank, text):
    comm = ras.RasComm(hash="h", size=len(per_rank),
                       ranks=tuple(ras.RasRank(rank=i, counts=tuple(c.items())) for i, c in enumerate(per_rank)))
    sp = ras.op_split(comm)
    if sp is not None:
        # each named rank really is ahead on its op, and the split is no later than the common count allows
        assert sp.counts_a[0] > sp.counts_a[1] and sp.counts_b[0] > sp.counts_b[1]
        assert sp.at_most <= min(sp.totals) + 1
        sp.describe()
    for c in ras.parse(text).comms:
        ras.op_split(c)
    raw = (PAIR / "ras" / "optype_ras.t50.ras.txt").read_text()
    for c in ras.parse(raw[: len(text)] + text).comms:
        ras.op_split(c)


MIXED = {"node1.txt": PAIR / "optype" / "rank0.log", "node2.txt": PAIR / "optype" / "rank1.log",
         "nccl_trace_rank_0": PAIR / "optype" / "nccl_trace_rank_0",
         "nccl_trace_rank_1": PAIR / "optype" / "nccl_trace_rank_1",
         "pyspy-rank0.txt": CAP / "watchdog.pyspy.rank0.txt", "ras_status": PAIR / "ras" / "optype_ras.t20.ras.txt",
         "smi.out": CAP / "watchdog.nvidia-smi.txt"}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(victim=st.sampled_from(sorted(MIXED) + ["extra"]), data=st.binary(max_size=4096))
def test_plain_folder_any_content_in_any_file(victim, data):
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        for name, src in MIXED.items():
            shutil.copy(src, d / name)
        (d / victim).write_bytes(data)
        try:
            groups = read_bundle(d)
        except BundleError as exc:
            assert "\n" not in str(exc)
            return
        for _, ev in groups:
            decide(ev).to_json()
