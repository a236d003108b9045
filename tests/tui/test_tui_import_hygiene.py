"""The core imports and runs without Textual (a subprocess where `import textual` fails)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

BLOCKER = r"""
import sys
class _NoTextual:
    def find_spec(self, name, path=None, target=None):
        if name == "textual" or name.startswith("textual."):
            raise ImportError("textual is blocked for this test")
        return None
sys.meta_path.insert(0, _NoTextual())
"""


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", BLOCKER + code], cwd=ROOT, capture_output=True, text=True, timeout=60)


def test_engine_imports_without_textual():
    r = _run("import sparktui.engine; print('ok')")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"


def test_blocker_really_blocks_textual():
    r = _run("import textual")
    assert r.returncode != 0 and "blocked" in r.stderr


def test_engine_runs_the_demo_events_and_registry_without_textual():
    code = (
        "from sparktui.config import demo_config\n"
        "from sparktui.engine import Engine\n"
        "from sparktui.sim import SimCluster\n"
        "from sparktui.actions import registry\n"
        "import sys\n"
        "c = demo_config(); e = Engine(c, [])\n"
        "e.process(SimCluster(c).events_until(30))\n"
        "registry.available()\n"
        "assert e.state.nodes['spark1'].containers\n"
        "assert not any(m == 'textual' or m.startswith('textual.') for m in sys.modules)\n"
        "print('ok')\n"
    )
    r = _run(code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"
