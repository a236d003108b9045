"""The guided actions the faces offer.  Each entry names the module and class that implement it;
an entry whose module (or class) cannot be imported is simply not offered, so the TUI runs with
whatever the build contains.  No Textual here.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .base import Action


@dataclass(frozen=True)
class ActionEntry:
    name: str  # cli-style name, also the palette/help id
    title: str
    module: str
    cls: str
    mutating: bool
    key: str  # Textual key name in the TUI
    screen: str = ""  # optional "module:Class" of a richer TUI screen, built like ActionScreen(entry, cls)


ENTRIES: tuple[ActionEntry, ...] = (
    ActionEntry("doctor", "Doctor: preflight checks", "sparktui.actions.doctor", "DoctorAction", False, "d"),
    ActionEntry("validate", "Validate image + model on one node", "sparktui.actions.validate", "ValidateAction", True, "v"),
    ActionEntry("build-image", "Build the hybrid image", "sparktui.actions.image", "BuildImageAction", True, "b"),
    ActionEntry("push-image", "Push the image node-to-node", "sparktui.actions.image", "PushImageAction", True, "p"),
    ActionEntry("launch", "Launch the cluster", "sparktui.actions.launch", "LaunchAction", True, "l",
                screen="sparktui.tui.launch:LaunchScreen"),
    ActionEntry("stop", "Stop the cluster on every node", "sparktui.actions.stop", "StopAction", True, "x"),
    ActionEntry("prompt", "Test prompt through the API", "sparktui.actions.prompt", "PromptAction", False, "P",
                screen="sparktui.tui.prompt:PromptScreen"),
    ActionEntry("investigate", "Investigate an NCCL hang", "sparktui.actions.investigate", "Investigate", False, "i",
                screen="sparktui.tui.screens.investigate:InvestigateScreen"),
    ActionEntry("load-test", "Load test the API", "sparktui.actions.load_test", "LoadTestAction", False, "T",
                screen="sparktui.tui.load_test:LoadTestScreen"),
)


def load(entry: ActionEntry) -> "type[Action] | None":
    """The Action class of ``entry``, or None when it is not in this build.

    The class is looked up by name, else as the one Action subclass whose ``name`` matches.
    """
    try:
        module = importlib.import_module(entry.module)
    except Exception:  # a half-written or missing module must not break the faces
        return None
    from .base import Action

    cls = getattr(module, entry.cls, None)
    if inspect.isclass(cls) and issubclass(cls, Action):
        return cls
    for _, obj in inspect.getmembers(module, inspect.isclass):
        if issubclass(obj, Action) and obj is not Action and getattr(obj, "name", None) == entry.name:
            return obj
    return None


def load_screen(entry: ActionEntry) -> type | None:
    """The entry's own screen class when it names one that imports, else None (generic screen)."""
    if not entry.screen:
        return None
    module, _, name = entry.screen.partition(":")
    try:
        return getattr(importlib.import_module(module), name, None)
    except Exception:
        return None


def entry(name: str) -> ActionEntry | None:
    for e in ENTRIES:
        if e.name == name:
            return e
    return None


def available() -> list[tuple[ActionEntry, "type[Action]"]]:
    out = []
    for e in ENTRIES:
        cls = load(e)
        if cls is not None:
            out.append((e, cls))
    return out


def present() -> list[ActionEntry]:
    """Entries whose module exists in this build, found without importing it (startup stays fast;
    faces import an entry when it is first used, see ``load``)."""
    out = []
    for e in ENTRIES:
        try:
            found = importlib.util.find_spec(e.module) is not None
        except (ImportError, ValueError):
            found = False
        if found:
            out.append(e)
    return out
