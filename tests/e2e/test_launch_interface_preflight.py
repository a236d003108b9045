"""The launch's preflight on the real bed (real sshd, real `ip` and /proc/meminfo on the node, real
Docker) refuses what would only fail after vLLM's start-up, and starts nothing.

A launch whose rank is pinned to a socket interface with no address on its node is refused by the
preflight on the real bed (real sshd, real `ip` on the node, real Docker): wrong_network_interface
names the node and the variable, and no container is started (issue 29's drill wrong-gloo-interface:
without it the rank's rendezvous waits ~60 s for Gloo's own error).  A rank of the CPU build asked
for more KV cache than its node's free memory: kv_cache_oom (the drill kv-too-big: vLLM's own error
came 45-66 s later, after its imports and the weights)."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _launch_with_worker_env(seed_bed, tmp_path, env: dict[str, str]):
    sys.path.insert(0, str(ROOT / "scripts" / "testbed_scenarios"))
    import seed as seed_mod  # the scenario's TOML writer

    data = tomllib.loads((seed_bed.dir / "cluster.toml").read_text())
    name = f"pf{uuid.uuid4().hex[:6]}"
    data["cluster"]["name"] = name
    worker = data["node"][1]
    worker["env"] = {**worker.get("env", {}), **env}
    cfg = tmp_path / "cluster.toml"
    seed_mod.write_config(cfg, data)
    r = subprocess.run([sys.executable, "-m", "sparktui", "launch", "--config", str(cfg), "--yes", "--json"],
                       capture_output=True, text=True, cwd=str(ROOT), timeout=300, stdin=subprocess.DEVNULL)
    res = json.loads(r.stdout)
    assert r.returncode == 1 and not res["ok"], res["summary"]
    for node in seed_bed.nodes:
        assert name not in seed_bed.docker(node, "ps", "-a", "--format", "{{.Names}}").stdout.split()
    return res, worker


def test_a_rank_pinned_to_an_interface_without_an_address_is_refused_before_anything_starts(seed_bed, tmp_path):
    res, worker = _launch_with_worker_env(seed_bed, tmp_path,
                                          {"GLOO_SOCKET_IFNAME": "nosuchif0", "NCCL_SOCKET_IFNAME": "lo"})
    ids = [f["id"] for f in res["findings"]]
    assert ids and ids[0] == "wrong_network_interface", ids
    first = res["findings"][0]
    assert worker["name"] in first["title"] and "GLOO_SOCKET_IFNAME=nosuchif0" in first["title"], first
    assert "NCCL_SOCKET_IFNAME" not in first["title"]  # lo holds an address on every bed node


def test_a_cpu_kv_cache_larger_than_the_nodes_free_memory_is_refused_before_anything_starts(seed_bed, tmp_path):
    # the seed scenario gives each node a GB10's /proc/meminfo (the node's meminfo_path): twice its MemTotal
    data = tomllib.loads((seed_bed.dir / "cluster.toml").read_text())
    meminfo = Path(data["node"][1].get("meminfo_path", "/proc/meminfo")).read_text()
    total_gib = int(meminfo.split()[1]) // (1 << 20)
    res, worker = _launch_with_worker_env(seed_bed, tmp_path, {"VLLM_CPU_KVCACHE_SPACE": str(2 * max(1, total_gib))})
    ids = [f["id"] for f in res["findings"]]
    assert ids and ids[0] == "kv_cache_oom", ids
    first = res["findings"][0]
    assert worker["name"] in first["title"] and "MemAvailable" in " ".join(first["evidence"]), first
    assert [f for f in res["findings"] if f["id"] == "kv_cache_oom"] == [first]  # the head was not asked for one
