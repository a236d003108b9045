"""Benchmarks of the embedded demo cluster and the stand-in vLLM (medians over >= 5 runs).

- events_until(120 s) of the healthy 2-node demo: what a snapshot test pays;
- CPU the live demo sources cost per wall second at speed 1 (the demo must leave the UI the CPU);
- stand-in vLLM: spawn to "Application startup complete." (no load delay) and a chat round trip.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUNS = 5


def _events_until() -> float:
    from sparktui.config import demo_config
    from sparktui.sim import SimCluster

    times = []
    for _ in range(RUNS):
        t = time.perf_counter()
        SimCluster(demo_config()).events_until(120.0)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def _live_cpu(seconds: float = 2.0) -> float:
    from sparktui.config import demo_config
    from sparktui.sim import SimCluster

    async def once() -> float:
        sim = SimCluster(demo_config(), "healthy", 1.0)
        n = 0

        def emit(ev) -> None:
            nonlocal n
            n += 1
        tasks = [asyncio.create_task(s.run(emit)) for s in sim.sources()]
        c0, w0 = time.process_time(), time.perf_counter()
        await asyncio.sleep(seconds)
        c1, w1 = time.process_time(), time.perf_counter()
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return 100.0 * (c1 - c0) / (w1 - w0)

    return statistics.median(asyncio.run(once()) for _ in range(RUNS))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _standin() -> tuple[float, float]:
    starts, rtts = [], []
    with tempfile.TemporaryDirectory() as tmp:
        model = Path(tmp) / "m"
        model.mkdir()
        (model / "config.json").write_text(json.dumps({"architectures": ["Qwen3_5MoeForConditionalGeneration"],
                                                       "model_type": "qwen3_5_moe"}))
        (model / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 119 * 10**9}}))
        env = dict(os.environ, SPARKTUI_STANDIN_LOAD_SECONDS="0", SPARKTUI_STANDIN_STEP_SECONDS="0",
                   SPARKTUI_STANDIN_REGISTRY=str(Path(tmp) / "none.py"), SPARKTUI_STANDIN_CONFIGMAP=str(Path(tmp) / "none.py"))
        for _ in range(RUNS):
            port = _free_port()
            t0 = time.perf_counter()
            p = subprocess.Popen([sys.executable, str(ROOT / "sparktui" / "sim" / "standin_vllm.py"), "serve", str(model),
                                  "--host", "127.0.0.1", "--port", str(port), "-tp", "2", "--reasoning-parser", "qwen3"],
                                 stdout=subprocess.PIPE, text=True, env=env)
            try:
                for line in p.stdout:
                    if "Application startup complete." in line:
                        break
                starts.append(time.perf_counter() - t0)
                body = json.dumps({"model": str(model), "messages": [{"role": "user", "content": "hi there"}]}).encode()
                req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", body,
                                             {"Content-Type": "application/json"})
                t1 = time.perf_counter()
                for _ in range(20):
                    with urllib.request.urlopen(req, timeout=10) as r:
                        r.read()
                rtts.append((time.perf_counter() - t1) / 20)
            finally:
                p.terminate()
                p.wait(timeout=10)
    return statistics.median(starts), statistics.median(rtts)


def main(args) -> list[dict]:
    sys.path.insert(0, str(ROOT))
    rows = []
    ev = _events_until()
    rows.append({"what": "sim events_until(120 s), 2 nodes, healthy", "value": ev * 1000, "unit": "ms",
                 "budget": "<= 100 ms (snapshot tests)", "ok": ev <= 0.1})
    cpu = _live_cpu()
    rows.append({"what": "sim live sources CPU at speed 1 (% of one core)", "value": cpu, "unit": "%",
                 "budget": "<= 5 %", "ok": cpu <= 5.0})
    start, rtt = _standin()
    rows.append({"what": "standin vLLM spawn -> 'Application startup complete.'", "value": start * 1000, "unit": "ms",
                 "budget": "-", "ok": None})
    rows.append({"what": "standin vLLM chat completion round trip", "value": rtt * 1000, "unit": "ms",
                 "budget": "-", "ok": None})
    return rows
