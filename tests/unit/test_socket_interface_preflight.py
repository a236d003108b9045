"""The launch's preflight refuses a rank whose socket interface (NCCL/Gloo/TensorPipe) names no
interface with an address on its node: the drill wrong-gloo-interface otherwise waits ~60 s for Gloo's
own error.  Judged on this machine's real `ip -j addr show` (tests/fixtures/ip/ip-j-addr.json: lo and
eth0 addressed, ifb0/ifb1 without an address) and on the live output of `ip` here."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from sparktui.actions.checks.fabric import addressed_interfaces, unusable_socket_ifs

IP_JSON = json.loads((Path(__file__).parents[1] / "fixtures" / "ip" / "ip-j-addr.json").read_text())


def test_addressed_interfaces_are_those_with_ipv4_or_global_ipv6():
    assert addressed_interfaces(IP_JSON) == {"lo", "eth0"}
    only_link_local = [{"ifname": "x0", "addr_info": [{"family": "inet6", "local": "fe80::1", "scope": "link"}]}]
    assert addressed_interfaces(only_link_local) == set()


@pytest.mark.parametrize("env", [
    {},  # nothing pinned: NCCL and Gloo pick themselves
    {"GLOO_SOCKET_IFNAME": "eth0", "NCCL_SOCKET_IFNAME": "eth0"},
    {"NCCL_SOCKET_IFNAME": "eth"},  # NCCL: a prefix
    {"NCCL_SOCKET_IFNAME": "=eth0"},
    {"NCCL_SOCKET_IFNAME": "^docker,ifb"},  # an exclusion names nothing to check
    {"NCCL_SOCKET_IFNAME": "ifb0,eth0", "GLOO_SOCKET_IFNAME": "lo"},  # one usable of a list is enough
    {"TP_SOCKET_IFNAME": "lo"},
])
def test_a_pinned_interface_with_an_address_passes(env):
    assert unusable_socket_ifs(env, IP_JSON) == []


@pytest.mark.parametrize("env,bad", [
    ({"GLOO_SOCKET_IFNAME": "ifb0"}, ["GLOO_SOCKET_IFNAME=ifb0"]),
    ({"GLOO_SOCKET_IFNAME": "eth"}, ["GLOO_SOCKET_IFNAME=eth"]),  # Gloo takes exact names, not prefixes
    ({"NCCL_SOCKET_IFNAME": "=eth", "GLOO_SOCKET_IFNAME": "eth0"}, ["NCCL_SOCKET_IFNAME==eth"]),
    ({"NCCL_SOCKET_IFNAME": "enp1s0f0np0", "GLOO_SOCKET_IFNAME": "enp1s0f0np0"},
     ["NCCL_SOCKET_IFNAME=enp1s0f0np0", "GLOO_SOCKET_IFNAME=enp1s0f0np0"]),
])
def test_an_interface_missing_or_without_an_address_is_named(env, bad):
    assert unusable_socket_ifs(env, IP_JSON) == bad


@pytest.mark.skipif(not shutil.which("ip"), reason="iproute2 is not installed here")
def test_this_machines_loopback_passes_and_a_name_it_lacks_does_not():
    live = json.loads(subprocess.run(["ip", "-j", "addr", "show"], capture_output=True, text=True, check=True).stdout)
    assert unusable_socket_ifs({"GLOO_SOCKET_IFNAME": "lo", "NCCL_SOCKET_IFNAME": "lo"}, live) == []
    assert unusable_socket_ifs({"GLOO_SOCKET_IFNAME": "nosuchif9"}, live) == ["GLOO_SOCKET_IFNAME=nosuchif9"]


def test_doctor_rows_say_the_same_as_the_preflight_per_node():
    from sparktui.actions.checks.fabric import socket_if_results

    envs = {"spark1": {"NCCL_SOCKET_IFNAME": "eth0", "GLOO_SOCKET_IFNAME": "eth0"},
            "spark2": {"GLOO_SOCKET_IFNAME": "ifb0"},
            "spark3": {},  # nothing pinned: no row
            "spark4": {"GLOO_SOCKET_IFNAME": "ifb0"}}  # `ip` gave nothing there: no row (cannot judge)
    rows = socket_if_results(envs, {"spark1": IP_JSON, "spark2": IP_JSON, "spark3": IP_JSON})
    assert [(r.node, r.status) for r in rows] == [("spark1", "ok"), ("spark2", "fail")]
    assert "GLOO_SOCKET_IFNAME=ifb0" in rows[1].title and rows[1].finding == "wrong_network_interface"
