"""Fixtures for the TUI tests: an app on deterministic sim events, no live sources, frozen clock."""

from __future__ import annotations

import time
from typing import Callable

import pytest

from sparktui.config import demo_config
from sparktui.engine import Engine
from sparktui.sim import DEMO_EPOCH, SimCluster
from sparktui.tui import keymap
from sparktui.tui.app import SparkApp

from pilot_helpers import screen_text, wait_for  # noqa: F401 (tui tests import them from here)


@pytest.fixture(autouse=True)
def _utc(monkeypatch):
    # timestamps and "since HH:MM:SS" render in local time: pin it for stable screens
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def build_app(scenario: str = "healthy", t: float = 60.0, **kw) -> SparkApp:
    config = demo_config()
    sim = SimCluster(config, scenario, 1.0)
    engine = Engine(config, [])
    engine.process(sim.events_until(t))
    nodes = lambda: {n.name: sim.node(n.name) for n in config.nodes}  # noqa: E731
    app = SparkApp(engine, nodes=nodes, live=False, clock=lambda: DEMO_EPOCH + t, **kw)
    app.sim = sim  # type: ignore[attr-defined]
    return app


@pytest.fixture
def make_app() -> Callable[..., SparkApp]:
    return build_app


@pytest.fixture
def sample_actions(monkeypatch):
    """Register the sample actions of tests/tui/tui_sample_actions.py in the action registry."""
    from sparktui.actions import registry

    entries = (
        registry.ActionEntry("echo-test", "Echo (read-only safe)", "tui_sample_actions", "EchoAction", False, "e"),
        registry.ActionEntry("wipe-test", "Wipe (destructive)", "tui_sample_actions", "WipeAction", True, "x"),
    )
    monkeypatch.setattr(registry, "ENTRIES", entries)
    keymap.entries.cache_clear()
    yield entries
    monkeypatch.undo()
    keymap.entries.cache_clear()
