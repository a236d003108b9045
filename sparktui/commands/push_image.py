"""`sparktui push-image [--image IMG] [--from NODE] [--to NODE]... [--full] [--yes] [--json]`."""

from __future__ import annotations


def run(args) -> int:
    from ..actions.cli_runner import run_action
    from ..actions.push import PushImageAction

    return run_action(args, lambda _c: PushImageAction(image=args.image, source=args.source,
                                                       targets=args.targets, full=args.full))
