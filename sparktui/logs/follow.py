"""Resumable following of a container's log through the docker SDK (``timestamps=True``).

A ``LogCursor`` remembers the last daemon timestamp seen (exact nanoseconds) and which texts were
seen at exactly that timestamp.  After any break (SSH drop, dockerd restart, container restart)
the stream is reopened from a little before that point and lines up to it are dropped, so the
result has no duplicate and no gap.  Blocking SDK streams run in their own threads (never the
default executor: a handful of followers would starve it) and lines are coalesced into one
``LogBatch`` per ~50 ms.  How the bytes arrive (threads, the Engine's HTTP answer, the ssh relay)
is ``sparktui/transport/``.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import threading
import time
from typing import TYPE_CHECKING, Any, Callable

from ..model import LogBatch, LogBlock, LogLine
from ..timefmt import parse as parse_docker_time, parse_ns as rfc3339_ns
from ..transport.docker_http import RelayedLogStream, container_tty, logs_path, open_raw_logs, usable
from ..transport.node_relay import DROPPED  # the relay's own (it runs on nodes without sparktui)
from ..transport.threads import in_thread, start_thread

if TYPE_CHECKING:
    import docker

log = logging.getLogger(__name__)

COALESCE_S = 0.05
MAX_BATCH = 5000
# a follower this far behind its source takes apart only the newest TAIL_LINES of what it reads
BEHIND_S = 1.0
TAIL_LINES, TAIL_EVERY_S = 200, 0.2  # what the screen gets meanwhile: ~1k lines/s, the newest
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

    @property
    def resuming(self) -> bool:
        """Replayed lines may still come: each must be compared, one by one."""
        return self._resuming

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


# ``async opener(path, tty) -> stream | None``: a node's faster way to the same answer (ssh: relayed)
Opener = Callable[[str, bool], Any]


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
        self.via = "docker-py"  # how the log was read: relay (ssh), socket, docker-py
        self._least_lag: float | None = None
        self._tail_at = 0.0
        self._on_loop = False  # read on the event loop (relayed), not in a thread
        self._file_full = False  # the session file takes no more of this source

    async def run(self, client: "docker.DockerClient", opener: Opener | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        self.cursor.begin_resume()
        params = self._params()
        if opener is not None:
            self._stream = await self._open_relayed(client, params, opener)
        if isinstance(self._stream, RelayedLogStream):
            try:
                await self._follow_relayed(self._stream)
            finally:
                self._stream.close()
                self.flush()
            return
        fut = start_thread(lambda: self._read(client, params), f"logs-{self.node}-{self.source}")
        try:
            await asyncio.shield(fut)
        except asyncio.CancelledError:
            self.close()
            raise
        finally:
            self.flush()

    async def catch_up(self, client: "docker.DockerClient", opener: Opener | None = None) -> None:
        """Read once more from the cursor after the stream ended on a stopped container: the daemon
        can end a follow before the log's last lines (a tty container's burst was cut at 16,579 of
        20,000 lines); on a stopped container the request returns at once, and the cursor drops
        every line already taken."""
        self._stream = None
        await self.run(client, opener)

    def close(self) -> None:
        s = self._stream
        if s is not None:
            try:
                s.close()  # CancellableStream: shuts the socket, the reading thread ends
            except Exception:
                pass

    def _params(self) -> dict[str, Any]:
        since = self.cursor.since()
        params: dict[str, Any] = {"stdout": 1, "stderr": 1, "follow": 1, "timestamps": 1, "tail": "all"}
        if since is not None:
            params["since"] = f"{since:.9f}"
        return params

    async def _open_relayed(self, client: "docker.DockerClient", params: dict, opener: Opener) -> Any:
        """The node's relayed stream, or None: then the usual paths, which report what is wrong."""
        try:
            tty = await in_thread(container_tty, client, self.container_id)
            stream = await opener(logs_path(client.api._version, self.container_id, params), tty)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.debug("%s: relayed logs of %s: %s", self.node, self.source, exc)
            return None
        stream = usable(stream) if stream is not None else None
        if stream is not None:
            self.via = "relay"
            if self._file_full:
                stream.tail_only()
        return stream

    def file_full(self) -> None:
        """The session file takes no more of this source: what is skipped would be lost anyway, so a
        relay need not send it (it counts it), and a flood costs the channel and the screen only
        the tail that is shown."""
        self._file_full = True
        if isinstance(self._stream, RelayedLogStream):
            self._stream.tail_only()

    async def _follow_relayed(self, stream: RelayedLogStream) -> None:
        self._on_loop = True
        pending = b""
        try:
            async for chunk in stream.blocks():
                pending = self._feed(pending, chunk)
                await asyncio.sleep(0)  # the screen between blocks
        finally:
            if pending:
                self._take([pending])

    def _feed(self, pending: bytes, chunk: bytes) -> bytes:
        """Takes the whole lines of ``pending + chunk``; returns the unfinished rest."""
        pending += chunk
        if b"\n" not in chunk:
            return pending
        # decoded a block at a time: a newline never sits inside a UTF-8 sequence
        cut = pending.rfind(b"\n")
        self._take_block(pending[:cut])
        return pending[cut + 1:]

    # -- the reading thread
    def _read(self, client: "docker.DockerClient", params: dict) -> None:
        since = self.cursor.since()
        if self._stream is None:
            self._stream = open_raw_logs(client, self.container_id, params)
            self.via = "socket" if self._stream is not None else self.via
        if self._stream is None:
            kw: dict[str, Any] = {"stream": True, "follow": True, "timestamps": True}
            if since is not None:
                kw["since"] = since
            self._stream = client.api.logs(self.container_id, **kw)
        pending = b""
        try:
            for chunk in self._stream:
                pending = self._feed(pending, chunk)
        finally:
            if pending:
                self._take([pending])
            try:
                self._stream.close()
            except Exception:
                pass

    def _take_block(self, block: bytes) -> None:
        """Whole lines, newline-separated, and the relay's counts of lines it did not send."""
        if DROPPED not in block:
            self._take_lines(block)
            return
        pos = 0
        while (at := block.find(DROPPED, pos)) >= 0:
            if at > pos:
                self._take_lines(block[pos:at - 1])  # without the newline before the count
            end = block.find(b"\n", at)
            end = len(block) if end < 0 else end
            count = block[at + len(DROPPED):end]
            if count.isdigit():
                self._dropped(int(count))
            pos = end + 1
        if pos < len(block):
            self._take_lines(block[pos:])

    def _dropped(self, n: int) -> None:
        """``n`` lines the relay counted and did not send: skipped and (never read) not saved."""
        self.cursor.seq += n
        with self._lock:
            self._emit_buffered()
            self.emit(LogBlock(self.node, self.source, b"", n, self.cursor.seq))

    def _take_lines(self, block: bytes) -> None:
        """Whole lines, newline-separated.  Taken apart line by line while the follower keeps up;
        when it has fallen behind the source, only the newest ``TAIL_LINES`` every ``TAIL_EVERY_S``
        are (the screen shows the tail) and the rest go on as one ``LogBlock``, session file only:
        it then reads many times faster than the source writes and catches up."""
        lag = self._lag(block)
        if lag is None or lag <= BEHIND_S or self.cursor.resuming:
            self._take_texts(block.decode("utf-8", "replace").split("\n"))
            return
        now = time.monotonic()
        if now - self._tail_at < TAIL_EVERY_S:  # the screen had its tail a moment ago
            self._skip_raw(block)
            return
        self._tail_at = now
        cut = len(block)
        for _ in range(TAIL_LINES):
            cut = block.rfind(b"\n", 0, cut)
            if cut < 0:
                break
        if cut > 0:
            self._skip_raw(block[:cut])
        self._take_texts(block[cut + 1:].decode("utf-8", "replace").split("\n"))

    def _lag(self, block: bytes) -> float | None:
        """How far behind the source its newest line is, in seconds, or None (no timestamp).  The
        node's clock and ours may differ: the lag is measured from the least ever seen on this
        stream (when the follower was keeping up), not from zero."""
        i = block.rfind(b"\n") + 1
        sp = block.find(b" ", i, i + 48)
        ns = docker_ns(block[i:sp].decode("ascii", "replace")) if sp > i else None
        if ns is None:
            return None
        lag = time.time() - ns / 1e9
        if self._least_lag is None or lag < self._least_lag:
            self._least_lag = lag
        return lag - self._least_lag

    def _skip_raw(self, head: bytes) -> None:
        text = head.decode("utf-8", "replace")  # as a parsed line would be written: same bytes in the file
        n = text.count("\n") + 1
        raw_ts, body = split_ts(text[text.rfind("\n") + 1:])
        if raw_ts is not None:  # the newest line seen: a resume starts after it
            self.cursor.accept(raw_ts, body)
        self.cursor.seq += n
        block = LogBlock(self.node, self.source, (text + "\n").encode("utf-8", "surrogateescape"), n, self.cursor.seq)
        with self._lock:  # after the lines already buffered, in order
            self._emit_buffered()
            self.emit(block)

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
        elif schedule and self._on_loop:
            self._loop.call_later(COALESCE_S, self.flush)  # type: ignore[union-attr]
        elif schedule and self._loop is not None:
            try:
                self._loop.call_soon_threadsafe(self._loop.call_later, COALESCE_S, self.flush)
            except RuntimeError:  # loop closed while we read: nobody left to deliver to
                pass

    def flush(self) -> None:
        with self._lock:  # emit under the lock: a thread flush and a timer flush keep line order
            self._emit_buffered()

    def _emit_buffered(self) -> None:  # under self._lock
        lines, self._buf = self._buf, []
        self._flush_pending = False
        if lines:
            self.emit(LogBatch(node=self.node, source=self.source, lines=tuple(lines)))
