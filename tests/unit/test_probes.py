"""Probe parsers against real captured output (/proc, ip -j, nvidia-smi on an H200) and the GB10
stand-in, plus the log cursor that makes resumed streams exact."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from sparktui.logs.follow import LogCursor, split_ts
from sparktui.model import ContainerState
from sparktui.probes import gpu, links, memory
from sparktui.probes.containers import from_inspect
from sparktui.timefmt import parse, parse_ns

FIX = Path(__file__).resolve().parent.parent / "fixtures"
SMI = FIX / "nvidia-smi"


def test_meminfo_real_capture():
    text = (FIX / "proc" / "meminfo").read_text()
    m = memory.parse_meminfo(text)
    info = memory.memory_info(text, (FIX / "proc" / "pressure-memory").read_text())
    assert info.total == m["MemTotal"] and info.total % 1024 == 0 and info.total > 1 << 30
    assert info.available == m["MemAvailable"]
    assert info.used == info.total - info.available
    assert info.psi_some_avg10 == 0.0 and info.psi_full_avg10 == 0.0
    assert m["HugePages_Total"] == 0  # unit-less counts are not scaled


def test_meminfo_gb10_numbers_and_psi():
    text = "MemTotal:       124610168 kB\nMemFree:         2209864 kB\nMemAvailable:    9876543 kB\nCached:          6000000 kB\n"
    psi = "some avg10=12.50 avg60=3.10 avg300=0.80 total=123\nfull avg10=4.25 avg60=1.00 avg300=0.20 total=45\n"
    info = memory.memory_info(text, psi)
    assert info.total == 124610168 * 1024
    assert info.used == (124610168 - 9876543) * 1024
    assert info.cached == 6000000 * 1024
    assert (info.psi_some_avg10, info.psi_full_avg10) == (12.5, 4.25)


def test_meminfo_without_memtotal_is_an_error():
    with pytest.raises(ValueError):
        memory.memory_info("garbage\n")


def test_query_gpu_real_h200():
    g = gpu.parse_query_gpu((SMI / "h200.query-gpu.busy.txt").read_text())
    assert len(g) == 1
    assert g[0].name == "NVIDIA H200" and g[0].index == 0
    assert g[0].power_w == pytest.approx(126.62) and g[0].power_limit_w == 700.0
    assert g[0].clock_sm_mhz == 1980 and g[0].temp_c == 39
    assert g[0].mem_used_bytes == 2679 * gpu.MIB and g[0].mem_total_bytes == 143771 * gpu.MIB
    assert not g[0].unified_memory


def test_compute_apps_real_h200_attached_to_the_gpu():
    s = gpu.gpu_sample("n", 0, (SMI / "h200.query-gpu.busy.txt").read_text(), 0,
                       (SMI / "h200.compute-apps.busy.txt").read_text())
    procs = s.gpus[0].processes
    assert [(p.pid, p.used_memory_bytes) for p in procs] == [(491, 1634 * gpu.MIB), (492, 1030 * gpu.MIB)]
    assert procs[0].name == "/opt/torch/.venv/bin/python3"


def test_idle_compute_apps_is_empty():
    assert gpu.parse_compute_apps((SMI / "h200.compute-apps.idle.txt").read_text()) == []


def _gb10(*args: str, conf: str | None = None, tmp_path: Path | None = None) -> str:
    exe = SMI / "gb10-nvidia-smi"
    if conf is not None and tmp_path is not None:
        dst = tmp_path / "nvidia-smi"
        dst.write_text(exe.read_text())
        (tmp_path / "nvidia-smi.json").write_text(conf)
        exe = dst
    return subprocess.run([sys.executable, str(exe), *args], capture_output=True, text=True, check=True).stdout


def test_gb10_memory_not_available_but_processes_are(tmp_path):
    q = _gb10(*gpu.QUERY_GPU[1:])
    apps = _gb10(*gpu.QUERY_APPS[1:], conf='{"apps": [[4242, "/usr/bin/python3", 98304]]}', tmp_path=tmp_path)
    s = gpu.gpu_sample("spark1", 0, q, 0, apps)
    assert s.available and s.error is None
    g = s.gpus[0]
    assert g.name == "NVIDIA GB10"
    assert g.mem_used_bytes is None and g.mem_total_bytes is None and g.unified_memory
    assert g.power_limit_w is None and g.util_percent == 96
    assert g.processes[0].used_memory_bytes == 98304 * gpu.MIB


def test_not_supported_and_units_tolerated():
    g = gpu.parse_query_gpu("0, NVIDIA GB10, 3 %, 11.50 W, [Not Supported], 208 MHz, 41, Not Supported, [N/A]\n")
    assert g[0].util_percent == 3 and g[0].power_w == 11.5 and g[0].power_limit_w is None
    assert g[0].mem_used_bytes is None and g[0].clock_sm_mhz == 208


def test_no_nvidia_smi_and_bad_field():
    s = gpu.gpu_sample("n", 127, "", err="bash: line 1: nvidia-smi: command not found")
    assert not s.available and s.gpus == ()
    bad = gpu.gpu_sample("n", 2, (SMI / "h200.bad-field.stdout.txt").read_text())
    assert bad.available and "not a valid field" in (bad.error or "")
    short = gpu.gpu_sample("n", 0, "0, NVIDIA H200, 0\n")
    assert short.error and "expected 9 fields" in short.error


def test_ip_addr_real_capture_and_ibdev2netdev():
    rdma = links.parse_ibdev2netdev("rocep1s0f1 port 1 ==> enp1s0f1np1 (Up)\nroceP2p1s0f1 port 1 ==> enP2p1s0f1np1 (Down)\n")
    assert rdma == {"enp1s0f1np1": "rocep1s0f1", "enP2p1s0f1np1": "roceP2p1s0f1"}
    ls = {l.name: l for l in links.parse_ip_addr((FIX / "ip" / "ip-j-addr.json").read_text(), {"lo": "x"})}
    assert "127.0.0.1/8" in ls["lo"].addresses and ls["lo"].mtu == 65536 and ls["lo"].rdma_device == "x"
    assert ls["eth0"].state == "UP"
    with pytest.raises(ValueError):
        links.parse_ip_addr("not json")


def test_docker_times():
    assert parse("0001-01-01T00:00:00Z") is None
    t = parse("2026-11-29T20:00:25.011869369Z")
    assert t == pytest.approx(1795982425.011869, abs=1e-6)
    assert parse("2026-11-29T21:00:25+01:00") == pytest.approx(1795982425.0)
    assert parse_ns("2026-11-29T20:00:25.0118Z") == 1795982425_011800000
    assert parse_ns("2026-11-29T20:00:25Z") == 1795982425_000000000
    assert parse_ns("garbage") is None


def test_from_inspect_killed_container():
    info = from_inspect({
        "Id": "f3b63fcd5742" + "0" * 52, "Name": "/vllm_node", "Image": "sha256:abc",
        "Config": {"Image": "vllm-node", "Cmd": ["sleep", "1"], "Labels": {"a": "b"}},
        "State": {"Status": "exited", "ExitCode": 137, "StartedAt": "2026-11-29T20:00:25.01Z",
                  "FinishedAt": "2026-11-29T20:01:25.5Z", "OOMKilled": False},
    })
    assert info.name == "vllm_node" and info.image == "vllm-node" and info.image_id == "sha256:abc"
    assert info.state is ContainerState.EXITED and info.exit_code == 137 and info.status == "Exited (137)"
    assert info.finished_at - info.started_at == pytest.approx(60.49)
    running = from_inspect({"Id": "x", "Name": "/r", "State": {"Status": "running", "ExitCode": 0,
                                                             "Health": {"Status": "healthy"}}})
    assert running.exit_code is None and running.health == "healthy"


def test_log_cursor_resume_has_no_duplicate_and_no_gap():
    c = LogCursor()
    first = [("2026-11-29T20:00:25.1Z", "a"), ("2026-11-29T20:00:25.2Z", "b"), ("2026-11-29T20:00:25.2Z", "b")]
    assert [c.accept(ts, t) for ts, t in first] == [True, True, True]
    assert c.since() == pytest.approx(parse_ns("2026-11-29T20:00:25.199Z") / 1e9)
    c.begin_resume()
    # the daemon replays from `since`: repeats are dropped, a third "b" in the same ns and later lines kept
    again = [("2026-11-29T20:00:25.1Z", "a"), ("2026-11-29T20:00:25.2Z", "b"), ("2026-11-29T20:00:25.2Z", "b"),
             ("2026-11-29T20:00:25.2Z", "b"), ("2026-11-29T20:00:25.3Z", "c")]
    assert [c.accept(ts, t) for ts, t in again] == [False, False, False, True, True]


def test_split_ts():
    assert split_ts("2026-11-29T20:00:25.011869369Z hello world") == ("2026-11-29T20:00:25.011869369Z", "hello world")
    assert split_ts("2026-11-29T20:00:25.011869369Z ") == ("2026-11-29T20:00:25.011869369Z", "")
    assert split_ts("no timestamp here") == (None, "no timestamp here")


def test_from_event_die_of_an_rm_container():
    from sparktui.probes.containers import from_event

    ev = {"Type": "container", "Action": "die", "id": "abc123", "from": "sparktui-base:bookworm",
          "Actor": {"ID": "abc123", "Attributes": {"name": "short", "image": "sparktui-base:bookworm",
                                                   "exitCode": "137", "tier": "x"}},
          "time": 1795982425, "timeNano": 1795982425011869369}
    info = from_event(ev, "die")
    assert (info.name, info.state, info.exit_code, info.status) == ("short", ContainerState.EXITED, 137, "Exited (137)")
    assert info.finished_at == pytest.approx(1795982425.011869) and info.labels == (("tier", "x"),)
    assert from_event(ev, "start").state is ContainerState.RUNNING and from_event(ev, "start").exit_code is None
