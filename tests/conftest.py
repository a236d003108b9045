"""Shared test fixtures.  Sessions and state go to a temporary XDG state dir, never $HOME."""

from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(autouse=True)
def _isolated_state(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARKTUI_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    yield


@pytest.fixture
def fixtures_dir() -> Path:
    return FIXTURES
