"""`report`, `report NAME` and `replay NAME` look for sessions where the session writer puts them:
the config's ``session_dir`` when it sets one (issue 30 item 13)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparktui.cli import main
from sparktui.model import Note
from sparktui.session import Session


@pytest.fixture
def configured(tmp_path) -> tuple[Path, Session]:
    sd = tmp_path / "team-sessions"
    cfg = tmp_path / "cluster.toml"
    cfg.write_text(f'session_dir = "{sd}"\n[[node]]\nname = "a"\nbackend = "local"\n')
    s = Session.create("omega", meta={"kind": "tui", "nodes": ["a"]}, root=sd)
    s.record(Note(text="kept in the configured folder", ts=1.0))
    s.close()
    return cfg, s


@pytest.mark.parametrize("how", ["subcommand", "top", "default"])
def test_report_finds_the_latest_and_a_named_session_in_session_dir(configured, capsys, monkeypatch, how):
    cfg, s = configured
    if how == "default":  # no --config: the default config file names the folder
        monkeypatch.setenv("SPARKTUI_CONFIG", str(cfg))
    for name in ([], [s.path.name]):
        argv = {"subcommand": ["report", "--config", str(cfg), *name], "top": ["--config", str(cfg), "report", *name],
                "default": ["report", *name]}[how]
        assert main(argv) == 0, capsys.readouterr().err
        out = capsys.readouterr().out
        assert out.startswith(f"# Incident report: {s.path.name}") and "kept in the configured folder" in out


def test_report_not_found_names_the_configured_folder(configured, capsys):
    cfg, _ = configured
    assert main(["report", "--config", str(cfg), "no-such-session"]) == 2
    err = capsys.readouterr().err
    assert "team-sessions" in err and err.count("\n") == 1


def test_replay_finds_a_named_session_in_session_dir(configured, capsys):
    cfg, s = configured
    # a bad --at is checked after the session is loaded: the session was found, the TUI never starts
    assert main(["replay", "--config", str(cfg), s.path.name, "--at", "not-a-time"]) == 2
    err = capsys.readouterr().err
    assert "--at:" in err and "not a session directory" not in err, err
