"""`sparktui diagnose FILE... [--json]`: offline analysis of log files.

``-`` reads stdin; ``.gz`` files are decompressed transparently.  Exit codes (README "Commands"): 0 no
error finding, 1 error findings, 2 unreadable input (one line on stderr, nothing else printed).
"""

from __future__ import annotations

import gzip
import io
import os
import re
import sys
import zlib
from typing import IO, Iterator

from ..units import human_bytes

CHUNK_LINES = 20_000
BLOCK = 1 << 20  # bytes read at a time
LINE_HEAD = LINE_TAIL = 16 << 10  # what a cut line keeps of its start and of its end
LINE_CAP = LINE_HEAD + LINE_TAIL  # longer lines are cut (a 50 MB line is one line, not 50 MB of memory)
MAX_INPUT_BYTES = 16 << 30  # per input, decompressed: /dev/zero and a gzip bomb end, with a note
# A compressed input yields at most this many lines per compressed byte read (past a floor): a real
# log gives well under one (a 7 MB NCCL debug log: 0.44 at 17x), a gzipped run of newlines ~1000,
# and every line costs ~0.1 µs however empty: a small such file was ~36 s of CPU. Cut, with a note.
GZ_LINES_PER_BYTE = 4
GZ_LINES_FLOOR = 2_000_000


class InputError(Exception):
    pass


class _Counted:
    """A compressed stream's bytes as read by the decompressor, counted: the lines its output may
    give are bounded by them (``_chunks``)."""

    def __init__(self, fh: IO[bytes]) -> None:
        self.fh, self.n = fh, 0

    def read(self, size: int = -1) -> bytes:
        data = self.fh.read(size)
        self.n += len(data)
        return data

    def close(self) -> None:
        self.fh.close()


class _Gunzip(gzip.GzipFile):
    """The decompressed input, with the count of compressed bytes read behind it."""

    def __init__(self, raw: IO[bytes]) -> None:
        self.compressed = _Counted(raw)
        super().__init__(fileobj=self.compressed)  # type: ignore[arg-type]


def _open(path: str) -> tuple[IO[bytes], str]:
    if path == "-":
        fh: IO[bytes] = sys.stdin.buffer
        name = "<stdin>"
    else:
        if os.path.isdir(path):
            raise InputError(f"sparktui diagnose: cannot read {path}: is a directory")
        try:
            fh = open(path, "rb")
        except OSError as exc:
            raise InputError(f"sparktui diagnose: cannot read {path}: {exc.strerror or exc}") from None
        name = path
    if not hasattr(fh, "peek"):
        fh = io.BufferedReader(fh)  # type: ignore[arg-type]
    try:
        head = fh.peek(2)[:2]  # type: ignore[attr-defined]
    except OSError as exc:
        raise InputError(f"sparktui diagnose: cannot read {name}: {exc.strerror or exc}") from None
    if path.endswith(".gz") or head == b"\x1f\x8b":
        return _Gunzip(fh), name  # type: ignore[arg-type]
    return fh, name


def _chunks(fh: IO[bytes], path: str, max_bytes: int = MAX_INPUT_BYTES,
            notes: list[str] | None = None) -> Iterator[list[str]]:
    """Lines (one per "\n"; "\r" stays part of a line) in lists of up to CHUNK_LINES, read in blocks
    so memory stays bounded whatever the input: a line longer than LINE_CAP keeps its head and tail
    (the classifier sees both) with the cut said in the middle; reading stops after ``max_bytes``
    (decompressed), with a note.  Blocks are decoded whole: a newline never sits inside a UTF-8
    sequence, so splitting after decoding is exact and much cheaper than a line iterator."""
    buf: list[str] = []
    head = b""  # the start of a line still open at the end of a block
    tail = bytearray()  # ... and its last bytes, once it has outgrown LINE_CAP
    cut = 0  # bytes dropped from the middle of that line
    total = 0
    lines = 0  # whole lines taken so far
    compressed = getattr(fh, "compressed", None)
    try:
        while True:
            block = fh.read(BLOCK)
            if not block:
                break
            total += len(block)
            if compressed is not None:
                lines += block.count(b"\n")
            nl = block.rfind(b"\n")
            if nl < 0:  # the open line goes on
                head, tail, cut = _grow(head, tail, cut, block)
            else:
                first = block.find(b"\n")
                head, tail, cut = _grow(head, tail, cut, block[:first])
                _add(buf, _close(head, tail, cut))
                head, tail, cut = b"", bytearray(), 0
                if nl > first:
                    _add_block(buf, block[first + 1:nl].decode("utf-8", "replace"))
                head, tail, cut = _grow(head, tail, cut, block[nl + 1:])
            if len(buf) >= CHUNK_LINES:
                yield buf
                buf = []
            if total >= max_bytes:
                if notes is not None:
                    notes.append(f"sparktui diagnose: {path}: stopped after {human_bytes(total)} (--max-bytes); "
                                 "the findings cover what was read")
                break
            if compressed is not None and lines > max(GZ_LINES_FLOOR, GZ_LINES_PER_BYTE * compressed.n):
                if notes is not None:
                    notes.append(f"sparktui diagnose: {path}: stopped after {lines:,} lines from "
                                 f"{human_bytes(compressed.n)} compressed (a decompression bomb?); "
                                 "the findings cover what was read")
                break
    except (OSError, EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise InputError(f"sparktui diagnose: cannot read {path}: {exc}") from None
    if head or tail:
        _add(buf, _close(head, tail, cut))
    if buf:
        yield buf


_CR_PART = re.compile(r"[^\r]*\r|[^\r]+")


def _add_block(buf: list[str], text: str) -> None:
    """The whole lines of a decoded block, each as ``_add`` would take it, with as little per-line
    Python as the block allows (none when no line holds a "\r" or is long enough to be cut)."""
    lines = text.split("\n")
    if max(map(len, lines)) > LINE_CAP:  # rare: cut first, then split at "\r", line by line
        for line in lines:
            _add(buf, line if len(line) <= LINE_CAP else _cut_str(line))
    elif "\r" in text:  # _add inlined: a call per line would cost more than the rest together
        append, extend, parts = buf.append, buf.extend, _CR_PART.findall
        for line in lines:
            if "\r" in line:
                extend(parts(line) or [line])
            else:
                append(line)
    else:
        buf.extend(lines)


def _add(buf: list[str], line: str) -> None:
    """A lone "\r" ends a line too (a progress bar's redraws are lines of their own, as they always
    were here: findings and their line numbers stay what they were); "\r\n" ends one line."""
    if "\r" not in line:
        buf.append(line)
    else:
        buf.extend(_CR_PART.findall(line) or [line])


def _grow(head: bytes, tail: bytearray, cut: int, more: bytes) -> tuple[bytes, bytearray, int]:
    """Add ``more`` to an open line, keeping at most LINE_HEAD + LINE_TAIL bytes of it."""
    if not tail and len(head) + len(more) <= LINE_CAP:
        return head + more, tail, cut
    if not tail:  # the line outgrows the cap now: keep its head, the rest goes to the rolling tail
        whole = head + more
        head, rest = whole[:LINE_HEAD], whole[LINE_HEAD:]
        tail = bytearray(rest[-LINE_TAIL:])
        return head, tail, cut + len(rest) - len(tail)
    tail += more
    over = len(tail) - LINE_TAIL
    if over > 0:
        del tail[:over]
        cut += over
    return head, tail, cut


def _close(head: bytes, tail: bytearray, cut: int) -> str:
    if not tail:
        return head.decode("utf-8", "replace")
    return (f"{head.decode('utf-8', 'replace')} … [{human_bytes(cut)} cut from this line] … "
            f"{bytes(tail).decode('utf-8', 'replace')}")


def _cut_str(line: str) -> str:
    return f"{line[:LINE_HEAD]} … [{len(line) - LINE_HEAD - LINE_TAIL} characters cut from this line] … " \
           f"{line[-LINE_TAIL:]}"


def expand_dirs(paths: list[str]) -> list[str]:
    """A folder stands for every log file under it (as ``investigate --offline`` reads one): plain or
    gzip text that is no dump or capture, by name order.  Links are not followed out of it."""
    from ..diagnosis.plain_dir import sniff

    out: list[str] = []
    for path in paths:
        if path == "-" or not os.path.isdir(path):
            out.append(path)
            continue
        found: list[str] = []
        for top, dirs, files in os.walk(path):
            dirs[:] = sorted(d for d in dirs if not os.path.islink(os.path.join(top, d)))
            for f in sorted(files):
                full = os.path.join(top, f)
                if os.path.islink(full) or not os.path.isfile(full):
                    continue
                try:
                    with open(full, "rb") as fh:
                        head = fh.read(4096)
                except OSError:
                    continue
                if head[:2] == b"\x1f\x8b" or sniff(f, head) == "log":
                    found.append(full)
        if not found:
            raise InputError(f"sparktui diagnose: {path}: no log file in this folder")
        out.extend(found)
    return out


def analyse(paths: list[str], max_bytes: int = MAX_INPUT_BYTES, notes: list[str] | None = None):
    """Run the Diagnoser over the files; returns it (finished).  ``notes``: inputs cut at max_bytes."""
    from ..diagnosis import Diagnoser
    from ..diagnosis.paste import Paste

    dg = Diagnoser()
    seen: dict[str, int] = {}
    for path in paths:
        fh, name = _open(path)
        # the same name twice (e.g. "-" and a file named like it) keeps separate sources
        seen[name] = seen.get(name, 0) + 1
        key = name if seen[name] == 1 else f"{name}#{seen[name]}"
        sc = dg.scanner(key)
        paste = Paste(sc.feed)  # the shapes of a paste, read off its first chunk (diagnosis/paste.py)
        try:
            for chunk in _chunks(fh, name, max_bytes, notes):
                paste.feed(chunk)
            paste.close()
        finally:
            if path != "-":
                fh.close()
    dg.finish()
    return dg


def to_json(dg) -> dict:
    return {
        "findings": [f.to_json() for f in dg.findings],
        "milestones": [
            {"id": m.id, "line": m.line, "text": m.text, "source": m.source} for m in dg.milestones()
        ],
        "summary": dg.summary(),
    }


_COLOURS = {"error": "\x1b[1;31m", "warning": "\x1b[33m", "info": "\x1b[36m"}


def render_text(dg, colour: bool) -> str:
    from ..logs.redact import redact
    from ..logs.sanitize import safe

    def clean_line(text) -> str:  # file text and names are data: no escapes, no secrets
        return redact(safe(text))

    def c(sev: str, s: str) -> str:
        return f"{_COLOURS.get(sev, '')}{s}\x1b[0m" if colour else s

    out: list[str] = []
    fs = dg.findings
    summ = dg.summary()
    counts = summ["counts"]
    out.append(
        f"{len(summ['files'])} file(s), {summ['lines']} lines: "
        f"{counts['error']} error(s), {counts['warning']} warning(s), {counts['info']} info"
    )
    for f in fs:
        out.append("")
        where = clean_line(f"{f.source}:{f.line}" if f.line else f.source)
        out.append(c(f.severity, f"{f.severity.upper():7} {clean_line(f.title)}") + f"  [{f.id}]  {where}")
        for ev in f.evidence[:6]:
            out.append(f"    | {clean_line(ev)}")
        out.append(f"    fix: {clean_line(f.advice)}")
    ms = dg.milestones()
    if ms:
        out.append("")
        out.append("milestones:")
        for m in ms:
            out.append(f"    {clean_line(m.source)}:{m.line or '-'}  {clean_line(m.text)}")
    if summ["nccl"]:
        out.append("")
        out.append("NCCL ranks:")
        for r in summ["nccl"]:
            inits = ", ".join(f"{cm['comm_id'] or cm['comm']} {cm['init']}" for cm in r["comms"]) or "no comm"
            out.append(clean_line(f"    rank {r['rank'] if r['rank'] is not None else '?'} ({r['source']}): "
                                  f"NCCL {r['version'] or '?'}, {r['transport'] or 'transport ?'}, {inits}"))
            if r["last_nccl_line"]:
                out.append(f"        last NCCL line {r['last_nccl_line_no']}: {clean_line(r['last_nccl_line'])[:160]}")
    for m in summ.get("mismatches", []):
        a, b2 = m["a"], m["b"]
        def side(o: dict) -> str:
            n = f" {o['numel_in']} elements" if o.get("numel_in") is not None else ""
            return f"rank {o['rank']} {o['op']}{n} ({o['source']})"

        out.append(c("error", clean_line(f"mismatch at SeqNum {m['seq']} ({m['what']}): {side(a)} vs {side(b2)}")))
    for b in summ["behind"]:
        out.append(c("error", clean_line(f"behind: rank {b['rank']} ({b['source']}): {b['reason']}")))
    return "\n".join(out)


def run(args) -> int:
    from ..logs.sanitize import safe

    notes: list[str] = []
    try:
        dg = analyse(expand_dirs(list(args.files)), getattr(args, "max_bytes", None) or MAX_INPUT_BYTES, notes)
    except InputError as exc:
        print(safe(exc), file=sys.stderr)  # a file name is the user's text: its escapes stay inert
        return 2
    except MemoryError:  # under a memory limit: one line, never a traceback
        print("sparktui diagnose: out of memory (try fewer or smaller inputs, or --max-bytes)", file=sys.stderr)
        return 2
    for note in notes:
        print(safe(note), file=sys.stderr)
    has_error = any(f.severity == "error" for f in dg.findings)
    try:
        if getattr(args, "json", False):
            from ..logs.redact import redact_obj
            from ..logs.sanitize import json_dumps

            # controls only as JSON escapes (a raw U+009B is a CSI), secrets masked
            sys.stdout.write(json_dumps(redact_obj(to_json(dg))) + "\n")
        else:
            from ..colour import use_colour

            print(render_text(dg, colour=use_colour(sys.stdout)))
        sys.stdout.flush()
    except BrokenPipeError:  # `sparktui diagnose x | head`: the reader left, not an error of ours
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return 1 if has_error else 0
