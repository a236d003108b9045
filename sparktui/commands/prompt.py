"""`sparktui prompt TEXT [--json] [--no-think] [--max-tokens N] [--stream/--no-stream]`.

Exit 0 on an answer, 1 on an API error (its status and message on stderr), 2 on bad arguments or
config.  A terminal sees the answer stream in, reasoning and content apart.
"""

from __future__ import annotations

import asyncio
import json
import sys


def _fmt_answer(target, answer, note: str | None, hint: str | None = None) -> str:
    from ..logs.sanitize import clean_text

    a = answer
    lines = [f"model {a.model}  at {target.base_url} ({target.via}{' via ' + target.node if target.node else ''})"]
    if a.reasoning:
        lines += ["", f"reasoning ({a.reasoning_tokens if a.reasoning_tokens is not None else '?'} tokens):",
                  clean_text(a.reasoning.strip())]
    lines += ["", "content:", clean_text(a.content.strip()) if a.content else "(none)"]
    for tc in a.tool_calls:
        fn = tc.get("function") or {}
        lines.append(f"tool call: {clean_text(str(fn.get('name')))}({clean_text(str(fn.get('arguments')))})")
    lines += ["", _stats(a)]
    if note:
        lines.append(f"note: {note}")
    if hint:
        lines.append(f"note: {hint}")
    return "\n".join(lines)


def _stats(a) -> str:
    parts = [f"finish_reason {a.finish_reason}"]
    if a.ttft_s is not None:
        parts.append(f"ttft {a.ttft_s * 1000:.0f} ms")
    if a.shown_rate is not None:
        parts.append(f"{a.shown_rate:.1f} tok/s")
    toks = f"tokens: prompt {a.prompt_tokens}, completion {a.completion_tokens}"
    if a.reasoning_tokens is not None:
        toks += f" (reasoning {a.reasoning_tokens})"
    return "   ".join(parts + [toks])


class _Live:
    """Streams pieces to a terminal with a header each time the kind changes."""

    def __init__(self, out) -> None:
        self.out, self.kind = out, None

    def __call__(self, kind: str, text: str) -> None:
        from ..logs.sanitize import clean_text

        if kind != self.kind:
            self.out.write(("\n" if self.kind else "") + f"── {kind} ──\n")
            self.kind = kind
        self.out.write(clean_text(text))
        self.out.flush()


async def _cluster_state(config, nodes, timeout: float = 20.0) -> list[str] | None:
    """The cluster's state lines (probes.cluster.state_lines) when it is broken, else None."""
    from ..probes.cluster import check_cluster, state_lines
    from .status import BROKEN

    real = {n.name: nodes[n.name] for n in config.nodes if n.backend != "sim" and n.name in nodes}
    if not real:
        return None
    try:
        async with asyncio.timeout(timeout):
            view, a = await check_cluster(real, config.cluster.name, [n.name for n in config.nodes])
    except Exception:  # the prompt's error stands on its own
        return None
    # only a broken cluster explains the error; a running or unknown one would be noise
    return state_lines(view, a) if a.state in BROKEN else None


async def _run(args, config) -> int:
    from ..actions.cli_runner import close_nodes, make_nodes
    from ..actions.prompt import History, canned, explain, send
    from ..probes.serving import ServingError

    tools = None
    thinking = False if args.no_think else None
    text = args.text
    if args.canned:
        c = {x.name: x for x in canned()}[args.canned]
        text, tools = c.text, c.tools
        if args.max_tokens is None:
            args.max_tokens = c.max_tokens
        if c.thinking is not None and thinking is None:
            thinking = c.thinking
    live = _Live(sys.stdout) if args.stream and not args.json and sys.stdout.isatty() else None
    nodes = make_nodes(config)
    try:
        target, answer = await send(config, nodes, text, thinking=thinking, max_tokens=args.max_tokens,
                                    stream=args.stream, timeout=args.timeout, tools=tools, on_delta=live)
    except ServingError as exc:
        from ..logs.sanitize import clean_line

        # vLLM's own message ("EngineCore encountered an issue. See stack trace (above)") says nothing
        # of the cause: the cluster's state, as `status` assesses it, says which container went
        state = await _cluster_state(config, nodes)
        if args.json:
            print(json.dumps({"error": str(exc), "status": exc.status, "kind": exc.kind, "cluster": state}))
        print(f"sparktui prompt: {clean_line(str(exc))}", file=sys.stderr)
        for line in state or ():
            print(clean_line(line), file=sys.stderr)
        return 1
    finally:
        await close_nodes(nodes)
    History.for_cluster(config.cluster.name).add(text)
    note = explain(answer, max_tokens=args.max_tokens, thinking=thinking)
    hint = None
    if target.via == "forward":  # the URL was this command's own forward: closed once it exits
        from ..actions.serving_target import forward_note

        hint = forward_note(config, target.node, target.base_url)
    if args.json:
        d = answer.to_json()
        d.update(note=note, base_url=target.base_url, serve_hint=hint)
        print(json.dumps(d, indent=2))
    elif live is not None:
        print("\n\n" + _stats(answer) + (f"\nnote: {note}" if note else "") + (f"\nnote: {hint}" if hint else ""))
    else:
        print(_fmt_answer(target, answer, note, hint))
    return 0


def run(args) -> int:
    from ..actions.prompt import canned
    from ..config import load_config

    if args.text is None and not args.canned:
        print("sparktui prompt: give the prompt TEXT (or --canned NAME)", file=sys.stderr)
        return 2
    names = [c.name for c in canned()]
    if args.canned and args.canned not in names:
        print(f"sparktui prompt: no canned prompt {args.canned!r} (have: {', '.join(names)})", file=sys.stderr)
        return 2
    if args.max_tokens is not None and args.max_tokens < 1:
        print("sparktui prompt: --max-tokens must be at least 1", file=sys.stderr)
        return 2
    if args.timeout <= 0:
        print("sparktui prompt: --timeout must be positive", file=sys.stderr)
        return 2
    config = load_config(args.config)
    return asyncio.run(_run(args, config))
