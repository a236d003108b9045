"""CLI conventions: --version, shell completion generated from the parser, NO_COLOR."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sparktui.cli import build_parser
from sparktui.commands.completion import bash_script, zsh_script

ROOT = Path(__file__).resolve().parents[2]


def _run(*argv: str, env: dict | None = None, stdin: str | None = None) -> subprocess.CompletedProcess:
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([sys.executable, *argv], capture_output=True, text=True, env=e, cwd=ROOT,
                          input=stdin, timeout=60)


def test_version_lists_every_component_without_importing_them():
    # -X importtime logs every module import on stderr: none of the heavy ones may appear
    r = _run("-X", "importtime", "-m", "sparktui", "--version")
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    from importlib.metadata import version

    assert out[0] == f"sparktui {version('sparktui')}"
    assert out[1].startswith(f"Python {sys.version_info.major}.{sys.version_info.minor}.")
    assert f"textual {version('textual')}" in out
    assert f"asyncssh {version('asyncssh')}" in out
    assert f"docker {version('docker')}" in out
    imported = {line.split("|")[-1].strip() for line in r.stderr.splitlines() if line.startswith("import time:")}
    for heavy in ("textual", "asyncssh", "docker", "rich"):
        assert heavy not in imported, f"--version imported {heavy}"


def _complete(script: Path, *words: str) -> list[str]:
    """Source the generated script in a real bash and call its function as bash would on <TAB>."""
    arr = " ".join(f"'{w}'" for w in words)
    cmd = (f"source {script}; COMP_WORDS=({arr}); COMP_CWORD={len(words) - 1}; "
           "_sparktui; printf '%s\\n' \"${COMPREPLY[@]}\"")
    r = subprocess.run(["bash", "--norc", "--noprofile", "-c", cmd], capture_output=True, text=True, timeout=30,
                       cwd=ROOT)
    assert r.returncode == 0, r.stderr
    return [w for w in r.stdout.splitlines() if w]


@pytest.fixture(scope="module")
def bash_file(tmp_path_factory) -> Path:
    r = _run("-m", "sparktui", "completion", "bash")
    assert r.returncode == 0, r.stderr
    p = tmp_path_factory.mktemp("comp") / "sparktui.bash"
    p.write_text(r.stdout)
    return p


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
class TestBash:
    def test_subcommands_from_the_parser(self, bash_file):
        got = _complete(bash_file, "sparktui", "")
        parser_cmds = next(a for a in build_parser()._actions if a.__class__.__name__ == "_SubParsersAction").choices
        assert set(parser_cmds) <= set(got)
        assert "--version" in got and "--config" in got

    def test_prefix_filters(self, bash_file):
        assert _complete(bash_file, "sparktui", "do") == ["doctor"]

    def test_subcommand_flags(self, bash_file):
        got = _complete(bash_file, "sparktui", "load-test", "--c")
        assert sorted(got) == ["--concurrency", "--config"]
        assert "--json" not in _complete(bash_file, "sparktui", "load-test", "--c")

    def test_top_level_value_is_skipped_when_finding_the_subcommand(self, bash_file):
        # `--config x.toml` before the subcommand: x.toml is a value, status is the command
        got = _complete(bash_file, "sparktui", "--config", "x.toml", "status", "--")
        assert "--json" in got and "--timeout" in got and "--scenario" not in got

    def test_choices(self, bash_file):
        assert sorted(_complete(bash_file, "sparktui", "demo", "--scenario", "")) == sorted(
            ["healthy", "nccl-hang", "oom", "unsupported-arch"])
        assert _complete(bash_file, "sparktui", "--theme", "sparktui-l") == ["sparktui-light"]
        assert sorted(_complete(bash_file, "sparktui", "completion", "")) == ["--help", "-h", "bash", "zsh"]

    def test_path_values_complete_files(self, bash_file, tmp_path):
        (tmp_path / "cluster-a.toml").write_text("")
        got = _complete(bash_file, "sparktui", "status", "--config", str(tmp_path / "cluster-"))
        assert got == [str(tmp_path / "cluster-a.toml")]

    def test_free_values_complete_nothing(self, bash_file):
        assert _complete(bash_file, "sparktui", "status", "--timeout", "") == []


def test_zsh_script_covers_the_parser():
    text = zsh_script(build_parser())
    assert text.startswith("#compdef sparktui")
    assert "'load-test:" in text and "'--concurrency[" in text and "(bash zsh)" in text
    if shutil.which("zsh"):  # syntax check where zsh exists
        r = subprocess.run(["zsh", "-n"], input=text, capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr


def test_bash_script_is_valid_syntax():
    r = subprocess.run(["bash", "-n"], input=bash_script(build_parser()), capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr


# --- NO_COLOR --------------------------------------------------------------------------------

ERROR_LOG = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"


def _pty_run(argv: list[str], env: dict) -> str:
    """Run with stdout on a pseudo-terminal (so isatty() is true) and return what it wrote."""
    import pty

    master, slave = pty.openpty()
    e = dict(os.environ)
    e.pop("NO_COLOR", None)
    e.update(env)
    p = subprocess.Popen([sys.executable, "-m", "sparktui", *argv], stdin=subprocess.DEVNULL, stdout=slave,
                         stderr=subprocess.DEVNULL, env=e, cwd=ROOT)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed its end
            break
        if not data:
            break
        chunks.append(data)
    p.wait(timeout=60)
    os.close(master)
    return b"".join(chunks).decode(errors="replace")


def test_diagnose_colours_a_terminal_but_not_with_no_color(tmp_path):
    log = tmp_path / "rank0.log"
    log.write_text(ERROR_LOG)
    coloured = _pty_run(["diagnose", str(log)], {})
    assert "\x1b[" in coloured  # the control: colour is on for a terminal
    plain = _pty_run(["diagnose", str(log)], {"NO_COLOR": "1"})
    assert "ERROR" in plain and "\x1b[" not in plain


def test_diagnose_piped_has_no_colour(tmp_path):
    log = tmp_path / "rank0.log"
    log.write_text(ERROR_LOG)
    r = _run("-m", "sparktui", "diagnose", str(log), env={"NO_COLOR": ""})
    assert "ERROR" in r.stdout and "\x1b[" not in r.stdout


def test_use_colour():
    import io

    from sparktui.colour import use_colour

    class Tty(io.StringIO):
        def isatty(self):
            return True

    old = os.environ.pop("NO_COLOR", None)
    try:
        assert use_colour(Tty()) is True
        assert use_colour(io.StringIO()) is False
        os.environ["NO_COLOR"] = "1"
        assert use_colour(Tty()) is False
        os.environ["NO_COLOR"] = ""  # an empty value does not count (no-color.org)
        assert use_colour(Tty()) is True
    finally:
        os.environ.pop("NO_COLOR", None)
        if old is not None:
            os.environ["NO_COLOR"] = old


def test_importing_the_ssh_backend_puts_no_library_warning_on_stderr():
    # cryptography 51 warns about DSA whenever asyncssh is imported; every command that reaches a node
    # printed it (ten lines before a one-line error).  -W error turns any warning left into a failure.
    r = _run("-W", "error", "-c", "import sparktui.nodes.ssh, sparktui.nodes.hostkeys")
    assert r.returncode == 0 and r.stderr == "", r.stderr[-800:]
