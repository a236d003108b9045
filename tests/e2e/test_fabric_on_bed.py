"""`sparktui fabric` for real: iperf3 between two test-bed nodes (their sshd on loopback addresses run
the commands on this host), and a real MTU mismatch made inside network namespaces this test creates
(a veth pair, MTU 9000 on one end and 1500 on the other; removed in finally) found and named with its
fix.  Needs iperf3 and ping on the host (.ci/run and scripts/testbed install them)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess

import pytest

from sparktui.actions.base import ActionContext
from sparktui.actions.fabric import FabricAction
from sparktui.config import ClusterConfig, Config, NodeConfig
from sparktui.fabric.check import FabricOptions
from sparktui.nodes.local import LocalNode

pytestmark = pytest.mark.e2e
CI = os.environ.get("CI", "").lower() == "true"


def _need(*tools: str) -> None:
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        if CI:
            pytest.fail(f"{', '.join(missing)} not installed (.ci/run installs them)")
        pytest.skip(f"{', '.join(missing)} not installed")


def _bed_config(bed, tmp_path, line_rate: float):
    """The bed's cluster.toml with the line rate lowered: loopback TCP on a shared CI machine is what
    it is; the test is about the measurement and the fields, not a CX-7's 200 Gb/s."""
    text = bed.config.read_text()
    text = re.sub(r"(?m)^\[cluster\]\n", f"[cluster]\nline_rate_gbps = {line_rate}\n", text, count=1)
    p = tmp_path / "cluster.toml"
    p.write_text(text)
    return p


def test_iperf3_between_two_bed_nodes(bed, e2e, tmp_path):
    _need("iperf3", "ping")
    cfg = _bed_config(bed, tmp_path, 0.1)
    r = e2e.run_cli("fabric", "--quick", "--size", "128M", "--json", "--config", str(cfg), timeout=180)
    assert r.returncode == 0, r.stderr[-2000:]
    d = json.loads(r.stdout)
    data = d["data"]
    a1, a2 = bed.nodes["spark1"]["address"], bed.nodes["spark2"]["address"]
    assert [(n["name"], n["fabric_ip"], n["interface"], n["nccl_socket_ifname"]) for n in data["nodes"]] == [
        ("spark1", a1, "lo", "lo"), ("spark2", a2, "lo", "lo")]
    assert [(p["src"], p["dst_ip"], p["mtu_ok"]) for p in data["pairs"]] == [("spark1", a2, True), ("spark2", a1, True)]
    [pair] = data["iperf3"]
    assert (pair["client"], pair["server"], pair["error"], pair["streams"]) == ("spark1", "spark2", "", 4)
    assert pair["gbps"] > 0.1 and pair["sent_bps"] > 0
    v = data["verdict"]
    assert (v["status"], v["source"]) == ("ok", "iperf3 TCP") and v["measured_gbps"] == pytest.approx(pair["gbps"], abs=1e-3)  # the pair rounds to Mb/s
    assert data["all_reduce_perf_note"] == "skipped (--quick)"
    # iperf3 -s -1 served one test and exited: nothing is left listening on the server's address
    ss = subprocess.run(["ss", "-Hltn", "src", f"{a2}:5201"], capture_output=True, text=True, timeout=10)
    assert ss.stdout.strip() == ""
    text = e2e.run_cli("fabric", "--quick", "--size", "64M", "--config", str(cfg), timeout=180)
    assert text.returncode == 0, text.stderr[-2000:]
    assert "iperf3      spark1 -> spark2:" in text.stdout and "verdict     OK" in text.stdout


def test_below_line_rate_is_a_failure_with_a_cause(bed, e2e, tmp_path):
    _need("iperf3", "ping")
    cfg = _bed_config(bed, tmp_path, 100000)  # no loopback reaches 100 Tb/s
    r = e2e.run_cli("fabric", "--quick", "--size", "64M", "--json", "--config", str(cfg), timeout=180)
    assert r.returncode == 1
    v = json.loads(r.stdout)["data"]["verdict"]
    assert v["status"] == "fail" and v["title"].startswith("below line rate")
    assert v["causes"][0]["id"] == "unexplained" and "NCCL_DEBUG=INFO" in v["causes"][0]["fix"]


class NetnsNode(LocalNode):
    """A local node whose commands run inside a network namespace (the test's stand-in for a second
    machine: its own interfaces, MTU and addresses)."""

    def __init__(self, cfg: NodeConfig, ns: str) -> None:
        super().__init__(cfg)
        self.ns = ns

    async def run(self, argv, **kw):
        return await super().run(["ip", "netns", "exec", self.ns, *argv], **kw)


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True, timeout=30)


def test_mtu_mismatch_in_a_namespace_found_and_named(tmp_path):
    _need("ping", "iperf3", "ip")
    if os.geteuid() != 0:
        pytest.skip("needs root for network namespaces")
    tag = f"sptf{os.getpid() % 100000}"
    ns_a, ns_b = f"{tag}a", f"{tag}b"
    made: list[str] = []
    try:
        for ns in (ns_a, ns_b):
            try:
                _ip("netns", "add", ns)
            except subprocess.CalledProcessError as exc:
                if CI:
                    raise
                pytest.skip(f"cannot make a network namespace here: {exc.stderr.strip()}")
            made.append(ns)
        # both ends made inside the namespaces (never in this host's own)
        _ip("-n", ns_a, "link", "add", "fa0", "type", "veth", "peer", "name", "fb0", "netns", ns_b)
        _ip("-n", ns_a, "addr", "add", "10.233.0.1/24", "dev", "fa0")
        _ip("-n", ns_b, "addr", "add", "10.233.0.2/24", "dev", "fb0")
        _ip("-n", ns_a, "link", "set", "fa0", "mtu", "9000", "up")
        _ip("-n", ns_b, "link", "set", "fb0", "mtu", "1500", "up")  # the mismatch: one end left at 1500
        for ns in (ns_a, ns_b):
            _ip("-n", ns, "link", "set", "lo", "up")
        nodes_cfg = (NodeConfig("spark1", backend="local", fabric_ip="10.233.0.1", fabric_if="fa0", role="head"),
                     NodeConfig("spark2", backend="local", fabric_ip="10.233.0.2", fabric_if="fb0"))
        cfg = Config(path=str(tmp_path / "none.toml"), cluster=ClusterConfig(), nodes=nodes_cfg)
        nodes = {"spark1": NetnsNode(nodes_cfg[0], ns_a), "spark2": NetnsNode(nodes_cfg[1], ns_b)}
        result = asyncio.run(FabricAction(FabricOptions(quick=True, size=64 << 20)).run(ActionContext(cfg, nodes)))
        data = result.data
        assert [(n["interface"], n["mtu"]) for n in data["nodes"]] == [("fa0", 9000), ("fb0", 1500)]
        ab, ba = data["pairs"]
        # 9000 leaves fa0 and is dropped at fb0; a small ping passes: reachable, MTU not
        assert (ab["reachable"], ab["mtu_ok"]) == (True, False)
        # from the 1500 side the kernel refuses the 8972-byte payload itself and says its MTU
        assert ba["df_ping"]["too_big"] and ba["df_ping"]["path_mtu"] == 1500
        v = data["verdict"]
        assert v["status"] == "fail" and not result.ok
        cause = v["causes"][0]
        assert cause["id"] == "mtu_mismatch"
        assert "MTU 9000 on both ends" in cause["fix"] and "ping -M do -s 8972" in cause["fix"]
        assert any("spark1 -> spark2 (10.233.0.2): ping -M do -s 8972 failed" in e for e in cause["evidence"])
        assert any("interface MTU differs" in e for e in cause["evidence"])
    finally:
        for ns in made:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)
