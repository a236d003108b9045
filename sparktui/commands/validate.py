"""`sparktui validate [--node N] [--image IMG] [--timeout S] [--yes] [--json]`."""

from __future__ import annotations


def run(args) -> int:
    from ..actions.cli_runner import run_action
    from .small_engine import engine_tap
    from ..actions.validate import ValidateAction

    return run_action(args, lambda _c: ValidateAction(node_name=args.node, image=args.image, timeout=args.timeout),
                      tap=engine_tap)
