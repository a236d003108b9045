"""What the user typed is echoed inert: a path or argument holding OSC 52 (set the clipboard), BEL and
CSI 2J (clear the screen) named in an error reaches the terminal without its escapes, as one line,
exit 2, whichever command echoes it (issue 30, low: "cannot read PATH", report/replay/--config)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparktui.cli import main

HOSTILE = "x\x1b]52;c;SGVsbG8=\x07\x1b[2Jy\x9b31m"


def _inert(text: str) -> None:
    for c in ("\x1b", "\x07", "\x9b"):
        assert c not in text, repr(text)


def _one_line_2(argv: list[str], capsys) -> str:
    try:
        rc = main(argv)
    except SystemExit as exc:  # argparse
        rc = exc.code
    out, err = capsys.readouterr()
    _inert(out + err)
    assert rc == 2, (rc, err)
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.fixture
def hostile(tmp_path) -> Path:
    return tmp_path / f"{HOSTILE}.log"


@pytest.mark.parametrize("argv", [
    ["diagnose", "{p}"],
    ["report", "{p}"],
    ["replay", "{p}"],
    ["--config", "{p}", "status"],
    ["status", "--config", "{p}"],
    ["report", "--config", "{p}"],
    ["replay", "--config", "{p}", "some-session"],
    ["sessions", "--config", "{p}"],
    ["doctor", "--config", "{p}"],
])
def test_a_missing_path_is_echoed_inert(hostile, capsys, argv):
    err = _one_line_2([a.replace("{p}", str(hostile)) for a in argv], capsys)
    assert "xy.log" in err  # the name is still said, only its escapes are gone


def test_a_folder_given_as_a_log_is_echoed_inert(hostile, capsys):
    hostile.mkdir()
    assert "no log file" in _one_line_2(["diagnose", str(hostile)], capsys)  # an empty folder


def test_a_config_key_with_escapes_is_echoed_inert(tmp_path, capsys):
    cfg = tmp_path / "cluster.toml"
    cfg.write_text('"\\u001b]52;c;SGVsbG8=\\u0007\\u001b[2J" = 1\n[[node]]\nname = "a"\nbackend = "local"\n')
    _one_line_2(["status", "--config", str(cfg)], capsys)


def test_argparse_echoes_an_unknown_argument_inert(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["status", HOSTILE])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    _inert(err)
    assert err.splitlines()[-1].startswith("sparktui: error: unrecognized arguments: x")


def test_a_session_dir_with_escapes_is_listed_inert(tmp_path, capsys):
    cfg = tmp_path / "cluster.toml"
    cfg.write_text(f'session_dir = "{tmp_path}/\\u001b[2Jsessions\\u0007"\n[[node]]\nname = "a"\nbackend = "local"\n')
    assert main(["sessions", "--config", str(cfg)]) == 0
    out = capsys.readouterr().out
    _inert(out)
    assert out.startswith("no sessions recorded in")
