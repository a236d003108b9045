"""The one error a config load raises (config.py and config_checks.py both raise it; it lives below them)."""

from __future__ import annotations

import os
import re


class ConfigError(Exception):
    def __init__(self, path: str | os.PathLike | None, message: str, *, key: str | None = None,
                 line: int | None = None, hint: str | None = None) -> None:
        self.path = str(path) if path is not None else "<config>"
        self.key = key
        self.line = line
        self.message = message
        self.hint = hint
        super().__init__(str(self))

    def __str__(self) -> str:
        where = self.path
        if self.line:
            where += f":{self.line}"
        parts = [f"{where}: "]
        if self.key:
            parts.append(f"{self.key}: ")
        parts.append(self.message)
        if self.hint:
            parts.append(f" (hint: {self.hint})")
        return "".join(parts)


def line_of(text: str, key: str, start_after: int = 0) -> int | None:
    # [ \t]*, not \s*: \s would start the match on a blank line above and miscount
    pat = re.compile(rf"^[ \t]*{re.escape(key)}[ \t]*=", re.M)
    m = pat.search(text, start_after)
    if m is None:
        pat = re.compile(rf"^[ \t]*\[+[ \t]*{re.escape(key)}[ \t]*\]+", re.M)
        m = pat.search(text, start_after)
    return text.count("\n", 0, m.start()) + 1 if m else None
