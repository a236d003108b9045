"""A launch whose rank is pinned to a socket interface with no address on its node is refused by the
preflight on the real bed (real sshd, real `ip` on the node, real Docker): wrong_network_interface
names the node and the variable, and no container is started (issue 29's drill wrong-gloo-interface:
without it the rank's rendezvous waits ~60 s for Gloo's own error)."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_rank_pinned_to_an_interface_without_an_address_is_refused_before_anything_starts(seed_bed, tmp_path):
    sys.path.insert(0, str(ROOT / "scripts" / "testbed_scenarios"))
    import seed as seed_mod  # the scenario's TOML writer

    data = tomllib.loads((seed_bed.dir / "cluster.toml").read_text())
    name = f"if{uuid.uuid4().hex[:6]}"
    data["cluster"]["name"] = name
    worker = data["node"][1]
    worker["env"] = {**worker.get("env", {}), "GLOO_SOCKET_IFNAME": "nosuchif0", "NCCL_SOCKET_IFNAME": "lo"}
    cfg = tmp_path / "cluster.toml"
    seed_mod.write_config(cfg, data)
    r = subprocess.run([sys.executable, "-m", "sparktui", "launch", "--config", str(cfg), "--yes", "--json"],
                       capture_output=True, text=True, cwd=str(ROOT), timeout=300, stdin=subprocess.DEVNULL)
    res = json.loads(r.stdout)
    assert r.returncode == 1 and not res["ok"], res["summary"]
    ids = [f["id"] for f in res["findings"]]
    assert ids and ids[0] == "wrong_network_interface", ids
    first = res["findings"][0]
    assert worker["name"] in first["title"] and "GLOO_SOCKET_IFNAME=nosuchif0" in first["title"], first
    assert "NCCL_SOCKET_IFNAME" not in first["title"]  # lo holds an address on every bed node
    for node in seed_bed.nodes:
        assert name not in seed_bed.docker(node, "ps", "-a", "--format", "{{.Names}}").stdout.split()
