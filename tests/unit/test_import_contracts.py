"""The import contracts (pyproject.toml [tool.importlinter]) and the no-loop rule hold on the package,
and each fails on a violation planted in a copy of it: a new upward import, Textual in the core, a
sparktui import in code that runs on a node, diagnosis reaching for a node, or an import loop fails
the suite, not a later review.  The node-side contract lists every program sent to or installed on a
node: a new one must be added there."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "sparktui"
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


def _contract(cid: str) -> dict:
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    return next(c for c in contracts if c["id"] == cid)


NODE_SIDE = _contract("node-side-standalone")["source_modules"]


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "sparktui", tree / "sparktui", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tree / "pyproject.toml")
    return tree


def test_the_package_keeps_every_import_contract():
    r = _lint(ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Contracts: 4 kept, 0 broken." in r.stdout


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


def _shipped() -> set[str]:
    """The modules whose source is sent to a node (``source()`` reading its own file, or a file read
    out of the package by name) or installed into the test bed's node images."""
    out: set[str] = set()
    for p in PKG.rglob("*.py"):
        text = p.read_text(encoding="utf-8")
        if "def source(" in text and "open(__file__" in text:
            out.add(".".join(p.relative_to(ROOT).with_suffix("").parts))
        out |= {f"{pkg}.{name}" for pkg, name in re.findall(r'files\("([\w.]+)"\)\.joinpath\("(\w+)\.py"\)', text)}
    for p in (ROOT / "scripts" / "testbed_scenarios").glob("*.py"):
        text = p.read_text(encoding="utf-8")
        out |= {f"sparktui.sim.{n}" for n in re.findall(r'(?:SIM|"sparktui" / "sim") / "(\w+)\.py"', text)}
    return out


def test_every_program_that_runs_on_a_node_is_under_the_node_side_contract():
    assert _shipped() == set(NODE_SIDE)


@pytest.mark.parametrize("module", NODE_SIDE)
def test_a_sparktui_import_in_code_that_runs_on_a_node_breaks_its_contract(copy: Path, module: str):
    _append(copy.joinpath(*module.split(".")).with_suffix(".py"), "import sparktui.units  # planted")
    r = _lint(copy)
    assert r.returncode == 1
    assert "code that runs on a node imports nothing of sparktui BROKEN" in r.stdout
    assert f"{module} -> sparktui.units" in r.stdout


@pytest.mark.parametrize("target", ["nodes.base", "transport.threads"])
def test_diagnosis_reaching_for_a_node_breaks_its_contract(copy: Path, target: str):
    # transport sits below diagnosis in the layers: only this contract keeps diagnosis off it
    (copy / "sparktui" / "diagnosis" / "planted.py").write_text(f"from ..{target} import *  # planted\n")
    r = _lint(copy)
    assert r.returncode == 1
    assert "never imports nodes, probes, collectors or transport BROKEN" in " ".join(r.stdout.split())
    assert f"sparktui.diagnosis.planted -> sparktui.{target}" in r.stdout
