"""The guided actions the faces offer: one entry per action, the one place its name, title, key and
whether it changes a node ("mutating") are written.  The Action class an entry names takes them from
here (Action.__init_subclass__); which TUI screen shows an action is the TUI's business
(tui/action_screens.py).  No Textual here, and no import at run time: this sits below actions/base.py.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .base import Action

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ActionEntry:
    name: str  # cli-style name, also the palette/help id
    title: str
    module: str
    cls: str
    mutating: bool
    key: str  # Textual key name in the TUI
    # what it does that an observer must not start although no node changes ('' for nothing): refused in
    # read-only like a mutating action, with this as the reason
    loads: str = ""
    # False: the demo (`sparktui demo`) does not offer it: it needs a Docker Engine on real nodes, which the
    # sim cluster has not, and a failure of it there would be the demo's invention, not the cluster's
    in_demo: bool = True
    # in the TUI's footer (help and the palette list every action): the footer is one line, and what
    # falls off its end is q Quit and ? Help
    footer: bool = True

    def demo_refusal(self) -> str:
        """Why the demo does not offer this action ('' when it does)."""
        return "" if self.in_demo else demo_refusal(self.name)

    def read_only_refusal(self) -> str:
        """Why read-only mode refuses this action ('' when it may run there)."""
        return read_only_refusal(self.name, self.mutating, self.loads)


def read_only_refusal(name: str, mutating: bool, loads: str) -> str:
    """The one sentence every face says when read-only mode refuses an action ('' when it may run)."""
    if mutating:
        return f"{name} refused: read-only mode (--read-only) forbids changing the cluster"
    if loads:
        return f"{name} refused: read-only mode (--read-only): it {loads}"
    return ""


def demo_refusal(name: str) -> str:
    """The one sentence every face says for an action the demo does not offer."""
    return (f"{name}: not in the demo (it needs Docker on real nodes: run `sparktui` with a cluster config "
            "or the test bed)")


BUILT_IN: tuple[ActionEntry, ...] = (
    ActionEntry("doctor", "Doctor: preflight checks", "sparktui.actions.doctor", "DoctorAction", False, "d",
                loads="starts probe containers on the nodes", in_demo=False),
    ActionEntry("validate", "Validate image + model on one node", "sparktui.actions.validate", "ValidateAction", True, "v",
                in_demo=False),
    ActionEntry("build-image", "Build the hybrid image", "sparktui.actions.image", "BuildImageAction", True, "b",
                in_demo=False),
    ActionEntry("push-image", "Push the image node-to-node", "sparktui.actions.push", "PushImageAction", True, "p",
                in_demo=False),
    ActionEntry("launch", "Launch the cluster", "sparktui.actions.launch", "LaunchAction", True, "l", in_demo=False),
    ActionEntry("stop", "Stop the cluster on every node", "sparktui.actions.stop", "StopAction", True, "x",
                in_demo=False),
    ActionEntry("prompt", "Test prompt through the API", "sparktui.actions.prompt", "PromptAction", False, "P"),
    ActionEntry("investigate", "Investigate an NCCL hang", "sparktui.actions.investigate", "InvestigateAction", False,
                "i"),
    ActionEntry("load-test", "Load test the API", "sparktui.actions.load_test", "LoadTestAction", False, "T",
                loads="puts load on the cluster's API, which may be serving production traffic"),
    ActionEntry("fabric", "Fabric check: path, MTU, bandwidth", "sparktui.actions.fabric", "FabricAction", False, "F",
                loads="moves test traffic across the node-to-node fabric (iperf3, all_reduce_perf)", footer=False),
    ActionEntry("api-forward", "Keep API forward open", "sparktui.actions.api_forward", "KeepForwardAction", False,
                "A"),
)
ENTRIES: tuple[ActionEntry, ...] = BUILT_IN  # what the faces offer (a test may offer its own)


def entry_of_class(module: str, cls: str) -> ActionEntry | None:
    """The built-in entry that names class ``cls`` of ``module`` (a test's ENTRIES never rename a class)."""
    return next((e for e in BUILT_IN if e.module == module and e.cls == cls), None)


class ActionUnavailable(ImportError):
    """An entry's module is in this build but does not import, or lacks the class it names."""


def load_or_raise(entry: ActionEntry) -> "type[Action]":
    """The Action class of ``entry``; ActionUnavailable (with the cause chained) when it cannot be had."""
    try:
        module = importlib.import_module(entry.module)
    except Exception as exc:
        raise ActionUnavailable(f"{entry.name}: {entry.module} does not import: {type(exc).__name__}: {exc}") from exc
    cls = getattr(module, entry.cls, None)
    if cls is None or getattr(cls, "name", None) != entry.name:
        raise ActionUnavailable(f"{entry.name}: {entry.module} has no action class {entry.cls}")
    return cls


def load(entry: ActionEntry) -> "type[Action] | None":
    """The Action class of ``entry``, or None when this build cannot offer it; the reason is logged with
    its traceback (a half-written module must not break the faces, nor go unexplained)."""
    try:
        return load_or_raise(entry)
    except ActionUnavailable:
        log.exception("guided action %s is not offered", entry.name)
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
