"""A private tmux server for tests that drive the real app in a real terminal (tests/tui/test_tmux.py,
tests/e2e/test_shared_timeline_on_bed.py).  tmux is an external process: screens are read with
`capture-pane` in a bounded loop with short waits.  tests/ is on sys.path (the rootdir conftest's folder).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import uuid
from typing import Callable

import pytest

# CI installs tmux (.ci/run): there a missing tmux is a failure, never a skip
_NO_TMUX = shutil.which("tmux") is None and os.environ.get("CI", "").lower() != "true"
TMUX_MARKS = [pytest.mark.tmux, pytest.mark.skipif(_NO_TMUX, reason="tmux not installed")]


class TmuxServer:
    """One tmux server on its own socket (``-L``): never touches the user's."""

    def __init__(self, prefix: str) -> None:
        self.socket = f"{prefix}-{uuid.uuid4().hex[:8]}"

    def __call__(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=20,
                              check=check)

    def kill(self, timeout: float = 10.0) -> None:
        """Stop the server and wait until it is gone: `kill-server` returns before the server has
        exited, and a session started on the same socket meanwhile meets the dying server ("server
        exited unexpectedly"), as the next test of a module sharing one server does."""
        self("kill-server", check=False)
        # gone once its socket refuses a connection (the file itself is left behind)
        path = os.path.join(os.environ.get("TMUX_TMPDIR") or "/tmp", f"tmux-{os.getuid()}", self.socket)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with socket.socket(socket.AF_UNIX) as s:
                try:
                    s.connect(path)
                except OSError:  # refused, or no file: nothing listens
                    return
            time.sleep(0.05)

    def capture(self, name: str) -> str:
        return self("capture-pane", "-p", "-t", name).stdout

    def poll(self, name: str, cond: Callable[[str], bool], what: str, timeout: float = 30.0) -> str:
        """The screen of session ``name`` once ``cond`` holds for it; AssertionError after ``timeout``."""
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.capture(name)
            if cond(screen):
                return screen
            time.sleep(0.1)
        raise AssertionError(f"{name}: timed out ({timeout:.0f} s) waiting for {what}; screen was:\n{screen}")
