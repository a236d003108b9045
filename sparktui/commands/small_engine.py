"""The command line's engine for the actions that read container logs (validate, launch): the
small engine of ``collectors/small_engine.py``, started for the action's run, offered as a Tap."""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import AsyncIterator, Mapping

from ..actions.tap import Tap
from ..collectors.small_engine import small_engine
from ..config import Config
from ..nodes.base import Node


@asynccontextmanager
async def engine_tap(config: Config, nodes: Mapping[str, Node]) -> AsyncIterator[Tap]:
    """A started small engine over ``nodes``, offered as a ``Tap``; stopped on the way out."""
    engine, want = small_engine(config, nodes)
    await engine.start()
    try:
        yield Tap(engine, want)
    finally:
        await engine.stop()
