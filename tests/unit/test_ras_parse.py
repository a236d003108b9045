"""RAS answers as captured on two H200s (fixtures/nccl-2gpu), JSON and text, and the 2.28.9 defect."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparktui.diagnosis import ras

FX = Path(__file__).parents[1] / "fixtures" / "nccl-2gpu"


def read(name: str) -> str:
    return (FX / name).read_text()


def test_json_desync_counts_and_identity():
    st = ras.parse(read("desync_ras.t20.ras.json"))
    assert st.ok and st.format == "json" and st.nccl_version == "2.28.9"
    (comm,) = st.comms
    assert comm.hash == "0x8520ecc8bdb3f238" and comm.size == 2
    assert [(r.rank, r.pid, r.count("AllReduce")) for r in comm.ranks] == [(0, 926, 51), (1, 927, 50)]
    assert all(r.init_state == 0 and not r.abort_flag for r in comm.ranks)


def test_text_desync_names_both_ranks_and_mismatch():
    st = ras.parse(read("desync_ras.t20.ras.txt"))
    assert st.ok and st.format == "text" and st.nccl_version == "2.28.9"
    (comm,) = st.comms
    assert comm.errors == "MISMATCH" and comm.status == "RUNNING"
    assert [(r.rank, r.pid, r.count("AllReduce")) for r in comm.ranks] == [(0, 926, 51), (1, 927, 50)]
    assert any("different AllReduce operation counts" in m for m in st.messages)


def test_text_healthy_is_running_ok():
    st = ras.parse(read("busy_ras.t12.ras.txt"))
    assert st.ok and [(c.status, c.errors) for c in st.comms] == [("RUNNING", "OK")]


def test_frozen_skew_across_polls_names_lagging_rank():
    (cmp,) = ras.compare(ras.parse(read("desync_ras.t20.ras.json")), ras.parse(read("desync_ras.t50.ras.json")))
    assert cmp.frozen and not cmp.advanced and cmp.skew
    assert cmp.lagging == (1,) and cmp.op == "AllReduce"


def test_json_and_text_twins_agree():
    a, b = ras.parse(read("desync_ras.t50.ras.json")), ras.parse(read("desync_ras.t50.ras.txt"))
    assert ras.skew_of(a.comms[0])[:3] == ras.skew_of(b.comms[0])[:3]


def test_missing_ranks_missing_comma_defect_is_repaired():
    # NCCL 2.28.9 writes missing_ranks objects back to back without a comma
    raw = read("desync_ras.t20.ras.json").replace(
        '"missing_ranks": [\n\n      ]',
        '"missing_ranks": [\n        {"rank": 1, "host": "192.0.2.2", "pid": 927, "status": {"unresponsive": true, '
        '"considered_dead": true}}\n        {"rank": 2, "host": "192.0.2.3", "pid": 11, "status": {"unresponsive": true, '
        '"considered_dead": false}}\n      ]')
    st = ras.parse(raw)
    assert st.ok
    assert [(m.rank, m.considered_dead, m.unresponsive) for m in st.comms[0].missing] == [(1, True, True), (2, False, True)]
    assert [m.rank for m in st.dead_ranks] == [1, 2]


@pytest.mark.parametrize("raw, why", [
    ("### connect failed: [Errno 111] Connection refused\n", "Connection refused"),
    ("SERVER PROTOCOL 2\nOK\nOK\n{\"communicators\": [", "unreadable RAS JSON"),
    ("", "empty answer"),
])
def test_unusable_answers_say_why(raw, why):
    st = ras.parse(raw)
    assert not st.ok and why in st.error


def test_advancing_counts_are_not_frozen():
    busy = read("busy_ras.t12.ras.json")
    later = busy.replace('"AllReduce": 1200', '"AllReduce": 2400')
    (cmp,) = ras.compare(ras.parse(busy), ras.parse(later))
    assert cmp.advanced and not cmp.frozen and not cmp.skew


def test_device_run_polls_json_and_text_agree_and_stay_frozen():
    """The live investigation's own RAS polls on two H200s (tests/fixtures/device-runs/desync)."""
    d = Path(__file__).parents[1] / "fixtures" / "device-runs" / "desync" / "bundle" / "gpuhost"
    j0, j1 = ras.parse((d / "ev.t00.ras.json").read_text()), ras.parse((d / "ev.t20.ras.json").read_text())
    t1 = ras.parse((d / "ev.t20.ras.txt").read_text())
    (cmp,) = ras.compare(j0, j1)
    assert cmp.frozen and cmp.skew and cmp.lagging == (1,) and dict(cmp.counts) == {0: 160, 1: 150}
    assert [(r.rank, r.total) for r in t1.comms[0].ranks] == [(0, 160), (1, 150)] and t1.comms[0].errors == "MISMATCH"
