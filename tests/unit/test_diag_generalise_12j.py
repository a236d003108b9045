"""Issue 12, round j: RDMA queue pairs whose GID is right, Gloo bound to an address with no route,
and Gloo's size check between two ranks of one collective.

Each detector is checked on a held-in excerpt of the corpus, fed WITHOUT our header lines, and on a
benign or near-miss line that must not name it.
"""

from __future__ import annotations

from pathlib import Path

from sparktui.diagnosis.classifier import SourceScanner
from sparktui.diagnosis.exc_shapes import default_shapes

# one scanner over the lines of a held-in excerpt (header dropped), ranked as diagnose ranks them
from test_diag_generalise_12i import body, named


# ------------------------------------------------------------------ RDMA queue pair, GID already right

# real one-line reports (too short for a corpus case, which needs two lines of log)
QP_TIMEOUT_IPV4_GID = (  # https://github.com/NVIDIA/nccl/issues/2013 (rail-connected RoCE; NCCL_CROSS_NIC=0)
    "[2026-03-13 22:26:02] host-01.example.com:XXXXXX [5] ibvwrap.c:262 NCCL WARN Call to ibv_modify_qp failed "
    "with 110 Connection timed out, on dev mlx_x:1, curr state INIT, next state RTR, local GID index 3, "
    "local GID ::ffff:xxx.xx.xx.xx, remote GID ::ffff:xxx.xx.xxx.xx")
GLOO_UNREACHABLE = (  # https://github.com/GoogleCloudPlatform/scientific-computing-examples/issues/118
    "/opt/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/socket.cc:142] rv != -1. -1 vs -1. "
    "connect: Network is unreachable.")


def test_a_queue_pair_timeout_on_an_ipv4_mapped_gid_is_the_path_not_the_gid_index():
    # NCCL names the local GID it used: ::ffff:a.b.c.d is the RoCE v2 IPv4 GID, so the GID index is
    # right and the queue pair failed on the way to the peer (rails that cannot reach each other)
    assert named([QP_TIMEOUT_IPV4_GID]) == ["nccl_ib_error"]


def test_a_queue_pair_failure_without_that_gid_still_points_at_the_gid_index():
    # the same call failing where no IPv4-mapped GID is shown keeps the GID-index finding
    assert named(body("b/nccl_nccl-tests_185_modify_qp_net_unreachable"))[:1] == ["nccl_ib_gid"]
    line = ("x:1:2 [1] misc/ibvwrap.cc:190 NCCL WARN Call to ibv_modify_qp failed with 110 Connection timed out, "
            "on dev mlx5_0:1, curr state INIT, next state RTR, local GID index 1, local GID fe80::1, remote GID fe80::2")
    assert named([line])[:1] == ["nccl_ib_gid"]


# ------------------------------------------------------------------ Gloo with no route to its peers

def test_gloo_connect_network_unreachable_is_a_wrong_interface():
    assert named([GLOO_UNREACHABLE]) == ["wrong_network_interface"]
    # the same words outside Gloo's transport (any program's socket error) are not this finding
    assert named(["connect: Network is unreachable."]) == []


def test_gloo_lines_of_a_healthy_two_node_start_name_no_error():
    # the real capture of a healthy two-node SGLang start: Gloo connects its peers over TCP
    log = Path(__file__).resolve().parents[1] / "fixtures" / "sglang-2node" / "healthy.node0.log"
    lines = log.read_text(encoding="utf-8").splitlines()
    assert any("Gloo" in x for x in lines)
    sc = SourceScanner("t")
    sc.feed(lines)
    sc.finish()
    assert [f.id for f in sc.findings if f.severity == "error"] == []


# ------------------------------------------------------------------ Gloo's size check between ranks

def test_gloo_message_longer_than_the_posted_buffer_is_a_collective_mismatch():
    # rank 0 all_reduces a tensor of another shape than the others: Gloo compares the two sizes
    assert named(body("b/pytorch_nccl_1394_gloo_allreduce_shape_differs")) == ["nccl_collective_mismatch"]


def test_gloo_size_check_with_equal_numbers_is_no_mismatch():
    # the shape compares the numbers: the same size on both sides is some other fault
    line = ("what():  [enforce fail at /opt/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:446] "
            "op.preamble.length <= op.nbytes. 128000 vs 128000")
    assert default_shapes().classify_line(line) is None


# ------------------------------------------------------------------ NCCL's rank against nranks

def test_nccl_invalid_rank_requested_is_a_world_size_mismatch():
    # --world-size 4 with processes for 8 GPUs: ranks 5-7 ask for "7/4", outside the communicator
    assert named(body("b/other_hybrik_47_world_size_4_eight_gpus_invalid_rank"))[:1] == ["world_size_mismatch"]


def test_ranks_inside_their_communicator_name_no_world_size_mismatch():
    # the real two-GPU capture that initialises NCCL normally ("rank 0 nranks 2", Init COMPLETE)
    log = Path(__file__).resolve().parents[1] / "fixtures" / "nccl-2gpu" / "healthy.rank0.log"
    assert "world_size_mismatch" not in named(log.read_text(encoding="utf-8").splitlines())
