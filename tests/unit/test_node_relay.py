"""transport/node_relay.py, the program an ssh node runs to relay a container's log in blocks: run as
the node runs it (a separate python3, stdin/stdout pipes) against a unix-socket server answering as
the Docker Engine does (HTTP/1.0 head, then 8-byte-framed stdout/stderr, a write per line)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

RELAY = Path(__file__).resolve().parents[2] / "sparktui" / "transport" / "node_relay.py"
HEAD = b"HTTP/1.0 200 OK\r\nContent-Type: application/vnd.docker.multiplexed-stream\r\n\r\n"


def _frame(stream: int, payload: bytes) -> bytes:
    return bytes([stream, 0, 0, 0]) + len(payload).to_bytes(4, "big") + payload


class _Engine:
    """Answers one connection with ``head`` then ``writes`` (each its own send), then closes,
    or, with ``hold``, keeps the connection open until told to close."""

    def __init__(self, path: Path, head: bytes, writes: list[bytes], hold: bool = False) -> None:
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(str(path))
        self.srv.listen(1)
        self.request = b""
        self.done = threading.Event()
        self.closed = threading.Event()
        self._t = threading.Thread(target=self._serve, args=(head, writes, hold), daemon=True)
        self._t.start()

    def _serve(self, head: bytes, writes: list[bytes], hold: bool) -> None:
        conn, _ = self.srv.accept()
        while b"\r\n\r\n" not in self.request:
            self.request += conn.recv(4096)
        conn.sendall(head)
        for w in writes:
            conn.sendall(w)
        self.done.set()
        if hold:  # a quiet container: nothing more, until the relay goes away
            conn.recv(1)
            self.closed.set()
        conn.close()
        self.srv.close()


def _relay(sock: Path, tty: bool, path: str = "/v1.41/containers/abc/logs?follow=1&timestamps=1",
           stdin: int = subprocess.PIPE) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", RELAY.read_text(), str(sock), path, "tty" if tty else "plain"],
                            stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _to_the_end(sock: Path, tty: bool) -> tuple[int, bytes, bytes]:
    """The relay run until the Engine ends its answer, its stdin (the ssh channel) open throughout."""
    channel, ours = os.pipe()
    try:
        proc = _relay(sock, tty, stdin=channel)
        out, err = proc.communicate(timeout=30)
    finally:
        os.close(channel)
        os.close(ours)
    return proc.returncode, out, err


@pytest.fixture
def sock(tmp_path):
    return tmp_path / "docker.sock"


def test_the_relay_passes_the_head_and_takes_the_frames_apart(sock):
    lines = [f"2026-12-01T10:00:00.{i:09d}Z line {i} é\n".encode() for i in range(3000)]
    writes = [_frame(1 + i % 2, ln) for i, ln in enumerate(lines)]
    writes[10] = writes[10][:5]  # a frame split across writes, as a socket may deliver it
    writes[11] = _frame(1 + 10 % 2, lines[10])[5:] + writes[11]
    eng = _Engine(sock, HEAD, writes)
    rc, out, err = _to_the_end(sock, tty=False)
    assert rc == 0, err
    assert eng.request.startswith(b"GET /v1.41/containers/abc/logs?follow=1&timestamps=1 HTTP/1.0\r\n")
    assert out == HEAD + b"".join(lines)


def test_a_tty_stream_and_an_error_answer_pass_unchanged(sock, tmp_path):
    raw = b"2026-12-01T10:00:00.000000001Z hello\r\n" * 50
    _Engine(sock, b"HTTP/1.0 200 OK\r\n\r\n", [raw[:100], raw[100:]])
    _, out, _ = _to_the_end(sock, tty=True)
    assert out == b"HTTP/1.0 200 OK\r\n\r\n" + raw
    other = tmp_path / "other.sock"
    body = b'{"message":"No such container: abc"}\n'
    _Engine(other, b"HTTP/1.0 404 Not Found\r\nContent-Type: application/json\r\n\r\n", [body])
    _, out, _ = _to_the_end(other, tty=False)
    assert out.endswith(b"\r\n\r\n" + body)  # not taken for frames: the caller reports the error


def test_the_relay_of_a_quiet_container_ends_when_its_channel_closes(sock):
    eng = _Engine(sock, HEAD, [_frame(1, b"one line\n")], hold=True)
    proc = _relay(sock, tty=False)
    assert eng.done.wait(30)
    assert proc.stdout.read(len(HEAD) + 9) == HEAD + b"one line\n"
    proc.stdin.close()  # what sshd does when the follower closes the channel
    assert proc.wait(timeout=30) == 0
    assert eng.closed.wait(30)  # and it let go of the Engine's connection


def test_a_request_path_that_could_smuggle_a_header_is_refused(sock):
    proc = _relay(sock, tty=False, path="/v1.41/containers/abc/logs HTTP/1.0\r\nX: y")
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2 and b"bad request path" in err


def test_a_slow_channel_never_stops_the_relay_reading_the_engine(sock):
    # the Engine's socket holds ~200 lines; a relay that blocked writing to its channel left it full
    # and the Engine waiting, so a flood fell behind by the time a write took.  Here nobody reads the
    # relay's output until the Engine has sent all of it (far more than a pipe and a socket hold).
    lines = [f"2026-12-01T10:00:00.{i:09d}Z flood line {i} ".encode() + b"x" * 80 + b"\n" for i in range(30000)]
    eng = _Engine(sock, HEAD, [_frame(1, ln) for ln in lines], hold=True)
    proc = _relay(sock, tty=False)
    assert eng.done.wait(60), "the Engine was left waiting while the channel was not read"
    want = HEAD + b"".join(lines)
    got = bytearray()
    while len(got) < len(want):
        chunk = proc.stdout.read1(1 << 20)
        assert chunk, "the relay ended early"
        got += chunk
    assert bytes(got) == want
    proc.stdin.close()
    assert proc.wait(timeout=30) == 0


def test_in_tail_mode_the_relay_sends_the_newest_lines_and_counts_the_rest(sock):
    # told "T" on its stdin (the follower's session file is full), each block is sent as a count of
    # the lines it did not send, then its newest lines; every line is either sent or counted
    from sparktui.transport.node_relay import DROPPED, TAIL_LINES, TAIL_ONLY

    first = [f"2026-12-01T10:00:00.{i:09d}Z before {i}\n".encode() for i in range(10)]
    flood = [f"2026-12-01T10:00:01.{i:09d}Z flood {i} ".encode() + b"y" * 60 + b"\n" for i in range(40000)]
    gate = threading.Event()

    class Gated(_Engine):  # the first lines, then the flood once the relay has been told
        def _serve(self, head, writes, hold):
            conn, _ = self.srv.accept()
            while b"\r\n\r\n" not in self.request:
                self.request += conn.recv(4096)
            conn.sendall(head + b"".join(_frame(1, ln) for ln in first))
            gate.wait(30)
            for ln in flood:
                conn.sendall(_frame(1, ln))
            self.done.set()
            conn.close()
            self.srv.close()

    Gated(sock, HEAD, [])
    proc = _relay(sock, tty=False)
    got = bytearray()
    while not got.endswith(first[-1]):
        got += proc.stdout.read1(1 << 16)
    assert bytes(got) == HEAD + b"".join(first)  # before: everything
    proc.stdin.write(TAIL_ONLY)
    proc.stdin.flush()
    gate.set()
    rest = bytearray()
    while chunk := proc.stdout.read1(1 << 20):
        rest += chunk
    assert proc.wait(timeout=30) == 0
    lines = bytes(rest).split(b"\n")[:-1]
    counted = sum(int(ln[len(DROPPED):]) for ln in lines if ln.startswith(DROPPED))
    sent = [ln + b"\n" for ln in lines if not ln.startswith(DROPPED)]
    assert counted > 0 and counted + len(sent) == len(flood)
    assert sent[-1] == flood[-1] and len(sent) < len(flood) // 2  # the newest line, and far fewer
    idx = [flood.index(ln) for ln in sent[:TAIL_LINES + 5]]
    assert idx == sorted(idx)  # in order
