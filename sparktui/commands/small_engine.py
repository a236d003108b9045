"""The command line's engine: a small one, no Textual, no analysis worker, no session, for the
actions that read container logs (validate, launch) and for ``status``.  It follows only the
containers an action asks for (``Tap.want``), with the collectors and processors the TUI's engine
uses, so the command line and the screen read the same events, line numbers included."""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from typing import AsyncIterator, Mapping

from ..actions.tap import Tap
from ..collectors.docker_watch import DockerWatch, LogState
from ..config import Config
from ..diagnosis.processors import default_processors
from ..engine import Engine
from ..model import Emit
from ..nodes.base import Node


class ContainerLogs:
    """One node's container logs as an event source: the TUI's DockerWatch, following only the
    containers named in ``only`` (grown by ``want``).  A node nothing is wanted of is never asked:
    validate on one node opens no connection to the others."""

    def __init__(self, node: Node, name: str) -> None:
        self.node, self.node_name = node, name
        self.only: set[str] = set()
        self.watch: DockerWatch | None = None
        self._wanted = asyncio.Event()

    async def run(self, emit: Emit) -> None:
        await self._wanted.wait()
        self.watch = DockerWatch(self.node, self.node_name, emit, LogState(), only=self.only)
        await self.watch.run()

    def want(self, container: str) -> None:
        if self.watch is not None:
            self.watch.want(container)
        else:
            self.only.add(container)
            self._wanted.set()

    async def close(self) -> None:
        if self.watch is not None:
            await self.watch.close()


def small_engine(config: Config, nodes: Mapping[str, Node]) -> tuple[Engine, dict[str, ContainerLogs]]:
    sources = {name: ContainerLogs(node, name) for name, node in nodes.items()}
    return Engine(config, list(sources.values()), processors=default_processors()), sources


@asynccontextmanager
async def engine_tap(config: Config, nodes: Mapping[str, Node]) -> AsyncIterator[Tap]:
    """A started small engine over ``nodes``, offered as a ``Tap``; stopped on the way out."""
    engine, sources = small_engine(config, nodes)

    def want(node: str, container: str) -> None:
        src = sources.get(node)
        if src is not None:
            src.want(container)

    await engine.start()
    try:
        yield Tap(engine, want)
    finally:
        await engine.stop()
