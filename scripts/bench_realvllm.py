"""The real-vLLM test bed: image build time (cold and cached), server start to ready, RSS of one server.

- cached: `scripts/testbed up --scenario real-vllm` on a fresh bed with the environment and image
  tarball already in the cache (what every CI run after the first pays: loads into each node);
- cold (only with `--cold`, ~5 min): the same with an empty cache of its own (pip install, debootstrap,
  docker build, save);
- start to ready: `docker run ... vllm serve` of the tiny model until /health answers 200, median of
  5 starts (the container is removed after each);
- RSS: the summed resident memory of the server's processes (API server, EngineCore, worker) once
  ready, read from /proc of the container's processes.

Runs on its own bed (SPARKTUI_BENCH_REALVLLM_BED names one to reuse).  No budget (docs/architecture.md "Performance budgets"): reported.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTBED = ROOT / "scripts" / "testbed"
RUNS = 5


def _up(env: dict) -> float:
    t0 = time.monotonic()
    r = subprocess.run([str(TESTBED), "up", "--scenario", "real-vllm"], env=env, capture_output=True, text=True,
                       timeout=3600)
    if r.returncode != 0:
        raise RuntimeError(f"testbed up --scenario real-vllm failed: {r.stderr[-500:]}")
    return time.monotonic() - t0


def _down(env: dict) -> None:
    subprocess.run([str(TESTBED), "down"], env=env, capture_output=True, timeout=600)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rss_of_container(sock: str, name: str) -> int:
    r = subprocess.run(["docker", "-H", f"unix://{sock}", "top", name, "-eo", "pid"], capture_output=True, text=True)
    total = 0
    for line in r.stdout.splitlines()[1:]:
        try:
            status = Path(f"/proc/{int(line.split()[0])}/status").read_text()
        except (OSError, ValueError, IndexError):
            continue
        for row in status.splitlines():
            if row.startswith("VmRSS:"):
                total += int(row.split()[1]) * 1024
    return total


def _start_to_ready(bed: Path) -> tuple[list[float], list[int]]:
    info = json.loads((bed / "real-vllm.json").read_text())
    sock = str(bed / "nodes" / "spark1" / "docker.sock")
    times, rss = [], []
    for i in range(RUNS):
        port, name = _free_port(), f"bench-ready-{i}"
        subprocess.run(["docker", "-H", f"unix://{sock}", "rm", "-f", name], capture_output=True)
        t0 = time.monotonic()
        subprocess.run(["docker", "-H", f"unix://{sock}", "run", "-d", "--name", name, "--network", "host", "--ipc",
                        "host", "-e", "VLLM_CPU_KVCACHE_SPACE=1", "-v", f"{info['models']}/tiny-reason:/models/tiny:ro",
                        info["image"], "vllm", "serve", "/models/tiny", "--host", "127.0.0.1", "--port", str(port),
                        "--max-model-len", "512", "--enforce-eager"], check=True, capture_output=True)
        try:
            deadline = t0 + 300
            while time.monotonic() < deadline:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as resp:
                        if resp.status == 200:
                            break
                except OSError:
                    time.sleep(0.25)
            else:
                raise RuntimeError("the server was not ready within 300 s")
            times.append(time.monotonic() - t0)
            rss.append(_rss_of_container(sock, name))
        finally:
            subprocess.run(["docker", "-H", f"unix://{sock}", "rm", "-f", name], capture_output=True)
    return times, rss


def main(args) -> list[dict]:
    rows = []
    pid = os.getpid()
    reuse = os.environ.get("SPARKTUI_BENCH_REALVLLM_BED")
    env = {**os.environ, "SPARKTUI_TESTBED_DIR": reuse or f"/tmp/tbr-{pid}",
           "SPARKTUI_TESTBED_NET": os.environ.get("SPARKTUI_BENCH_REALVLLM_NET") or f"127.78.{pid % 250}"}
    if "--cold" in sys.argv:  # scripts/bench keeps only the non-option words in args
        cache = Path(f"/tmp/tbr-cache-{pid}")
        cold_env = {**env, "SPARKTUI_TESTBED_CACHE": str(cache), "SPARKTUI_TESTBED_DIR": f"/tmp/tbr-cold-{pid}",
                    "SPARKTUI_TESTBED_NET": f"127.79.{pid % 250}"}
        try:
            cold = _up(cold_env)
        finally:
            _down(cold_env)
            shutil.rmtree(cache, ignore_errors=True)
        rows.append({"what": "real-vLLM bed up, cold cache (pip, debootstrap, build, load)", "value": cold,
                     "unit": "s", "budget": "-", "ok": None})
    if not reuse:
        _up(env)  # fills the shared cache if it is empty: the figure below is the cached one
        _down(env)
    try:
        cached = [_up(env)]
        if not reuse:
            for _ in range(2):
                _down(env)
                cached.append(_up(env))
        rows.append({"what": f"real-vLLM bed up, cached image (median of {len(cached)})",
                     "value": statistics.median(cached), "unit": "s", "budget": "-", "ok": None})
        times, rss = _start_to_ready(Path(env["SPARKTUI_TESTBED_DIR"]))
        rows.append({"what": f"real vLLM server start -> /health 200 (median of {RUNS})",
                     "value": statistics.median(times), "unit": "s", "budget": "-", "ok": None})
        rows.append({"what": "RSS of one real vLLM server (tiny model, 1 GiB KV)",
                     "value": statistics.median(rss) / 2**20, "unit": "MiB", "budget": "-", "ok": None})
    finally:
        if not reuse:
            _down(env)
    return rows
