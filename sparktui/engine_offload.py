"""The screen's side of the analysis worker (engine_worker.py): starts it, hands it events
without ever blocking the caller, and hands back what it derived.

A sender thread writes (a slow worker blocks that thread, never the event loop) and a reader
thread reads; both only call the callbacks they were given, which must be thread-safe
(``Engine.emit`` is).  ``backlog`` counts the log lines handed over and not yet done: the engine
drops to the tail, then refuses, when it grows (see engine.py).
"""

from __future__ import annotations

import collections
import logging
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Callable

from .engine_worker import read_frame, write_frame
from .logs.safe_files import open_private

log = logging.getLogger(__name__)

SEND_BATCH = 64  # items per frame at most: one pickle per ~30k lines under a flood, not one per batch


class AnalysisWorker:
    def __init__(self, *, on_derived: Callable[[list], None], on_unsaved: Callable[[str, str, int, bool], None],
                 on_dead: Callable[[str], None]) -> None:
        self.on_derived, self.on_unsaved, self.on_dead = on_derived, on_unsaved, on_dead
        self.proc: subprocess.Popen | None = None
        self._outbox: collections.deque = collections.deque()
        self._cv = threading.Condition()
        self._closing = False
        self._dead = False
        self.backlog = 0  # lines handed over, not yet done
        self._threads: list[threading.Thread] = []

    @property
    def alive(self) -> bool:
        return self.proc is not None and not self._dead

    def start(self, session_path: Path | None, max_log_bytes: int, factory: str | None, tick_interval: float,
              cluster: str | None = None) -> None:
        # its stderr (a traceback if it dies) sits with the session, owner-only like the rest
        errors = open_private(session_path / "worker.log", "ab") if session_path else subprocess.DEVNULL
        try:
            # its own interpreter (not fork: the app has threads) with our sys.path; never the tty
            env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
            self.proc = subprocess.Popen([sys.executable, "-m", "sparktui.engine_worker"], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=errors, env=env, close_fds=True)
        finally:
            if errors is not subprocess.DEVNULL:
                errors.close()
        self._send_now(("init", str(session_path) if session_path else None, max_log_bytes, factory, tick_interval,
                        cluster))
        for target, name in ((self._sender, "engine-worker-send"), (self._reader, "engine-worker-read")):
            t = threading.Thread(target=target, name=name, daemon=True)
            t.start()
            self._threads.append(t)

    def send(self, item: Any, lines: int = 0) -> None:
        with self._cv:
            self._outbox.append(item)
            self.backlog += lines
            self._cv.notify()

    def _send_now(self, msg: Any) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        write_frame(self.proc.stdin, msg)

    def _sender(self) -> None:
        while True:
            with self._cv:
                while not self._outbox and not self._closing:
                    self._cv.wait()
                items = [self._outbox.popleft() for _ in range(min(SEND_BATCH, len(self._outbox)))]
                closing = self._closing and not self._outbox
            try:
                if items:
                    self._send_now(("ev", items))
                if closing:
                    self._send_now(("stop",))
                    self.proc.stdin.close()  # type: ignore[union-attr]
                    return
            except (OSError, ValueError) as exc:  # BrokenPipe: the worker died
                self._died(f"cannot write to it: {exc}")
                return

    def _reader(self) -> None:
        out = self.proc.stdout  # type: ignore[union-attr]
        try:
            while True:
                msg = read_frame(out)
                if msg is None:
                    break
                kind = msg[0]
                if kind == "done":
                    with self._cv:
                        self.backlog -= msg[1]
                elif kind == "derived":
                    self.on_derived(msg[1])
                elif kind == "unsaved":
                    self.on_unsaved(msg[1], msg[2], msg[3], msg[4])
        except Exception as exc:  # a frame we cannot read: treat as dead
            self._died(f"unreadable answer: {exc}")
            return
        if not self._closing:
            self._died(f"it exited (code {self.proc.wait()})")  # type: ignore[union-attr]

    def _died(self, why: str) -> None:
        if self._dead:
            return
        self._dead = True
        with self._cv:
            self._outbox.clear()
            self.backlog = 0
            self._cv.notify_all()
        log.warning("analysis worker: %s", why)
        self.on_dead(why)

    def stop(self, timeout: float = 10.0) -> None:
        """Everything handed over is analysed and written, then the worker exits (blocking: call
        it from a thread)."""
        with self._cv:
            self._closing = True
            self._cv.notify_all()
        for t in self._threads:
            t.join(timeout)
        if self.proc is not None:
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
