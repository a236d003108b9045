"""The engine's analysis in a process of its own: the processors (classifier, stall detector) and
the session files, so that a log flood costs the screen's process only what it shows.

Python runs one thread at a time per process: in one process a flood's analysis, the log
followers and the screen took turns on one core while the second core idled (measured: the UI
thread 93 % busy, the follower starved, the view 30 s behind a 90k lines/s container).  Here the
screen's process keeps the state, the bounded store and the rows; this one does the rest.

Both sides speak in frames: a 4-byte big-endian length, then a pickle.  To the worker:
``("init", session_path, max_log_bytes, factory, tick_interval, cluster)`` once, then ``("ev", [item])``
where an item is an event, or a log batch as plain lists (``("lines", skip, node, source, texts,
stamps, seqs, raw_ts)``: several times cheaper to pickle than LogLine objects; ``skip`` means
session file only), and ``("stop",)``.  From the worker: ``("derived", [events])``,
``("done", lines)`` after each message, ``("unsaved", node, source, n, skipped)`` (lines the
session file did not take; ``skipped``: lines that were not shown either).

Run as ``python -m sparktui.engine_worker``: stdin and stdout carry the frames, stderr is a file.
"""

from __future__ import annotations

import importlib
import io
import logging
import pickle
import struct
import sys
import time
from typing import IO, Any, Callable

from .model import Event, LogBatch, LogBlock, LogLine

log = logging.getLogger(__name__)
_LEN = struct.Struct(">I")


class _ModelOnly(pickle.Unpickler):
    """The frames carry events (sparktui.model) and plain data, nothing else: any other class is
    refused, so a frame can never build an object that runs code (the log text inside is from
    strangers; the frames themselves come only from this program's two processes)."""

    def find_class(self, module: str, name: str) -> Any:
        if module == "sparktui.model":
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refused in an engine frame: {module}.{name}")


def loads(data: bytes) -> Any:
    return _ModelOnly(io.BytesIO(data)).load()


def write_frame(fh: IO[bytes], msg: Any) -> None:
    data = pickle.dumps(msg, protocol=pickle.HIGHEST_PROTOCOL)
    fh.write(_LEN.pack(len(data)) + data)
    fh.flush()


def read_frame(fh: IO[bytes]) -> Any:  # the screen's side: a blocking read in its own thread
    """The next message, or None at the end of the stream."""
    head = fh.read(4)
    if len(head) < 4:
        return None
    (n,) = _LEN.unpack(head)
    data = fh.read(n)
    if len(data) < n:
        return None
    return loads(data)


class FrameReader:
    """Frames off a file descriptor with a timeout (select on the fd; our own buffer, since a
    buffered reader would hide bytes from select)."""

    EOF = object()

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buf = bytearray()

    def _frame(self) -> Any:
        if len(self.buf) < 4:
            return None
        (n,) = _LEN.unpack_from(self.buf)
        if len(self.buf) < 4 + n:
            return None
        data = bytes(self.buf[4:4 + n])
        del self.buf[:4 + n]
        return loads(data)

    def next(self, timeout: float) -> Any:
        """A message; None when none came within ``timeout``; ``EOF`` at the end."""
        import os
        import select

        deadline = time.monotonic() + timeout
        while True:
            msg = self._frame()
            if msg is not None:
                return msg
            r, _, _ = select.select([self.fd], [], [], max(0.0, deadline - time.monotonic()))
            if not r:
                return None
            data = os.read(self.fd, 1 << 20)
            if not data:
                return self.EOF
            self.buf += data


def pack_lines(ev: LogBatch | LogLine, skip: bool) -> tuple:
    lines = ev.lines if isinstance(ev, LogBatch) else (ev,)
    return ("lines", skip, ev.node, ev.source, [ln.text for ln in lines], [ln.ts for ln in lines],
            [ln.seq for ln in lines], [ln.raw_ts for ln in lines])


def unpack_lines(item: tuple) -> tuple[bool, LogBatch]:
    _, skip, node, source, texts, stamps, seqs, raws = item
    return skip, LogBatch(node, source, tuple(LogLine(node, source, t, ts, s, r)
                                              for t, ts, s, r in zip(texts, stamps, seqs, raws)))


def load_factory(path: str) -> Callable[[], list]:
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


def scope_processors(processors: list, cluster: str | None) -> list:
    """Tell the processors that judge a cluster (``scope``) which one the config names."""
    if cluster:
        for p in processors:
            if hasattr(p, "scope"):
                p.scope(cluster)
    return processors


def record_safely(session: Any, ev: Event) -> int:
    """``session.record(ev)``, where a full disk is a warning, never the end of the stream; the
    number of lines the session file did not take."""
    if session is None:
        return 0
    try:
        return session.record(ev) or 0
    except OSError as exc:
        log.warning("session write failed: %s", exc)
        return 0


def feed_all(processors: list, ev: Event) -> list[Event]:
    """What the processors derive from ``ev``; a broken rule is logged and must not stop the stream."""
    out: list[Event] = []
    for p in processors:
        try:
            out.extend(p.feed(ev) or ())
        except Exception:
            log.exception("processor %r failed", p)
    return out


class Analysis:
    """What the worker does with each item: the session file, then the processors (their derived
    events are fed back to them and recorded, as the in-process engine does)."""

    def __init__(self, session: Any, processors: list) -> None:
        self.session = session
        self.processors = processors

    def handle(self, ev: Event, *, skip: bool = False) -> tuple[list[Event], int]:
        """(derived events, lines the session file did not take)."""
        unsaved = record_safely(self.session, ev)
        if skip:
            return [], unsaved
        derived: list[Event] = []
        queue = [ev]
        while queue:
            for d in feed_all(self.processors, queue.pop(0)):
                record_safely(self.session, d)
                derived.append(d)
                queue.append(d)
        return derived, unsaved

    def tick(self, now: float) -> list[Event]:
        out: list[Event] = []
        for p in self.processors:
            if hasattr(p, "tick"):
                try:
                    got = list(p.tick(now))
                except Exception:
                    log.exception("tick of %r failed", p)
                    continue
                for d in got:
                    record_safely(self.session, d)
                    out.append(d)
        return out


def serve(rd_fd: int, wr: IO[bytes]) -> int:
    from pathlib import Path

    from .session import Session

    rd = FrameReader(rd_fd)
    init = rd.next(60.0)
    if not isinstance(init, tuple) or init[0] != "init":
        return 2
    _, session_path, max_log_bytes, factory, tick_interval, cluster = init
    session = Session(Path(session_path), max_log_bytes) if session_path else None
    work = Analysis(session, scope_processors(load_factory(factory)(), cluster) if factory else [])
    next_tick = time.monotonic() + tick_interval
    try:
        while True:
            # ticks run when the input is quiet too: a hang is exactly when no line comes
            msg = rd.next(max(0.0, next_tick - time.monotonic()))
            if time.monotonic() >= next_tick:
                next_tick = time.monotonic() + tick_interval
                out = work.tick(time.time())
                if out:
                    write_frame(wr, ("derived", out))
            if msg is None:
                continue
            if msg is FrameReader.EOF or msg[0] == "stop":
                return 0
            derived: list[Event] = []
            lines = 0
            for item in msg[1]:
                if isinstance(item, tuple) and item and item[0] == "lines":
                    skip, ev = unpack_lines(item)
                    lines += len(ev.lines)
                    got, unsaved = work.handle(ev, skip=skip)
                    if unsaved:
                        write_frame(wr, ("unsaved", ev.node, ev.source, unsaved, skip))
                elif isinstance(item, LogBlock):  # skipped by its follower: the session file only
                    lines += item.count
                    got, unsaved = work.handle(item, skip=True)
                    if unsaved:
                        write_frame(wr, ("unsaved", item.node, item.source, unsaved, True))
                else:
                    got, _ = work.handle(item)
                derived += got
            if session is not None:
                session.flush()
            if derived:
                write_frame(wr, ("derived", derived))
            write_frame(wr, ("done", lines))
    finally:
        if session is not None:
            session.close()


def main() -> int:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        return serve(sys.stdin.fileno(), sys.stdout.buffer)
    except BrokenPipeError:  # the screen's process went away: nothing left to tell
        return 0


if __name__ == "__main__":
    sys.exit(main())
