"""Doctor decisions on real data: GB10 meminfo, the probe script run against the test-bed copies
of vLLM's/transformers' files, model directories read through a LocalNode, entrypoint scripts; and
how its rows read: a skipped check says skip (not ok), the head's ports follow the executor."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from sparktui.actions.base import ActionContext
from sparktui.actions.checks import ok, skip, worst
from sparktui.actions.checks.basics import head_ports, listening_ports
from sparktui.actions.checks.entrypoint import entrypoint_result, passes_args
from sparktui.actions.checks.fabric import fabric_results, find_interface
from sparktui.actions.checks.fit import compute_fit, fit_results, parse_meminfo
from sparktui.actions.doctor import DoctorAction
from sparktui.actions.validate import env_for_image
from sparktui.config import ClusterConfig, Config, NodeConfig, load_config
from sparktui.nodes.local import LocalNode
from sparktui.probes.image import PROBE_SCRIPT, image_info_from_attrs, parse_probe_output
from sparktui.probes.model import ModelProbeError, probe_model

ROOT = Path(__file__).resolve().parents[2]
IMAGES = ROOT / "scripts" / "testbed_images"
GIB = 1 << 30
MODEL_BYTES = 127_775_000_000  # the seed's safetensors index: ~119 GiB


def gb10() -> dict[str, int]:
    return parse_meminfo((IMAGES / "model" / "meminfo.gb10").read_text())


def test_meminfo_parsed_in_bytes():
    mi = gb10()
    assert mi["MemTotal"] == 124609376 * 1024
    assert mi["MemAvailable"] < mi["MemTotal"]
    assert mi["HugePages_Total"] == 0  # no unit: taken as is


def test_fit_tp2_fits_single_node_does_not():
    mi = gb10()
    res = fit_results("spark1", MODEL_BYTES, "safetensors index", 2, mi["MemTotal"], mi["MemAvailable"], 0.9)
    by = {r.check: r for r in res}
    assert by["memory_fit"].status == "ok"
    assert by["memory_fit_single"].status == "warn" and by["memory_fit_single"].finding == "insufficient_free_memory"
    assert "single-node validation will end in an OOM" in by["memory_fit_single"].title


def test_fit_fails_when_tp_too_small_or_memory_taken():
    mi = gb10()
    assert fit_results("s", MODEL_BYTES, "x", 1, mi["MemTotal"], mi["MemAvailable"], 0.9)[0].status == "fail"
    busy = fit_results("s", MODEL_BYTES, "x", 2, mi["MemTotal"], 40 * GIB, 0.9)
    assert busy[0].status == "fail" and "free" in busy[0].title and "drop_caches" in busy[0].fix
    f = compute_fit(MODEL_BYTES, 2, mi["MemTotal"], mi["MemAvailable"], 0.9)
    assert f.per_rank_weights == MODEL_BYTES // 2 and f.fits and not f.fits_single_node


def run_probe(site: Path | None, arches, model_type) -> str:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if site:
        env["PYTHONPATH"] = str(site)
    r = subprocess.run([sys.executable, "-c", PROBE_SCRIPT, json.dumps({"arches": arches, "model_type": model_type})],
                       capture_output=True, text=True, env=env, cwd=str(IMAGES / "vllm-node"), timeout=30)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_probe_script_reads_registry_and_config_map_without_importing():
    out = parse_probe_output(run_probe(IMAGES / "site", ["Qwen3_5MoeForConditionalGeneration", "Qwen3MoeForCausalLM"],
                                       "qwen3_5_moe"))
    assert out.vllm_version == "0.14.0rc2" and out.transformers_version == "4.57.1"
    assert out.architectures == {"Qwen3_5MoeForConditionalGeneration": False, "Qwen3MoeForCausalLM": True}
    assert out.model_type_known is False
    assert "run-cluster-node.sh" in out.workdir_files


def test_probe_script_after_patch_knows_it(tmp_path):
    site = tmp_path / "site"
    shutil.copytree(IMAGES / "site", site)
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "patch_vllm_registry.py"), "--arch",
                        "Qwen3_5MoeForConditionalGeneration=qwen3_5:Qwen3_5MoeForConditionalGeneration",
                        "--model-type", "qwen3_5_moe=Qwen3_5MoeConfig"], env={**os.environ, "PYTHONPATH": str(site)},
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    out = parse_probe_output(run_probe(site, ["Qwen3_5MoeForConditionalGeneration"], "qwen3_5_moe"))
    assert out.architectures == {"Qwen3_5MoeForConditionalGeneration": True} and out.model_type_known


def test_probe_script_without_vllm_says_so():
    out = parse_probe_output(run_probe(None, ["X"], "x"))
    assert "no vllm package in the image" in out.errors


COMMUNITY = {"Id": "sha256:abc", "Config": {
    "Entrypoint": ["/app/entrypoint.sh"], "Cmd": None, "WorkingDir": "/app",
    "Env": ["PATH=/usr/bin", "MODEL_PATH=/models/Qwen3-Next-80B-A3B-Thinking-FP8", "PORT=8000", "HOST=0.0.0.0",
            "MAX_MODEL_LEN=32768", "GPU_MEMORY_UTIL=0.90"]}}


def test_entrypoint_env_driven_warns_and_says_how_to_start():
    info = image_info_from_attrs("community", COMMUNITY)
    script = (IMAGES / "community" / "entrypoint.sh").read_text()
    assert not passes_args(script)
    res = entrypoint_result("spark1", info, script, ("entrypoint.sh",), False)
    ep = next(r for r in res if r.check == "entrypoint")
    assert ep.status == "warn" and ep.finding == "docker_entrypoint_error"
    assert "./run-cluster-node.sh" in ep.title and "MODEL_PATH" in ep.fix and "--entrypoint" in ep.fix
    assert worst(res) == "warn"


def test_entrypoint_passthrough_and_none_are_ok():
    nv = image_info_from_attrs("ngc", {"Id": "x", "Config": {"Entrypoint": ["/opt/nvidia/nvidia_entrypoint.sh"],
                                                            "WorkingDir": "/workspace/vllm"}})
    res = entrypoint_result("s", nv, "#!/bin/bash\nset -e\nexec \"$@\"\n", ("run-cluster-node.sh",), True)
    assert [r.status for r in res] == ["ok"]
    plain = image_info_from_attrs("vllm-node", {"Id": "x", "Config": {"Cmd": ["/bin/bash"], "WorkingDir": "/workspace/vllm"}})
    assert [r.status for r in entrypoint_result("s", plain, None, ("run-cluster-node.sh",), True)] == ["ok"]


def test_env_for_image_fills_the_names_the_image_uses():
    info = image_info_from_attrs("community", COMMUNITY)
    env = env_for_image(info, "/models/m", 8001, "0.0.0.0", 32768, 0.9)
    assert env == {"MODEL_PATH": "/models/m", "PORT": "8001", "HOST": "0.0.0.0", "MAX_MODEL_LEN": "32768",
                   "GPU_MEMORY_UTIL": "0.9"}


IP_JSON = [
    {"ifname": "lo", "mtu": 65536, "addr_info": [{"family": "inet", "local": "127.0.0.1", "prefixlen": 8, "scope": "host"}]},
    {"ifname": "enp1s0f1np1", "mtu": 9000, "addr_info": [{"family": "inet", "local": "192.168.200.12", "prefixlen": 24,  # data only, never contacted
                                                          "scope": "global"}]},
]


def cfg(*nodes: NodeConfig, **cl) -> Config:
    return Config(path="t", cluster=ClusterConfig(**cl), nodes=nodes)


def test_fabric_same_subnet_mtu_and_interface():
    a = NodeConfig("spark1", fabric_ip="192.168.200.12", fabric_if="enp1s0f1np1", role="head")  # data only, never contacted
    b = NodeConfig("spark2", fabric_ip="192.168.200.13", fabric_if="enp1s0f1np1")  # data only, never contacted
    fa = find_interface(IP_JSON, "192.168.200.12")  # data only, never contacted
    assert fa[0] == "enp1s0f1np1" and fa[2] == 9000
    import ipaddress

    fb = ("enp1s0f1np1", ipaddress.ip_interface("192.168.200.13/24"), 9000)  # data only, never contacted
    assert [r.status for r in fabric_results(cfg(a, b), {"spark1": fa, "spark2": fb}, {})] == ["ok"]
    fb_mtu = ("enp1s0f1np1", ipaddress.ip_interface("192.168.200.13/24"), 1500)  # data only, never contacted
    res = fabric_results(cfg(a, b), {"spark1": fa, "spark2": fb_mtu}, {})
    assert any(r.check == "fabric_mtu" and r.status == "fail" for r in res)
    fb_net = ("enp1s0f1np1", ipaddress.ip_interface("192.168.201.13/24"), 9000)  # data only, never contacted
    assert any("different subnets" in r.title for r in fabric_results(cfg(a, b), {"spark1": fa, "spark2": fb_net}, {}))
    res = fabric_results(cfg(a, b), {"spark1": fa, "spark2": fb}, {"spark1": ["spark2 (192.168.200.13)"]})  # data only, never contacted
    assert any(r.check == "fabric_reach" for r in res)
    res = fabric_results(cfg(a, b, env=(("NCCL_IB_GID_INDEX", "3"),)), {"spark1": fa, "spark2": fb}, {})
    assert any(r.finding == "nccl_ib_error" for r in res)
    # a loopback address owned by lo's 127.0.0.1/8 (the test bed)
    assert find_interface(IP_JSON, "127.0.5.2")[0] == "lo"
    # no fabric_ip at all: warn, with the story's failure named
    res = fabric_results(cfg(NodeConfig("x"), NodeConfig("y")), {}, {})
    assert res[0].status == "warn" and res[0].finding == "wrong_network_interface"


def test_listening_ports_from_ss():
    ss = ("LISTEN 0      4096         0.0.0.0:8001      0.0.0.0:*\n"
          "LISTEN 0      128        127.0.0.2:22        0.0.0.0:*\n"
          "LISTEN 0      4096            [::]:6379         [::]:*\n")
    assert listening_ports(ss) == {8001, 22, 6379}


async def test_model_probe_reads_index_size_and_keeps_hostile_path(tmp_path):
    odd = tmp_path / "a b'c\" $(touch pwned)"
    odd.mkdir()
    shutil.copy(IMAGES / "model" / "config.json", odd / "config.json")
    (odd / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {"total_size": MODEL_BYTES}, "weight_map": {"a": "model-00001-of-00002.safetensors",
                                                                  "b": "model-00002-of-00002.safetensors"}}))
    node = LocalNode(NodeConfig("local", backend="local"))
    m = await probe_model(node, str(odd))
    assert m.architectures == ("Qwen3_5MoeForConditionalGeneration",) and m.model_type == "qwen3_5_moe"
    assert m.total_bytes == MODEL_BYTES and m.size_source == "safetensors index" and m.shard_count == 2
    assert not (tmp_path / "pwned").exists() and not Path("pwned").exists()
    # no index: the weight files' sizes
    (odd / "model.safetensors.index.json").unlink()
    (odd / "model-00001-of-00001.safetensors").write_bytes(b"\0" * 1000)
    m = await probe_model(node, str(odd))
    assert m.total_bytes == 1000 and m.size_source == "file sizes"
    with pytest.raises(ModelProbeError, match="does not exist"):
        await probe_model(node, str(tmp_path / "missing"))
    (odd / "config.json").unlink()
    with pytest.raises(ModelProbeError, match="config.json"):
        await probe_model(node, str(odd))


# ------------------------------------------------------------------ how the rows read

EXAMPLE = ROOT / "cluster.example.toml"


def _group(results) -> list:
    events: list = []
    ctx = ActionContext(load_config(str(EXAMPLE)), {}, emit=events.append)

    async def checks():
        return results

    asyncio.run(DoctorAction()._group(ctx, "memory", checks()))
    return events


def test_a_skipped_check_reads_skip_with_its_reason():
    done = [e for e in _group([skip("memory_fit", "model size unknown")]) if e.status != "started"]
    assert [(e.status, e.message) for e in done] == [("skip", "model size unknown")]


def test_per_node_rows_keep_skip_apart_from_ok():
    evs = _group([ok("memory_fit", "fits", "spark1"), skip("memory_fit", "cannot read meminfo", "spark2")])
    rows = {e.node: e.status for e in evs if e.node}
    assert rows == {"spark1": "ok", "spark2": "skip"}


def test_the_head_ports_follow_the_executor():
    c = load_config(str(EXAMPLE)).cluster
    ray = replace(c, executor="ray", serve_port=8000, ray_port=6380, master_port=29501)
    assert head_ports(ray) == [8000, 6380, 8265]
    mp = replace(ray, executor="mp")
    assert head_ports(mp) == [8000, 29501]
