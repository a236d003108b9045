"""A log as users paste it: the shapes a whole file takes that no line prefix explains.

Read off a file's first chunk (offline: `sparktui diagnose`), then applied to every chunk, line for
line so the classifier's numbers stay the file's (the one exception, a hard-wrapped paste, feeds
each joined line under the number of its first piece):
  docker's json-file records       ``{"log": "...\\n", "stream": "stderr", "time": ...}``
  colour codes that lost their ESC ``[31mERROR[0m``, ``ESC[31m``
  a notebook's tracebacks          IPython's layout, written as CPython writes it
  a margin on every line           a quote's "> ", a forum post's indent (lineprefix.paste_margin)
  a stamp on every line            a time of day, one tag word, line numbers counting up
  a terminal's hard wrap           lines broken at its width, joined back
  a table's wrapped last column    Triton's model table, its status text on rows of blank cells
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Callable

from . import lineprefix


class Paste:
    """The shapes of one file, read off its first chunk (``read``); ``feed`` passes every chunk,
    unshaped, to the scanner's ``feed(lines, first_lineno=None)``."""

    def __init__(self, feed: Callable[..., object]) -> None:
        self._feed = feed
        self._read = False
        self.json = self.colour = self.ipython = False
        self.margin = ""
        self.stamp: re.Pattern[str] | None = None
        self.wrap: int | None = None
        self.cells = False
        self._held: tuple[int, str] | None = None
        self._lines = 0  # the file's lines read so far

    def _shape(self, chunk: list[str]) -> list[str]:
        """The chunk without the shapes read: line for line."""
        if self.json:
            chunk = from_docker_json(chunk)
        if self.colour:
            chunk = strip_visible_colour(chunk)
        if self.ipython:
            chunk = from_ipython(chunk)
        return strip_prefix(lineprefix.strip_margin(chunk, self.margin), self.stamp)

    def _read_shapes(self, chunk: list[str]) -> list[str]:
        # each reading on the chunk as the ones before it leave it
        self.json = docker_json(chunk)
        first = from_docker_json(chunk) if self.json else chunk
        self.colour = visible_colour(first)
        if self.colour:
            first = strip_visible_colour(first)
        self.ipython = ipython_tracebacks(first)
        if self.ipython:
            first = from_ipython(first)
        self.margin = lineprefix.paste_margin(first)
        first = lineprefix.strip_margin(first, self.margin)
        self.stamp = paste_prefix(first)
        first = strip_prefix(first, self.stamp)
        self.wrap = hard_wrap_width(first)
        self.cells = table_cells(first)
        self._read = True
        return first

    def feed(self, chunk: list[str]) -> None:
        lines = self._read_shapes(chunk) if not self._read else self._shape(chunk)
        if self.wrap or self.cells:
            # joined lines keep the number of their first piece in the file
            if self.wrap:
                numbered, self._held = unwrap(lines, self.wrap, self._lines + 1, self._held)
            else:
                numbered = list(enumerate(lines, self._lines + 1))
            if self.cells:
                numbered = join_cells(numbered)
            for n, run in runs(numbered):
                self._feed(run, first_lineno=n)
        else:
            self._feed(lines)
        self._lines += len(chunk)

    def close(self) -> None:
        """End of the file: a piece a hard wrap left over."""
        if self._held is not None:
            self._feed([self._held[1]], first_lineno=self._held[0])
            self._held = None

_DOCKER_JSON = re.compile(r'^\{\s*"log"\s*:\s*"')


def docker_json(lines: list[str]) -> bool:
    """Whether a file is docker's json-file log (``/var/lib/docker/containers/<id>/<id>-json.log``),
    one ``{"log": "...\\n", "stream": ..., "time": ...}`` object per line: most non-blank lines
    of its first chunk are such objects.  Offline only, on the first chunk of a file."""
    body = [ln for ln in lines[:200] if ln.strip()]
    return len(body) >= 1 and sum(1 for ln in body if _DOCKER_JSON.match(ln)) * 10 >= len(body) * 8


def from_docker_json(lines: list[str]) -> list[str]:
    """Each object's ``log`` text (its newline dropped); a line that is not such an object stays."""
    out = []
    for ln in lines:
        if _DOCKER_JSON.match(ln):
            try:
                rec = json.loads(ln)
            except ValueError:
                out.append(ln)
                continue
            text = rec.get("log") if isinstance(rec, dict) else None
            if isinstance(text, str):
                out.append(text[:-1] if text.endswith("\n") else text)
                continue
        out.append(ln)
    return out


# a launcher's or a terminal multiplexer's own stamp before every line that no known format names:
# a time of day ("19:11:29 ", "[19:11:29.120] "), the same short tag on every line ("[worker]: ",
# "node-a> "), or line numbers counting up (`cat -n`'s "     12\t", an editor's "12: ").  Read off
# a whole paste like its margin: only where nearly every line carries it.
_TIME_OF_DAY = re.compile(r"^\[?\d\d:\d\d:\d\d(?:[.,]\d{1,9})?\]? ")
_BULLET = re.compile(r"^[*+-] (?=\S)")  # a paste turned into a markdown list, one bullet a line
_TAG_END = re.compile(r"(?:\]:? |: | \| |> )")
_PREFIX_SHARE = 0.9
_LINE_NUMBER = re.compile(r"^\s{0,8}(\d{1,7})(?:\t| \| |: | {2})")


def paste_prefix(lines: list[str]) -> re.Pattern[str] | None:
    """A stamp every line of a paste starts with that the known prefixes do not read (``_PREFIX``),
    as a pattern to strip, or None.  Offline only, on the first chunk of a file (after its margin)."""
    body = [ln for ln in lines[:400] if ln.strip()]
    if len(body) == 1 and body[0].lstrip().startswith("1\t"):
        return _LINE_NUMBER  # `cat -n` of a one-line file
    if len(body) < 2:
        return None
    numbers = [int(m.group(1)) for m in map(_LINE_NUMBER.match, body) if m is not None]
    if len(numbers) >= max(2, int(len(body) * _PREFIX_SHARE + 0.999)):
        # line numbers count up by one (a few blank lines dropped may skip some): `cat -n`, `nl`, an editor
        if sum(1 for a, b in zip(numbers, numbers[1:]) if 0 < b - a <= 3) >= (len(numbers) - 1) * 0.9:
            return _LINE_NUMBER
    if len(body) < 3:
        return None
    need = max(3, int(len(body) * _PREFIX_SHARE + 0.999))
    cands: list[re.Pattern[str]] = [_TIME_OF_DAY, _BULLET]
    head = body[0]
    for m in _TAG_END.finditer(head[:48]):
        tag = head[:m.end()]
        # a stamp is one word ("[worker]: ", "node-a> "), never a phrase a program repeats
        # ("Loading safetensors checkpoint shards: ")
        if tag.strip() and not any(c.isspace() for c in head[:m.start()]):
            cands.append(re.compile(re.escape(tag)))
    for rx in cands:
        if sum(1 for ln in body if rx.match(ln)) < need:
            continue
        sample = next(ln for ln in body if rx.match(ln))
        if rx.match(lineprefix.split(lineprefix.clean(sample))[1]) is None:
            continue  # a known prefix reads it (a compose service, a pdsh host): it stays theirs
        return rx
    return None


def strip_prefix(lines: list[str], rx: re.Pattern[str] | None) -> list[str]:
    if rx is None:
        return lines
    out = []
    for ln in lines:
        m = rx.match(ln)
        out.append(ln[m.end():] if m else ln)
    return out


# terminal colour codes whose ESC byte a copy lost or spelled out: "ESC[33m", "^[[33m", "\\x1b[33m",
# or bare "[33m ... [0m" (a browser or an issue form drops the control byte and keeps the rest)
_SGR_SPELLED = re.compile(r"(?:ESC|\^\[|\\x1[bB]|\\033|\\u001[bB]|\\e)\[[0-9;]{0,20}m")
_SGR_BARE = re.compile(r"(?<!\x1b)\[(?:[0-9]{1,3}(?:;[0-9]{1,3}){0,6})?m")  # (a real escape is clean()'s)
_SGR_RESET = ("[0m", "[m")


def visible_colour(lines: list[str]) -> bool:
    """Whether a paste carries colour codes as text (their ESC lost): a spelled-out ESC, or a bare
    code on a line that also has the reset every coloured span ends with.  Offline, per file."""
    for ln in lines[:2000]:
        if "[" not in ln:
            continue
        if _SGR_SPELLED.search(ln) or (any(r in ln for r in _SGR_RESET) and len(_SGR_BARE.findall(ln)) >= 2):
            return True
    return False


def strip_visible_colour(lines: list[str]) -> list[str]:
    out = []
    for ln in lines:
        if "[" in ln and "m" in ln:
            ln = _SGR_SPELLED.sub("", ln)
            if any(r in ln for r in _SGR_RESET):
                ln = _SGR_BARE.sub("", ln)
        out.append(ln)
    return out


# a terminal's copy that broke long lines at its width: several lines exactly as long as the longest,
# each followed by a line that starts like no other (a word's tail, not the next record)
_WRAP_MIN = 60
_WRAP_MAX = 320  # a terminal's width (a single long line wider than this is the program's own)
_GOES_ON = "),.;:]}'\"=_"
# what starts a record of its own whatever the paste: a level word, an exception, a traceback's head,
# a date, a bracketed stamp or tag
_RECORD_HEAD = re.compile(r"(?:INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL|FATAL|Traceback)\b|[A-Z]\w*(?:Error|Exception|Warning)\b"
                          r"|\d{4}-\d\d-\d\d|\[")


# a program's own record about a file it ran or read, the path before a colon ("exec /bin/sh: ...",
# "/usr/bin/python3: error while loading ..."); a bare "word: " can be a piece broken mid-word
_PROGRAM_SAYS = re.compile(r"(?:[a-z][\w.-]{0,40} )?/[\w./-]{1,160}: \S")


def _start_shape(line: str) -> str:
    return "".join("0" if c.isdigit() else "a" if c.islower() else "A" if c.isupper() else c for c in line[:4])


def hard_wrap_width(lines: list[str]) -> int | None:
    """The width a paste was hard-wrapped at, or None.  Offline only, on the first chunk of a file:
    lines exactly as long as the longest (at least ``_WRAP_MIN``), followed by a piece that no record
    of the paste starts like.  At least 3 such lines (and 3 %), 60 % of them followed by a line whose
    start is unlike the other lines', unlike any record's start (the lines after a shorter line), or
    by a shorter line that starts unlike them (a table's rows, all as long, are followed by rows as
    long that start alike); or one or two such lines in a short paste, each broken inside a word or
    after a space and followed by a piece unlike any record's start."""
    lines = [ln[:-1] if ln.endswith("\r") else ln for ln in lines]  # a CRLF line end is no column
    body = [ln for ln in lines if ln.strip()]
    if len(body) < 2:
        return None
    width = max(len(ln) for ln in body)
    if width < _WRAP_MIN:
        return None
    at = [k for k, ln in enumerate(lines) if len(ln) == width]
    shapes = Counter(_start_shape(ln) for ln in body)
    # how this paste's records start: its first line, and each line after a shorter one
    starts = {_start_shape(body[0])} | {_start_shape(lines[k + 1]) for k in range(len(lines) - 1)
                                        if len(lines[k]) < width and lines[k + 1].strip()}

    def after(k: int) -> str:
        return lines[k + 1] if k + 1 < len(lines) else ""

    def piece(k: int) -> bool:
        """The line after ``k`` is no record of its own: it goes on a word or a clause (not a table's
        rule or row, not indented, not blank), unlike every start, and starts no record by its look."""
        nxt = after(k)
        return (nxt[:1].isalnum() or nxt[:1] in _GOES_ON) and _start_shape(nxt) not in starts \
            and _RECORD_HEAD.match(nxt) is None

    def broken(k: int) -> bool:
        """Line ``k`` broken inside a word ("OpTy" / "pe=BROADCAST": it goes on in lowercase or digits)
        or after a space, as a terminal breaks at its width and a program never ends a record."""
        nxt = after(k)[:1]
        return piece(k) and (lines[k][-1] == " " or (lines[k][-1].isalnum() and (nxt.islower() or nxt.isdigit())))

    if len(at) <= 2:  # a short paste's one or two long lines: each must be broken
        # (and not before a program's own record: "exec /bin/sh: exec format error" after a long
        # warning is a line of its own; a piece broken mid-word rarely reads "name /path: ...")
        return width if len(body) <= 40 and width <= _WRAP_MAX and all(
            broken(k) and _PROGRAM_SAYS.match(after(k)) is None for k in at) else None
    if len(at) < 0.03 * len(body):
        return None

    def continued(k: int) -> bool:
        if k + 1 >= len(lines) or not lines[k + 1].strip():
            return False
        nxt = _start_shape(lines[k + 1])
        # a start no other line has or no record has, or a shorter line that starts unlike this one (a
        # stack's frames wrapped: every piece starts lowercase, as half the lines do); a table's rows,
        # all as long, are followed by rows as long
        return shapes[nxt] <= 2 or piece(k) or (len(lines[k + 1]) < width and lines[k + 1][:4] != lines[k][:4])

    cont = sum(1 for k in at if continued(k))
    return width if cont >= 0.6 * len(at) else None


def unwrap(lines: list[str], width: int, first: int,
           held: tuple[int, str] | None = None) -> tuple[list[tuple[int, str]], tuple[int, str] | None]:
    """(file line number, text) of each line with its pieces of ``width`` characters joined to the
    one after: a joined line keeps the number of its first piece, so findings point at the file.
    ``first`` is the number of ``lines[0]``; ``held`` a piece left over from the previous chunk,
    and the one this chunk ends with is handed back."""
    out: list[tuple[int, str]] = []
    for k, ln in enumerate(lines):
        n = first + k
        if ln.endswith("\r"):
            ln = ln[:-1]  # CRLF: inside a joined line a CR would read as a progress bar's redraw
        if held is not None:
            (n, ln), held = (held[0], held[1] + ln), None
        if ln and len(ln) % width == 0:
            held = (n, ln)
            continue
        out.append((n, ln))
    return out, held


# a table that wraps a long cell of its last column onto the next rows, every other cell blank (Triton's
# model-status table: "| tensorrt_llm | 1 | UNAVAILABLE: ... [TensorRT-LLM][ERRO |", then "|   |   | R]
# Assertion failed: ... |"): the text is left-aligned (one space after the bar); a right-aligned value
# under blank cells (nvidia-smi's "|        |        |     N/A |") is a row of its own
_CELL_ROW = re.compile(r"^\|(?:\s*\|)+ (?P<text>\S.*?)(?P<end>\s+\||\s*)$")


def _cell_piece(prev: str, line: str) -> re.Match[str] | None:
    """The text ``line`` carries on from the last cell of ``prev`` (a row ending in a bar), or None.
    Both are read behind a log prefix (a compose service, a timestamp) when they have one."""
    if line[:1] != "|" and "| |" not in line and "|  " not in line:  # cheap gate: no bar that can open a cell
        return None
    body = line if line[:1] == "|" else lineprefix.split(lineprefix.clean(line))[1]
    m = _CELL_ROW.match(body) if body[:1] == "|" else None
    if m is None or not prev.rstrip().endswith("|"):
        return None
    head = prev if prev[:1] in "|+" else lineprefix.split(lineprefix.clean(prev))[1]
    return None if head.lstrip()[:2] in ("+-", "+=") else m


def table_cells(lines: list[str]) -> bool:
    """Whether a paste holds a table whose last column wraps onto rows of blank cells."""
    return any(_cell_piece(a, b) is not None for a, b in zip(lines, lines[1:]) if "|" in b)


def join_cells(numbered: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """Each wrapped cell's pieces joined to the row it started on (under that row's number).  A piece
    that filled its cell (one space before the bar) was cut at the column's width, mid-word: joined
    as it is; a shorter one ended a word: joined with a space."""
    out: list[tuple[int, str]] = []
    for n, ln in numbered:
        piece = _cell_piece(out[-1][1], ln) if out else None
        if piece is None:
            out.append((n, ln))
            continue
        n0, prev = out[-1]
        head = prev.rstrip()[:-1]  # the row without its closing bar
        filled = head.endswith(" ") and not head.endswith("  ")
        out[-1] = (n0, head.rstrip() + ("" if filled else " ") + piece.group("text") + piece.group("end"))
    return out


def runs(numbered: list[tuple[int, str]]) -> list[tuple[int, list[str]]]:
    """(first line number, lines) of each run of consecutively numbered lines."""
    out: list[tuple[int, list[str]]] = []
    for n, ln in numbered:
        if out and out[-1][0] + len(out[-1][1]) == n:
            out[-1][1].append(ln)
        else:
            out.append((n, [ln]))
    return out


# IPython's (a notebook's, Colab's) traceback: a rule, "<Class>   Traceback (most recent call last)",
# frames as "File <path>:<n>, in <f>()" with numbered source lines ("----> 5     init()", "      4 x")
_IPY_HEAD = re.compile(r"^(?P<cls>[A-Za-z_][\w.]*)\s{2,}Traceback \(most recent call last\)\s*$")
_IPY_FRAME = re.compile(r"^(?:File |Cell )(?P<path>.+?)(?::|, line )(?P<n>\d+)(?:, in (?P<fn>[^\s(]+)\(.*\))?\s*$")
_IPY_CODE = re.compile(r"^(?P<arrow>-*> )?\s*\d+ (?P<code>.*)$")
_IPY_RULE = re.compile(r"^-{20,}\s*$")


def ipython_tracebacks(lines: list[str]) -> bool:
    """Whether a file holds IPython's tracebacks (its first chunk has one's head).  Offline only."""
    return any("Traceback (most recent call last)" in ln and _IPY_HEAD.match(ln) for ln in lines)


def from_ipython(lines: list[str]) -> list[str]:
    """IPython's tracebacks written as CPython writes them, line for line (numbers stay): the head
    as "Traceback (most recent call last):", each frame as '  File "<path>", line <n>, in <f>', the
    line it ran ("---->") as its indented source line, the context lines and the rule blank."""
    out: list[str] = []
    inside = False
    for ln in lines:
        if _IPY_HEAD.match(ln):
            if out and _IPY_RULE.match(out[-1]):
                out[-1] = ""
            out.append("Traceback (most recent call last):")
            inside = True
            continue
        if inside:
            f = _IPY_FRAME.match(ln)
            if f is not None:
                out.append(f'  File "{f["path"]}", line {f["n"]}, in {f["fn"] or "<module>"}')
                continue
            c = _IPY_CODE.match(ln)
            if c is not None and (c["arrow"] or ln[:1] == " "):
                out.append("    " + c["code"].strip() if c["arrow"] else "")
                continue
            if not ln.strip():
                out.append("")
                continue
            inside = False  # the exception line: CPython's own from here
        out.append(ln)
    return out
