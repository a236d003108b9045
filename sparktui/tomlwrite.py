"""Writing TOML: values and comments that hold text from elsewhere (a node, an ssh config).

``tomllib`` only reads, and pasting text between quotes or after ``#`` lets a newline in it start
a key of its own.  Here every string becomes a TOML basic string with everything that is not a
printable character written as an escape, and a comment is one line whatever it is given, so
``tomllib.loads`` of what is written gives back exactly the values put in.
"""

from __future__ import annotations

import math
import re

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_SHORT = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


class TomlWriteError(ValueError):
    """A value TOML cannot hold (a lone surrogate, NaN, an unsupported type): one line."""


def _escape(text: str, *, comment: bool) -> str:
    if text.isprintable() and '"' not in text and "\\" not in text:
        return text  # the common case: nothing to escape
    out = []
    for ch in text:
        if ch in _SHORT and not (comment and ch in '"\\'):
            out.append(_SHORT[ch])
        elif ch.isprintable():  # space included; every control, format and separator char is not
            out.append(ch)
        elif 0xD800 <= ord(ch) <= 0xDFFF:
            # TOML escapes name Unicode scalar values only: a lone surrogate has no TOML spelling
            if not comment:
                raise TomlWriteError(f"a lone surrogate (U+{ord(ch):04X}) cannot be written as TOML")
            out.append(f"\\u{ord(ch):04x}")  # a comment is never read back: shown, not kept
        elif ord(ch) <= 0xFFFF:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    return "".join(out)


def string(text: str) -> str:
    """A TOML basic string whose value is exactly ``text``; printable text stays readable."""
    if not isinstance(text, str):
        raise TomlWriteError(f"not a string: {type(text).__name__}")
    return '"' + _escape(text, comment=False) + '"'


def value(v: object) -> str:
    """A TOML value: str, bool, int, finite float, or a list of those."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return string(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise TomlWriteError(f"{v} is not a number TOML keeps")
        return repr(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(value(x) for x in v) + "]"
    raise TomlWriteError(f"cannot write a {type(v).__name__} as TOML")


def key(name: str) -> str:
    """A key: bare where TOML allows it, else quoted."""
    return name if _BARE_KEY.fullmatch(name) else string(name)


def comment(text: str) -> str:
    """``# text`` on one line: newlines and every other control character are shown escaped, so
    nothing in ``text`` can end the comment."""
    return "# " + _escape(str(text), comment=True)


def pair(name: str, v: object, note: str | None = None) -> str:
    """``name = value``, with an optional comment after it on the same line."""
    line = f"{key(name)} = {value(v)}"
    return line + ("   " + comment(note) if note else "")
