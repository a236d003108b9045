"""Assembling a run: processors, session, app.  Shared by `sparktui`, `sparktui demo`, `replay`."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Callable, Mapping

from ..diagnosis.processors import FACTORY, default_processors

if TYPE_CHECKING:
    from ..config import Config
    from ..engine import Engine
    from ..nodes.base import Node


def make_engine(config: "Config", sources: list, kind: str, extra_meta: dict | None = None, *,
                offload: bool = False) -> "Engine":
    """``offload``: the live faces analyse in a worker process (engine_worker.py) once started."""
    from ..engine import Engine
    from ..session import Session, sessions_dir

    session = Session.create(config.cluster.name, meta={"kind": kind, "config": config.path, "cluster": config.cluster.name,
                                                        "nodes": [n.name for n in config.nodes], **(extra_meta or {})},
                             root=sessions_dir(config), max_log_bytes=config.session_log_cap_mib << 20)
    return Engine(config, sources, processors=default_processors(), session=session,
                  processor_factory=FACTORY, offload=offload)


def run_app(engine: "Engine", args: Any, *, nodes: "Callable[[], Mapping[str, Node]] | None", subtitle: str,
            timeline: Any = None, demo: bool = False) -> int:
    """``timeline``: the cluster's shared-timeline writer (live TUI), fed by actions and notes.  ``demo``:
    the sim cluster of `sparktui demo` (the actions it cannot play are not offered)."""
    from .app import SparkApp, exit_after_first_paint_requested

    first_paint = exit_after_first_paint_requested()
    app = SparkApp(engine, nodes=nodes, read_only=bool(getattr(args, "read_only", False)),
                   theme=getattr(args, "theme", None), subtitle=subtitle, exit_after_first_paint=first_paint,
                   timeline=timeline, demo=demo)
    result = app.run(mouse=not getattr(args, "no_mouse", False))
    if first_paint and app.first_paint_at and app.first_paint_at > 0:
        print(f"sparktui-first-paint={app.first_paint_at:.6f}", file=sys.stderr, flush=True)
    if engine.session is not None:
        print(f"sparktui: session recorded in {engine.session.path}", file=sys.stderr)
    if app.return_code:  # the app died of an exception: Textual restored the terminal, the shell must see it
        return int(app.return_code)
    return int(result or 0)
