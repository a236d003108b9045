#!/usr/bin/env python3
"""Write docs/demo.svg: the demo's main screen (160x48) as Textual exports it, for the README.

    scripts/screenshot_demo.py [--scenario NAME] [--at SECONDS] [--output PATH]

The demo cluster's events up to ``--at`` seconds of simulated time go through an engine with the
real processors (diagnoser, stall detector), and the app is shown headless with its clock frozen
there and TZ=UTC, so the same inputs give the same picture.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SIZE = (160, 48)


async def shoot(scenario: str, at: float) -> str:
    from sparktui.config import demo_config
    from sparktui.engine import Engine
    from sparktui.sim import DEMO_EPOCH, SimCluster
    from sparktui.tui.app import SparkApp
    from sparktui.tui.boot import default_processors

    config = demo_config()
    sim = SimCluster(config, scenario, 1.0)
    engine = Engine(config, [], processors=default_processors())
    engine.process(sim.events_until(at))
    nodes = lambda: {n.name: sim.node(n.name) for n in config.nodes}  # noqa: E731
    app = SparkApp(engine, nodes=nodes, live=False, clock=lambda: DEMO_EPOCH + at,
                   subtitle=f"demo · {scenario}", demo=True)  # as `sparktui demo` shows it
    async with app.run_test(size=SIZE) as pilot:
        app.refresh_now()
        await pilot.pause()
        return app.export_screenshot(title=f"sparktui demo · {scenario}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/screenshot_demo.py", description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="healthy")
    parser.add_argument("--at", type=float, default=150.0, help="simulated seconds since the containers started")
    parser.add_argument("--output", type=Path, default=ROOT / "docs" / "demo.svg")
    args = parser.parse_args(argv)
    os.environ["TZ"] = "UTC"  # timestamps render in local time
    time.tzset()
    svg = asyncio.run(shoot(args.scenario, args.at))
    args.output.write_text(svg, encoding="utf-8")
    print(f"wrote {args.output} ({len(svg) // 1024} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
