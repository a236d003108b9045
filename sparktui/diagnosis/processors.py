"""The engine's analysis, one list for every face: the TUI's engine, the CLI's small one
(validate, launch, status) and the analysis worker build the same processors, so a line gets the
same findings and milestones whoever reads it."""

from __future__ import annotations

from typing import Any


def default_processors() -> list[Any]:
    """In order.  Each is part of every build: one that does not import fails the start loudly
    rather than leaving the faces without findings.  The lifecycle comes last: it sees the
    findings the others derived from the same event."""
    from . import Diagnoser
    from .cluster_watch import ClusterWatch
    from .lifecycle import Lifecycle
    from .stall import StallDetector

    return [Diagnoser(), StallDetector(), ClusterWatch(), Lifecycle()]


FACTORY = f"{__name__}:default_processors"  # how the analysis worker makes its own
