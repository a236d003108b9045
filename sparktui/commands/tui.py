"""`sparktui` with no subcommand: the TUI on the configured cluster."""

from __future__ import annotations

import sys


def run(args) -> int:
    from ..config import load_config

    config = load_config(getattr(args, "config", None))
    try:
        from ..nodes import make_node, make_sources
    except ImportError as exc:
        print(f"sparktui: node backends are not available in this build ({exc})", file=sys.stderr)
        return 2
    try:
        nodes = {n.name: make_node(n) for n in config.nodes}
        sources = make_sources(config, nodes)
    except (ImportError, ValueError) as exc:
        print(f"sparktui: cannot set up the nodes: {exc}", file=sys.stderr)
        return 2
    from ..tui.boot import make_engine, run_app

    engine = make_engine(config, sources, "tui")
    return run_app(engine, args, nodes=lambda: nodes, subtitle=config.path)
