"""Hostile node data on the real bed (issue 14, item 1): a node's `nvidia-smi` whose GPU and process
names carry OSC 52 (clipboard), OSC 0 (title), CSI 2J (clear) and a C1 CSI, and a container with
such a label, command and log output.  The TUI runs in tmux with `set-clipboard on`: no paste buffer
may appear, the pane title stays, the names show as plain text; `status` and `doctor` print no
control sequence.

tmux is an external process: this polls `capture-pane` in a bounded loop with short waits.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_NO_TMUX = shutil.which("tmux") is None and os.environ.get("CI", "").lower() != "true"
pytestmark = [pytest.mark.e2e, pytest.mark.tmux, pytest.mark.skipif(_NO_TMUX, reason="tmux not installed")]

OSC52 = "\x1b]52;c;cHduZWQ=\x07"  # would put "pwned" in the clipboard / a tmux paste buffer
OSC0 = "\x1b]0;PWNED-TITLE\x07"
EVIL = f"{OSC52}{OSC0}\x1b[2J\u009b2J"  # no comma: it sits inside nvidia-smi's CSV
CONTROL = re.compile(rb"[\x00-\x08\x0b-\x1f\x7f]|\xc2[\x80-\x9f]")  # C0 (but TAB/LF), DEL, C1 in UTF-8

FAKE_NVIDIA_SMI = f"""#!/bin/sh
# a hostile nvidia-smi (issue 14): real CSV shapes, names carrying terminal sequences
case "$*" in
  *--query-gpu=*) printf '%s\\n' '0, NVIDIA GB10{EVIL}, 7, 11.50, 100.00, 2418, 41, [N/A], [N/A]' ;;
  *--query-compute-apps=*) printf '%s\\n' '4242, /usr/bin/python3{EVIL}, 1024' ;;
  *) printf '%s\\n' 'NVIDIA-SMI 580.95.05  Driver Version: 580.95.05{EVIL}  CUDA Version: 13.0' ;;
esac
"""


@pytest.fixture
def hostile_spark1(bed, cleanup):
    """spark1 with the hostile nvidia-smi first on its PATH and a container with hostile metadata."""
    fake = Path(bed.nodes["spark1"]["bin"]) / "nvidia-smi"
    before = fake.read_bytes() if fake.exists() else None
    fake.write_text(FAKE_NVIDIA_SMI, encoding="utf-8")
    fake.chmod(0o755)
    name = f"sec-{uuid.uuid4().hex[:8]}"
    cleanup.append(("spark1", name))
    bed.docker("spark1", "run", "-d", "--name", name, "--network", "host", "--label", f"evil={EVIL}",
               "-e", f"EVIL={EVIL}", "sparktui-base:bookworm",
               "sh", "-c", 'printf "log-line %s\\n" "$EVIL"; exec sleep 600', check=True)
    try:
        yield name
    finally:
        if before is None:
            fake.unlink(missing_ok=True)
        else:
            fake.write_bytes(before)


def _no_controls(data: bytes, what: str) -> None:
    bad = CONTROL.findall(data)
    assert not bad, f"{what}: control bytes reached the terminal: {bad[:10]!r}"


def test_status_and_doctor_print_no_control_sequence(bed, hostile_spark1):
    base = [sys.executable, "-m", "sparktui"]
    r = subprocess.run([*base, "status", "--config", str(bed.config)], capture_output=True, cwd=ROOT, timeout=120)
    assert r.returncode in (0, 1), r.stderr.decode(errors="replace")
    out = r.stdout.decode()
    assert "NVIDIA GB10" in out and "/usr/bin/python3" in out and hostile_spark1 in out
    _no_controls(r.stdout, "status")
    _no_controls(r.stderr, "status stderr")
    r = subprocess.run([*base, "status", "--json", "--config", str(bed.config)], capture_output=True, cwd=ROOT,
                       timeout=120)
    _no_controls(r.stdout, "status --json")
    doc = json.loads(r.stdout)
    spark1 = next(n for n in doc["nodes"] if n["name"] == "spark1")
    assert spark1["gpu"]["gpus"][0]["name"].startswith("NVIDIA GB10")  # the data itself is kept, escaped
    r = subprocess.run([*base, "doctor", "--config", str(bed.config)], capture_output=True, cwd=ROOT, timeout=300)
    assert r.returncode in (0, 1), r.stderr.decode(errors="replace")
    assert r.stdout.strip()
    _no_controls(r.stdout, "doctor")
    _no_controls(r.stderr, "doctor stderr")


class Tmux:
    def __init__(self) -> None:
        self.socket = f"sparktui-sec-{uuid.uuid4().hex[:8]}"  # a private server: never the user's

    def __call__(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=20,
                              check=check)

    def poll(self, target: str, cond, what: str, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self("capture-pane", "-p", "-t", target).stdout
            if cond(screen):
                return screen
            time.sleep(0.2)
        raise AssertionError(f"timed out waiting for {what}; screen was:\n{screen}")


def test_tui_in_tmux_with_set_clipboard_on_stays_untouched(bed, hostile_spark1, tmp_path):
    tmux = Tmux()
    conf = tmp_path / "tmux.conf"
    # the operator's worst case: applications may set the clipboard and the pane title
    conf.write_text("set -s set-clipboard on\nset -g allow-rename on\nset -g default-terminal xterm-256color\n")
    env = [f"SPARKTUI_STATE_DIR={tmp_path / 'state'}", f"PYTHONPATH={ROOT}", "TERM=xterm-256color"]
    cmd = " ".join(env) + f" {sys.executable} -m sparktui --config {bed.config}; echo SPARKTUI-EXITED-$?; sleep 30"
    tmux("-f", str(conf), "new-session", "-d", "-s", "sec", "-x", "220", "-y", "50", "true; sleep 600")
    try:
        assert tmux("show-options", "-s", "set-clipboard").stdout.split()[-1] == "on"
        title_before = tmux("display-message", "-p", "-t", "sec", "#{pane_title}").stdout.strip()
        tmux("respawn-pane", "-k", "-t", "sec", cmd)
        screen = tmux.poll("sec", lambda s: "NVIDIA GB10" in s and hostile_spark1 in s and "python3" in s,
                           "the hostile GPU, process and container on screen")
        # shown as text: the name is there, the sequences' payloads are not, nothing was cleared
        assert "PWNED" not in screen and "cHduZWQ" not in screen
        assert "spark1" in screen and "spark2" in screen
        # a few more sampling rounds go by while the fake keeps answering
        rounds = screen
        tmux.poll("sec", lambda s: s != rounds, "the screen to refresh", timeout=30)
        buffers = tmux("list-buffers", check=False).stdout
        assert buffers.strip() == "", f"a paste buffer appeared: {buffers!r}"
        title = tmux("display-message", "-p", "-t", "sec", "#{pane_title}").stdout.strip()
        assert title == title_before and "PWNED" not in title
        tmux("send-keys", "-t", "sec", "q")
        done = tmux.poll("sec", lambda s: "SPARKTUI-EXITED-" in s, "the app to exit")
        assert "SPARKTUI-EXITED-0" in done
        assert tmux("list-buffers", check=False).stdout.strip() == ""
    finally:
        tmux("kill-server", check=False)
