"""`sparktui status` exits 1 for a broken cluster (issue 32 item 2): the exit code from the same
assessment the command makes of the containers every node's Docker Engine lists."""

from __future__ import annotations

import pytest

from sparktui.commands.status import cluster_doc, exit_code
from sparktui.probes.cluster import ClusterContainer, ClusterView, assess

NODES = ["spark1", "spark2"]


def _c(node: str, state: str, status: str, rank: int | None, launch: str | None = "L1") -> ClusterContainer:
    labels = {"sparktui.cluster": "vllm_node", "sparktui.rank": str(rank)} if launch else {}
    if launch:
        labels["sparktui.launch"] = launch
    return ClusterContainer(node, "vllm_node", f"{node}-id", state, status, "img", "sha256:1", labels)


def _reachable() -> list[dict]:
    return [{"name": n, "reachable": True} for n in NODES]


def _code(*containers: ClusterContainer) -> tuple[str, int]:
    view = ClusterView("vllm_node")
    for n in NODES:
        view.containers[n] = [c for c in containers if c.node == n]
    doc = cluster_doc(view, assess(view, NODES))
    return doc["state"], exit_code(_reachable(), doc)


@pytest.mark.parametrize("containers, state, code", [
    ((), "absent", 0),
    ((_c("spark1", "running", "Up 1 minute", 0), _c("spark2", "running", "Up 1 minute", 1)), "running", 0),
    ((_c("spark1", "running", "Up 1 minute", 0), _c("spark2", "exited", "Exited (137) 5 seconds ago", 1)), "half", 1),
    ((_c("spark1", "exited", "Exited (1) 1 minute ago", 0), _c("spark2", "exited", "Exited (1) 1 minute ago", 1)),
     "exited", 1),
    ((_c("spark1", "running", "Up 1 minute", 0, launch=None),), "stale", 1),
], ids=["absent", "running", "half", "exited", "stale"])
def test_exit_code_follows_the_cluster_state(containers, state, code):
    assert _code(*containers) == (state, code)


def test_an_unreachable_node_still_exits_1():
    nodes = [{"name": "spark1", "reachable": True}, {"name": "spark2", "reachable": False}]
    assert exit_code(nodes, {"state": "absent"}) == 1


def test_state_lines_name_the_exited_container_its_code_and_when():
    from sparktui.probes.cluster import state_lines

    view = ClusterView("vllm_node")
    view.containers = {"spark1": [_c("spark1", "running", "Up 3 minutes", 0)],
                       "spark2": [_c("spark2", "exited", "Exited (137) 40 seconds ago", 1)]}
    lines = state_lines(view, assess(view, NODES))
    assert lines[0] == "cluster vllm_node: half"
    assert "  spark2: container vllm_node exited with code 137 (Exited (137) 40 seconds ago)" in lines
    assert not any("spark1: container" in ln for ln in lines)  # the running one is no news
    assert any("half_cluster" in ln for ln in lines)


@pytest.mark.parametrize("containers, state, code", [
    # the launch made the worker's container and has not started it yet: starting, not half (cried wolf before)
    ((_c("spark1", "running", "Up 2 seconds", 0), _c("spark2", "created", "Created", 1)), "starting", 0),
    ((_c("spark1", "created", "Created", 0), _c("spark2", "created", "Created", 1)), "starting", 0),
    # one exited beside one created: something did go wrong
    ((_c("spark1", "exited", "Exited (1) 3 seconds ago", 0), _c("spark2", "created", "Created", 1)), "exited", 1),
], ids=["worker-created", "both-created", "exited-and-created"])
def test_a_launch_under_way_is_starting_not_half(containers, state, code):
    from sparktui.probes.cluster import launch_under_way

    view = ClusterView("vllm_node")
    for n in NODES:
        view.containers[n] = [c for c in containers if c.node == n]
    doc = cluster_doc(view, launch_under_way(assess(view, NODES), view))
    assert (doc["state"], exit_code(_reachable(), doc)) == (state, code)
    assert (doc["findings"] == []) == (state == "starting")
