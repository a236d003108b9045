"""`sparktui launch` prints its plan readably (issue 32 item 1): one summary line per node by default,
the full `docker run` commands, wrapped one argument group a line, only with --verbose.  The CLI's own
context, printer and y/N prompt run the real launch's plan-and-confirm step; the answer comes through a
real pseudo-terminal."""

from __future__ import annotations

import io
import os
import sys

import pytest
from test_launch_plan import cfg

from sparktui.actions import cli_runner
from sparktui.actions.cluster_plan import plan_cluster
from sparktui.actions.launch import LaunchAction
from sparktui.cli import build_parser


async def _ask(argv: list[str], answer: str, monkeypatch, capsys) -> tuple[bool, list[str]]:
    args = build_parser().parse_args(["launch", *argv])
    config = cfg('executor = "mp"')
    err = io.StringIO()
    master, slave = os.openpty()
    os.write(master, answer.encode() + b"\n")
    tty = os.fdopen(slave, "r")
    monkeypatch.setattr(sys, "stdin", tty)
    verbose = bool(args.verbose)
    ctx = cli_runner._CliContext(config, {}, emit=cli_runner._Printer(stream=err),
                                 confirm=lambda t, d="", f="": cli_runner.cli_confirm(t, d, f, verbose=verbose),
                                 assume_yes=args.yes)
    ctx.verbose = verbose
    ctx.action_name = "launch"
    try:
        monkeypatch.setattr(sys, "stderr", err)
        ok = await LaunchAction()._plan_and_confirm(ctx, plan_cluster(config, launch_id="abc"), [])
    finally:
        tty.close()
        os.close(master)
    out = capsys.readouterr().out + err.getvalue()
    return ok, out.splitlines()


@pytest.mark.parametrize("argv,answer,ok", [([], "n", False), (["--yes"], "", True)])
async def test_default_plan_is_a_line_per_node_no_docker_run(argv, answer, ok, monkeypatch, capsys):
    got, lines = await _ask(argv, answer, monkeypatch, capsys)
    assert got is ok
    assert max(map(len, lines)) <= 200, max(lines, key=len)
    assert not any("docker run" in line for line in lines)
    assert sum("spark1  head" in line for line in lines) == 1 and sum("spark2  worker" in line for line in lines) == 1
    if not argv:
        assert any("--verbose shows the full commands" in line for line in lines)


@pytest.mark.parametrize("argv,answer,ok", [(["--verbose"], "y", True), (["--yes", "-v"], "", True)])
async def test_verbose_shows_the_docker_run_commands_wrapped(argv, answer, ok, monkeypatch, capsys):
    got, lines = await _ask(argv, answer, monkeypatch, capsys)
    assert got is ok
    assert sum(line == "docker run -d \\" for line in lines) == 2  # one per node, its groups below it
    assert "    --master-addr 192.168.200.12 \\" in lines and "    --headless" in lines
    assert max(map(len, lines)) <= 200, max(lines, key=len)
    assert not any("hf_secret" in line for line in lines)


def test_verbose_is_a_launch_flag_the_completion_offers():
    from sparktui.commands.completion import describe

    _, subs = describe(build_parser())
    launch = next(c for c in subs if c.name == "launch")
    assert any("--verbose" in o.flags for o in launch.opts)
