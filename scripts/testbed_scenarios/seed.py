#!/usr/bin/env python3
"""Scenario `seed`: the story's starting point (old and community vLLM images, a Qwen3.5-122B model
directory without weights, GB10-sized memory) on a running test bed (`scripts/testbed up --scenario seed`).

- builds, in spark1's dockerd, the old `vllm-node` image (no Qwen3.5 in its vLLM registry or its
  transformers config map; no ENTRYPOINT; run-cluster-node.sh in /workspace/vllm) and a
  community-like image `vllm-qwen35-community` (knows Qwen3.5; env-driven custom ENTRYPOINT), then
  copies both to every other node (`docker save | docker load`) so the image IDs are equal;
- writes the model directory <bed>/models/Qwen3.5-122B-A10B-FP8 (real-shaped config.json and a
  safetensors index declaring ~119 GiB, no weights) and a GB10-shaped meminfo per node;
- removes the hybrid image and any container of the cluster's name (nothing built yet);
- points cluster.toml's [cluster] at all this.

Builds are skipped when the image already carries the recipe's hash (re-running is fast).
Usage: seed.py BED_DIR
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
IMAGES = ROOT / "scripts" / "testbed_images"
STANDIN = Path(os.environ.get("SPARKTUI_STANDIN_SRC") or ROOT / "sparktui" / "sim" / "standin_vllm.py")
PATCH = ROOT / "scripts" / "patch_vllm_registry.py"
MODEL_NAME = "Qwen3.5-122B-A10B-FP8"
MODEL_BYTES = 127_775_000_000  # metadata.total_size: ~119 GiB, what the FP8 checkpoint holds
SHARDS = 40
RECIPES = {"vllm-node": "vllm-node/Dockerfile", "vllm-qwen35-community": "community/Dockerfile"}
HYBRID = "vllm-node-qwen35"
CLUSTER_NAME = "vllm_qwen35"


def say(msg: str) -> None:
    print(f"seed: {msg}", flush=True)


def docker(sock: str, *args: str, check: bool = True, **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "DOCKER_HOST": f"unix://{sock}"}
    return subprocess.run(["docker", *args], env=env, check=check, capture_output=True, text=True, **kw)


def context_dir(tmp: Path) -> Path:
    if not STANDIN.is_file():
        raise SystemExit(f"seed: {STANDIN} is missing (the stand-in vLLM the images run)")
    ctx = tmp / "ctx"
    for sub in ("site", "common", "vllm-node", "community"):
        shutil.copytree(IMAGES / sub, ctx / sub, ignore=shutil.ignore_patterns("__pycache__"))
    # the stand-in vLLM: its modules (standin_*.py) and its line templates (scripts/)
    (ctx / "standin").mkdir()
    for f in STANDIN.parent.glob("standin_*.py"):
        shutil.copy2(f, ctx / "standin" / f.name)
    shutil.copytree(STANDIN.parent / "scripts", ctx / "standin" / "scripts", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(PATCH, ctx / "patch_vllm_registry.py")
    return ctx


def recipe_hash(ctx: Path, dockerfile: str) -> str:
    h = hashlib.sha256(dockerfile.encode())
    for p in sorted(ctx.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(ctx)).encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:16]


def image_id(sock: str, ref: str) -> str | None:
    r = docker(sock, "image", "inspect", "--format", "{{.Id}}", ref, check=False)
    return r.stdout.strip() if r.returncode == 0 else None


def build(sock: str, ctx: Path, tag: str, dockerfile: str) -> None:
    want = recipe_hash(ctx, dockerfile)
    r = docker(sock, "image", "inspect", "--format", '{{index .Config.Labels "sparktui.testbed.recipe"}}', tag, check=False)
    if r.returncode == 0 and r.stdout.strip() == want:
        say(f"{tag}: up to date")
        return
    say(f"building {tag}")
    r = docker(sock, "build", "-q", "-f", str(ctx / dockerfile), "--label", f"sparktui.testbed.recipe={want}",
               "-t", tag, str(ctx), check=False)
    if r.returncode != 0:
        raise SystemExit(f"seed: building {tag} failed: {r.stderr.strip()[-500:]}")


def copy_image(src: str, dst: str, ref: str) -> None:
    if image_id(src, ref) == image_id(dst, ref):
        return
    env_s = {**os.environ, "DOCKER_HOST": f"unix://{src}"}
    env_d = {**os.environ, "DOCKER_HOST": f"unix://{dst}"}
    save = subprocess.Popen(["docker", "save", ref], env=env_s, stdout=subprocess.PIPE)
    load = subprocess.run(["docker", "load", "-q"], env=env_d, stdin=save.stdout, capture_output=True, text=True)
    save.stdout.close()
    if save.wait() != 0 or load.returncode != 0:
        raise SystemExit(f"seed: copying {ref} failed: {load.stderr.strip()[-300:]}")


def write_model(root: Path) -> Path:
    d = root / "models" / MODEL_NAME
    d.mkdir(parents=True, exist_ok=True)
    shutil.copy2(IMAGES / "model" / "config.json", d / "config.json")
    shard = [f"model-{i:05d}-of-{SHARDS:05d}.safetensors" for i in range(1, SHARDS + 1)]
    weight_map = {}
    for layer in range(48):  # a realistic spread of tensor names over the shards
        f = shard[min(SHARDS - 1, layer * SHARDS // 48)]
        for t in ("self_attn.q_proj.weight", "mlp.experts.gate_up_proj", "mlp.experts.down_proj", "input_layernorm.weight"):
            weight_map[f"model.language_model.layers.{layer}.{t}"] = f
    weight_map["lm_head.weight"] = shard[-1]
    weight_map["model.language_model.embed_tokens.weight"] = shard[0]
    weight_map["model.visual.patch_embed.proj.weight"] = shard[-1]
    index = {"metadata": {"total_size": MODEL_BYTES}, "weight_map": dict(sorted(weight_map.items()))}
    (d / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n")
    (d / "generation_config.json").write_text(json.dumps(
        {"bos_token_id": 248044, "do_sample": True, "eos_token_id": [248046, 248044], "pad_token_id": 248044,
         "temperature": 0.6, "top_k": 20, "top_p": 0.95, "transformers_version": "5.0.0.dev0"}, indent=2) + "\n")
    return d


def toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):  # an inline table, e.g. a [[node]]'s env
        return "{" + ", ".join(f"{json.dumps(str(k))} = {toml_value(x)}" for k, x in v.items()) + "}"
    return json.dumps(str(v))  # a JSON string is a valid TOML basic string


def write_config(path: Path, data: dict) -> None:
    lines = ["# written by scripts/testbed, set up by scenario seed (scripts/testbed_scenarios/seed.py)"]
    lines += [f"{k} = {toml_value(v)}" for k, v in data.items() if k not in ("cluster", "node")]  # top-level keys
    lines += ["[cluster]"]
    lines += [f"{k} = {toml_value(v)}" for k, v in data["cluster"].items() if not isinstance(v, dict)]
    for k, v in data["cluster"].items():
        if isinstance(v, dict):
            lines += ["", f"[cluster.{k}]"] + [f"{kk} = {toml_value(vv)}" for kk, vv in v.items()]
    for n in data["node"]:
        lines += ["", "[[node]]"] + [f"{k} = {toml_value(v)}" for k, v in n.items()]
    tmp = path.with_suffix(".tmp")
    tmp.write_text("\n".join(lines) + "\n")
    os.replace(tmp, path)


def main(argv: list[str]) -> int:
    bed = Path(argv[0] if argv else os.environ.get("SPARKTUI_TESTBED_DIR", "/tmp/sparktui-testbed"))
    cfg_path = bed / "cluster.toml"
    data = tomllib.loads(cfg_path.read_text())
    nodes = data["node"]
    socks = {n["name"]: n["docker_socket"] for n in nodes}
    head = next((n for n in nodes if n.get("role") == "head"), nodes[0])["name"]
    with tempfile.TemporaryDirectory() as tmp:
        ctx = context_dir(Path(tmp))
        for tag, dockerfile in RECIPES.items():
            build(socks[head], ctx, tag, dockerfile)
    for name, sock in socks.items():
        if name != head:
            for tag in RECIPES:
                copy_image(socks[head], sock, tag)
        docker(sock, "rm", "-f", CLUSTER_NAME, check=False)
        docker(sock, "rmi", "-f", HYBRID, check=False)
        mem = bed / "nodes" / name / "meminfo"
        shutil.copy2(IMAGES / "model" / "meminfo.gb10", mem)
    model = write_model(bed)
    client = bed / "client"
    data["cluster"].update({
        "name": CLUSTER_NAME, "image": "vllm-node", "base_image": "vllm-node", "hybrid_image": HYBRID,
        "model_path": str(model), "model_mount": f"/root/.cache/huggingface/hub/{MODEL_NAME}",
        "served_model": f"/root/.cache/huggingface/hub/{MODEL_NAME}", "tensor_parallel": 2, "serve_port": 8001,
        "gpu_memory_utilization": 0.9, "max_model_len": 32768,
        "peer_ssh_args": ["-i", str(client / "id_ed25519"), "-o", f"UserKnownHostsFile={client / 'known_hosts'}"],
    })
    for n in nodes:
        n["meminfo_path"] = str(bed / "nodes" / n["name"] / "meminfo")
    write_config(cfg_path, data)
    say(f"ready: images {', '.join(RECIPES)} on {', '.join(socks)}; model {model}; config {cfg_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
