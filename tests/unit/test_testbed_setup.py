"""Set-up rough edges (issue 32 item 12): `scripts/testbed --help` names every environment variable the
bed reads and every scenario; the bed's scripts import only the standard library or what pyproject
declares; `.ci/run` installs `.[test]` once, with the README's test command verbatim."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts"
SCENARIOS = SCRIPTS / "testbed_scenarios"
LIB = SCRIPTS / "testbed_lib"

# reads of the environment: os.environ.get("X"), env.get("X") (env = os.environ), os.getenv("X"),
# os.environ["X"]; in a shell scenario, $X / ${X}
PY_READ = re.compile(r"""(?:\.get|getenv)\(\s*["']([A-Z][A-Z0-9_]{2,})["']|environ\[\s*["']([A-Z][A-Z0-9_]{2,})["']\s*\](?!\s*=[^=])""")
SH_READ = re.compile(r"\$\{?([A-Z][A-Z0-9_]{2,})")


def bed_sources() -> list[Path]:
    return [SCRIPTS / "testbed", *sorted(LIB.glob("*.py")), *sorted(SCENARIOS.glob("*.py"))]


def scenario_names() -> list[str]:
    return sorted(p.stem for p in SCENARIOS.iterdir() if p.suffix in (".py", ".sh") and not p.stem.startswith("_"))


def variables_read() -> set[str]:
    found: set[str] = set()
    for f in bed_sources():
        found |= {a or b for a, b in PY_READ.findall(f.read_text())}
    for f in SCENARIOS.glob("*.sh"):
        found |= set(SH_READ.findall(f.read_text()))
    return found - {"PATH", "HOME", "USER"}  # the shell's own, not the bed's settings


def run_help(*args: str) -> str:
    r = subprocess.run([sys.executable, str(SCRIPTS / "testbed"), *args, "--help"], capture_output=True,
                       text=True, timeout=30, cwd=str(ROOT))
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_help_lists_every_variable_the_bed_reads_and_every_scenario():
    read = variables_read()
    assert {"SPARKTUI_TESTBED_DIR", "SPARKTUI_TESTBED_NET", "SPARKTUI_TESTBED_CACHE"} <= read  # the scan works
    names = scenario_names()
    assert {"seed", "real-vllm"} <= set(names)
    for args in ((), ("up",)):
        out = run_help(*args)
        lines = out.splitlines()
        for var in sorted(read):
            row = next((ln for ln in lines if ln.split()[:1] == [var]), None)
            assert row, f"`scripts/testbed {' '.join(args)} --help` does not explain {var}"
            assert "default" in row and len(row.split()) > 3, row  # a meaning and a default, not the bare name
        for name in names:
            row = next((ln for ln in lines if ln.split()[:1] == [name]), None)
            assert row and len(row.split()) > 3, f"scenario {name} has no line of its own in the help"


def test_an_unknown_scenario_is_refused_in_one_line_before_anything_starts():
    r = subprocess.run([sys.executable, str(SCRIPTS / "testbed"), "up", "--scenario", "no-such"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2
    assert "invalid choice: 'no-such'" in r.stderr and "'seed'" in r.stderr and "Traceback" not in r.stderr


def _top(name: str) -> str:
    return re.split(r"[<>=!~;\[ ]", name, maxsplit=1)[0]


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def declared_import_names() -> set[str]:
    """pyproject's dependencies and extras, as import names (an installed distribution's own list of
    top-level modules when it is installed, else its normalised name)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    dists = {_norm(_top(d)) for d in project["dependencies"]}
    for extra in project.get("optional-dependencies", {}).values():
        dists |= {_norm(_top(d)) for d in extra}
    names = set(dists)
    for module, owners in importlib.metadata.packages_distributions().items():
        if any(_norm(o) in dists for o in owners):
            names.add(module)
    return names


def test_the_bed_imports_only_the_stdlib_and_what_pyproject_declares():
    own = {"sparktui", LIB.name} | {p.stem for p in SCENARIOS.glob("*.py")} | {p.stem for p in SCRIPTS.glob("*.py")}
    declared = declared_import_names()
    undeclared = []
    for f in bed_sources():
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                mods = [node.module]
            else:
                continue
            for m in mods:
                top = m.split(".")[0]
                if top not in sys.stdlib_module_names and top not in own and top not in declared:
                    undeclared.append(f"{f.relative_to(ROOT)}:{node.lineno} imports {m}")
    assert not undeclared, "not in pyproject's dependencies or extras: " + "; ".join(undeclared)


def readme_test_command() -> str:
    lines = (ROOT / "README.md").read_text().splitlines()
    i = next(i for i, ln in enumerate(lines) if ln.startswith("# 2."))  # the set-up block's command 2
    return lines[i + 1].strip()


def test_ci_installs_the_package_once_with_the_readme_test_command_verbatim():
    cmd = readme_test_command()
    assert "pip install" in cmd and "pytest" in cmd, cmd
    code = [ln.strip() for ln in (ROOT / ".ci" / "run").read_text().splitlines()]
    code = [ln for ln in code if ln and not ln.startswith("#")]
    assert cmd in code, f".ci/run does not run the README's test command: {cmd}"
    installs = [ln for ln in code if "pip install" in ln]
    assert installs == [cmd], f".ci/run installs the package more than once: {installs}"


def test_real_vllm_without_packaging_says_which_install_in_one_line():
    """README command 1 installs the package without the [test] extra: the scenario then stops at once
    with the install to run, not a traceback half-way through building the environment."""
    script = SCENARIOS / "real-vllm.py"
    hide = ("import runpy, sys; sys.modules['packaging'] = None; "  # as if it were not installed
            f"sys.argv = [{str(script)!r}, '/nonexistent-bed']; runpy.run_path(sys.argv[0], run_name='__main__')")
    r = subprocess.run([sys.executable, "-c", hide], capture_output=True, text=True, timeout=30)
    assert r.returncode == 1
    assert r.stderr.strip().splitlines() == [
        "real-vllm: needs the Python module 'packaging' (the tests' install, README command 2): "
        "python3 -m pip install -e '.[test]'"]
