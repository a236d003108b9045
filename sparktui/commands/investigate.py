"""``sparktui investigate``: live hang investigation (or ``--offline DIR``).  No Textual needed.

Exit 0 healthy (or nothing running), 1 problem found, 2 usage/config/bundle error.
"""

from __future__ import annotations

import asyncio
import json
import sys


def _dumps(obj, **kw) -> str:
    """JSON out: controls only as \\u escapes (ensure_ascii), secrets masked (evidence quotes logs)."""
    from ..logs.redact import redact_obj

    return json.dumps(redact_obj(obj), **kw)


def _print_verdict(name: str, v, out=None) -> None:
    from ..logs.redact import redact
    from ..logs.sanitize import safe

    out = out or sys.stdout

    def say(text: str) -> None:  # every field came from a node or a file: one safe line each
        print(redact(safe(text)), file=out)

    head = f"[{name}] " if name else ""
    say(f"{head}{v.rule}: {v.title}  (confidence {v.confidence:.2f})")
    if v.finding_ids:
        say(f"  findings: {', '.join(v.finding_ids)}")
    for node, lines in v.evidence.items():
        for line in lines:
            say(f"  {node:>10} | {line}")
    for item in v.latent:
        say(f"  R7 {item['id']}: {item['title']}")
        for line in item.get("evidence", [])[:4]:
            say(f"       {line}")
    say(f"  next: {v.next_action}")


def offline(args) -> int:
    from ..diagnosis.evidence import BundleError, read_bundle
    from ..diagnosis.verdict import decide
    from ..logs.sanitize import safe

    try:
        groups = read_bundle(args.offline)
    except (BundleError, OSError, ValueError) as exc:
        print(f"sparktui: investigate --offline: {safe(exc)}", file=sys.stderr)
        return 2
    verdicts = [(name, decide(ev)) for name, ev in groups]
    notes = [note for _, ev in groups for note in ev.read_notes]
    if args.json:
        if len(verdicts) == 1:
            out = {"source": str(args.offline), "verdict": verdicts[0][1].to_json()}
        else:
            out = {"source": str(args.offline), "bundles": [{"name": n, "verdict": v.to_json()} for n, v in verdicts]}
        if notes:
            out["notes"] = notes
        print(_dumps(out, indent=2))
    else:
        # what was cut (a huge log read as head + tail) or dropped (a Flight Recorder field of the wrong type)
        for note in notes:
            print(f"sparktui: investigate --offline: note: {safe(note)}", file=sys.stderr)
        for name, v in verdicts:
            _print_verdict(name if len(verdicts) > 1 else "", v)
    return 1 if any(v.problem for _, v in verdicts) else 0


async def _live(args) -> int:
    from ..actions.base import ActionContext
    from ..actions.investigate import DEFAULT_INTERVAL, InvestigateAction
    from ..config import load_config
    from ..logs.sanitize import safe
    from ..model import FAIL
    from ..nodes import make_node

    config = load_config(args.config)
    nodes = {}
    for n in config.nodes:
        if n.backend == "sim":
            print(f"sparktui: investigate: node {safe(n.name)} is simulated; use `sparktui demo --scenario nccl-hang`",
                  file=sys.stderr)
            return 2
        nodes[n.name] = make_node(n)

    def show(e) -> None:
        if e.status in ("started", "ok", "warn", FAIL, "info") or e.step.startswith("round"):
            where = f"{e.node}: " if e.node else ""
            print(safe(f"[{e.step}] {e.status:>8} {where}{e.message}"), file=sys.stderr, flush=True)

    async def _connect(name, node):
        try:
            await node.connect()
        except Exception as exc:  # an unreachable node is evidence, not a crash
            print(safe(f"[connect] {name}: {exc}"), file=sys.stderr)

    await asyncio.gather(*(_connect(k, v) for k, v in nodes.items()))
    ctx = ActionContext(config, nodes, emit=show, read_only=bool(getattr(args, "read_only", False)))
    action = InvestigateAction(interval=args.interval if args.interval is not None else DEFAULT_INTERVAL,
                               bundle=args.bundle)
    try:
        result = await action.run(ctx)
    finally:
        await asyncio.gather(*(n.close() for n in nodes.values()), return_exceptions=True)
    v = action.verdict
    if v is None:
        if args.json:
            print(_dumps(result.to_json(), indent=2))
        else:
            print(safe(f"sparktui: investigate failed: {result.summary}"), file=sys.stderr)
        return 1
    bundle_error = (result.data or {}).get("bundle_error")
    if args.json:
        out = result.to_json()
        out["verdict"] = v.to_json()
        print(_dumps(out, indent=2))
    else:
        _print_verdict("", v)
        if args.bundle and not bundle_error:
            print(f"  bundle: {safe(args.bundle)}")
    if bundle_error:
        # the verdict stands, but the bundle asked for was refused (e.g. a link planted in DIR)
        print(f"sparktui: investigate: bundle not written: {safe(bundle_error)}", file=sys.stderr)
        return 2
    return v.exit_code


def run(args) -> int:
    try:
        if getattr(args, "offline", None):
            return offline(args)
        return asyncio.run(_live(args))
    except BrokenPipeError:  # `sparktui investigate --offline DIR | head`: the reader left, not our error
        import os

        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
