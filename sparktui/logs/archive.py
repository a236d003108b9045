"""A session log file read back by line number (the view scrolled past what the store holds).

The session writes one line per log line (``<daemon RFC 3339 ts> <text>`` or ``<text>``), in
order, so line k of the file is the line numbered k (``LogLine.seq``) as long as nothing was lost
for that source.  ``LogArchive`` reads such a file while it still grows:

- a sparse index: one entry (byte offset, lines before it) at the first line that starts at or
  after every ``SPAN`` bytes.  Built with C-speed scans (``bytes.count``/``find``), a constant
  amount of Python work per 64 KiB instead of per line; extended from where it stopped, whole
  lines only (the writer may be half-way through one);
- ``read(first, last)``: from the nearest entry, in blocks, never the whole file (files reach
  1 GiB); a line longer than ``LINE_CAP`` bytes keeps its head and says how much was left;
- the cap note the session writes when the file is full is recognised: it is not a log line.

Plain IO and no UI: a face calls it from a worker thread.  A missing or unreadable file is a state
(``error``), never an exception.
"""

from __future__ import annotations

import os
import threading
from array import array
from bisect import bisect_right
from dataclasses import dataclass
from pathlib import Path

from .follow import docker_ns, split_ts
from .sanitize import clean_line

# written by session.py as the last line of a source's log file that reached its cap
CAP_NOTE = "[sparktui: this session log reached its cap of {cap}; later lines are not kept here]\n"
_NOTE_HEAD, _NOTE_TAIL = (part.encode() for part in CAP_NOTE.split("{cap}"))


def is_cap_note(line: bytes) -> bool:
    """``line`` (with or without its newline) is the session's cap note."""
    line = line if line.endswith(b"\n") else line + b"\n"
    return line.startswith(_NOTE_HEAD) and line.endswith(_NOTE_TAIL) and len(line) < 256


@dataclass(frozen=True, slots=True)
class ArchivedLine:
    seq: int  # the line's number: its line in the file, 1-based
    ts: float | None  # the daemon's timestamp, as the store keeps it
    text: str  # terminal-safe (``clean_line``); only the head of a very long line
    more: int = 0  # bytes of the line past ``text`` (a line longer than LINE_CAP)


class LogArchive:
    SPAN = 1 << 16  # bytes between index entries: a read skips at most this much to its first line
    BLOCK = 1 << 20  # bytes read at a time while indexing
    READ = 1 << 18  # ... and while reading lines
    LINE_CAP = 1 << 14  # bytes of one line kept (the view renders the first few thousand characters)

    def __init__(self, path: Path | str, span: int = SPAN) -> None:
        self.path = Path(path)
        self.span = span
        self._lock = threading.Lock()  # one reader at a time: workers may overlap
        self._reset()

    def _reset(self) -> None:
        self._offsets = array("q", [0])  # entry i: a line starts at this byte offset ...
        self._before = array("q", [0])  # ... and this many lines come before it
        self.count = 0  # whole log lines indexed (the cap note not counted)
        self._end = 0  # byte offset just past the last whole line indexed
        self._last_start = 0  # byte offset of the last whole line (where a cap note would be)
        self.capped = False  # the file ends with the cap note: nothing after it is kept
        self.error: str | None = None
        self._ident: tuple[int, int] | None = None

    @property
    def entries(self) -> int:
        """Index entries held (the index's memory is 16 bytes an entry)."""
        return len(self._offsets)

    # ------------------------------------------------------------------ index
    def refresh(self) -> int:
        """Index what was appended since the last call; the number of log lines now known."""
        with self._lock:
            try:
                with open(self.path, "rb") as fh:
                    st = os.fstat(fh.fileno())
                    if self._ident not in (None, (st.st_dev, st.st_ino)) or st.st_size < self._end:
                        self._reset()  # another file under the name, or cut short: start over
                    self._ident = (st.st_dev, st.st_ino)
                    if not self.capped:
                        self._extend(fh)
                    self.error = None
            except OSError as exc:
                self.error = _why(exc)
            return self.count

    def _extend(self, fh) -> None:
        fh.seek(self._end)
        base = self._end
        lines = self.count  # newlines before ``base`` (a capped file is never extended)
        while True:
            data = fh.read(self.BLOCK)
            if not data:
                break
            last_nl = data.rfind(b"\n")
            if last_nl < 0:  # inside a line longer than a block: nothing whole in this one
                base += len(data)
                continue
            i = 0
            while True:  # the entries that fall in this block
                at = max(self._offsets[-1] + self.span - 1 - base, i)  # a line starting >= the next mark
                nl = data.find(b"\n", at, last_nl + 1) if at <= last_nl else -1
                if nl < 0:
                    break
                lines += data.count(b"\n", i, nl + 1)
                i = nl + 1
                self._offsets.append(base + i)
                self._before.append(lines)
            lines += data.count(b"\n", i, last_nl + 1)
            prev = data.rfind(b"\n", 0, last_nl)
            # the last whole line starts after the newline before it, or where the unfinished line began
            self._last_start = base + prev + 1 if prev >= 0 else self._end
            base += last_nl + 1
            self._end = base
            fh.seek(base)  # the unfinished rest is read again with what follows it
        self.count = lines
        if lines and self._end - self._last_start < 256:
            fh.seek(self._last_start)
            if is_cap_note(fh.read(self._end - self._last_start)):
                self.capped = True
                self.count = lines - 1

    # ------------------------------------------------------------------ read
    def read(self, first: int, last: int) -> list[ArchivedLine]:
        """Lines ``first``..``last`` (1-based, inclusive) among those indexed; fewer when the file
        has fewer, none when it cannot be read (``error`` says why)."""
        with self._lock:
            last = min(last, self.count)
            first = max(first, 1)
            if first > last:
                return []
            k = bisect_right(self._before, first - 1) - 1
            try:
                with open(self.path, "rb") as fh:
                    fh.seek(self._offsets[k])
                    return self._collect(fh, self._before[k], first, last)
            except OSError as exc:
                self.error = _why(exc)
                return []

    def _collect(self, fh, done: int, first: int, last: int) -> list[ArchivedLine]:
        """Read on from the start of line ``done + 1``: skip to ``first``, keep up to ``last``."""
        out: list[ArchivedLine] = []
        head = bytearray()
        more = 0
        cap = self.LINE_CAP
        while done < last:
            data = fh.read(self.READ)
            if not data:  # shorter than indexed (cut under us): what there is
                break
            i, n = 0, len(data)
            while done < first - 1 and i < n:  # skipping: whole lines, no bytes kept
                nl = data.find(b"\n", i)
                if nl < 0:
                    i = n
                    break
                done += 1
                i = nl + 1
            while done < last and i < n:
                nl = data.find(b"\n", i)
                end = nl if nl >= 0 else n
                room = cap - len(head)
                if room > 0:
                    head += data[i:min(end, i + room)]
                more += max(0, end - i - max(room, 0))
                if nl < 0:
                    break
                done += 1
                out.append(_parse(done, bytes(head), more))
                head.clear()
                more = 0
                i = nl + 1
        return out


def _parse(seq: int, raw: bytes, more: int) -> ArchivedLine:
    raw_ts, text = split_ts(raw.decode("utf-8", "replace"))
    ns = docker_ns(raw_ts) if raw_ts is not None else None
    return ArchivedLine(seq, ns / 1e9 if ns is not None else None, clean_line(text), more)


def _why(exc: OSError) -> str:
    return f"{exc.strerror or exc.__class__.__name__}: {exc.filename or ''}".rstrip(": ")
