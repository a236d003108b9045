"""Waiting, bounded: a queue read with a time limit, and the pause between retries (a leaf module).

Every retry loop paces itself with ``Backoff`` and every time-limited queue read goes through
``get_within``, so the cancellation rule below holds everywhere.
"""

from __future__ import annotations

import asyncio
from typing import Any


async def get_within(q: "asyncio.Queue[Any]", timeout: float) -> Any:
    """``q.get()`` with a timeout (``TimeoutError`` when it passes) that never swallows a
    cancellation (Python 3.11's wait_for can, when the item and the cancel arrive together)."""
    getter = asyncio.ensure_future(q.get())
    try:
        done, _ = await asyncio.wait({getter}, timeout=max(0.0, timeout))
    except asyncio.CancelledError:
        getter.cancel()
        raise
    if not done:
        getter.cancel()
        if not (getter.done() and not getter.cancelled()):
            raise asyncio.TimeoutError
    return getter.result()


class Backoff:
    """Retry delays that double from ``first`` up to ``most``; ``reset()`` once a try succeeds."""

    def __init__(self, first: float, most: float) -> None:
        self.first, self.most = first, most
        self.delay = first  # the pause before the next try

    def next(self) -> float:
        """The pause to take now; the one after it is twice as long (up to ``most``)."""
        d = self.delay
        self.delay = min(d * 2, self.most)
        return d

    def reset(self) -> None:
        self.delay = self.first
