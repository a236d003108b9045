"""Whether CLI output may carry colour: never when NO_COLOR is set (https://no-color.org: any
non-empty value) and never when the stream is not a terminal (a pipe or a file keeps plain text)."""

from __future__ import annotations

import os
import sys
from typing import TextIO


def use_colour(stream: TextIO | None = None) -> bool:
    if os.environ.get("NO_COLOR"):
        return False
    stream = sys.stdout if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # a closed or fake stream
        return False
