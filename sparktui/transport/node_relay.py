"""Runs ON THE NODE (``python3 -c <this file> SOCKET PATH tty|plain``, over ssh): asks the node's
Docker Engine for a log stream and relays its answer to stdout in blocks.

Why: the Engine flushes every log line as its own write, so a forwarded Docker socket arrives as
one small SSH packet per few lines (measured: ~15k packets/s under a 90k lines/s flood), and each
packet costs the screen's process Python work; the follower then managed ~45k lines/s.  Relayed
in blocks of up to 50 ms, the same flood is ~100 reads a second.

Standard library only, no sparktui import: the node has Python 3 but not our package.  The answer
is passed on as its HTTP head, then the log's bytes (the Engine's stream framing removed).  Ends
when the Engine ends the stream, or when stdin closes (the ssh channel went away), so a relay for
a quiet container never outlives its follower.
"""

import os
import select
import socket
import sys
import time

FLUSH_S = 0.05  # the most a line waits here: well inside the screen's own 50 ms coalescing
FLUSH_BYTES = 1 << 18
GATHER_S = 0.001  # the sending socket holds only ~200 lines: longer would throttle the Engine
HELD_MAX = 64 << 20  # relayed bytes the channel has not taken yet; beyond it, the Engine waits
TAIL_LINES = 200  # in tail mode, the newest lines of each block that are sent
# tail mode: the follower writes this to our stdin when its session file is full.  The lines of a
# block before its newest TAIL_LINES are then not sent (nothing would keep them: the screen shows
# the tail, the file takes no more); a line starting with DROPPED says how many, so every line is
# still counted.  A NUL never starts a relayed line: each begins with the Engine's timestamp.
TAIL_ONLY = b"T"
DROPPED = b"\x00sparktui-relay dropped "


def take_frames(buf) -> tuple:
    """(the payload of the whole frames at the start of ``buf``, how many bytes they took).  A
    non-tty container's stream is frames: stream, 0, 0, 0, big-endian length, then that many bytes."""
    out = []
    pos, end = 0, len(buf)
    while end - pos >= 8:
        n = int.from_bytes(buf[pos + 4:pos + 8], "big")
        if end - pos - 8 < n:
            break
        out.append(buf[pos + 8:pos + 8 + n])
        pos += 8 + n
    return b"".join(out), pos


def tail_of(block: bytes, keep: int) -> bytes:
    """``block`` (starting at a line's start) as sent in tail mode: a DROPPED line counting the
    whole lines before its newest ``keep``, then those, then any open line at its end (sent, not
    counted: the next block finishes it)."""
    cut = block.rfind(b"\n")
    for _ in range(keep):
        if cut < 0:
            return block
        cut = block.rfind(b"\n", 0, cut)
    if cut < 0:
        return block
    return DROPPED + str(block.count(b"\n", 0, cut + 1)).encode() + b"\n" + block[cut + 1:]


class _Demux:
    """The Engine's answer: its HTTP head passed on as is, then the body without the 8-byte frame
    headers of a non-tty container's stream (taken apart here: on the node, not in the screen's
    process).  An error answer, or a tty container's stream, passes unchanged."""

    def __init__(self, tty: bool) -> None:
        self.tty = tty
        self.head = bytearray()  # until the head is complete
        self.framed = None  # known once the head is
        self.body = bytearray()

    def feed(self, data: bytes) -> bytes:
        if self.framed is None:
            self.head += data
            end = self.head.find(b"\r\n\r\n")
            if end < 0:
                return b""
            head, data = bytes(self.head[:end + 4]), bytes(self.head[end + 4:])
            status = head.split(b"\r\n", 1)[0].split(b" ")
            self.framed = not self.tty and len(status) > 1 and status[1] == b"200"
            return head + self.feed(data)
        if not self.framed:
            return data
        self.body += data
        payload, used = take_frames(self.body)
        del self.body[:used]
        return payload


def main(argv: list) -> int:
    socket_path, path, tty = argv[1], argv[2], argv[3] == "tty"
    if not path.startswith("/") or any(c in path for c in "\r\n "):
        sys.stderr.write("relay: bad request path\n")
        return 2
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(socket_path)
    # HTTP/1.0: the body is the bare stream, no chunked framing
    sock.sendall(("GET %s HTTP/1.0\r\nHost: docker\r\n\r\n" % path).encode())
    demux = _Demux(tty)
    # stdout is written without blocking: a slow channel must never stop the reading of the Engine's
    # socket, which holds ~200 lines; the Engine waits while it is full (a blocking write here put
    # the whole flood seconds behind within a minute)
    os.set_blocking(1, False)
    gathered = bytearray()  # relayed, waiting for its block to fill or its time to come
    sending = memoryview(b"")  # the block being written
    first = 0.0
    reading = True
    tail = False
    at_line_start = False  # whether what was sent so far ends a line (tail mode cuts whole lines)
    while reading or gathered or sending:
        if not sending and gathered and (not reading or len(gathered) >= FLUSH_BYTES
                                         or time.monotonic() - first >= FLUSH_S):
            block = bytes(gathered)
            gathered.clear()
            if tail and at_line_start and demux.framed:
                block = tail_of(block, TAIL_LINES)
            at_line_start = block.endswith(b"\n")
            sending = memoryview(block)
        wait = None
        if gathered and not sending:
            wait = max(0.0, FLUSH_S - (time.monotonic() - first))
        rlist = [0]
        if reading and len(gathered) + len(sending) < HELD_MAX:
            rlist.append(sock)
        ready, writable, _ = select.select(rlist, [1] if sending else [], [], wait)
        if 0 in ready:
            said = os.read(0, 4096)
            if not said:
                return 0  # the channel is gone: nobody reads what we would send
            tail = tail or TAIL_ONLY in said
        if writable:
            try:
                sending = sending[os.write(1, sending):]
            except BlockingIOError:
                pass
        if sock in ready:
            data = sock.recv(1 << 20)
            if not data:
                reading = False
                continue
            if not gathered:
                first = time.monotonic()
            gathered += demux.feed(data)
            # the Engine writes a line at a time: let a moment of them gather in the socket rather
            # than wake for each (a relay reading each write cost a fifth of a core under a flood)
            time.sleep(GATHER_S)
    return 0

if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except (BrokenPipeError, KeyboardInterrupt):
        sys.exit(0)
