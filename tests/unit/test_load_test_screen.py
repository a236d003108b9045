"""The Load test screen (key T) against the stand-in vLLM on 127.0.0.1: form, progress, table, plot."""

from __future__ import annotations

import asyncio
import importlib.util
from pathlib import Path

from textual.widgets import DataTable, Input, ProgressBar, Static

from sparktui.config import demo_config
from sparktui.engine import Engine
from sparktui.tui import load_test as lt_screen
from sparktui.tui.app import SparkApp

_spec = importlib.util.spec_from_file_location("_lt_runner_tests", Path(__file__).with_name("test_load_test_runner.py"))
_mod = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_mod)
Server, KEY = _mod.Server, _mod.KEY


def _app() -> SparkApp:
    config = demo_config()
    return SparkApp(Engine(config, []), nodes=lambda: {}, live=False)


async def test_key_T_runs_a_load_test_and_shows_percentiles_and_plot(monkeypatch):
    config = demo_config()
    with Server() as srv:
        monkeypatch.setenv("SPARKTUI_API_BASE", srv.url)
        monkeypatch.setenv(config.api_key_env, KEY)
        app = _app()
        async with app.run_test(size=(140, 50)) as pilot:
            await pilot.press("T")
            await pilot.pause()
            screen = app.screen
            assert isinstance(screen, lt_screen.LoadTestScreen)
            screen.query_one("#lt-concurrency", Input).value = "3"
            screen.query_one("#lt-requests", Input).value = "9"
            await pilot.click("#lt-start")
            await pilot.pause()
            await asyncio.wait_for(screen._worker.wait(), 30)
            await pilot.pause()
            assert srv.streams == 9 and srv.peak <= 3
            assert screen.result.ok, screen.result.summary
            assert screen.action_obj.result.summary["completed"] == 9
            table = screen.query_one(DataTable)
            assert [str(r.key.value) for r in table.ordered_rows] == ["TTFT", "TPOT", "ITL", "E2EL"]
            assert screen.query_one(ProgressBar).progress == 100
            status = str(screen.query_one("#lt-status", Static).render())
            assert "9 completed, 0 failed" in status
            assert "E2EL ms" in str(screen.query_one("#lt-plot", Static).render())
            await pilot.press("escape")
            await pilot.pause()
            assert not isinstance(app.screen, lt_screen.LoadTestScreen)


async def test_bad_form_value_is_one_line_and_nothing_runs(monkeypatch):
    app = _app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("T")
        await pilot.pause()
        screen = app.screen
        screen.query_one("#lt-concurrency", Input).value = "0"
        await pilot.click("#lt-start")
        await pilot.pause()
        assert screen._worker is None
        assert "concurrency must be a positive integer" in str(screen.query_one("#lt-status", Static).render())
