"""What an action reads of its containers: the engine's events for them, one log path.

An action never follows a log nor runs a Diagnoser of its own: the face hands it a ``Tap`` over an
engine (the TUI its running one; the CLI a small one, ``collectors/small_engine.py``), and
``ctx.watch([(node, container), ...])`` gives the action that engine's events for those sources:
their log lines with the engine's line numbers (``LogLine.seq``, the session file's line), their
milestones and findings, and the end of each log (``LogEnded``, or a ``ContainerChanged`` to
removed).  So the launch screen, the findings strip, ``status`` and the session say the same
finding on the same line.

``finish()`` asks the engine's Diagnoser for its end-of-input analysis over the watched sources
(``InputEnded``) and waits for the answer, which carries their findings, ranked.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any, Callable, Iterable

from ..model import (ContainerChanged, ContainerState, Event, Finding, FindingRaised, InputEnded, LogBatch, LogEnded,
                     LogLine, MilestoneReached)
from ..waiting import get_within

_tokens = itertools.count(1)
FINISH_S = 15.0  # how long an end-of-input answer may take (an analysis worker busy with a flood)


class SourceWatch:
    """The engine's events of some sources, queued for one action.  Create it BEFORE starting the
    containers, so nothing of theirs is missed; ``backlog``: also what the engine knows of them
    already (attaching to a running cluster the engine has followed for a while)."""

    def __init__(self, engine: Any, sources: Iterable[tuple[str, str]], *, backlog: bool = False,
                 on_close: Callable[[], None] | None = None) -> None:
        self.engine = engine
        self._on_close = on_close
        self.pairs = list(dict.fromkeys(sources))
        self.keys = [f"{n}/{s}" for n, s in self.pairs]
        self._pairs = set(self.pairs)
        self._keys = set(self.keys)
        self.queue: asyncio.Queue = asyncio.Queue()
        self.findings: dict[str, Finding] = {}  # Finding.key -> the newest raise of it
        self._seq: dict[tuple[str, str], int] = {}  # lines fed by the action itself (feed), numbered here
        self._unsubscribe: Callable[[], None] | None = engine.subscribe(self._take)
        if backlog:
            self._backlog()

    # ------------------------------------------------------------------ in (the engine's thread of control)
    def _mine(self, ev: Event) -> bool:
        if isinstance(ev, (LogBatch, LogLine, LogEnded)):
            return (ev.node, ev.source) in self._pairs
        if isinstance(ev, FindingRaised):
            return ev.finding.source in self._keys
        if isinstance(ev, MilestoneReached):
            return ev.milestone.source in self._keys
        if isinstance(ev, ContainerChanged):
            return (ev.node, ev.container.name) in self._pairs
        if isinstance(ev, InputEnded):
            return ev.done and ev.token.startswith(f"{id(self)}:")
        return False

    def _take(self, events: list[Event]) -> None:
        for ev in events:
            if self._mine(ev):
                if isinstance(ev, FindingRaised):
                    self.findings[ev.finding.key] = ev.finding
                self.queue.put_nowait(ev)

    def _backlog(self) -> None:
        state = self.engine.state
        for node in {n for n, _ in self.pairs}:
            ns = state.nodes.get(node)
            for m in sorted(ns.milestones.values() if ns is not None else (), key=lambda m: m.line or 0):
                if m.source in self._keys:
                    self.queue.put_nowait(MilestoneReached(m))
        for f in state.active_findings():
            if f.source in self._keys:
                self.findings[f.key] = f
                self.queue.put_nowait(FindingRaised(f))

    # ------------------------------------------------------------------ out (the action)
    async def next(self, timeout: float) -> Event:
        """The next event of the watched sources; TimeoutError when none came within ``timeout``."""
        return await get_within(self.queue, timeout)

    def feed(self, node: str, source: str, lines: list[str]) -> None:
        """Lines that are not a container's log (the launcher script's output) into the engine, as a
        source of their own: analysed, numbered, recorded and shown like any log."""
        if (node, source) not in self._pairs:
            self.pairs.append((node, source))
            self.keys.append(f"{node}/{source}")
            self._pairs.add((node, source))
            self._keys.add(f"{node}/{source}")
        first = self._seq.get((node, source), 0) + 1
        self._seq[(node, source)] = first + len(lines) - 1
        self.engine.emit(LogBatch(node, source, tuple(LogLine(node, source, t, seq=first + i)
                                                      for i, t in enumerate(lines))))

    async def finish(self) -> tuple[list[Event], list[Finding]]:
        """End of input: the engine's end-of-input analysis of these sources.  Returns the events
        that came meanwhile (findings and milestones it derived included) and the sources' findings,
        ranked root cause first (those seen so far, when no answer came)."""
        token = f"{id(self)}:{next(_tokens)}"
        self.engine.emit(InputEnded(tuple(self.keys), token=token))
        got: list[Event] = []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + FINISH_S
        while True:
            try:
                ev = await self.next(max(0.0, deadline - loop.time()))
            except TimeoutError:
                return got, self.ranked()
            if isinstance(ev, InputEnded):
                if ev.token == token:
                    return got, list(ev.findings)
                continue
            got.append(ev)

    def ranked(self) -> list[Finding]:
        """The watched sources' findings so far, root cause first."""
        from ..diagnosis.catalogue import default_catalogue
        from ..diagnosis.ranking import rank_findings

        return rank_findings(list(self.findings.values()), default_catalogue(),
                             {k: i for i, k in enumerate(self.keys)})

    def close(self) -> None:
        unsub, self._unsubscribe = self._unsubscribe, None
        if unsub is not None:
            unsub()
            if self._on_close is not None:
                self._on_close()


def ended(ev: Event) -> tuple[str, str, str] | None:
    """(node, container id, how) when ``ev`` says a container's log is over: read to its end
    ("exited (code)"), or the container removed ("gone (removed)")."""
    if isinstance(ev, LogEnded):
        return ev.node, ev.container, f"{ev.state or 'exited'} ({ev.exit_code})"
    if isinstance(ev, ContainerChanged) and ev.container.state is ContainerState.REMOVED:
        return ev.node, ev.container.id, "gone (removed)"
    return None


class Tap:
    """A face's engine, offered to its actions.  ``want(node, container)``: tells the engine's
    sources to follow that container (a small engine follows only what is asked).  ``make``: for a
    face whose engine does not follow Docker (a TUI without live collectors): () -> (engine, want),
    a small engine started at the first watch and stopped when the last watch closes."""

    def __init__(self, engine: Any = None, want: Callable[[str, str], None] | None = None, *,
                 make: Callable[[], tuple[Any, Callable[[str, str], None]]] | None = None) -> None:
        self.engine = engine
        self._want = want
        self._make = make
        self._open = 0
        self._stopping: asyncio.Task | None = None  # held: a task nobody references may be collected

    def watch(self, sources: Iterable[tuple[str, str]], *, backlog: bool = False) -> SourceWatch:
        if self.engine is None and self._make is not None:
            self.engine, self._want = self._make()
            asyncio.get_running_loop().create_task(self.engine.start())
        w = SourceWatch(self.engine, sources, backlog=backlog, on_close=self._closed)
        self._open += 1
        if self._want is not None:
            for node, container in w.pairs:
                self._want(node, container)
        return w

    def _closed(self) -> None:
        self._open -= 1
        if self._open == 0 and self._make is not None and self.engine is not None:
            engine, self.engine = self.engine, None
            self._stopping = asyncio.get_running_loop().create_task(engine.stop())
