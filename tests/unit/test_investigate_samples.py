"""py-spy dumps, nvidia-smi CSV and /proc thread listings from the real captures."""

from __future__ import annotations

from pathlib import Path

from sparktui.diagnosis import pyspy
from sparktui.diagnosis.samples import parse_gpu_csv, parse_threads

FX = Path(__file__).parents[1] / "fixtures" / "nccl-2gpu"


def read(name: str) -> str:
    return (FX / name).read_text()


def test_pyspy_json_desync_places():
    r0, r1 = pyspy.parse(read("desync_ras.t20.pyspy.rank0.json")), pyspy.parse(read("desync_ras.t20.pyspy.rank1.json"))
    assert r0.pid == 926 and r0.main.active is True
    assert pyspy.where(r0) == "sync" and pyspy.top_frame(r0).startswith("synchronize (torch/cuda/__init__.py:1162)")
    assert pyspy.where(r1) == "sleep" and pyspy.user_frame(r1) == "worker (nccl_capture2.py:43)"


def test_pyspy_same_place_across_dumps():
    a = pyspy.parse(read("desync_ras.t20.pyspy.rank0.json"))
    b = pyspy.parse(read("desync_ras.t50.pyspy.rank0.json"))
    other = pyspy.parse(read("desync_ras.t20.pyspy.rank1.json"))
    assert pyspy.same_place(a, b) is True
    assert pyspy.same_place(a, other) is False
    assert pyspy.same_place(a, pyspy.parse("Error: Failed to parse python binary")) is None


def test_pyspy_text_and_native():
    d = pyspy.parse(read("init_hang.pyspy.rank0.txt"))
    assert d.pid == 1073 and d.main.active is False
    assert pyspy.where(d) == "rendezvous"
    nat = pyspy.parse(read("watchdog.pyspy-native.rank0.txt"))
    names = [f.name for f in nat.main.frames]
    assert "cuCtxSynchronize_v2" in names and "synchronize" in names
    assert [f.name for f in nat.main.python_frames][:2] == ["synchronize", "worker"]
    assert pyspy.where(nat) == "sync"


def test_gpu_csv_rows():
    rows = parse_gpu_csv(read("desync_ras.t20.gpu.csv"))
    assert [(r.index, r.util, r.power_w, r.sm_mhz) for r in rows] == [(0, 100.0, 123.57, 1980.0), (1, 0.0, 124.6, 1980.0)]
    gb10 = "index, utilization.gpu [%], power.draw [W], memory.used [MiB], clocks.current.sm [MHz]\n0, 96 %, 17.20 W, [N/A], 2405 MHz\n"
    (row,) = parse_gpu_csv(gb10)
    assert row.util == 96.0 and row.mem_mib is None


def test_threads_capture_form_keeps_names_with_spaces():
    (group,) = parse_threads(read("desync_ras.t20.threads.txt"))
    names = {t.comm for t in group.threads}
    assert {"NCCL RAS", "NCCL Service 0", "pt_nccl_watchdg"} <= names
    ras = next(t for t in group.threads if t.comm == "NCCL RAS")
    assert ras.state == "?" and ras.wchan == "poll_schedule_timeout.constprop.0"
    assert sum(1 for t in group.threads if t.state == "R") == 1  # rank 0 spins in cudaDeviceSynchronize


def test_threads_own_form_per_rank():
    text = "## rank 0 pid 10\n10\tpython3\tR\t0\t500\t99.0\n11\tNCCL RAS\tS\tdo_poll\t3\t0.0\n## rank 1 pid 20\n20\tpython3\tS\tfutex_do_wait\t9\t0.0\n"
    g0, g1 = parse_threads(text)
    assert (g0.rank, g0.pid, len(g0.threads)) == (0, 10, 2) and g0.threads[0].cpu == 99.0
    assert (g1.rank, g1.threads[0].state, g1.threads[0].wchan) == (1, "S", "futex_do_wait")
