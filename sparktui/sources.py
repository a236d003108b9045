"""The event-source contract the engine consumes: something that turns one node into typed events
(model.py) until cancelled.  Collectors implement it for ssh/local nodes, the simulation for sim.

Core, below the engine and the node backends: the engine imports it from here, never from nodes/.
"""

from __future__ import annotations

from typing import Protocol

from .model import Emit  # the one Emit type: events go out through it, thread-safe and non-blocking


class EventSource(Protocol):
    """Produces events for one node until cancelled.  ``emit`` is thread-safe and non-blocking."""

    node_name: str

    async def run(self, emit: Emit) -> None: ...

    # optional: ``file_full(node, source)``, called once when that source's session file takes no
    # more lines (a log follower may then fetch only what is shown, counting the rest)
