"""Launch to ready on the real-vLLM test bed: `sparktui launch --yes --json` until /health and
/v1/models answer, then `sparktui stop --yes`; median of 5 launches each for

- mp: the REAL vLLM (CPU build), TP=2 across two bed nodes with vLLM's multi-node executor;
- ray: a real two-node Ray cluster, `ray status` gate, then the stand-in serving process (vLLM on CPU
  refuses the Ray executor);
- attach: a second `sparktui launch` finding the running mp cluster and following it to ready.

Also reported: stop time.  Uses the bed at SPARKTUI_BENCH_LAUNCH_BED (+ _NET) when given, else makes
one (`scripts/testbed up --nodes 3 --scenario real-vllm`) and removes it.  No budget (docs/architecture.md "Performance budgets").
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTBED = ROOT / "scripts" / "testbed"
RUNS = 5


def _cli(*args: str, config: Path, timeout: float = 900) -> tuple[float, dict]:
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "sparktui", args[0], "--config", str(config), *args[1:]],
                       capture_output=True, text=True, cwd=str(ROOT), timeout=timeout)
    took = time.monotonic() - t0
    try:
        out = json.loads(r.stdout)
    except ValueError:
        raise RuntimeError(f"{args[0]}: no JSON: {r.stderr[-400:]}") from None
    if r.returncode != 0:
        raise RuntimeError(f"{args[0]} failed: {out.get('summary')}")
    return took, out


def _config(bed: Path, out: Path, **cluster) -> Path:
    import tomllib

    sys.path.insert(0, str(ROOT / "scripts" / "testbed_scenarios"))
    import seed  # noqa: PLC0415

    data = tomllib.loads((bed / "cluster.toml").read_text())
    data["node"] = data["node"][:2]
    env = {**data["cluster"].get("env", {}), **cluster.pop("env", {})}
    data["cluster"].update(cluster, env=env, tensor_parallel=2)
    seed.write_config(out, data)
    return out


def main(args) -> list[dict]:
    given = os.environ.get("SPARKTUI_BENCH_LAUNCH_BED")
    bed = Path(given or f"/tmp/bench-launch-{os.getpid()}")
    env = {**os.environ, "SPARKTUI_TESTBED_DIR": str(bed),
           "SPARKTUI_TESTBED_NET": os.environ.get("SPARKTUI_BENCH_LAUNCH_NET") or "127.79.0"}
    r = subprocess.run([str(TESTBED), "up", "--nodes", "3", "--scenario", "real-vllm"], env=env, capture_output=True,
                       text=True, timeout=3600)
    if r.returncode != 0:
        raise RuntimeError(f"testbed up failed: {r.stderr[-400:]}")
    rows = []
    try:
        cfgs = {"mp": _config(bed, bed / "bench-mp.toml", name="bench_mp"),
                "ray": _config(bed, bed / "bench-ray.toml", name="bench_ray", executor="ray",
                               env={"SPARKTUI_TESTBED_STANDIN": "1"})}
        for kind, cfg in cfgs.items():
            ready, attach, stop = [], [], []
            for _ in range(RUNS):
                took, out = _cli("launch", "--yes", "--json", config=cfg)
                ready.append(took)
                if kind == "mp":
                    took, out = _cli("launch", "--yes", "--json", config=cfg)
                    assert out["data"]["attached"], out["summary"]
                    attach.append(took)
                took, _ = _cli("stop", "--yes", "--json", config=cfg)
                stop.append(took)
            rows.append({"what": f"launch to ready, {kind} ({'real vLLM' if kind == 'mp' else 'Ray + stand-in'}, "
                                 "2 nodes)", "value": statistics.median(ready), "unit": "s", "budget": "-", "ok": None})
            if attach:
                rows.append({"what": "launch attaching to the running mp cluster", "value": statistics.median(attach),
                             "unit": "s", "budget": "-", "ok": None})
            rows.append({"what": f"stop, {kind}", "value": statistics.median(stop), "unit": "s", "budget": "-",
                         "ok": None})
    finally:
        if not given:
            subprocess.run([str(TESTBED), "down"], env=env, capture_output=True, timeout=600)
    return rows
