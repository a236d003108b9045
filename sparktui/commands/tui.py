"""`sparktui` with no subcommand: the TUI on the configured cluster."""

from __future__ import annotations

import sys


def run(args) -> int:
    from ..config import load_config

    config = load_config(getattr(args, "config", None))
    try:
        from ..collectors import make_sources
        from ..nodes import make_node
    except ImportError as exc:
        print(f"sparktui: node backends are not available in this build ({exc})", file=sys.stderr)
        return 2
    try:
        nodes = {n.name: make_node(n) for n in config.nodes}
        sources = make_sources(config, nodes)
    except (ImportError, ValueError) as exc:
        from ..logs.sanitize import safe

        print(f"sparktui: cannot set up the nodes: {safe(exc)}", file=sys.stderr)
        return 2
    from ..tui.boot import make_engine, run_app

    from ..actions.shared_timeline import attach, operator_id

    engine = make_engine(config, sources, "tui", {"operator": operator_id()}, offload=True)
    # the head holds the cluster's shared timeline: this face writes its actions and notes there
    # and shows the other operators' (a reader source started with the engine)
    timeline = attach(engine, nodes[config.head.name])
    return run_app(engine, args, nodes=lambda: nodes, subtitle=config.path, timeline=timeline)
