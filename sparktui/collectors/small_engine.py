"""A small engine for a face whose own engine does not follow Docker: the command line (validate,
launch) and a TUI built without live collectors.  No Textual, no analysis worker, no session.  It
follows only the containers an action asks for (``want``), with the TUI's log follower and
processors, so every face reads the same events, line numbers included."""

from __future__ import annotations

import asyncio
from typing import Callable, Mapping

from ..config import Config
from ..diagnosis.processors import default_processors
from ..engine import Engine
from ..model import Emit
from ..nodes.base import Node
from .docker_watch import DockerWatch, LogState


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


def small_engine(config: Config, nodes: Mapping[str, Node]) -> tuple[Engine, Callable[[str, str], None]]:
    """The engine (not started) and its ``want(node, container)``."""
    sources = {name: ContainerLogs(node, name) for name, node in nodes.items()}

    def want(node: str, container: str) -> None:
        src = sources.get(node)
        if src is not None:
            src.want(container)

    return Engine(config, list(sources.values()), processors=default_processors()), want
