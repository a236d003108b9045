"""Pure renderers: gauges, ages, timestamps, pane text (no app needed)."""

from __future__ import annotations

from sparktui.model import ContainerInfo, ContainerState, GpuInfo, GpuProcess, MemoryInfo, Milestone
from sparktui.state import NodeState
from sparktui.tui import format as fmt
from sparktui.tui.widgets import node_stats
from sparktui.tui.widgets.findings_strip import summary
from sparktui.model import Finding

GIB = 1024**3


def test_duration_like_docker():
    assert [fmt.duration(s) for s in (0, 59, 61, 3600 + 300, 86400 * 3 + 3600)] == ["0s", "59s", "1m01s", "1h05m", "3d01h"]
    assert fmt.duration(None) == "-"
    assert fmt.duration(-4) == "0s"  # clock skew never shows a negative age


def test_bar_is_exact_width_and_clamped():
    for frac in (0.0, 0.01, 0.5, 0.999, 1.0, 1.7, -1):
        filled, empty = fmt.bar(frac, 20)
        assert len(filled) + len(empty) == 20
    assert fmt.bar(1.0, 10)[0] == "█" * 10
    assert fmt.bar(0.0, 10)[0] == ""


def test_levels():
    assert fmt.level(0.2) == "$success" and fmt.level(0.8) == "$warning" and fmt.level(0.95) == "$error"


def test_memory_line_shows_used_total_cache_psi_and_reservation():
    mem = MemoryInfo(total=int(121.6 * GIB), available=int(51.6 * GIB), cached=int(3 * GIB), psi_some_avg10=2.5)
    text = node_stats.memory(NodeState("spark1", memory=mem), 100, 0.9).plain
    assert "70.0/121.6 GiB" in text and "cache 3.0" in text and "PSI 2.5%" in text and "vLLM wants 109.4" in text


def test_memory_line_shows_the_nodes_cpu_and_io_wait_once_they_slow_it():
    from sparktui.model import MemorySample, NodePressure
    from sparktui.state import ClusterState, reduce

    mem = MemoryInfo(total=int(121.6 * GIB), available=int(51.6 * GIB), psi_some_avg10=0.0)
    s = reduce(reduce(ClusterState.initial(["spark1"]), MemorySample("spark1", mem)),
               NodePressure("spark1", cpu=91.4, io=2.0, memory=0.0))
    text = node_stats.memory(s.nodes["spark1"], 120).plain
    assert "CPU wait 91%" in text and "IO wait" not in text  # 2 % of the last 10 s: not worth a word
    quiet = node_stats.memory(reduce(s, NodePressure("spark1", cpu=1.0, io=None)).nodes["spark1"], 120).plain
    assert "wait" not in quiet
    assert "wait" not in node_stats.memory(NodeState("spark1", memory=mem), 120).plain  # never read


def test_gpu_line_unified_and_discrete():
    gb10 = GpuInfo(0, "NVIDIA GB10", 96.0, 21.3, clock_sm_mhz=2418, processes=(GpuProcess(581, "ray::RayWorkerWrapper", 71 * GIB),))
    text = node_stats.gpu(NodeState("spark1", gpus=(gb10,), gpu_available=True)).plain
    assert "util 96%" in text and "21.3 W" in text and "mem unified" in text and "pid 581" in text and "71.0 GiB" in text
    h100 = GpuInfo(0, "NVIDIA H100", 10.0, 100.0, mem_used_bytes=10 * GIB, mem_total_bytes=80 * GIB)
    assert "mem 10.0/80.0 GiB" in node_stats.gpu(NodeState("x", gpus=(h100,), gpu_available=True)).plain
    assert "none" in node_stats.gpu(NodeState("x", gpu_available=False, gpu_error="nvidia-smi not found")).plain


def test_startup_progress_uses_shard_fraction():
    ms = {"container_started": Milestone("container_started", "up"),
          "weights_loading": Milestone("weights_loading", "18/40 shards", progress=0.45)}
    value, label = node_stats.startup(NodeState("spark1", milestones=ms))
    assert value == 4.45 and "loading weights 45%" in label.plain


def test_container_age_or_exit_code():
    up = ContainerInfo("a" * 64, "vllm", "img", state=ContainerState.RUNNING, started_at=1000.0)
    gone = ContainerInfo("b" * 64, "old", "img", state=ContainerState.EXITED, exit_code=137)
    assert node_stats.uptime_or_exit(up, 1075.0) == "up 1m15s"
    assert node_stats.uptime_or_exit(gone, 1075.0) == "exit 137"


def test_findings_summary_counts_and_names_the_first_ranked():
    # the caller ranks them (root cause first); the strip names that one, not the newest
    fs = [Finding("a", "error", "first [b]x[/b]", node="spark2", ts=1), Finding("b", "warning", "second", ts=2)]
    text = summary(fs, "i").plain
    assert "1 error" in text and "1 warning" in text and "root cause: first [b]x[/b] (spark2)" in text
    assert "second" not in text
    assert "investigate" not in text
    assert "i: investigate" in summary([Finding("suspected_hang", "error", "Suspected hang")], "i").plain


def test_header_shows_docker_outage_while_node_answers():
    from sparktui.model import DockerStatus, NodeReachability
    from sparktui.state import ClusterState, reduce
    from sparktui.tui.widgets import node_stats

    s = ClusterState.initial(["spark1"])
    s = reduce(s, NodeReachability("spark1", True, backend="ssh"))
    s = reduce(s, DockerStatus("spark1", False, "Cannot connect to the Docker daemon"))
    text = node_stats.header(s.node("spark1"), now=0.0).plain
    assert "● reachable" in text and "docker: Cannot connect to the Docker daemon" in text
    s = reduce(s, DockerStatus("spark1", True))
    assert "docker:" not in node_stats.header(s.node("spark1"), now=0.0).plain
