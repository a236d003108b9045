"""`sparktui build-image [--base IMG] [--tag TAG] [--node N] [--no-nccl-tests] [--yes] [--json]`."""

from __future__ import annotations


def run(args) -> int:
    from ..actions.cli_runner import run_action
    from ..actions.image import BuildImageAction

    return run_action(args, lambda _c: BuildImageAction(base=args.base, tag=args.tag, node_name=args.node,
                                                                 nccl_tests=args.nccl_tests))
