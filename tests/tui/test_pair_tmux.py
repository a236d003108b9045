"""A read-only observer in a real terminal (issue 32 item 4): `sparktui --read-only demo` in tmux at
80x24 and 200x50; the keys an observer may not use say why when pressed (the load test puts load on
the API, doctor starts probe containers, launch changes the cluster), and nothing opens."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from tmux_helpers import TMUX_MARKS, TmuxServer

ROOT = Path(__file__).resolve().parents[2]
pytestmark = TMUX_MARKS
_tmux = TmuxServer("sparktui-pair")


@pytest.mark.parametrize("width, height", [(80, 24), (200, 50)])
def test_an_observers_refused_keys_say_why_in_a_real_terminal(tmp_path, width, height):
    name = f"observer{width}"
    env = [f"SPARKTUI_STATE_DIR={tmp_path / 'state'}", f"PYTHONPATH={ROOT}", "TERM=xterm-256color"]
    cmd = " ".join(env) + f" {sys.executable} -m sparktui --read-only demo; echo SPARKTUI-EXITED-$?; sleep 30"
    _tmux("new-session", "-d", "-s", name, "-x", str(width), "-y", str(height), cmd)
    try:
        _tmux.poll(name, lambda s: "READ-ONLY" in s and "spark1" in s, "the observer's main screen")
        for key, why in (("T", "load-test refused"), ("d", "doctor refused"), ("l", "launch refused")):
            _tmux("send-keys", "-t", name, key)
            screen = _tmux.poll(name, lambda s: why in s, f"the reason {key} is refused")
            assert "read-only" in screen
        assert "Load test" not in _tmux.capture(name).splitlines()[0]  # no action screen opened
        _tmux("send-keys", "-t", name, "q")
        assert "SPARKTUI-EXITED-0" in _tmux.poll(name, lambda s: "SPARKTUI-EXITED-" in s, "the app to exit")
    finally:
        _tmux.kill()
