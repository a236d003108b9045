"""The network path a job took: the wrong interface or address (a missing interface in several
wordings, docker's bridge for NCCL's sockets or UCX, Gloo with no route, loopback across hosts but
not on one host, NCCL before 2.4's interface lines), RDMA queue pairs, errno and getaddrinfo
failures, torch's retried connect notice; and the catalogue keys those rules lean on (``unless``,
``single_host_ok``).

Each rule is checked on a held-in excerpt of the corpus (fed without our header lines) or a real
line, and on a benign or failing counterpart.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sparktui.diagnosis.catalogue import CatalogueError, default_catalogue, parse_catalogue
from sparktui.diagnosis.classifier import SourceScanner
from sparktui.diagnosis.exc_shapes import default_shapes

from corpus_helpers import (
    CATALOGUE_ENTRY, bare_errors, bare_findings, body, diagnose_lines, fact_of, ranked, scan_named)

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
    assert scan_named([QP_TIMEOUT_IPV4_GID]) == ["nccl_ib_error"]


def test_a_queue_pair_failure_without_that_gid_still_points_at_the_gid_index():
    # the same call failing where no IPv4-mapped GID is shown keeps the GID-index finding
    assert scan_named(body("b/nccl_nccl-tests_185_modify_qp_net_unreachable"))[:1] == ["nccl_ib_gid"]
    line = ("x:1:2 [1] misc/ibvwrap.cc:190 NCCL WARN Call to ibv_modify_qp failed with 110 Connection timed out, "
            "on dev mlx5_0:1, curr state INIT, next state RTR, local GID index 1, local GID fe80::1, remote GID fe80::2")
    assert scan_named([line])[:1] == ["nccl_ib_gid"]


# ------------------------------------------------------------------ Gloo with no route to its peers

def test_gloo_connect_network_unreachable_is_a_wrong_interface():
    assert scan_named([GLOO_UNREACHABLE]) == ["wrong_network_interface"]
    # the same words outside Gloo's transport (any program's socket error) are not this finding
    assert scan_named(["connect: Network is unreachable."]) == []


def test_gloo_lines_of_a_healthy_two_node_start_name_no_error():
    # the real capture of a healthy two-node SGLang start: Gloo connects its peers over TCP
    log = Path(__file__).resolve().parents[1] / "fixtures" / "sglang-2node" / "healthy.node0.log"
    lines = log.read_text(encoding="utf-8").splitlines()
    assert any("Gloo" in x for x in lines)
    sc = SourceScanner("t")
    sc.feed(lines)
    sc.finish()
    assert [f.id for f in sc.findings if f.severity == "error"] == []


# ------------------------------------------------------------------ interface address

def test_a_refused_connect_to_the_docker_bridge_address_is_a_wrong_interface():
    assert scan_named(body("b/ompi_horovod_310_btl_tcp_connect_docker0"))[:1] == ["wrong_network_interface"]


def test_a_refused_connect_to_a_real_peer_address_is_no_interface_finding():
    line = ("[u10][[38971,1],2][btl_tcp_endpoint.c:796:mca_btl_tcp_endpoint_complete_connect] "
            "connect() to 172.30.160.7 failed: Connection refused (111)")
    assert "wrong_network_interface" not in scan_named([line])
    # docker's bridge named in a healthy interface listing is not a connection attempt
    assert scan_named(["docker0   Link encap:Ethernet  HWaddr 02:42:a9:9e:3d:33",
                  "          inet addr:172.17.0.1  Bcast:0.0.0.0  Mask:255.255.0.0"]) == []


# ------------------------------------------------------------------ wordings of a missing interface

def test_an_interface_that_does_not_exist_is_a_wrong_interface_in_several_wordings():
    # iproute2 (a launch script reading the fabric address), a launcher's own check, an *_IFNAME
    for line in ['Device "enp1s0f0np0" does not exist.',
                 "ValueError: interface eth1 does not exist",
                 "RuntimeError: GLOO_SOCKET_IFNAME eth0 not found"]:
        assert scan_named([line])[:1] == ["wrong_network_interface"], line


def test_an_ifname_that_is_set_or_a_missing_file_names_no_interface():
    # (a log that stops in NCCL init is a suspected hang, a warning of its own)
    assert "wrong_network_interface" not in scan_named(
        ["node1:581:581 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to enp1s0f1np1"])
    assert "wrong_network_interface" not in scan_named(['FileNotFoundError: Path "/models/x" does not exist'])


# ------------------------------------------------------------------ loopback on one host

def test_loopback_sockets_of_a_one_host_job_are_no_error(tmp_path):
    # nccl-tests on two local V100s with NCCL_SOCKET_IFNAME=lo: both processes on one host
    got = bare_findings("b/nccl_nccl_352_mpirun_lo_socket_no_plugin_no_ib_healthy", tmp_path)
    wni = [f for f in got if f.id == "wrong_network_interface"]
    assert wni and all(f.severity == "info" for f in wni)
    assert "one machine" in wni[0].title
    assert not [f for f in got if f.severity == "error"]


def test_wifi_bootstrap_on_one_workstation_leaves_the_hang_first(tmp_path):
    # two ranks on one host bootstrap over Wi-Fi and hang: the interface is no cause there
    assert ranked("a/vllm_vllm_5484_nccl_test_hang_wifi_bootstrap", tmp_path)[:1] == ["nccl_init_hang"]


def test_loopback_across_two_hosts_stays_the_root_cause(tmp_path):
    # Horovod on two machines: NCCL < 2.4 lists lo among its socket interfaces, connects are refused
    got = ranked("b/nccl_horovod_584_lo_interface_connect_refused_multinode", tmp_path)
    assert got[:1] == ["wrong_network_interface"]


def test_one_process_with_a_bigger_communicator_is_not_one_host():
    # a rank's own log of a two-rank communicator: the other rank may be on another machine
    lines = [
        "node1:100:100 [0] NCCL INFO Bootstrap : Using lo:127.0.0.1<0>",
        "node1:100:200 [0] NCCL INFO comm 0x55 rank 0 nranks 2 cudaDev 0 busId 1000 - Init START",
    ]
    got = [f for f in diagnose_lines(lines) if f.id == "wrong_network_interface"]
    assert got and got[0].severity == "error"


def test_a_missing_interface_on_one_host_is_still_an_error():
    # only the interface CHOICE patterns are excused on one host, not a name that does not exist
    lines = [
        "h:1:1 [0] NCCL INFO Bootstrap : Using lo:127.0.0.1<0>",
        "h:2:2 [1] NCCL INFO Bootstrap : Using lo:127.0.0.1<0>",
        'Error: Device "enp1s0f1np1" does not exist.',
    ]
    got = [f for f in diagnose_lines(lines) if f.id == "wrong_network_interface"]
    assert got and got[0].severity == "error"


# ------------------------------------------------------------------ torch's c10d connect notice

# verbatim from https://github.com/pytorch/PiPPy/issues/158 (a one-line paste: too short for the corpus)
C10D_NOTICE = ("[W socket.cpp:558] [c10d] The client socket has failed to connect to [localhost]:29500 "
               "(errno: 99 - Cannot assign requested address).")


def test_a_w_level_c10d_connect_notice_is_no_wrong_interface(tmp_path):
    assert [f.id for f in diagnose_lines([C10D_NOTICE]) if f.severity == "error"] == []
    assert bare_errors("b/pytorch_llamafactory_7127_windows_c10d_10049_warning_healthy", tmp_path) == []


def test_cannot_assign_requested_address_elsewhere_is_still_a_wrong_interface():
    cat = default_catalogue()
    entry = cat["wrong_network_interface"]
    assert entry.search(C10D_NOTICE) is None
    # a bind to an address this host does not have: the E level, or another library's wording
    assert entry.search("[E socket.cpp:610] [c10d] bind: Cannot assign requested address") is not None
    assert entry.search("zmq.error.ZMQError: Cannot assign requested address") is not None


# ------------------------------------------------------------------ NCCL before 2.4 names its interfaces

def test_nccl_before_2_4_interface_lines_name_loopback():
    entry = default_catalogue()["wrong_network_interface"]
    assert entry.search("paigcr-b-gpu-1012:4152:4206 [0] NCCL INFO NET : Using interface lo:127.0.0.1<0>")
    assert entry.search("paigcr-b-gpu-1012:4152:4206 [0] NCCL INFO NET : Using interface eth0:10.151.40.240<0>") is None


# ------------------------------------------------------------------ the catalogue keys

def test_unless_and_single_host_ok_are_checked_regexes():
    with pytest.raises(CatalogueError, match="bad regex"):
        parse_catalogue(CATALOGUE_ENTRY + "patterns = ['a']\nprefilter = ['a']\nunless = ['(']\n")
    with pytest.raises(CatalogueError, match="need line patterns"):
        parse_catalogue(CATALOGUE_ENTRY + "derived = true\nsingle_host_ok = ['a']\n")
    cat = parse_catalogue(CATALOGUE_ENTRY + "patterns = ['boom']\nprefilter = ['boom']\nunless = ['^retrying']\n")
    assert cat["x"].search("boom now") and cat["x"].search("retrying after boom") is None


# ------------------------------------------------------------------ UCX to docker's bridge

def test_ucx_connect_to_the_docker_bridge_is_the_wrong_interface(tmp_path):
    assert ranked("b/nccl_nccl-tests_180_ucx_docker0_bridge_refused", tmp_path)[:1] == ["wrong_network_interface"]


def test_ucx_connect_to_a_routable_peer_is_not_an_interface_choice():
    lines = ["[1700554343.440877] [n1:7356 :0]            sock.c:323  UCX  ERROR   "
             "connect(fd=48, dest_addr=10.192.80.133:42887) failed: Connection refused"]
    assert not [f for f in diagnose_lines(lines) if f.id == "wrong_network_interface"]


# ----------------------------------------------------------------------------- errno and getaddrinfo


@pytest.mark.parametrize("line, fid", [
    # torch's DistNetworkError format: the errno as "code: -N, name: ENAME"
    ("torch.distributed.DistNetworkError: The server socket has failed to bind. port: 29500, useIpv6: false, "
     "code: -99, name: EADDRNOTAVAIL, message: cannot assign requested address", "wrong_network_interface"),
    ("torch.distributed.DistNetworkError: The client socket has failed to connect. code: -111", "rendezvous_timeout"),
    # getaddrinfo cannot resolve the rendezvous host
    ("socket.gaierror: [Errno -2] Name or service not known", "rendezvous_timeout"),
    ("ValueError: host node-0 for the rendezvous store: Temporary failure in name resolution", "rendezvous_timeout"),
])
def test_socket_failures_name_their_cause_by_errno(line, fid):
    assert fact_of(line) == fid


@pytest.mark.parametrize("line", [
    "RuntimeError: worker exited with code 99",  # an exit status is no errno, and no socket
    "Process 12 finished with exit code 111 after the rendezvous",  # positive "code N" is an exit status
    "[W socket.cpp:401] [c10d] getaddrinfo failed for [node-0]: Name or service not known",  # c10d's retried notice
    "requests.get failed: Name or service not known",  # no socket/rendezvous context
])
def test_the_same_numbers_and_words_elsewhere_name_nothing(line):
    assert fact_of(line) is None


def test_every_rendezvous_error_class_is_a_rendezvous_failure():
    sh = default_shapes()
    for cls in ("torch.distributed.elastic.rendezvous.api.RendezvousConnectionError",
                "torch.distributed.elastic.rendezvous.api.RendezvousStateError",
                "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError"):
        assert sh.classify(cls, "The connection to the C10d store has failed.") == "rendezvous_timeout", cls
    assert sh.classify("ConnectionError", "The connection to the store has failed.") is None
