"""ClusterState is a pure reducer: same events in, same state out; no IO."""

from __future__ import annotations

from sparktui.model import (
    ContainerChanged, ContainerInfo, ContainersSnapshot, ContainerState, Finding, FindingRaised,
    GpuInfo, GpuSample, LogBatch, LogLine, MemoryInfo, MemorySample, Milestone, MilestoneReached,
    NodeReachability,
)
from sparktui.state import MEMORY_HISTORY, ClusterState, reduce, reduce_all

GiB = 1024**3


def _c(name, state=ContainerState.RUNNING, **kw):
    return ContainerInfo(id=name * 4, name=name, image="vllm-node", state=state, **kw)


def test_initial_state_has_nodes_in_order():
    s = ClusterState.initial(["spark1", "spark2"])
    assert s.order == ("spark1", "spark2")
    assert s.node("spark1").reachable is None


def test_reachability_keeps_first_unreachable_time():
    s = ClusterState.initial(["a"])
    s = reduce(s, NodeReachability("a", True, ts=1.0))
    s = reduce(s, NodeReachability("a", False, ts=10.0, error="timeout", retry_in=1))
    s = reduce(s, NodeReachability("a", False, ts=12.0, error="timeout", retry_in=2))
    n = s.node("a")
    assert n.reachable is False and n.unreachable_since == 10.0 and n.retry_in == 2
    s = reduce(s, NodeReachability("a", True, ts=20.0))
    assert s.node("a").reachable is True and s.node("a").unreachable_since is None


def test_containers_snapshot_and_change():
    s = ClusterState.initial(["a"])
    s = reduce(s, ContainersSnapshot("a", (_c("head"), _c("idle", ContainerState.EXITED, exit_code=0))))
    assert [c.name for c in s.node("a").container_list()] == ["head", "idle"]
    s = reduce(s, ContainerChanged("a", _c("head", ContainerState.EXITED, exit_code=137)))
    assert s.node("a").containers["head"].exit_code == 137


def test_removed_container_with_logs_stays_visible():
    s = ClusterState.initial(["a"])
    s = reduce(s, ContainersSnapshot("a", (_c("vllm"),)))
    s = reduce(s, LogLine("a", "vllm", "hello", seq=1))
    s = reduce(s, ContainersSnapshot("a", ()))
    assert s.node("a").containers["vllm"].state is ContainerState.REMOVED


def test_memory_history_is_bounded():
    s = ClusterState.initial(["a"])
    for i in range(MEMORY_HISTORY + 50):
        s = reduce(s, MemorySample("a", MemoryInfo(total=128 * GiB, available=(120 - i % 100) * GiB)))
    n = s.node("a")
    assert len(n.memory_history) == MEMORY_HISTORY
    assert abs(n.memory.used_fraction - n.memory_history[-1]) < 1e-9


def test_a_source_with_logs_is_known_and_more_of_its_lines_leave_the_state_as_it_is():
    s = ClusterState.initial(["a"])
    lines = tuple(LogLine("a", "c", f"l{i}", ts=100.0 + i, seq=i + 1) for i in range(5))
    s = reduce(s, LogBatch("a", "c", lines))
    assert s.node("a").logs == {"c"}
    assert reduce(s, LogBatch("a", "c", lines)) is s  # a flood copies nothing
    assert reduce(s, LogLine("a", "d", "x")).node("a").logs == {"c", "d"}


def test_gpu_and_unknown_node_is_added():
    s = ClusterState.initial(["a"])
    s = reduce(s, GpuSample("b", (GpuInfo(0, "NVIDIA GB10", 96.0, 18.0),)))
    assert s.order == ("a", "b")
    assert s.node("b").gpus[0].unified_memory


def test_findings_deduplicate_and_sort_by_severity():
    s = ClusterState.initial(["a"])
    w = Finding("nccl_socket_transport", "warning", "socket", source="a/x", line=3, ts=1)
    e = Finding("cuda_oom", "error", "oom", source="a/x", line=9, ts=2)
    s = reduce_all(s, [FindingRaised(w), FindingRaised(e), FindingRaised(w)])
    assert [f.id for f in s.sorted_findings()] == ["cuda_oom", "nccl_socket_transport"]


def test_milestones_per_node():
    s = ClusterState.initial(["a"])
    s = reduce(s, MilestoneReached(Milestone("weights_loading", "3/40", node="a", progress=0.075)))
    s = reduce(s, MilestoneReached(Milestone("weights_loading", "20/40", node="a", progress=0.5)))
    assert s.node("a").milestones["weights_loading"].progress == 0.5


def test_reducer_is_pure():
    s0 = ClusterState.initial(["a"])
    s1 = reduce(s0, MemorySample("a", MemoryInfo(total=10, available=5)))
    assert s0.node("a").memory is None and s1.node("a").memory is not None


def test_docker_outage_while_node_reachable():
    from sparktui.model import DockerStatus

    s = ClusterState.initial(["a"])
    s = reduce(s, NodeReachability("a", True))
    s = reduce(s, DockerStatus("a", False, "connection refused"))
    assert s.node("a").reachable and s.node("a").docker_error == "connection refused"
    s = reduce(s, DockerStatus("a", True))
    assert s.node("a").docker_error is None
