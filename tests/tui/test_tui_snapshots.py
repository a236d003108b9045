"""Snapshot tests (pytest-textual-snapshot) of the main screen and help, on deterministic sim
events with a frozen clock.  Update with `pytest tests/tui --snapshot-update` only after looking
at the report."""

from __future__ import annotations

from conftest import build_app


def _populate(pilot) -> None:
    pilot.app.refresh_now()


def test_main_screen_80x24(snap_compare):
    assert snap_compare(build_app(t=90), terminal_size=(80, 24), run_before=_populate)


def test_main_screen_160x48(snap_compare):
    assert snap_compare(build_app(t=90), terminal_size=(160, 48), run_before=_populate)


def test_main_screen_160x48_oom(snap_compare):
    assert snap_compare(build_app("oom", t=120), terminal_size=(160, 48), run_before=_populate)


# help lists the registry, so it uses the sample actions: stable whatever actions the build has
def test_help_80x24(snap_compare, sample_actions):
    assert snap_compare(build_app(t=30), press=["question_mark"], terminal_size=(80, 24), run_before=_populate)


def test_help_160x48(snap_compare, sample_actions):
    assert snap_compare(build_app(t=30), press=["question_mark"], terminal_size=(160, 48), run_before=_populate)
