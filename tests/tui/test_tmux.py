"""The real app in a real terminal: `sparktui demo` inside a detached tmux session.

tmux is an external process, so this polls `capture-pane` in a bounded loop with short waits.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# CI installs tmux (.ci/run): there a missing tmux is a failure, never a skip
_NO_TMUX = shutil.which("tmux") is None and os.environ.get("CI", "").lower() != "true"
pytestmark = [pytest.mark.tmux, pytest.mark.skipif(_NO_TMUX, reason="tmux not installed")]


def _tmux(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["tmux", "-L", SOCKET, *args], capture_output=True, text=True, timeout=20, check=check)


SOCKET = f"sparktui-test-{uuid.uuid4().hex[:8]}"  # a private tmux server: never touches the user's


def _capture(name: str) -> str:
    return _tmux("capture-pane", "-p", "-t", name).stdout


def _poll(name: str, cond, what: str, timeout: float = 30.0) -> str:
    deadline = time.monotonic() + timeout
    screen = ""
    while time.monotonic() < deadline:
        screen = _capture(name)
        if cond(screen):
            return screen
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}; screen was:\n{screen}")


def _log_area(screen: str) -> list[str]:
    # the log rows: below the log title line ("... lines  FOLLOW") of the left pane
    rows = screen.splitlines()
    start = next(i for i, r in enumerate(rows) if "FOLLOW" in r or "DETACHED" in r)
    return [r[:100] for r in rows[start + 1:-3]]


def test_demo_in_tmux_shows_both_nodes_running_containers_and_a_moving_log(tmp_path):
    name = "demo"
    env_prefix = [f"SPARKTUI_STATE_DIR={tmp_path / 'state'}", f"PYTHONPATH={ROOT}", "TERM=xterm-256color"]
    cmd = " ".join(env_prefix) + f" {sys.executable} -m sparktui demo --speed 4; echo SPARKTUI-EXITED-$?; sleep 30"
    _tmux("new-session", "-d", "-s", name, "-x", "200", "-y", "50", cmd)
    try:
        first = _poll(name, lambda s: "spark1" in s and "spark2" in s and "running" in s and "lines" in s,
                      "both nodes and a running container")
        assert "reachable" in first
        before = _log_area(_poll(name, lambda s: "FOLLOW" in s, "log title"))
        _poll(name, lambda s: "FOLLOW" in s and _log_area(s) != before, "the log to move")
        # keys reach the app: help opens and closes
        _tmux("send-keys", "-t", name, "?")
        _poll(name, lambda s: "sparktui — keys" in s, "help screen")
        _tmux("send-keys", "-t", name, "Escape")
        _poll(name, lambda s: "sparktui — keys" not in s, "help closed")
        _tmux("send-keys", "-t", name, "q")
        done = _poll(name, lambda s: "SPARKTUI-EXITED-" in s, "the app to exit")
        assert "SPARKTUI-EXITED-0" in done
    finally:
        _tmux("kill-server", check=False)
