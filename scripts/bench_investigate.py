"""Hang-investigation figures.

- suspected hang after progress stops: the sim's nccl-hang replayed in simulated time through the
  StallDetector (median of 5), and the figures recorded on two real H200s (tests/fixtures/device-runs);
- verdict time: the pure rules over each real device bundle (median of 5 runs, ms);
- a live local investigation round trip (--interval 1) with nothing to find: the probes' own cost.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEV = ROOT / "tests" / "fixtures" / "device-runs"
RUNS = 5


def _sim_alarm_delay() -> float:
    from sparktui.config import demo_config
    from sparktui.diagnosis.stall import StallDetector
    from sparktui.sim import SimCluster

    sim = SimCluster(demo_config(), "nccl-hang", 1.0)
    events = sim.events_until(90)
    now = [sim.start]
    det = StallDetector(clock=lambda: now[0])
    i = 0
    while now[0] < sim.start + 90:
        now[0] += 0.25
        while i < len(events) and getattr(events[i], "ts", 0) <= now[0]:
            det.feed(events[i])
            i += 1
        for ev in det.tick(now[0]):
            return ev.ts - det.last_progress
    return float("nan")


def main(args) -> list[dict]:
    from sparktui.diagnosis.evidence import read_bundle
    from sparktui.diagnosis.verdict import decide

    rows = []
    delay = statistics.median(_sim_alarm_delay() for _ in range(RUNS))
    rows.append({"what": "sim nccl-hang: progress stops -> suspected hang", "value": round(delay, 2), "unit": "s",
                 "budget": "<= 15 s", "ok": delay <= 15})
    sums = [json.loads(p.read_text()) for p in sorted(DEV.glob("*/summary.json"))]
    hangs = [s for s in sums if s.get("hang_to_suspected_s") is not None]
    if hangs:
        worst = max(s["hang_to_suspected_s"] for s in hangs)
        rows.append({"what": f"2xH200 real hangs ({len(hangs)} modes): worst hang -> suspected (recorded)",
                     "value": worst, "unit": "s", "budget": "<= 15 s", "ok": worst <= 15})
        worst_v = max(s["hang_to_verdict_s"] for s in hangs)
        rows.append({"what": "2xH200 real hangs: worst hang -> verdict with evidence (recorded)", "value": worst_v,
                     "unit": "s", "budget": "<= 60 s", "ok": worst_v <= 60})
        fa = [s for s in sums if s.get("false_alarm")]
        rows.append({"what": "2xH200 healthy loop: false alarms (recorded)", "value": len(fa), "unit": "",
                     "budget": "0", "ok": not fa})
    bundles = [read_bundle(p)[0][1] for p in sorted(DEV.glob("*/bundle"))]
    if bundles:
        times = []
        for _ in range(RUNS):
            t = time.perf_counter()
            for ev in bundles:
                decide(ev)
            times.append((time.perf_counter() - t) * 1000 / len(bundles))
        ms = statistics.median(times)
        rows.append({"what": "verdict rules over one real bundle", "value": round(ms, 2), "unit": "ms",
                     "budget": "<= 1000 ms", "ok": ms <= 1000})
    with tempfile.TemporaryDirectory() as d:
        cfg = Path(d) / "c.toml"
        cfg.write_text('[cluster]\nname = "bench_nothing"\n[[node]]\nname = "me"\nbackend = "local"\n')
        walls = []
        for _ in range(RUNS):
            t = time.perf_counter()
            subprocess.run([sys.executable, "-m", "sparktui", "investigate", "--config", str(cfg), "--json",
                            "--interval", "1"], capture_output=True, cwd=str(ROOT), timeout=120)
            walls.append(time.perf_counter() - t)
        w = statistics.median(walls)
        rows.append({"what": "live local investigation, nothing running (probe cost)", "value": round(w, 2),
                     "unit": "s", "budget": "<= 60 s", "ok": w <= 60})
    return rows
