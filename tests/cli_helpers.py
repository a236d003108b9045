"""`python -m sparktui` in a child process, run as a user runs it, for tests of the command line.
tests/ is on sys.path (the rootdir conftest's folder)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def sparktui_cli(*argv: str, home: Path | str | None = None, env: dict | None = None, stdin: str | None = None,
                 timeout: float = 60) -> subprocess.CompletedProcess:
    """``python -m sparktui ARGV`` from the repository root, this checkout first on its path.

    ``home``: a HOME of its own, without our SPARKTUI_CONFIG / XDG_CONFIG_HOME, so the child finds
    only what the test put there (~/.ssh, a config).  ``env``: variables added.  ``stdin``: text fed
    to it; without it stdin is empty, so a question ends at once instead of waiting."""
    e = dict(os.environ, PYTHONPATH=str(ROOT), **(env or {}))
    if home is not None:
        e["HOME"] = str(home)
        e.pop("SPARKTUI_CONFIG", None)
        e.pop("XDG_CONFIG_HOME", None)
    feed: dict = {"input": stdin} if stdin is not None else {"stdin": subprocess.DEVNULL}
    return subprocess.run([sys.executable, "-m", "sparktui", *argv], capture_output=True, text=True, env=e,
                          cwd=ROOT, timeout=timeout, **feed)
