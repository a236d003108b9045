"""Which screen shows a guided action: its own where it has one, else the generic ActionScreen.

Every screen is built as ``Screen(entry, action_class, make_context=None)``.  Imported when an action is opened, not at
start-up; an import error here is a bug and is raised, never hidden.
"""

from __future__ import annotations


def screen_for(name: str) -> type:
    """The screen class for the registry entry called ``name``."""
    if name == "launch":
        from .launch import LaunchScreen

        return LaunchScreen
    if name == "prompt":
        from .prompt import PromptScreen

        return PromptScreen
    if name == "investigate":
        from .screens.investigate import InvestigateScreen

        return InvestigateScreen
    if name == "load-test":
        from .load_test import LoadTestScreen

        return LoadTestScreen
    if name == "fabric":
        from .fabric import FabricScreen

        return FabricScreen
    from .screens.action import ActionScreen

    return ActionScreen
