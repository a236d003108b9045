"""Issue 30: the tmux clipboard test, extended to what the API server says.  A hostile server on
127.0.0.1 answers with OSC 52 (clipboard), OSC 0 (title), CSI 2J and C1 in the model id, the answer
and finish_reason; `prompt`, `load-test` and the TUI's prompt screen run in a real tmux with
`set-clipboard on`: no paste buffer appears, the pane title stays, the text is there as text."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from hostile_http import HOSTILE, chunk, models, serve, sse
from tmux_helpers import TMUX_MARKS, TmuxServer

pytestmark = TMUX_MARKS
ROOT = Path(__file__).resolve().parents[2]

ANSWER = sse(chunk(f"the answer{HOSTILE}", model=f"m{HOSTILE}"), chunk(finish=f"stop{HOSTILE}", model=f"m{HOSTILE}"))


@pytest.fixture
def tmux(tmp_path):
    t = TmuxServer("sparktui-api")
    conf = tmp_path / "tmux.conf"
    # the operator's worst case: applications may set the clipboard and the pane title
    conf.write_text("set -s set-clipboard on\nset -g allow-rename on\nset -g default-terminal xterm-256color\n")
    t("-f", str(conf), "new-session", "-d", "-s", "api", "-x", "160", "-y", "45", "sleep 600")
    try:
        yield t
    finally:
        t("kill-server", check=False)


def _untouched(t: TmuxServer, title_before: str, screen: str) -> None:
    assert "PWNED" not in screen and "cHduZWQ" not in screen
    assert t("list-buffers", check=False).stdout.strip() == "", "a paste buffer appeared"
    assert t("display-message", "-p", "-t", "api", "#{pane_title}").stdout.strip() == title_before


def test_prompt_load_test_and_the_prompt_screen_leave_clipboard_and_title_alone(tmux, tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('[cluster]\nname = "t"\n\n[[node]]\nname = "a"\nbackend = "local"\n')
    title_before = tmux("display-message", "-p", "-t", "api", "#{pane_title}").stdout.strip()
    py = shlex.join([sys.executable, "-m", "sparktui"])
    with serve(get=models(f"m{HOSTILE}"), post=ANSWER) as url:
        env = " ".join(shlex.quote(e) for e in (
            f"SPARKTUI_API_BASE={url}", f"PYTHONPATH={ROOT}", f"SPARKTUI_STATE_DIR={tmp_path / 'state'}",
            "TERM=xterm-256color", "OPENAI_API_KEY=sk-test"))
        c = shlex.quote(str(cfg))
        cli = (f"export {env}; {py} prompt hi --config {c} --timeout 10; "
               f"{py} load-test --requests 2 --config {c}; echo CLI-DONE-$?; "
               f"{py} --config {c}; echo TUI-EXITED-$?; sleep 600")
        tmux("respawn-pane", "-k", "-t", "api", cli)
        screen = tmux.poll("api", lambda s: "CLI-DONE-" in s, "prompt and load-test to finish", timeout=60)
        assert "the answer" in screen
        _untouched(tmux, title_before, screen)
        tmux.poll("api", lambda s: "P Prompt" in s, "the TUI's footer", timeout=60)
        tmux("send-keys", "-t", "api", "P")
        # the title names the model once the API is found: the input has focus by then
        tmux.poll("api", lambda s: "Test prompt" in s and url in s, "the prompt screen at the server", timeout=30)
        tmux("send-keys", "-t", "api", "-l", "hi")
        tmux("send-keys", "-t", "api", "Enter")
        screen = tmux.poll("api", lambda s: "the answer" in s, "the answer on the prompt screen", timeout=60)
        _untouched(tmux, title_before, screen)
        tmux("send-keys", "-t", "api", "Escape")
        # q only once the main screen is back: an Escape followed at once by q reads as Alt+q
        tmux.poll("api", lambda s: "P Prompt" in s, "the main screen again", timeout=30)
        tmux("send-keys", "-t", "api", "q")
        done = tmux.poll("api", lambda s: "TUI-EXITED-" in s, "the TUI to exit", timeout=30)
    assert "TUI-EXITED-0" in done
    _untouched(tmux, title_before, done)
