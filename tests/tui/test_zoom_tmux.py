"""`z` in a real terminal (issue 32 item 8): `sparktui demo` in tmux at 80x24 and 200x50; `z` gives the
active node's pane the whole width (the other node's pane is gone from the screen), `z` again gives
both back."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from tmux_helpers import TMUX_MARKS, TmuxServer

ROOT = Path(__file__).resolve().parents[2]
pytestmark = TMUX_MARKS


def _headers(screen: str) -> list[str]:
    """The node panes' headers on the screen ("spark1  ● reachable"), side by side or alone."""
    return [part.split()[-1] for ln in screen.splitlines() for part in ln.split("  ● reachable")[:-1]]


@pytest.mark.parametrize("width, height", [(80, 24), (200, 50)])
def test_z_maximises_the_active_pane_and_z_gives_the_layout_back(tmp_path, width, height):
    tmux = TmuxServer("sparktui-zoom")
    name = f"zoom{width}"
    env = [f"SPARKTUI_STATE_DIR={tmp_path / 'state'}", f"PYTHONPATH={ROOT}", "TERM=xterm-256color"]
    # COLUMNS/LINES from the test's own terminal would override the window's size
    cmd = "unset COLUMNS LINES; " + " ".join(env) + f" {sys.executable} -m sparktui demo; echo SPARKTUI-EXITED-$?; sleep 30"
    tmux("new-session", "-d", "-s", name, "-x", str(width), "-y", str(height), cmd)
    try:
        # the layout: the findings strip, and both panes side by side (wide) or one with a node bar (80)
        tmux.poll(name, lambda s: "findings:" in s and _headers(s) and "spark2" in s, "the main screen")
        tmux("send-keys", "-t", name, "z")
        zoomed = tmux.poll(name, lambda s: "findings:" not in s and len(_headers(s)) == 1, "spark1's pane alone")
        assert _headers(zoomed) == ["spark1"] and "spark2" not in zoomed  # no other pane, no node bar
        assert len(zoomed.splitlines()) >= height - 1  # it holds the terminal
        tmux("send-keys", "-t", name, "z")
        back = tmux.poll(name, lambda s: "findings:" in s and "spark2" in s, "the layout back")
        assert _headers(back) == (["spark1", "spark2"] if width >= 160 else ["spark1"])
        tmux("send-keys", "-t", name, "q")
        assert "SPARKTUI-EXITED-0" in tmux.poll(name, lambda s: "SPARKTUI-EXITED-" in s, "the app to exit")
    finally:
        tmux("kill-server", check=False)
