"""`sparktui stop [--yes] [--json]`."""

from __future__ import annotations


def run(args) -> int:
    from ..actions.cli_runner import run_action
    from ..actions.stop import StopAction

    return run_action(args, lambda _c: StopAction())
