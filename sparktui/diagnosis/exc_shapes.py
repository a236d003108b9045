"""Name a finding from the SHAPE of an exception (its class and message), not from copied phrases.

A Python exception line reads ``pkg.module.ClassName: message``.  ``exc_shapes.toml`` maps class
names (regexes over the qualified name) and message shapes (regexes) to catalogue ids, first match
wins.  The classifier asks this table when a traceback closes (root cause of a chain first) and at
end of input for a bare exception line whose traceback header was cut off.  ``[[during]]`` rules
name a second id from the frames an exception was raised under (an NCCL error of any class while a
communicator is created).  Cold path only: a handful of regexes per traceback, nothing per log line.
"""

from __future__ import annotations

import functools
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

SHAPES_PATH = Path(__file__).with_name("exc_shapes.toml")

# ``torch.distributed.DistBackendError: NCCL error ...``; the class is dotted identifiers whose last
# part looks like an exception type (CamelCase ending in Error/Exception/... or a few bare names).
_EXC_LINE = re.compile(
    r"^\s*(?P<cls>(?:[A-Za-z_]\w*\.){0,8}"
    # (a binding's per-status subclasses: pynvml's "NVMLError_NotSupported")
    r"(?:[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Failure|Timeout|Died|Dead)(?:_[A-Z][A-Za-z]+)?|(?:Base)?Exception|KeyboardInterrupt|StopIteration"
    # any class a package's own errors module defines ("zmq.error.Again", "requests.exceptions.ConnectTimeout")
    # (not a warning category those modules define too: "urllib3.exceptions.InsecureRequestWarning")
    r"|(?<=error\.)(?![A-Z]\w*Warning\b)[A-Z]\w*|(?<=errors\.)(?![A-Z]\w*Warning\b)[A-Z]\w*"
    r"|(?<=exceptions\.)(?![A-Z]\w*Warning\b)[A-Z]\w*))"
    r"(?:\((?P<inner>[A-Za-z_][\w.]{0,80})\))?"  # Ray's RayTaskError(OutOfMemoryError): the cause's class
    r"(?::\s?(?P<msg>.*)|\s*)$"
)
MAX_MSG = 2000  # characters of a message that are matched (bounded work)


# prefixes that launchers put in front of every line of a rank (lineprefix knows the loggers'):
# mpirun "[1,0]<stderr>:", srun/torchrun "0: " or "[rank0]: ", pdsh "node01: ", torchx "trainer/0 [1]:",
# FastChat "2024-01-01 10:00:00 | ERROR | stderr | "
_LAUNCHER_PREFIX = re.compile(
    r"^(?:\[\d+,\d+\]<std(?:out|err)>:|\[?rank\d+\]?:|\d{1,4}: |[\w.-]{1,64}: |\S{1,64} \[\d+\]:"
    r"|.{0,40}\| (?:ERROR|INFO|WARNING|DEBUG) \| \w+ \| )\s*"
)


# a C++ exception's message after "terminate called after throwing an instance of 'c10::Error'"
_WHAT = re.compile(r"^\s*what\(\):\s+(?P<msg>.*)$")
# error lines of engines that print no Python exception, each read as (class, message) so the shape
# table maps them by data: TensorRT/TensorRT-LLM's "[TRT-LLM] [RANK 0] [E] ..." and
# "[TensorRT-LLM][ERROR] ...", a Rust panic ("thread 'main' panicked at src/x.rs:1:2: ..."), a Go
# panic ("panic: ...").  A bare "Error: ..." stays prose (it is how logs say "see above").
_ENGINE_LINE = (
    (re.compile(r"^(?:\[[^\]\[]{1,40}\] ?){0,4}\[(?:E|ERROR)\] ?(?P<msg>\S.*)$"), "EngineError"),
    (re.compile(r"^thread '[^']{0,80}' panicked at (?:[^\s:]{1,200}:\d+:\d+:?)?\s*(?P<msg>.*)$"), "panic"),
    (re.compile(r"^panic: (?P<msg>\S.*)$"), "panic"),
)
# an exception quoted inside another's message: vLLM's "Worker failed with error 'ImportError: ...'"
_QUOTED = re.compile(r"'(?P<cls>(?:[A-Za-z_]\w*\.){0,8}[A-Z]\w*(?:Error|Exception)): ?(?P<msg>[^']*)")


# the JVM's heads of an exception line: the thread that died of it, a cause or a suppressed exception
# of a chain ("Exception in thread "main" java.lang.X: ...", "Caused by: java.net.Y: ...")
JAVA_HEAD = re.compile(r'^(?:Exception in thread "[^"\n]{0,80}" |Caused by: |Suppressed: )')


def parse(text: str) -> tuple[str, str] | None:
    """(qualified class, message) of an exception line (its log prefix already removed), or None."""
    text = text[:MAX_MSG]
    if text[:1] in "ECS" and (j := JAVA_HEAD.match(text)) is not None:
        text = text[j.end():]
    w = _WHAT.match(text)
    if w is not None:
        return "what()", w.group("msg").strip()
    m = _EXC_LINE.match(text)
    if m is None and text[:1] in "[tp":  # cheap gate: every engine shape starts with one of these
        for rx, cls in _ENGINE_LINE:
            e = rx.match(text)
            if e is not None:
                return cls, e.group("msg").strip()
    if m is None:
        p = _LAUNCHER_PREFIX.match(text)
        if p is None or p.end() == 0:
            return None
        m = _EXC_LINE.match(text[p.end():])
        if m is None:
            return None
    msg = (m.group("msg") or "").strip()
    if m.group("inner"):  # judged as the wrapped class (the wrapper only says where it ran)
        return m.group("inner"), msg
    return m.group("cls"), msg


@dataclass(frozen=True)
class Shape:
    id: str
    classes: tuple[re.Pattern[str], ...]  # any of them searched in the qualified class; none = any class
    messages: tuple[re.Pattern[str], ...]  # any of them searched in the message; none = any message
    frames: tuple[re.Pattern[str], ...] = ()  # any of them searched in the raising frame's "File" line
    # any of them searched in the code lines of the last frames above the exception: what a bare
    # "AssertionError: 4 is not divisible by 8" was checking (``_ensure_divisibility(world_size, ...)``)
    contexts: tuple[re.Pattern[str], ...] = ()

    def matches(self, cls: str, msg: str, frame: str = "", context: str = "") -> bool:
        if self.classes and not any(rx.search(cls) for rx in self.classes):
            return False
        if self.frames and not any(rx.search(frame) for rx in self.frames):
            return False
        if self.contexts and not any(rx.search(context) for rx in self.contexts):
            return False
        return not self.messages or any(rx.search(msg) for rx in self.messages)


@dataclass(frozen=True)
class During:
    """A finding named by an exception raised under a frame doing some job, besides its own shape
    (an NCCL error of any class inside the frames that create a communicator)."""
    id: str
    messages: tuple[re.Pattern[str], ...]  # any of them searched in the exception line and message
    frames: tuple[re.Pattern[str], ...]  # any of them searched in any "File ..." line of the stack
    unless: tuple[re.Pattern[str], ...] = ()  # none of them may be in the message

    def matches(self, msg: str, files: list[str]) -> bool:
        if not any(rx.search(msg) for rx in self.messages) or any(rx.search(msg) for rx in self.unless):
            return False
        return any(rx.search(f) for f in files for rx in self.frames)


class ShapeError(ValueError):
    """exc_shapes.toml is unusable; the message names the file, the rule and the problem."""


@dataclass(frozen=True)
class Shapes:
    rules: tuple[Shape, ...]
    during_rules: tuple[During, ...] = ()

    def during(self, msg: str, files: list[str]) -> list[str]:
        """The ids that an exception (its lines joined) raised under these frames names as well."""
        if not files:
            return []
        msg = msg[:MAX_MSG]
        return [d.id for d in self.during_rules if d.matches(msg, files)]

    def classify(self, cls: str, msg: str, frame: str = "", context: str = "") -> str | None:
        """The finding id for one exception (class, message, raising frame, the code lines of the
        frames above it), or None."""
        # a wrapper whose message starts with the wrapped exception ("InductorError: RuntimeError:
        # ...", "Worker failed with error 'ImportError: ...'") is judged as the wrapped one too
        inner = parse(msg)
        if inner is None:
            q = _QUOTED.search(msg)
            inner = (q.group("cls"), q.group("msg")) if q else None
        for rule in self.rules:
            if rule.matches(cls, msg, frame, context) or (inner is not None and rule.matches(*inner, frame, context)):
                return rule.id
        return None

    def classify_frame(self, frame: str) -> str | None:
        """The id named by the raising frame alone (a traceback cut before its exception line)."""
        if not frame:
            return None
        for rule in self.rules:
            if rule.frames and not (rule.classes or rule.messages or rule.contexts) and rule.matches("", "", frame):
                return rule.id
        return None

    def classify_line(self, text: str, more: str = "", frame: str = "", context: str = "") -> str | None:
        """The finding id for an exception line (prefix removed); ``more``: continuation lines;
        ``frame``: the ``File "...", line N, in f`` line of the frame that raised it; ``context``:
        the code lines of the last frames before it."""
        got = parse(text)
        if got is None:
            return None
        cls, msg = got
        if more:
            msg = f"{msg} {more}"[:MAX_MSG]
        return self.classify(cls, msg, frame, context)


def parse_shapes(text: str, path: str, known_ids: set[str] | None = None) -> Shapes:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ShapeError(f"{path}: not valid TOML: {exc}") from None
    rules: list[Shape] = []
    examples: list[tuple[int, str, str]] = []
    for i, raw in enumerate(data.get("shape", [])):
        fid = raw.get("id")
        if not isinstance(fid, str) or (known_ids is not None and fid not in known_ids):
            raise ShapeError(f"{path}: shape #{i + 1}: id {fid!r} is not a catalogue id")
        try:
            classes = tuple(re.compile(p) for p in raw.get("exception", []))
            messages = tuple(re.compile(p) for p in raw.get("message", []))
            frames = tuple(re.compile(p) for p in raw.get("frame", []))
            contexts = tuple(re.compile(p) for p in raw.get("context", []))
        except re.error as exc:
            raise ShapeError(f"{path}: shape #{i + 1} ({fid}): bad regex: {exc}") from None
        if not classes and not messages and not frames:
            raise ShapeError(f"{path}: shape #{i + 1} ({fid}): needs an exception or a message pattern")
        rules.append(Shape(fid, classes, messages, frames, contexts))
        # an example is "exception line" or, for a shape that needs its context, [line, context]
        examples.extend((i, fid, ex) for ex in raw.get("examples", []))
    during: list[During] = []
    for i, raw in enumerate(data.get("during", [])):
        fid = raw.get("id")
        if not isinstance(fid, str) or (known_ids is not None and fid not in known_ids):
            raise ShapeError(f"{path}: during #{i + 1}: id {fid!r} is not a catalogue id")
        try:
            d = During(fid, tuple(re.compile(p) for p in raw.get("message", [])),
                       tuple(re.compile(p) for p in raw.get("frame", [])),
                       tuple(re.compile(p) for p in raw.get("unless", [])))
        except re.error as exc:
            raise ShapeError(f"{path}: during #{i + 1} ({fid}): bad regex: {exc}") from None
        if not d.messages or not d.frames:
            raise ShapeError(f"{path}: during #{i + 1} ({fid}): needs a message and a frame pattern")
        for ex in raw.get("examples", []):  # [exception line, "File ..." line]
            if not d.matches(ex[0], [ex[1]]):
                raise ShapeError(f"{path}: during #{i + 1} ({fid}): example does not match: {ex[0][:80]!r}")
        during.append(d)
    shapes = Shapes(tuple(rules), tuple(during))
    for i, fid, ex in examples:  # an example must come out as its own id through the whole table
        line, context = (ex, "") if isinstance(ex, str) else (ex[0], ex[1])
        got = shapes.classify_line(line, context=context)
        if got != fid:
            raise ShapeError(f"{path}: shape #{i + 1} ({fid}): example gives {got}: {line[:80]!r}")
    return shapes


@functools.lru_cache(maxsize=1)
def default_shapes() -> Shapes:
    from .catalogue import default_catalogue

    return parse_shapes(SHAPES_PATH.read_text(encoding="utf-8"), str(SHAPES_PATH), set(default_catalogue().entries))
