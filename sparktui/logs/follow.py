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
        self.at_last: dict[str, int] = {}  # texts seen at exactly last_ns, how many times
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

    def accept(self, raw_ts: str, text: str, ns: int | None = None) -> bool:
        if ns is None:
            ns = docker_ns(raw_ts)
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
            self.at_last = {text: 1}  # a plain dict: a Counter per line cost ~2 us under a flood
            return True
        self.at_last[text] = self.at_last.get(text, 0) + 1
        return True


_SECONDS: tuple[str, int | None] = ("", None)  # the last "YYYY-mm-ddTHH:MM:SS" parsed, and its epoch


def docker_ns(raw_ts: str) -> int | None:
    """``rfc3339_ns`` for the daemon's own stamps (``2026-12-01T10:00:05.123456789Z``), fast: the
    seconds part changes once a second, so strptime runs once a second, not once a line (it cost
    ~20 us a line and capped a follower near 25k lines/s)."""
    global _SECONDS
    if len(raw_ts) < 20 or raw_ts[-1] != "Z" or raw_ts[10] != "T":
        return rfc3339_ns(raw_ts)
    head = raw_ts[:19]
    cached, secs = _SECONDS  # one tuple: a race between follower threads costs a parse, never a mix
    if head != cached:
        whole = rfc3339_ns(head + "Z")
        secs = None if whole is None else whole // 1_000_000_000
        _SECONDS = (head, secs)
    if secs is None:
        return None
    if len(raw_ts) == 20:
        return secs * 1_000_000_000
    frac = raw_ts[20:-1]
    if raw_ts[19] != "." or not frac.isdigit():
        return rfc3339_ns(raw_ts)
    return secs * 1_000_000_000 + int((frac + "000000000")[:9])


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


class RawLogStream:
    """A container's log stream read straight off the Engine's unix socket: one HTTP/1.0 request
    (so the body is the bare stream, no chunked framing) and reads of up to 1 MiB demultiplexed in
    bulk.  docker-py reads two small pieces per line through urllib3 (~30k lines/s at best here);
    this keeps up with a container printing 90k lines/s.  Iterating yields payload bytes."""

    READ = 1 << 20

    def __init__(self, socket_path: str, api_version: str, container_id: str, params: dict, tty: bool) -> None:
        import socket
        from urllib.parse import quote, urlencode

        self.tty = tty
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._sock.connect(socket_path)
            path = f"/v{api_version}/containers/{quote(container_id, safe='')}/logs?{urlencode(params)}"
            self._sock.sendall(f"GET {path} HTTP/1.0\r\nHost: docker\r\n\r\n".encode())
            head = b""
            while b"\r\n\r\n" not in head:
                data = self._sock.recv(65536)
                if not data:
                    raise OSError("the Engine closed the log stream before answering")
                head += data
                if len(head) > 65536:
                    raise OSError("no end to the Engine's HTTP headers")
        except BaseException:
            self._sock.close()
            raise
        head, _, self._first = head.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        self.status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
        self.chunked = any(h.lower().replace(" ", "") == "transfer-encoding:chunked" for h in lines[1:])

    def close(self) -> None:
        import socket

        try:
            self._sock.shutdown(socket.SHUT_RDWR)  # the reading thread's recv returns at once
        except OSError:
            pass
        self._sock.close()

    def __iter__(self):
        buf, self._first = self._first, b""
        recv = self._sock.recv
        while True:
            if self.tty:
                if buf:
                    yield buf
                buf = b""
            else:  # 8-byte frame headers: stream, 0, 0, 0, big-endian length
                out = []
                pos, end = 0, len(buf)
                while end - pos >= 8:
                    n = int.from_bytes(buf[pos + 4:pos + 8], "big")
                    if end - pos - 8 < n:
                        break
                    out.append(buf[pos + 8:pos + 8 + n])
                    pos += 8 + n
                buf = buf[pos:]
                if out:
                    yield b"".join(out)
            try:
                data = recv(self.READ)
            except OSError:
                return
            if not data:
                return
            buf += data


def open_raw_logs(client: Any, container_id: str, params: dict) -> "RawLogStream | None":
    """The fast stream when the client talks to a unix socket and the Engine answers plainly; None
    to use docker-py's own (a TCP Engine, an error status it should report, chunked framing)."""
    try:
        api = client.api
        socket_path = getattr(api.get_adapter(api.base_url), "socket_path", None)
        if not socket_path:
            return None
        tty = bool(((api.inspect_container(container_id) or {}).get("Config") or {}).get("Tty"))
        stream = RawLogStream(socket_path, api._version, container_id, params, tty)
    except Exception:
        return None
    if stream.status != 200 or stream.chunked:
        stream.close()
        return None
    return stream


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
        params: dict[str, Any] = {"stdout": 1, "stderr": 1, "follow": 1, "timestamps": 1, "tail": "all"}
        if since is not None:
            params["since"] = f"{since:.9f}"
        self._stream = open_raw_logs(client, self.container_id, params)
        if self._stream is None:
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
                # decoded a block at a time: a newline never sits inside a UTF-8 sequence
                cut = pending.rfind(b"\n")
                block, pending = pending[:cut], pending[cut + 1:]
                self._take_texts(block.decode("utf-8", "replace").split("\n"))
        finally:
            if pending:
                self._take([pending])
            try:
                self._stream.close()
            except Exception:
                pass

    def _take(self, lines: list[bytes]) -> None:
        self._take_texts([raw.decode("utf-8", "replace") for raw in lines])

    def _take_texts(self, lines: list[str]) -> None:
        out = []
        cursor, node, source = self.cursor, self.node, self.source
        seq = cursor.seq
        for line in lines:
            raw_ts, text = split_ts(line)
            ts = None
            if raw_ts is not None:
                ns = docker_ns(raw_ts)
                if not cursor.accept(raw_ts, text, ns):
                    continue
                ts = ns / 1e9 if ns is not None else parse_docker_time(raw_ts)
            seq += 1
            out.append(LogLine(node, source, text, ts, seq, raw_ts))
        cursor.seq = seq
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
