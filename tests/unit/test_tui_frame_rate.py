"""The app's frame cap (sparktui/tui/__init__.py): a key's repaint waits for Textual's next frame
slot, so the cap is raised to 120 before Textual is imported; an operator's TEXTUAL_FPS wins."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROBE = "import sparktui.tui.app, textual.constants as c; print(c.MAX_FPS)"


def _fps(**env: str) -> int:
    base = {k: v for k, v in os.environ.items() if k != "TEXTUAL_FPS"}
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, cwd=ROOT,
                         env={**base, "PYTHONPATH": str(ROOT), **env})
    return int(out.stdout.strip())


def test_the_app_paints_up_to_120_frames_a_second_unless_the_operator_says_otherwise():
    assert _fps() == 120
    assert _fps(TEXTUAL_FPS="30") == 30
