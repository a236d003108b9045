"""`sparktui demo`: the TUI on the embedded simulated cluster (no hardware, network or Docker)."""

from __future__ import annotations

import sys


def run(args) -> int:
    from ..config import demo_config

    try:
        from ..sim import SimCluster
    except ImportError as exc:
        print(f"sparktui: the demo cluster is not available in this build ({exc})", file=sys.stderr)
        return 2
    from ..tui.boot import make_engine, run_app

    scenario = getattr(args, "scenario", "healthy") or "healthy"
    speed = getattr(args, "speed", None)
    speed = 1.0 if speed is None else float(speed)
    if not speed > 0:  # also NaN
        print("sparktui: --speed must be > 0", file=sys.stderr)
        return 2
    config = demo_config()
    sim = SimCluster(config, scenario, speed)
    from ..collectors.serving import ServingSource

    # the head's stand-in API (sim/serving.py) is scraped like a real one, so prompts move the numbers
    serving = ServingSource(sim.node(config.head.name), config.cluster.serve_host, config.cluster.serve_port)
    engine = make_engine(config, [*sim.sources(), serving], "demo", {"scenario": scenario, "speed": speed}, offload=True)
    nodes = lambda: {n.name: sim.node(n.name) for n in config.nodes}  # noqa: E731
    return run_app(engine, args, nodes=nodes, subtitle=f"demo · {scenario}" + (f" · ×{speed:g}" if speed != 1 else ""),
                   demo=True)
