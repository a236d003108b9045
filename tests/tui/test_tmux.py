"""The real app in a real terminal: `sparktui demo` inside a detached tmux session.

tmux is an external process, so this polls `capture-pane` in a bounded loop with short waits.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from tmux_helpers import TMUX_MARKS, TmuxServer

ROOT = Path(__file__).resolve().parents[2]
pytestmark = TMUX_MARKS
_tmux = TmuxServer("sparktui-test")
SOCKET = _tmux.socket
_capture, _poll = _tmux.capture, _tmux.poll


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
        _tmux.kill()


def _layout_ok(screen: str, width: int, height: int) -> bool:
    """Both node panes, the findings strip and the footer on screen, every row within the width."""
    rows = screen.rstrip("\n").splitlines()
    return (len(rows) <= height and all(len(r) <= width for r in rows)
            and "spark1" in screen and "spark2" in screen and "findings" in screen
            and any("Filter" in r or "Doctor" in r for r in rows[-2:]))  # the footer


def test_a_second_client_of_another_size_keeps_panes_strip_and_footer(tmp_path):
    """Two engineers, one tmux session: a second client attaches at another size (tmux sizes the
    window to the latest client), the app re-lays out, and everything stays visible, unclipped."""
    name = "shared"
    # a server of its own: the test before this one ends by killing the module's server, and a
    # new-session on that socket while it is still going away fails ("server exited unexpectedly")
    own = TmuxServer("sparktui-test")
    tmux, poll = own, own.poll
    viewer = f"{own.socket}-viewer"  # a second tmux server whose panes are the other engineers' terminals

    def outer(*args: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(["tmux", "-L", viewer, *args], capture_output=True, text=True, timeout=20, check=check)

    env_prefix = [f"SPARKTUI_STATE_DIR={tmp_path / 'state'}", f"PYTHONPATH={ROOT}", "TERM=xterm-256color"]
    cmd = " ".join(env_prefix) + f" {sys.executable} -m sparktui demo; sleep 30"
    tmux("new-session", "-d", "-s", name, "-x", "160", "-y", "48", cmd)
    try:
        poll(name, lambda s: _layout_ok(s, 160, 48), "the app at 160x48")
        for w, h in ((80, 24),):
            client = f"c{w}x{h}"
            outer("new-session", "-d", "-s", client, "-x", str(w), "-y", str(h),
                  f"TMUX= tmux -L {own.socket} attach -t {name}")
            size = f"{w}x{h - 1}"  # the client's own status line takes a row
            deadline = time.monotonic() + 20
            while tmux("display", "-p", "-t", name, "#{window_width}x#{window_height}").stdout.strip() != size:
                assert time.monotonic() < deadline, "tmux did not resize the window to the new client"
                time.sleep(0.2)
            screen = poll(name, lambda s: _layout_ok(s, w, h - 1), f"the app re-laid out at {size}")
            assert "Traceback" not in screen
        clients = tmux("list-clients", "-t", name).stdout.strip().splitlines()
        assert len(clients) == 1  # the second engineer's terminal stays attached
    finally:
        subprocess.run(["tmux", "-L", viewer, "kill-server"], capture_output=True, timeout=20)
        tmux("kill-server", check=False)
