"""The import contracts (pyproject.toml [tool.importlinter]) and the no-loop rule hold on the package,
and each fails on a violation planted in a copy of it: a new upward import, Textual in the core or an
import loop fails the suite, not a later review."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT = ("import sys; from importlinter.cli import lint_imports; "
        "sys.exit(lint_imports(config_filename='pyproject.toml', no_cache=True, no_logo=True))")


def _in(tree: Path, *argv: str) -> subprocess.CompletedProcess:
    # a fresh interpreter that finds `sparktui` in `tree` first (the linters read the source, never run it)
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run([sys.executable, *argv], cwd=tree, env=env, capture_output=True, text=True, timeout=120)


def _lint(tree: Path) -> subprocess.CompletedProcess:
    return _in(tree, "-c", LINT)


def _loops(tree: Path) -> subprocess.CompletedProcess:
    return _in(tree, str(ROOT / "scripts" / "import_cycles.py"), "sparktui")


def _append(path: Path, line: str) -> None:
    path.write_text(path.read_text() + "\n" + line + "\n")


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "sparktui", tree / "sparktui", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tree / "pyproject.toml")
    return tree


def test_the_package_keeps_every_import_contract():
    r = _lint(ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Contracts: 2 kept, 0 broken." in r.stdout


def test_the_package_has_no_import_loop():
    r = _loops(ROOT)
    assert (r.returncode, r.stdout) == (0, ""), r.stdout + r.stderr


def test_an_upward_import_breaks_the_layers_contract(copy: Path):
    assert _lint(copy).returncode == 0  # the copy is as clean as the package
    (copy / "sparktui" / "diagnosis" / "planted.py").write_text("from ..actions import base\n")
    r = _lint(copy)
    assert r.returncode == 1
    assert "model/config BROKEN" in " ".join(r.stdout.split())
    assert "sparktui.diagnosis.planted -> sparktui.actions.base" in r.stdout


def test_textual_below_the_faces_breaks_the_forbidden_contract(copy: Path):
    _append(copy / "sparktui" / "state.py", "import textual.widget  # planted")
    r = _lint(copy)
    assert r.returncode == 1
    assert "never import textual BROKEN" in r.stdout
    assert "sparktui.state -> textual" in r.stdout


def test_a_type_only_import_is_no_violation(copy: Path):
    (copy / "sparktui" / "diagnosis" / "planted.py").write_text(
        "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from ..actions import base\n")
    assert _lint(copy).returncode == 0
    assert _loops(copy).returncode == 0


def test_a_planted_loop_is_found_and_named(copy: Path):
    _append(copy / "sparktui" / "config_error.py", "from . import config  # planted")
    r = _loops(copy)
    assert r.returncode == 1
    assert r.stdout.splitlines() == ["sparktui.config <-> sparktui.config_checks <-> sparktui.config_error"]
