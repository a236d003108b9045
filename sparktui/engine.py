"""The engine: event sources in, state + findings + session out.  Never imports Textual.

    sources --emit()--> pending deque --pump--> processors (diagnoser, stall detector, ...)
                                          \\--> reduce() -> ClusterState
                                          \\--> LogStore (bounded, for faces)
                                          \\--> Session (everything, on disk)
                                          \\--> subscribers(batch)   (TUI posts a message)

``emit`` is thread-safe (collectors that wrap blocking docker-py streams run in threads) and
never blocks; the pump drains in batches so high-rate log lines cost one wake-up per batch.

Bounded under a flood, and honest about it: when one source has more than ``SKIP_ABOVE`` lines
queued, the pump drops that source to its tail: the older queued lines are only written to the
session file (cheap), not analysed nor held for the screen, and the store counts them as
skipped.  When everything queued passes ``LOSE_ABOVE`` lines, new batches are refused at
``emit`` and counted as lost (even the session file could not keep up).  Both totals, and the
lines a full session file did not take, go to the store (the pane says them) and to the
session's events as ``LogGap``.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Protocol, Sequence

from .config import Config
from .engine_offload import AnalysisWorker
from .engine_worker import feed_all, pack_lines, record_safely
from .logs.store import LogStore
from .model import Event, LogBatch, LogBlock, LogGap, LogLine
from .sources import EventSource
from .session import Session
from .state import ClusterState, reduce

log = logging.getLogger(__name__)

Subscriber = Callable[[list[Event]], None]


class Processor(Protocol):
    """Consumes events, may derive new ones (findings, milestones).  Must be fast and pure-ish."""

    def feed(self, event: Event) -> Iterable[Event]: ...


class Engine:
    def __init__(
        self,
        config: Config,
        sources: Sequence[EventSource] = (),
        *,
        processors: Sequence[Processor] = (),
        session: Session | None = None,
        log_store: LogStore | None = None,
        tick_interval: float = 1.0,
        processor_factory: str | None = None,
        offload: bool = False,
    ) -> None:
        """``offload``: once started, the processors and the session files run in a worker process
        (engine_worker.py), made fresh by ``processor_factory`` ("module:function"); the state,
        the store and the subscribers stay here.  Without it (tests, replays, CLI) all is here."""
        self.config = config
        self.sources = list(sources)
        self.processors = list(processors)
        self._scope(self.processors)
        self.session = session
        self.logs = log_store or LogStore()
        self.state = ClusterState.initial([n.name for n in config.nodes])
        self.tick_interval = tick_interval
        self._pending: collections.deque[Event] = collections.deque()
        self._wake: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: list[asyncio.Task] = []
        self._subscribers: list[Subscriber] = []
        self._scheduled = False
        self.started = False
        self._ranked: tuple[tuple, list] = ((), [])
        self._queued: collections.Counter[tuple[str, str]] = collections.Counter()  # lines pending, per source
        self._queued_total = 0
        self._lost: collections.Counter[tuple[str, str]] = collections.Counter()  # refused at emit, not yet told
        self._count_lock = threading.Lock()
        self._full_told: set[tuple[str, str]] = set()  # session files full, sources told
        self._gaps: dict[tuple[str, str], list] = {}  # [skipped, lost, unsaved, last recorded, recorded at]
        self.processor_factory = processor_factory
        self.offload = offload and processor_factory is not None
        self.worker: AnalysisWorker | None = None

    # ------------------------------------------------------------------ subscription
    def subscribe(self, fn: Subscriber) -> Callable[[], None]:
        self._subscribers.append(fn)
        return lambda: self._subscribers.remove(fn) if fn in self._subscribers else None

    def ranked_findings(self) -> list:
        """The active findings most severe and most causal first (a CUDA OOM before the engine death
        it caused), ranked by the catalogue's cause relations; recomputed only when they change.
        Resolved and acknowledged findings are not ranked (``all_findings`` has them)."""
        fs, states = self.state.findings, self.state.finding_states
        held = self._ranked[0]
        if not held or held[0] is not fs or held[1] is not states:  # held, not ids: a freed tuple's id comes back
            from .diagnosis.catalogue import default_catalogue
            from .diagnosis.ranking import rank_findings

            self._ranked = ((fs, states), rank_findings(list(self.state.active_findings()), default_catalogue()))
        return self._ranked[1]

    def all_findings(self) -> list:
        """Every finding: the active ones ranked, then the acknowledged, then the resolved (newest
        first): what the findings panel lists."""
        states = self.state.finding_states
        closed = [(states[f.key], f) for f in self.state.findings if f.key in states]
        closed.sort(key=lambda sf: (sf[0].state != "acknowledged", -sf[0].ts))
        return [*self.ranked_findings(), *(f for _, f in closed)]

    # ------------------------------------------------------------------ input
    # a source with more lines than this queued drops to its tail (older ones: session file only);
    # at 90k lines/s it is ~0.2 s of backlog, so the screen stays well within 2 s of the source
    SKIP_ABOVE = 20_000
    LOSE_ABOVE = 200_000  # lines queued in all: beyond it a batch is refused (and counted)

    def emit(self, event: Event) -> None:
        """Thread-safe, non-blocking."""
        if isinstance(event, (LogBatch, LogLine, LogBlock)):
            n = _line_count(event)
            key = (event.node, event.source)
            backlog = self.worker.backlog if self.worker is not None else 0
            with self._count_lock:
                if self._queued_total + backlog + n > self.LOSE_ABOVE:
                    self._lost[key] += n
                    return
                self._queued[key] += n
                self._queued_total += n
        self._pending.append(event)
        loop = self._loop
        if loop is None or self._scheduled:
            return
        self._scheduled = True
        try:
            if _running_loop() is loop:
                self._wake.set()  # type: ignore[union-attr]
            else:
                loop.call_soon_threadsafe(self._wake.set)  # type: ignore[union-attr]
        except RuntimeError:  # loop closed during shutdown
            pass

    # ------------------------------------------------------------------ processing
    def process(self, events: list[Event]) -> list[Event]:
        """Apply a batch synchronously (also used by tests and offline replays)."""
        out: list[Event] = []
        queue = collections.deque(events)
        while queue:
            ev = queue.popleft()
            if isinstance(ev, _Analysed):  # the worker's: analysed and recorded there already
                self._take_analysed(ev, out)
                continue
            if isinstance(ev, _Unsaved):
                self._gap(ev.node, ev.source, **({"skipped": -ev.n, "lost": ev.n} if ev.skipped else {"unsaved": ev.n}))
                self._file_full(ev.node, ev.source)
                continue
            if isinstance(ev, _WorkerGone):
                self._worker_gone(ev.why)
                continue
            if isinstance(ev, LogBlock):  # a follower's skipped lines: the session file only
                self._skip(ev, ev.count)
                continue
            self._show(ev, out)
            worker = self.worker
            if worker is not None and worker.alive:
                if isinstance(ev, (LogBatch, LogLine)):
                    worker.send(pack_lines(ev, skip=False), len(ev.lines) if isinstance(ev, LogBatch) else 1)
                else:
                    worker.send(ev)
                continue
            unsaved = self._record(ev)
            if unsaved:
                self._gap(ev.node, ev.source, unsaved=unsaved)  # type: ignore[union-attr]
                self._file_full(ev.node, ev.source)  # type: ignore[union-attr]
            queue.extend(feed_all(self.processors, ev))
        if self.session is not None and self.worker is None:
            self.session.flush()
        for fn in list(self._subscribers):
            try:
                fn(out)
            except Exception:
                log.exception("subscriber failed")
        return out

    def _take_analysed(self, msg: "_Analysed", out: list[Event]) -> None:
        """What the worker derived: reduced and shown here, never analysed nor recorded again."""
        for ev in msg.events:
            self._show(ev, out)

    def _show(self, ev: Event, out: list[Event]) -> None:
        """Into the state and the store, and out to the subscribers."""
        out.append(ev)
        self.state = reduce(self.state, ev)
        if isinstance(ev, LogBatch):
            self.logs.append(ev.node, ev.source, list(ev.lines))
        elif isinstance(ev, LogLine):
            self.logs.append(ev.node, ev.source, [ev])

    def _record(self, ev: Event) -> int:
        if self.worker is not None and self.worker.alive:
            self.worker.send(ev)  # processors ignore what is not theirs; the worker records it
            return 0
        return record_safely(self.session, ev)

    # work per drain, in lines: small enough that a key press waits at most a few ms behind it
    DRAIN_BUDGET = 2000
    SHOW_TAIL = 200  # a batch dropped to the tail still shows (and analyses) its newest lines
    SKIP_COST = 10  # a skipped line only goes to the session file: a tenth of a line's full cost

    def drain(self) -> list[Event]:
        batch: list[Event] = []
        out: list[Event] = []
        pending = self._pending
        cost = 0
        skipped = False
        while pending and cost < self.DRAIN_BUDGET * self.SKIP_COST:
            ev = pending.popleft()
            if isinstance(ev, (LogBatch, LogLine, LogBlock)):
                n = _line_count(ev)
                key = (ev.node, ev.source)
                worker = self.worker if self.worker is not None and self.worker.alive else None
                with self._count_lock:
                    behind = isinstance(ev, LogBlock) or self._queued[key] > self.SKIP_ABOVE or (
                        worker is not None and worker.backlog > self.SKIP_ABOVE)
                    self._queued[key] -= n
                    self._queued_total -= n
                if behind:  # drop to the tail: the file keeps it, nothing else looks at it
                    if batch:  # in order: what came before it is processed first
                        out += self.process(batch)
                        batch = []
                    head, tail = _split_tail(ev, self.SHOW_TAIL)
                    self._skip(head, n - len(tail))
                    skipped = True
                    cost += n
                    if not tail:
                        continue
                    # its newest lines still take the full path, so the screen never freezes on an
                    # old line while the file writer catches up (measured: 2-3 s frozen behind)
                    ev, n = LogBatch(ev.node, ev.source, tail), len(tail)
                cost += n * self.SKIP_COST
            else:
                cost += self.SKIP_COST
            batch.append(ev)
            skipped = False
        if batch or skipped:  # after a skip too: the file flushed, subscribers see the new counts
            out += self.process(batch)
        self._take_lost()
        self._report_gaps()
        return out

    def _skip(self, ev: "LogBatch | LogLine | LogBlock", n: int) -> None:
        """``n`` lines to the session file only; counted as skipped (or lost, when even the file
        did not take them)."""
        # the pane exists even if all is skipped, and counts to the newest line's number
        self.logs.series(ev.node, ev.source).note_gap(last_seq=_last_seq(ev))
        worker = self.worker if self.worker is not None and self.worker.alive else None
        if worker is not None:
            worker.send(ev if isinstance(ev, LogBlock) else pack_lines(ev, skip=True), n)
            self._gap(ev.node, ev.source, skipped=n)  # the worker tells what the file refused
        else:
            unsaved = self._record(ev)
            self._gap(ev.node, ev.source, skipped=n - unsaved, lost=unsaved)
            if unsaved:
                self._file_full(ev.node, ev.source)

    def _file_full(self, node: str, source: str) -> None:
        """Tell the sources, once, that a source's session file takes no more lines (a source with
        ``file_full`` then need not fetch what it would only skip)."""
        if (node, source) in self._full_told:
            return
        self._full_told.add((node, source))
        for src in self.sources:
            tell = getattr(src, "file_full", None)
            if tell is not None:
                try:
                    tell(node, source)
                except Exception:
                    log.exception("file_full of %s failed", getattr(src, "node_name", src))

    def _take_lost(self) -> None:
        if not self._lost:
            return
        with self._count_lock:
            lost, self._lost = self._lost, collections.Counter()
        for (node, source), n in lost.items():
            self._gap(node, source, lost=n)

    def _gap(self, node: str, source: str, skipped: int = 0, lost: int = 0, unsaved: int = 0) -> None:
        self.logs.series(node, source).note_gap(skipped=skipped, lost=lost, unsaved=unsaved)
        g = self._gaps.setdefault((node, source), [0, 0, 0, None, 0.0])
        g[0] += skipped
        g[1] += lost
        g[2] += unsaved

    def _report_gaps(self, final: bool = False) -> None:
        """A LogGap (totals so far) into the session, at most once a second per source."""
        now = time.monotonic()
        for (node, source), g in self._gaps.items():
            totals = (g[0], g[1], g[2])
            if totals != g[3] and (final or now - g[4] >= 1.0):
                g[3], g[4] = totals, now
                self._record(LogGap(node, source, *totals))

    async def _pump(self) -> None:
        assert self._wake is not None
        while True:
            await self._wake.wait()
            self._wake.clear()
            self._scheduled = False
            while self._pending:
                self.drain()
                await asyncio.sleep(0)  # let the UI breathe between batches

    async def _ticker(self) -> None:
        tickers = [p for p in self.processors if hasattr(p, "tick")]
        if not tickers:
            return
        while True:
            await asyncio.sleep(self.tick_interval)
            now = time.time()
            for p in tickers:
                try:
                    derived = list(p.tick(now))  # type: ignore[attr-defined]
                except Exception:
                    log.exception("tick of %r failed", p)
                    continue
                for e in derived:
                    self.emit(e)

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        if self.started:
            return
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self.started = True
        if self._pending:
            self._wake.set()
        if self.offload:
            self._start_worker()
        self._tasks.append(asyncio.create_task(self._pump(), name="engine-pump"))
        if self.worker is None:  # the worker ticks its own processors
            self._tasks.append(asyncio.create_task(self._ticker(), name="engine-ticker"))
        for src in self.sources:
            self._tasks.append(asyncio.create_task(self._run_source(src), name=f"source-{src.node_name}"))

    def _scope(self, processors: list) -> list:
        """The processors that judge a cluster judge the config's (as `status` does)."""
        from .engine_worker import scope_processors

        return scope_processors(processors, self.config.cluster.name)

    def _start_worker(self) -> None:
        worker = AnalysisWorker(on_derived=lambda evs: self.emit(_Analysed(tuple(evs))),
                                on_unsaved=lambda node, source, n, skipped: self.emit(_Unsaved(node, source, n, skipped)),
                                on_dead=self._worker_died)
        try:
            worker.start(self.session.path if self.session is not None else None,
                         self.session.max_log_bytes if self.session is not None else 0,
                         self.processor_factory, self.tick_interval, self.config.cluster.name)
        except OSError as exc:
            log.warning("analysis worker did not start (%s): analysing here", exc)
            return
        self.worker = worker

    def _worker_gone(self, why: str) -> None:
        # the worker is gone: analyse here from now on (this process's processors were never fed:
        # what the worker's had learnt is lost, said in the log) and write the session files from
        # here, appending
        self.worker = None
        if not self.processors and self.processor_factory:
            from .engine_worker import load_factory

            self.processors = self._scope(load_factory(self.processor_factory)())
        if self._loop is not None and self.started:
            self._tasks.append(self._loop.create_task(self._ticker(), name="engine-ticker"))
        log.warning("analysis worker gone (%s): analysing in this process", why)

    def _worker_died(self, why: str) -> None:
        """Go on here: fresh processors, this process writes the session files (appending)."""
        self.emit(_WorkerGone(why))

    async def _run_source(self, src: EventSource) -> None:
        try:
            await src.run(self.emit)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("event source %s died", src.node_name)

    STOP_S = 10.0  # what a task or a source's close gets before stop goes on without it

    async def stop(self) -> None:
        tasks, self._tasks = self._tasks, []
        for t in tasks:
            t.cancel()
        if tasks:  # bounded: a task that swallows its cancel must not hold the app's exit forever
            done, stuck = await asyncio.wait(tasks, timeout=self.STOP_S)
            for t in done:
                if not t.cancelled():
                    t.exception()  # retrieved: ending is all that is asked of it here
            for t in stuck:
                log.warning("%s did not end within %.0f s of its cancel; left behind, waiting in\n%s",
                            t.get_name(), self.STOP_S, _awaiting(t))
        for src in self.sources:
            close = getattr(src, "close", None)
            if close is not None:
                try:
                    await asyncio.wait_for(close(), self.STOP_S)
                except asyncio.TimeoutError:
                    log.warning("closing %s took over %.0f s; left behind", src.node_name, self.STOP_S)
                except Exception:
                    log.exception("closing %s failed", src.node_name)
        while self._pending:
            self.drain()
        self._take_lost()
        self._report_gaps(final=True)
        worker, self.worker = self.worker, None
        if worker is not None and worker.alive:
            await asyncio.to_thread(worker.stop)  # it analyses and writes what it was given, then exits
        if self.session is not None:
            self.session.close()
        self.started = False


@dataclass(frozen=True)
class _Analysed:
    """Events the worker derived (findings, milestones): reduced and shown here, not analysed again."""

    events: tuple


@dataclass(frozen=True)
class _Unsaved:
    """From the worker: ``n`` lines a full session file did not take.  Lines that were skipped (not
    shown either) are then lost, not skipped: nothing kept them."""

    node: str
    source: str
    n: int
    skipped: bool = False


@dataclass(frozen=True)
class _WorkerGone:
    """From the worker's threads: it is gone (why); this process analyses from now on."""

    why: str


def _line_count(ev: "LogBatch | LogLine | LogBlock") -> int:
    if isinstance(ev, LogBatch):
        return len(ev.lines)
    return ev.count if isinstance(ev, LogBlock) else 1


def _awaiting(task: "asyncio.Task") -> str:
    """Where a suspended task waits, outermost first: its await chain (``Task.print_stack`` shows
    only the outer frame of a suspended coroutine)."""
    out: list[str] = []
    obj: Any = task.get_coro()
    while obj is not None and len(out) < 40:
        frame = getattr(obj, "cr_frame", None) or getattr(obj, "gi_frame", None) or getattr(obj, "ag_frame", None)
        if frame is not None:
            out.append(f"  {frame.f_code.co_qualname} ({frame.f_code.co_filename}:{frame.f_lineno})")
        obj = getattr(obj, "cr_await", None) or getattr(obj, "gi_yieldfrom", None) or getattr(obj, "ag_await", None)
    return "\n".join(out)


def _split_tail(ev: "LogBatch | LogLine | LogBlock", keep: int) -> "tuple[LogBatch | LogLine | LogBlock, tuple]":
    """A batch's older lines and its newest ``keep``; other events are all head."""
    if not isinstance(ev, LogBatch) or len(ev.lines) <= keep:
        return ev, ()
    return LogBatch(ev.node, ev.source, ev.lines[:-keep]), ev.lines[-keep:]


def _last_seq(ev: "LogBatch | LogLine | LogBlock") -> int:
    if isinstance(ev, LogBatch):
        return ev.lines[-1].seq if ev.lines else 0
    return ev.last_seq if isinstance(ev, LogBlock) else ev.seq


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
