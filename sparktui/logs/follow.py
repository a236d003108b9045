"""Resumable following of a container's log through the docker SDK (``timestamps=True``).

A ``LogCursor`` remembers the last daemon timestamp seen (exact nanoseconds) and which texts were
seen at exactly that timestamp.  After any break (SSH drop, dockerd restart, container restart)
the stream is reopened from a little before that point and lines up to it are dropped, so the
result has no duplicate and no gap.  Blocking SDK streams run in their own threads (never the
default executor: a handful of followers would starve it) and lines are coalesced into one
``LogBatch`` per ~50 ms.
"""

from __future__ import annotations

import asyncio
import collections
import threading
from typing import TYPE_CHECKING, Any, Callable

from ..model import LogBatch, LogLine
from ..timefmt import parse as parse_docker_time, parse_ns as rfc3339_ns

if TYPE_CHECKING:
    import docker

COALESCE_S = 0.05
MAX_BATCH = 5000
_SINCE_MARGIN_NS = 1_000_000  # since= is sent as a float: step back 1 ms, the cursor drops repeats


class LogCursor:
    def __init__(self) -> None:
        self.last_ns: int | None = None
        self.at_last: collections.Counter[str] = collections.Counter()
        self._replay: collections.Counter[str] = collections.Counter()
        self._resuming = False
        self.seq = 0

    def since(self) -> float | None:
        if self.last_ns is None:
            return None
        return max(0, self.last_ns - _SINCE_MARGIN_NS) / 1e9

    def begin_resume(self) -> None:
        self._resuming = self.last_ns is not None
        self._replay = collections.Counter(self.at_last)

    def accept(self, raw_ts: str, text: str) -> bool:
        ns = rfc3339_ns(raw_ts)
        if ns is None:
            return True  # nothing to compare with: keep it
        if self._resuming and self.last_ns is not None:
            if ns < self.last_ns:
                return False
            if ns == self.last_ns and self._replay[text] > 0:
                self._replay[text] -= 1
                return False
            if ns > self.last_ns:
                self._resuming = False
        if self.last_ns is None or ns > self.last_ns:
            self.last_ns = ns
            self.at_last = collections.Counter()
        self.at_last[text] += 1
        return True


def split_ts(line: str) -> tuple[str | None, str]:
    """``2026-11-29T20:00:25.011869369Z text`` -> (raw_ts, text)."""
    head, sep, rest = line.partition(" ")
    if sep and head.endswith("Z") and "T" in head[:20]:
        return head, rest
    return None, line


def start_thread(fn: Callable[[], Any], name: str) -> "asyncio.Future[Any]":
    """Run a blocking function in a daemon thread; the returned future gets its result."""
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[Any] = loop.create_future()

    def body() -> None:
        try:
            res: Any = fn()
        except BaseException as exc:  # handed to the awaiting side
            res, err = None, exc
        else:
            err = None
        try:
            loop.call_soon_threadsafe(_set, fut, res, err)
        except RuntimeError:  # the loop is closed: nobody is waiting any more
            pass

    threading.Thread(target=body, name=name, daemon=True).start()
    return fut


def in_thread(fn: Callable[..., Any], *args: Any, **kw: Any) -> "asyncio.Future[Any]":
    """A blocking SDK call in its own daemon thread.  Unlike ``asyncio.to_thread`` (the default
    executor), a call stuck on a dead socket never holds up the loop's shutdown."""
    return start_thread(lambda: fn(*args, **kw), getattr(fn, "__name__", "blocking"))


def _set(fut: asyncio.Future, res: Any, exc: BaseException | None) -> None:
    if fut.done():
        return
    if exc is not None:
        fut.set_exception(exc)
    else:
        fut.set_result(res)


class LogFollower:
    """Follows one container until its stream ends (container stopped) or breaks (raises)."""

    def __init__(self, node: str, source: str, container_id: str, cursor: LogCursor,
                 emit: Callable[[Any], None]) -> None:
        self.node = node
        self.source = source
        self.container_id = container_id
        self.cursor = cursor
        self.emit = emit
        self._lock = threading.Lock()
        self._buf: list[LogLine] = []
        self._stream: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._flush_pending = False

    async def run(self, client: "docker.DockerClient") -> None:
        self._loop = asyncio.get_running_loop()
        self.cursor.begin_resume()
        fut = start_thread(lambda: self._read(client), f"logs-{self.node}-{self.source}")
        try:
            await asyncio.shield(fut)
        except asyncio.CancelledError:
            self.close()
            raise
        finally:
            self.flush()

    def close(self) -> None:
        s = self._stream
        if s is not None:
            try:
                s.close()  # CancellableStream: shuts the socket, the reading thread ends
            except Exception:
                pass

    # -- the reading thread
    def _read(self, client: "docker.DockerClient") -> None:
        since = self.cursor.since()
        kw: dict[str, Any] = {"stream": True, "follow": True, "timestamps": True}
        if since is not None:
            kw["since"] = since
        self._stream = client.api.logs(self.container_id, **kw)
        pending = b""
        try:
            for chunk in self._stream:
                pending += chunk
                if b"\n" not in chunk:
                    continue
                *lines, pending = pending.split(b"\n")
                self._take(lines)
        finally:
            if pending:
                self._take([pending])
            try:
                self._stream.close()
            except Exception:
                pass

    def _take(self, lines: list[bytes]) -> None:
        out = []
        for raw in lines:
            raw_ts, text = split_ts(raw.decode("utf-8", "replace"))
            if raw_ts is not None and not self.cursor.accept(raw_ts, text):
                continue
            self.cursor.seq += 1
            out.append(LogLine(node=self.node, source=self.source, text=text,
                               ts=parse_docker_time(raw_ts) if raw_ts else None,
                               seq=self.cursor.seq, raw_ts=raw_ts))
        if not out:
            return
        with self._lock:
            self._buf.extend(out)
            big = len(self._buf) >= MAX_BATCH
            schedule = not self._flush_pending and not big
            if schedule:
                self._flush_pending = True
        if big:
            self.flush()
        elif schedule and self._loop is not None:
            try:
                self._loop.call_soon_threadsafe(self._loop.call_later, COALESCE_S, self.flush)
            except RuntimeError:  # loop closed while we read: nobody left to deliver to
                pass

    def flush(self) -> None:
        with self._lock:  # emit under the lock: a thread flush and a timer flush keep line order
            lines, self._buf = self._buf, []
            self._flush_pending = False
            if lines:
                self.emit(LogBatch(node=self.node, source=self.source, lines=tuple(lines)))
