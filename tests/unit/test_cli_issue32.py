"""Issue 32's CLI items (11): refusals printed once, diagnose DIR, report --output/--json, and more."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _cli(*argv: str, env: dict | None = None) -> subprocess.CompletedProcess:
    e = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "sparktui", *argv], capture_output=True, text=True, env=e,
                          cwd=ROOT, stdin=subprocess.DEVNULL, timeout=60)


def test_a_refusal_is_printed_once():
    # read-only refuses before any node is contacted
    r = _cli("--read-only", "stop", "--yes", "--config", str(ROOT / "cluster.example.toml"))
    assert r.returncode == 1
    both = r.stdout + r.stderr
    assert both.count("forbids changing the cluster") == 1, both
    assert r.stdout.startswith("FAILED  stop refused")
