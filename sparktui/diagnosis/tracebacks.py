"""Follow one Python traceback (with chained exceptions and appended C++ ``frame #N`` blocks) line
by line, so the classifier raises ONE finding per traceback, anchored on its final exception line.

A ``TracebackTracker`` is fed the lines after ``Traceback (most recent call last):`` one at a time
(already cleaned, split into prefix signature and body by ``lineprefix``).  ``step`` answers:
  OWN      the line belongs to the traceback;
  FOREIGN  the line comes from another process interleaved in the stream (other prefix): classify it
           on its own, the traceback continues;
  END      the traceback ended BEFORE this line: finish it, then classify this line normally.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from . import lineprefix
from .exc_shapes import parse as parse_exception

OWN, FOREIGN, END = 0, 1, 2

TB_START = "Traceback (most recent call last)"
CHAIN = (
    "During handling of the above exception, another exception occurred",
    "The above exception was the direct cause of the following exception",
)
# A line that starts a new log record, so it cannot continue an exception message.
_NEW_RECORD = re.compile(
    r"(?:\[?\d{4}-\d\d-\d\d[ T]\d\d:\d\d"  # ISO timestamps
    r"|\[?[IWEF]\d{4} \d\d:\d\d"  # glog / c10 "[W1129 19:15:10.8 ..."
    r"|\[[IWEF]\d{4} "
    r"|[^\s:]+:\d+:\d+ (?:\[\d+\] )?NCCL "  # NCCL envelope
    r"|(?:INFO|WARNING|ERROR|DEBUG|CRITICAL)[: ]"
    r"|\[rank\d+\]:"
    r"|### "
    r"|Traceback \(most recent call last\)"
    r"|terminate called after throwing"
    r"|\(\w[^()]*pid=\d+"
    r")"
)
MAX_TB_LINES = 4000  # bounded work: a runaway "traceback" ends here
MAX_MSG_LINES = 60  # continuation lines after the exception line (C++ frames not counted)
KEEP_MSG_LINES = 8
RECENT_FRAMES = 3  # frames above the exception whose code lines tell what it checked
KEEP_FILES = 48  # "File ..." lines kept: what the stack was doing (exc_shapes.toml [[during]])


@dataclass
class TracebackTracker:
    start_line: int  # 1-based line of "Traceback (most recent call last):"
    signature: str
    first_text: str
    locked: bool = True  # False: the start line's prefix was unreadable, adopt the first frame's
    stage: str = "frames"  # frames | message | blank
    nlines: int = 0
    blanks: int = 0
    msg_count: int = 0
    last_file: tuple[str, str] = ("", "")  # last "File ..." line and the code line after it
    recent_code: list[str] = field(default_factory=list)  # code lines of the last RECENT_FRAMES frames
    files: list[str] = field(default_factory=list)  # the last KEEP_FILES "File ..." lines, oldest first
    _pending_file: str = ""
    _file_indent: int = -1  # indent of the first "File ..." line
    exc: list[tuple[int, str]] = field(default_factory=list)  # (line, text) exception + continuation
    chained: list[str] = field(default_factory=list)  # earlier exceptions of the chain

    def step(self, lineno: int, signature: str, body: str, raw: str) -> int:
        self.nlines += 1
        if self.nlines > MAX_TB_LINES:
            return END
        if signature == "" and self.signature:
            # damage in front of the prefix (a stray byte, a tab): look behind it
            sig2, body2 = lineprefix.split(body.lstrip())
            if sig2 == self.signature:
                signature, body = sig2, body2
        if signature != self.signature:
            if not self.locked and body.lstrip().startswith("File "):
                self.signature, self.locked = signature, True  # the start line's prefix was damaged
            elif signature:  # a readable prefix of another process or logger
                if body.startswith(TB_START) or self.stage != "frames":
                    return END  # once the exception line is out, another record closes it
                return FOREIGN  # interleaved between the frames: classified on its own
            # else: no readable prefix at all (a damaged line): judged as one of ours below
        stripped = body.strip()
        if self.stage == "frames":
            if not stripped:
                return OWN
            indent = len(body) - len(body.lstrip(" \t"))
            # a traceback pasted without its indentation (a forum or an issue form stripped it): its
            # frames are at the margin, each "File" line followed by its code line, not an exception
            flat = body[0] not in " \t" and (
                (stripped.startswith('File "') and ", line " in stripped)
                or (self._file_indent == 0 and (set(stripped) <= {"^", "~", " "}
                                                or self._pending_file and parse_exception(stripped) is None)))
            if flat and self._file_indent < 0:
                self._file_indent = 0
            if flat or body[0] in " \t" and not (0 < indent < self._file_indent and not stripped.startswith("File ")):
                # (a line indented less than the frames is the exception line of a traceback quoted
                # whole with an indent, as torchelastic's failure summary prints it)
                if stripped.startswith("File "):
                    if self._file_indent < 0:
                        self._file_indent = indent
                    self._pending_file = stripped
                    self.files.append(stripped)
                    if len(self.files) > KEEP_FILES:
                        del self.files[0]
                elif self._pending_file:
                    if not set(stripped) <= {"^", "~", " "}:
                        self.last_file = (self._pending_file, stripped)
                        self._pending_file = ""
                        self.recent_code.append(stripped)
                        if len(self.recent_code) > RECENT_FRAMES:
                            del self.recent_code[0]
                return OWN
            if stripped.startswith(TB_START) or stripped.startswith(CHAIN):
                return OWN
            if _NEW_RECORD.match(stripped):
                return FOREIGN  # another thread's log line printed between the frames
            # the exception line
            self.stage = "message"
            self.exc = [(lineno, raw.strip())]
            self.msg_count = 0
            return OWN
        if self.stage == "message":
            if not stripped:
                self.stage = "blank"
                self.blanks = 1
                return OWN
            if stripped.startswith(("frame #", "Exception raised from ")):
                return OWN
            if _NEW_RECORD.match(stripped):
                return END
            self.msg_count += 1
            if self.msg_count > MAX_MSG_LINES:
                return END
            if len(self.exc) < KEEP_MSG_LINES:
                self.exc.append((lineno, raw.strip()))
            return OWN
        # stage "blank": after an empty line only a chain marker continues the traceback
        if not stripped:
            self.blanks += 1
            return OWN if self.blanks <= 3 else END
        if stripped.startswith(CHAIN):
            if self.exc:
                self.chained.append(self.exc[0][1])
            self.exc = []
            self.recent_code = []
            self.stage = "frames"
            return OWN
        if stripped.startswith(("frame #", "Exception raised from ")):
            self.stage = "message"  # a C++ block after a blank line still belongs to it
            return OWN
        if stripped.startswith(". This may indicate"):
            self.stage = "message"
            return OWN
        return END

    def context(self) -> str:
        """The code lines of the last frames, oldest first (what the raising code was checking)."""
        return " | ".join(self.recent_code)

    @property
    def exception_line(self) -> tuple[int, str] | None:
        return self.exc[0] if self.exc else None

    def candidates(self) -> list[str]:
        """Lines to classify, most telling first: the final exception, its continuation lines,
        then the earlier exceptions of the chain (latest first)."""
        cands = [t for _, t in self.exc] + list(reversed(self.chained))
        head = self.first_text.split(TB_START)[0]
        if head.strip(" ,:"):  # "Exception in worker ...: NCCL error: ..., Traceback (most recent call last):"
            cands.append(head)
        return cands

    def evidence(self) -> list[str]:
        ev = [self.first_text.strip()]
        if self.last_file[0]:
            ev.extend(self.last_file)
        ev.extend(t for _, t in self.exc[:4])
        return ev
