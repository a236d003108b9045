"""Log text is data.  Decode any bytes, neutralise terminal escapes and control characters.

Rich markup is never interpreted from log text: faces render lines as ``rich.text.Text`` objects
(never ``Text.from_markup``), so ``[bold red]`` stays literal; this module only makes the *terminal*
safe.
"""

from __future__ import annotations

import re

# CSI (ESC [ ... final), OSC (ESC ] ... BEL|ST), other two-char ESC sequences, and 8-bit C1 CSI
_ANSI_RE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"  # DCS/SOS/PM/APC
    r"|\x1b[@-Z\\-_]"  # 2-char
    r"|\x9b[0-?]*[ -/]*[@-~]"  # C1 CSI
)
# C0 controls except TAB, plus DEL and C1 controls
_CTRL_RE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")
_CTRL_MAP = {i: 0x2400 + i for i in range(0x20)}  # visible control pictures (␀, ␛, ...)
_CTRL_MAP[0x7F] = 0x2421
_CTRL_MAP[ord("\r")] = None
_CTRL_MAP[ord("\t")] = ord("\t")


def decode(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def strip_ansi(text: str) -> str:
    if "\x1b" not in text and "\x9b" not in text:
        return text
    return _ANSI_RE.sub("", text)


def clean_line(text: str | bytes) -> str:
    """One displayable line: escapes removed, CR dropped, other controls shown as symbols."""
    if isinstance(text, bytes):
        text = decode(text)
    if text.isprintable():  # the common case, at C speed: no escape, no control, nothing to change
        return text
    text = strip_ansi(text)
    if _CTRL_RE.search(text):
        text = text.translate(_CTRL_MAP)
        text = re.sub(r"[\x80-\x9f]", "\ufffd", text)
    return text


def clean_text(text: str) -> str:
    """Multi-line text (a model's answer) made terminal-safe line by line; the newlines stay."""
    return "\n".join(clean_line(part) for part in text.split("\n"))


def safe(value: object) -> str:
    """One field from a node or a file (a container, GPU or process name, a label, an error message)
    as one displayable line: escapes removed, controls (newlines included) shown as symbols."""
    if value is None:
        return ""
    text = value if isinstance(value, str) else str(value)
    if text.isprintable():  # the common case: nothing to do (isprintable is False for any control)
        return text
    return clean_line(text)


# JSON escapes for what json.dumps(ensure_ascii=False) leaves raw: DEL and the C1 controls (a raw
# U+009B is a CSI on many terminals) and the line/paragraph separators
_JSON_RAW = {c: f"\\u{c:04x}" for c in (*range(0x7F, 0xA0), 0x2028, 0x2029)}


def json_dumps(obj: object, **kw) -> str:
    """``json.dumps`` for output read on a terminal: non-ASCII text kept readable, every control
    character (C0, DEL, C1) only as a JSON escape, never raw."""
    import json

    kw.setdefault("ensure_ascii", False)
    return json.dumps(obj, **kw).translate(_JSON_RAW)
