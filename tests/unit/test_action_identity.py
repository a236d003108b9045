"""One identity per guided action: the registry entry is the only place its name, title and "changes a
node" flag are written; the TUI picks the screen; a module that does not import is reported, not hidden;
--help lists only the commands this build has."""

from __future__ import annotations

import inspect
import logging
import re
import sys

import pytest

from sparktui.actions import registry
from sparktui.cli import build_parser


@pytest.mark.parametrize("entry", registry.BUILT_IN, ids=[e.name for e in registry.BUILT_IN])
def test_each_action_class_takes_its_identity_from_its_entry(entry):
    cls = registry.load_or_raise(entry)
    assert (cls.name, cls.title, cls.mutating) == (entry.name, entry.title, entry.mutating)
    # written nowhere else: the class body does not say it again (and so cannot disagree)
    assert not re.search(r"^    (name|title|mutating) = ", inspect.getsource(cls), re.M)


def test_a_class_the_registry_does_not_name_keeps_its_own_identity():
    from sparktui.actions.base import Action

    class Own(Action):
        name, title, mutating = "own-test", "Own", True

    assert (Own.name, Own.title, Own.mutating) == ("own-test", "Own", True)


def test_a_module_that_does_not_import_is_reported_with_its_cause(tmp_path, monkeypatch, caplog):
    (tmp_path / "half_written_action.py").write_text("import no_such_module_anywhere\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    entry = registry.ActionEntry("half-test", "Half", "half_written_action", "HalfAction", False, "h")
    with pytest.raises(registry.ActionUnavailable, match="half_written_action does not import") as err:
        registry.load_or_raise(entry)
    assert isinstance(err.value.__cause__, ModuleNotFoundError)
    with caplog.at_level(logging.ERROR, logger="sparktui.actions.registry"):
        assert registry.load(entry) is None  # the faces still run without it ...
    assert "half-test is not offered" in caplog.text and "no_such_module_anywhere" in caplog.text  # ... and say why


def test_an_entry_naming_a_missing_class_is_unavailable():
    entry = registry.ActionEntry("doctor", "Doctor", "sparktui.actions.doctor", "NoSuchAction", False, "d")
    with pytest.raises(registry.ActionUnavailable, match="no action class NoSuchAction"):
        registry.load_or_raise(entry)


def test_the_tui_maps_actions_to_screens():
    from sparktui.tui.action_screens import screen_for
    from sparktui.tui.launch import LaunchScreen
    from sparktui.tui.load_test import LoadTestScreen
    from sparktui.tui.screens.action import ActionScreen

    assert screen_for("launch") is LaunchScreen and screen_for("load-test") is LoadTestScreen
    assert screen_for("doctor") is ActionScreen and screen_for("stop") is ActionScreen
    assert not hasattr(registry.BUILT_IN[0], "screen")  # the registry names no screen


def _listed(parser) -> list[str]:
    return re.findall(r"^    (\S+)", parser.format_help(), re.M)


def test_help_lists_only_commands_this_build_has(monkeypatch):
    assert "report" in _listed(build_parser())
    monkeypatch.setitem(sys.modules, "sparktui.commands.report", None)  # as if report.py were not in the build
    listed = _listed(build_parser())
    assert "report" not in listed and "sessions" in listed


def test_the_engines_processors_do_not_hide_an_import_error(monkeypatch):
    from sparktui.tui.boot import default_processors

    assert [type(p).__name__ for p in default_processors()] == ["Diagnoser", "StallDetector", "ClusterWatch", "Lifecycle"]
    monkeypatch.setitem(sys.modules, "sparktui.diagnosis.stall", None)  # as if stall.py did not import
    with pytest.raises(ImportError):
        default_processors()
