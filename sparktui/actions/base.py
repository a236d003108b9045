"""The action framework: guided workflows of named steps, shared by the TUI and the CLI.

An action is an async workflow that
- reports every step as ``ActionEvent``s (started / progress / ok / warn / fail / info: ``model.StepStatus``),
- asks ``ctx.confirm(...)`` before anything destructive (CLI: ``--yes`` or a y/N prompt;
  TUI: the one confirm modal; ``--read-only`` refuses without asking),
- can be cancelled (``asyncio.CancelledError`` reaches it) and cleans up in ``finally``/cleanup
  callbacks registered with ``ctx.on_cleanup``,
- returns an ``ActionResult``.

Faces only render events and answer confirmations; the IO happens here, through node handles.
"""

from __future__ import annotations

import asyncio
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Awaitable, Callable, Mapping

from ..config import Config
from ..model import FAIL, ActionEvent, Emit, Finding
from ..nodes.base import Node
from . import registry
from .errors import ActionFailed, ActionRefused  # defined below lock.py, which raises them; imported from here

ConfirmFn = Callable[..., Awaitable[bool]]  # (title, detail[, full]) -> yes?


@dataclass
class StepRecord:
    name: str
    status: str = "pending"  # pending / running / ok / warn / fail / cancelled / skipped
    message: str = ""
    started: float | None = None
    finished: float | None = None
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class ActionResult:
    action: str
    ok: bool
    summary: str
    steps: list[StepRecord] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)
    cancelled: bool = False

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1

    def to_json(self) -> dict:
        return {
            "action": self.action,
            "ok": self.ok,
            "cancelled": self.cancelled,
            "summary": self.summary,
            "steps": [
                {"name": s.name, "status": s.status, "message": s.message,
                 "seconds": (round(s.finished - s.started, 3) if s.started and s.finished else None),
                 **({"data": s.data} if s.data else {})}
                for s in self.steps
            ],
            "findings": [f.to_json() for f in self.findings],
            "data": self.data,
        }


class ActionContext:
    def __init__(
        self,
        config: Config,
        nodes: Mapping[str, Node],
        *,
        emit: Emit | None = None,
        confirm: ConfirmFn | None = None,
        read_only: bool = False,
        assume_yes: bool = False,
        lock_wait: bool = False,
        break_lock: bool = False,
        lock_root: str | None = None,
        session_id: str = "",
    ) -> None:
        self.config = config
        self.nodes = dict(nodes)
        self._emit = emit or (lambda e: None)
        self._confirm = confirm
        self.read_only = read_only
        self.assume_yes = assume_yes
        self._cleanups: list[Callable[[], Awaitable[None]]] = []
        self.action_name = ""
        self.steps: list[StepRecord] = []
        # the cluster lock (lock.py): queue behind a holder (--wait), break a stale one (--break-lock),
        # where it lives on the head (tests: elsewhere; default ~/.local/state/sparktui/clusters)
        self.lock_wait = lock_wait
        self.break_lock = break_lock
        self.lock_root = lock_root
        self.session_id = session_id
        self.lock = None  # the ClusterLock a running mutating action holds

    # the cluster's shared timeline (actions/shared_timeline.TimelineWriter): set by a face that has one
    timeline: Any = None
    # how this face queues behind another operator's lock, said in a refusal ('' : the CLI's --wait)
    wait_hint: str = ""
    # the face's engine, offered to actions (actions/tap.py): set by a face whose actions read logs
    tap: Any = None

    def watch(self, sources, *, backlog: bool = False):
        """The engine's events of these (node, container) sources (``tap.SourceWatch``): an action
        reads its containers' logs, milestones and findings here, never from Docker itself."""
        if self.tap is None:
            raise ActionFailed(f"{self.action_name or 'this action'} reads container logs through an engine, "
                               "and this face gave it none")
        return self.tap.watch(sources, backlog=backlog)

    def emit(self, step: str, status: str, message: str = "", *, progress: float | None = None, node: str = "",
             key: str = "") -> None:
        ev = ActionEvent(action=self.action_name, step=step, status=status,  # type: ignore[arg-type]
                         message=message, progress=progress, node=node, key=key)
        self._emit(ev)
        if self.timeline is not None:  # queued, never awaited: the action does not wait on the head
            self.timeline.action(ev)

    async def confirm(self, title: str, detail: str = "", *, full: str = "") -> bool:
        """Ask before something destructive.  Read-only refuses; --yes accepts.  ``full``: what the
        detail summarises (exact commands), shown only on request (TUI ``v``, CLI ``--verbose``).

        A person may walk away from the question: the cluster lock is given back while it is open and
        taken again after Yes (LockHeld, naming the holder, when someone took it meanwhile).  A No is
        told to the shared timeline, so the other operators know the action was not run."""
        if self.read_only:
            raise ActionRefused(f"{title}: refused in read-only mode")
        if self.assume_yes:
            return True
        if self._confirm is None:
            raise ActionRefused(f"{title}: needs confirmation (pass --yes)")
        lock = self.lock
        if lock is not None and lock.token:
            await asyncio.shield(lock.release())
            self.emit("lock", "info", "cluster lock given back while the question is open")
        # a face's confirm that takes (title, detail) only still works for a question without details
        asked = self._confirm(title, detail, full) if full else self._confirm(title, detail)
        if not await asked:
            from ..identity import operator_id

            self.emit("confirm", "cancelled", f"{operator_id()} declined {self.action_name}: {title}")
            return False
        if lock is not None and not lock.lost:
            from .lock import LockHeld

            try:  # no queueing here: whatever the other operator did makes the plan just confirmed stale
                await self.take_lock(lock, wait=False)
            except LockHeld as exc:
                raise LockHeld(f"taken while the question was open: {exc}", exc.holder) from None
        return True

    async def take_lock(self, lock: Any, *, wait: bool | None = None) -> None:
        """Take ``lock`` for this action (LockHeld / LockError when it cannot be had) and keep it beating."""
        await lock.acquire(self, self.action_name, wait=wait)
        lock.start_heartbeat(lambda why: self.emit("lock", "warn", why))

    def on_cleanup(self, fn: Callable[[], Awaitable[None]]) -> None:
        self._cleanups.append(fn)

    async def run_cleanups(self) -> None:
        lost = getattr(self.lock, "lost", "")
        if lost and self._cleanups:
            # cleanups change the cluster too: with the lock gone they could undo the new holder's work
            self.emit("cleanup", "warn", f"cleanup skipped ({len(self._cleanups)} step(s)): {lost}")
            self._cleanups.clear()
        while self._cleanups:
            fn = self._cleanups.pop()
            try:
                await asyncio.shield(fn())
            except Exception as exc:  # cleanup must try everything
                self.emit("cleanup", "warn", f"cleanup step failed: {exc}")

    @asynccontextmanager
    async def step(self, name: str, message: str = "", node: str = "") -> AsyncIterator[StepRecord]:
        rec = StepRecord(name=name, status="running", message=message, started=time.time())
        self.steps.append(rec)
        self.emit(name, "started", message, node=node)
        try:
            if self.lock is not None:  # a holder that lost the lock (a stall, then a break) stops here
                await self.lock.verify(name)
            yield rec
        except asyncio.CancelledError:
            rec.status, rec.finished = "cancelled", time.time()
            self.emit(name, "cancelled", "cancelled", node=node)
            raise
        except ActionRefused as exc:
            rec.status, rec.message, rec.finished = FAIL, str(exc), time.time()
            self.emit(name, FAIL, str(exc), node=node)
            raise
        except Exception as exc:
            rec.status, rec.finished = FAIL, time.time()
            rec.message = rec.message if rec.status == FAIL and rec.message != message else str(exc) or type(exc).__name__
            self.emit(name, FAIL, rec.message, node=node)
            raise
        else:
            rec.finished = time.time()
            if rec.status == "running":
                rec.status = "ok"
            self.emit(name, rec.status if rec.status in ("ok", "warn", FAIL, "skip") else "ok", rec.message, node=node)


class Action:
    """Subclass and implement ``execute``.  ``mutating`` actions are hidden in read-only mode.

    An action that gathers findings across steps keeps them in ``self.findings``: ``run`` adds them to
    the result however ``execute`` ended (ActionFailed ends a step early; what was found before it stays).
    """

    name: str = "action"
    title: str = "Action"
    mutating: bool = False
    loads: str = ""  # registry.ActionEntry.loads: refused in read-only mode too
    findings: list[Finding]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # a class the registry names takes its identity from the entry: one place for name, title, mutating
        super().__init_subclass__(**kwargs)
        entry = registry.entry_of_class(cls.__module__, cls.__qualname__)
        if entry is not None:
            cls.name, cls.title, cls.mutating, cls.loads = entry.name, entry.title, entry.mutating, entry.loads

    async def execute(self, ctx: ActionContext) -> ActionResult:  # pragma: no cover - abstract
        raise NotImplementedError

    async def run(self, ctx: ActionContext) -> ActionResult:
        result = await self._run_workflow(ctx)
        for f in getattr(self, "findings", ()):
            if f not in result.findings:
                result.findings.append(f)
        return result

    async def _run_workflow(self, ctx: ActionContext) -> ActionResult:
        ctx.action_name = self.name
        why = registry.read_only_refusal(self.name, self.mutating, self.loads) if ctx.read_only else ""
        if why:
            ctx.emit("start", FAIL, why)
            return ActionResult(self.name, False, why, data={"refused": "read_only"})
        lock = None
        if self.mutating:
            from .lock import ClusterLock  # here: read-only faces never pay for its imports

            # one mutating action per cluster, across operators: taken on the head before anything runs
            # (given back while a question is open: ActionContext.confirm)
            try:
                lock = ClusterLock.for_context(ctx)
                if lock is not None:
                    await ctx.take_lock(lock)
            except ActionRefused as exc:
                return self._lock_refused(ctx, exc)
            ctx.lock = lock
        try:
            try:
                result = await self.execute(ctx)
            except asyncio.CancelledError:
                await ctx.run_cleanups()
                ctx.emit("end", "cancelled", "cancelled; cleaned up")
                raise
            except ActionRefused as exc:
                await ctx.run_cleanups()
                if lock is not None:
                    from .lock import LockError, LockHeld

                    if isinstance(exc, (LockHeld, LockError)):  # after a Yes, someone else had taken it
                        return self._lock_refused(ctx, exc)
                return ActionResult(self.name, False, str(exc), steps=ctx.steps)
            except ActionFailed as exc:
                await ctx.run_cleanups()
                return ActionResult(self.name, False, str(exc), steps=ctx.steps)
            except Exception as exc:
                await ctx.run_cleanups()
                return ActionResult(self.name, False, f"{type(exc).__name__}: {exc}", steps=ctx.steps)
            await ctx.run_cleanups()
            if not result.steps:
                result.steps = ctx.steps
            if lock is not None and lock.lost and result.ok:
                # a step refused by verify inside a gather (stop's nodes at once) must not read as success
                return ActionResult(self.name, False, f"cluster lock lost: {lock.lost}", steps=ctx.steps)
            return result
        finally:
            if lock is not None:
                try:  # shielded: a Ctrl+C must not leave the lock behind for the next operator
                    await asyncio.shield(lock.release())
                except Exception as exc:
                    ctx.emit("lock", "warn", f"cluster lock not released: {exc}")
                ctx.lock = None

    def _lock_refused(self, ctx: ActionContext, exc: ActionRefused) -> ActionResult:
        ctx.emit("lock", FAIL, str(exc))
        data: dict[str, Any] = {"refused": "lock"}
        holder = getattr(exc, "holder", None)
        if holder is not None:
            data["lock_holder"] = holder.to_json()
        return ActionResult(self.name, False, str(exc), steps=ctx.steps, data=data)


def confirmation_text(title: str, detail: str = "", full: str = "", *, verbose: bool = False) -> str:
    """A question as the CLI prints it: ``full`` (exact commands) with ``verbose``, else only named."""
    hint = "(--verbose shows the full commands)" if full and not verbose else ""
    return "\n".join(x for x in (title, detail, full if verbose else "", hint) if x)


async def cli_confirm(title: str, detail: str = "", full: str = "", *, verbose: bool = False) -> bool:
    """A y/N prompt on the terminal (the CLI face).  No TTY means no."""
    import sys

    if not sys.stdin or not sys.stdin.isatty():
        return False
    loop = asyncio.get_running_loop()
    text = confirmation_text(title, detail, full, verbose=verbose)
    prompt = f"{text}\nProceed? [y/N] " if text != title else f"{title} [y/N] "
    answer = await loop.run_in_executor(None, lambda: input(prompt))
    return answer.strip().lower() in ("y", "yes")
