"""Run one Action headless for the CLI: load the config, open the nodes, print progress on stderr,
the result on stdout (text or ``--json``), close everything.  Ctrl+C / SIGTERM cancel the action,
which cleans up after itself before the process exits (130)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import signal
import sys
from typing import Callable

from ..config import Config, load_config
from ..logs.redact import redact, redact_obj
from ..logs.sanitize import clean_text, safe
from ..model import FAIL, ActionEvent
from .base import Action, ActionContext, ActionResult, cli_confirm

MARK = {"started": "..", "ok": "ok", "warn": "!!", FAIL: "XX", "cancelled": "--", "info": "  ", "progress": "  ",
        "skip": "--"}


def make_nodes(config: Config) -> dict:
    from ..nodes import make_node

    return {n.name: make_node(n) for n in config.nodes}


async def close_nodes(nodes) -> None:
    """Close every node handle; one that fails to close must not keep the others open."""
    for n in nodes.values():
        try:
            await n.close()
        except Exception:
            pass


class _Printer:
    """Progress on stderr.  ``transient``: for an action whose result lists every step itself
    (doctor's table): one self-rewriting line on a terminal, cleared at the end, nothing when piped,
    so no check is printed twice."""

    def __init__(self, stream=sys.stderr, transient: bool = False) -> None:
        self.stream = stream
        self.transient = transient
        self._last_progress = 0.0
        self._dirty = False
        # the newest failure line, held back: the result line says the same when a refusal or a
        # failure ends the action, and one line is enough
        self._held: tuple[str, str] | None = None

    def _release(self, unless: str | None = None) -> None:
        held, self._held = self._held, None
        if held is not None and held[0] != unless:
            self.stream.write(held[1])
            self.stream.flush()

    def finish(self, summary: str | None = None) -> None:
        """End of the action: a held failure line goes out unless ``summary`` (the result) repeats it."""
        self._release(unless=summary)
        if self._dirty:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._dirty = False

    def __call__(self, ev: ActionEvent) -> None:
        self._release()
        if self.transient:
            if self.stream.isatty():
                node = f"[{ev.node}] " if ev.node else ""
                self.stream.write(f"\r   {ev.step}: {node}{safe(ev.message.replace(chr(10), ' '))[:100]}\x1b[K")
                self.stream.flush()
                self._dirty = True
            return
        if ev.status == "started":
            return  # the outcome line follows
        if ev.status == "progress":
            # progress lines rewrite themselves on a terminal, and are thinned when piped
            if self.stream.isatty():
                self.stream.write(f"\r   {ev.step}: {safe(ev.message)}\x1b[K")
                self.stream.flush()
                return
            if ev.ts - self._last_progress < 2.0 and (ev.progress or 0) < 1.0 and not ev.message.startswith("Step "):
                return
            self._last_progress = ev.ts
        elif self.stream.isatty():
            self.stream.write("\r\x1b[K")
        node = f"[{ev.node}] " if ev.node else ""
        msg = safe(ev.message.replace("\n", " "))  # messages quote node output: no escapes reach the terminal
        line = f"{MARK.get(ev.status, '  ')} {node}{ev.step}: {msg}\n".rstrip() + "\n"
        if ev.status == FAIL:
            self._held = (ev.message, line)
            return
        self.stream.write(line)
        self.stream.flush()


def print_result(result: ActionResult, as_json: bool, extra_text: Callable[[ActionResult], str] | None = None,
                 show_findings: bool = True) -> None:
    # results quote containers' last lines and commands: secrets are masked here, once for every action
    if as_json:
        print(json.dumps(redact_obj(result.to_json()), indent=2, default=str))
        return
    if extra_text:
        text = extra_text(result)
        if text:
            print(redact(clean_text(text)))
    if result.data.get("serve_hint"):  # a URL that is a temporary forward: how to keep one
        print(f"note: {safe(result.data['serve_hint'])}")
    for f in (result.findings if show_findings else ()):
        print(f"{f.severity.upper():8} {f.id}: {safe(f.title)}")
        for e in f.evidence[:4]:
            print(f"         | {redact(safe(e))}")
        if f.advice:
            print(f"         fix: {safe(f.advice)}")
    print(("OK  " if result.ok else "FAILED  ") + safe(result.summary))


def _shared_timeline(config: Config, nodes: dict, action: Action):
    """A mutating action run from the CLI goes to the cluster's shared timeline on the head too, so
    an operator watching in the TUI sees it.  None where there is nothing to share (sim nodes)."""
    if not action.mutating or not config.nodes:
        return None
    head = nodes.get(config.head.name)
    if head is None or head.backend == "sim":
        return None
    from .lock import PROCESS_SESSION
    from .shared_timeline import TimelineWriter

    return TimelineWriter(head, config.cluster.name, session=f"cli-{PROCESS_SESSION}")


class _CliContext(ActionContext):
    """The CLI's context: ``verbose`` (launch --verbose) puts a question's full commands in the prompt,
    and with --yes, where nothing is asked, prints them on stderr so they are still on record."""

    verbose = False

    async def confirm(self, title: str, detail: str = "", *, full: str = "") -> bool:
        if self.verbose and full and self.assume_yes and not self.read_only:
            print(redact(clean_text(full)), file=sys.stderr)
        return await super().confirm(title, detail, full=full)


async def _run(config: Config, action: Action, args, transient: bool = False, tap=None) -> ActionResult:
    """``tap``: (config, nodes) -> an async context giving the engine the action reads its logs from
    (the commands layer's small engine, ``commands/small_engine.py``)."""
    nodes = make_nodes(config)
    printer = _Printer(transient=transient)
    verbose = bool(getattr(args, "verbose", False))
    ctx = _CliContext(config, nodes, emit=printer, confirm=functools.partial(cli_confirm, verbose=verbose),
                      read_only=bool(getattr(args, "read_only", False)), assume_yes=bool(getattr(args, "yes", False)),
                      lock_wait=bool(getattr(args, "wait", False)), break_lock=bool(getattr(args, "break_lock", False)))
    ctx.verbose = verbose
    writer = None if ctx.read_only else _shared_timeline(config, nodes, action)  # read-only writes nothing
    ctx.timeline = writer
    task = asyncio.current_task()
    loop = asyncio.get_running_loop()
    # SIGINT too, explicitly: a process started with SIGINT ignored (`trap "" INT`, nohup, some CI
    # runners) gets no KeyboardInterrupt from Python, and Ctrl+C would do nothing
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, task.cancel)
        except (NotImplementedError, RuntimeError, ValueError):
            pass
    try:
        async with (tap(config, nodes) if tap is not None else contextlib.nullcontext()) as ctx.tap:
            result = await action.run(ctx)
        # text output ends with the result's line: a failure line saying the same is not printed too
        printer.finish(None if getattr(args, "json", False) else result.summary)
        return result
    finally:
        printer.finish()
        if writer is not None:  # what this operator did reaches the head before the connection closes
            if not await writer.flush(timeout=5.0):
                print(f"sparktui: the shared timeline on {writer.node.name} did not take this action's record"
                      + (f": {writer.last_error}" if writer.last_error else ""), file=sys.stderr)
            await writer.close()
        for n in nodes.values():
            try:
                await asyncio.wait_for(n.close(), 10)
            except Exception:
                pass


def run_action(args, make_action: Callable[[Config], Action],
               extra_text: Callable[[ActionResult], str] | None = None, show_findings: bool = True,
               transient_progress: bool = False, tap=None) -> int:
    """``transient_progress``: the result text repeats every step (see ``_Printer``).  ``tap``: see ``_run``."""
    config = load_config(getattr(args, "config", None))
    action = make_action(config)
    try:
        result = asyncio.run(_run(config, action, args, transient_progress, tap))
    except (KeyboardInterrupt, asyncio.CancelledError):
        print("sparktui: cancelled; cleaned up", file=sys.stderr)
        return 130
    print_result(result, bool(getattr(args, "json", False)), extra_text, show_findings)
    return result.exit_code
