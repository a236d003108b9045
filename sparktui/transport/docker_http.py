"""A container's log answer from the Docker Engine, read over plain HTTP/1.0: off the Engine's unix
socket (a local Engine, or a socket forwarded over ssh), or relayed in blocks by
``node_relay.py`` over an ssh channel.  Blocking reads, except the relayed stream's (event loop)."""

from __future__ import annotations

from typing import Any, Callable

from .node_relay import TAIL_ONLY, take_frames  # the relay's own (it runs on nodes without sparktui)


class _FramedStream:
    """A container's log answer from the Engine (HTTP/1.0: the body is the bare stream, no chunked
    framing), read in blocks of up to 1 MiB and demultiplexed in bulk.  docker-py reads two small
    pieces per line through urllib3 (~30k lines/s at best here); this keeps up with a container
    printing 90k lines/s.  Iterating yields payload bytes; subclasses say where blocks come from."""

    READ = 1 << 20

    def __init__(self, head: bytes, first: bytes, tty: bool) -> None:
        self.tty = tty
        self._first = first
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        self.status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
        self.chunked = any(h.lower().replace(" ", "") == "transfer-encoding:chunked" for h in lines[1:])

    def _recv(self) -> bytes:
        """The next block; b"" at the end (or when closed)."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def demux(self, buf: bytes) -> tuple[bytes, bytes]:
        """(the payload of the whole frames in ``buf``, what is left of it)."""
        if self.tty:
            return buf, b""
        payload, used = take_frames(buf)
        return payload, buf[used:]

    def __iter__(self):
        buf, self._first = self._first, b""
        recv = self._recv
        while True:
            payload, buf = self.demux(buf)
            if payload:
                yield payload
            data = recv()
            if not data:
                return
            buf += data


def split_head(data: bytes) -> tuple[bytes, bytes] | None:
    """(HTTP head, what follows it), or None while the head is incomplete."""
    head, sep, rest = data.partition(b"\r\n\r\n")
    return (head, rest) if sep else None


def logs_path(api_version: str, container_id: str, params: dict) -> str:
    from urllib.parse import quote, urlencode

    return f"/v{api_version}/containers/{quote(container_id, safe='')}/logs?{urlencode(params)}"


class RawLogStream(_FramedStream):
    """Straight off the Engine's unix socket (a local Engine, or a socket forwarded over ssh)."""

    def __init__(self, socket_path: str, api_version: str, container_id: str, params: dict, tty: bool) -> None:
        import socket

        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._sock.connect(socket_path)
            path = logs_path(api_version, container_id, params)
            self._sock.sendall(f"GET {path} HTTP/1.0\r\nHost: docker\r\n\r\n".encode())
            got = b""
            while (parts := split_head(got)) is None:
                data = self._sock.recv(65536)
                if not data:
                    raise OSError("the Engine closed the log stream before answering")
                got += data
                if len(got) > 65536:
                    raise OSError("no end to the Engine's HTTP headers")
        except BaseException:
            self._sock.close()
            raise
        super().__init__(parts[0], parts[1], tty)

    def _recv(self) -> bytes:
        try:
            return self._sock.recv(self.READ)
        except OSError:
            return b""

    def close(self) -> None:
        import socket

        try:
            self._sock.shutdown(socket.SHUT_RDWR)  # the reading thread's recv returns at once
        except OSError:
            pass
        self._sock.close()


class RelayedLogStream(_FramedStream):
    """The same answer relayed by node_relay.py over an ssh channel (ssh nodes): blocks of up to
    50 ms instead of a packet per few lines.  The channel lives on the event loop, so this stream
    is read there (``blocks``), not in a thread: a thread would hand the interpreter lock back and
    forth with the screen several times a block (measured: a third of the follower's time)."""

    READ = 1 << 18  # ~2.5k lines: a block taken apart on the loop holds a key press a few ms at most

    def __init__(self, reader: Any, close: Callable[[], None], head: bytes, first: bytes,
                 tell: Callable[[bytes], None] | None = None) -> None:
        super().__init__(head, first, tty=True)  # the relay took the frames apart: bare bytes, as a tty's
        self._reader, self._close, self._tell = reader, close, tell

    def tail_only(self) -> None:
        """Ask the relay for the newest lines of each block only, the rest counted (DROPPED lines)."""
        if self._tell is not None:
            try:
                self._tell(TAIL_ONLY)
            except Exception:  # the channel is going away: the stream ends by itself
                pass

    async def blocks(self):
        buf, self._first = self._first, b""
        while True:
            payload, buf = self.demux(buf)
            if payload:
                yield payload
            try:
                data = await self._reader.read(self.READ)
            except Exception:  # the channel or the connection went away
                return
            if not data:
                return
            buf += data

    def close(self) -> None:
        self._close()


def container_tty(client: Any, container_id: str) -> bool:
    """Whether the container has a tty: its log is then one raw stream, not framed (blocking)."""
    return bool(((client.api.inspect_container(container_id) or {}).get("Config") or {}).get("Tty"))


def open_raw_logs(client: Any, container_id: str, params: dict) -> "RawLogStream | None":
    """The fast stream when the client talks to a unix socket and the Engine answers plainly; None
    to use docker-py's own (a TCP Engine, an error status it should report, chunked framing)."""
    try:
        api = client.api
        socket_path = getattr(api.get_adapter(api.base_url), "socket_path", None)
        if not socket_path:
            return None
        stream = RawLogStream(socket_path, api._version, container_id, params, container_tty(client, container_id))
    except Exception:
        return None
    return usable(stream)


def usable(stream: "_FramedStream") -> "_FramedStream | None":
    """The stream if the Engine answered plainly; else None (closed), and docker-py's own path
    reports the error status it carries."""
    if stream.status != 200 or stream.chunked:
        stream.close()
        return None
    return stream
