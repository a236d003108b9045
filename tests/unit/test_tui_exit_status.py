"""Issue 30: a TUI that dies of bad data exits with a non-zero status (it returned 0 before), so a
wrapper script or the operator's shell sees the crash."""

from __future__ import annotations

from types import SimpleNamespace

from sparktui.config import demo_config
from sparktui.engine import Engine
from sparktui.tui import app as app_mod
from sparktui.tui.boot import run_app


def test_a_tui_that_crashes_exits_non_zero(monkeypatch, capsys):
    run = app_mod.SparkApp.run
    monkeypatch.setattr(app_mod.SparkApp, "run", lambda self, **kw: run(self, headless=True, **kw))

    async def boom(self) -> None:
        raise ValueError("could not convert string to float: '+Inf'")

    monkeypatch.setattr(app_mod.SparkApp, "on_mount", boom)
    rc = run_app(Engine(demo_config(), []), SimpleNamespace(), nodes=None, subtitle="t")
    assert rc == 1
