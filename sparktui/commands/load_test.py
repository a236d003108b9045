"""`sparktui load-test [--requests M] [--duration T] [--concurrency N] [--json] ...`

N concurrent streaming requests against the cluster's API (``serving_target``), then the
``vllm bench serve`` summary: a table and a latency plot, or ``--json`` with its field names.
A progress bar on stderr only when stderr is a terminal.  Exit 0 when every request completed,
1 when some failed (errors by kind: http_401, connection, timeout, ...), 2 for usage/config errors.
Ctrl+C / SIGTERM stop the test; what finished is still reported (exit 130).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import sys

from ..config import load_config

BAR = 30


class _Bar:
    """``[#####.....] 12/32  2 failed  3.4 s`` rewritten in place on stderr (a terminal only)."""

    def __init__(self, stream=None) -> None:
        self.stream = stream or sys.stderr  # the stderr of now, not of import time
        self.on = self.stream.isatty()
        self._last = ""

    def __call__(self, p) -> None:
        if not self.on:
            return
        n = int(p.fraction * BAR)
        total = f"/{p.total}" if p.total else ""
        fail = f"  {p.failed} failed ({', '.join(f'{k} {v}' for k, v in p.errors.items())})" if p.failed else ""
        line = f"\r[{'#' * n}{'.' * (BAR - n)}] {p.done}{total}  {p.in_flight} in flight{fail}  {p.elapsed:.1f} s\x1b[K"
        if line != self._last:
            self._last = line
            self.stream.write(line)
            self.stream.flush()

    def done(self) -> None:
        if self.on and self._last:
            self.stream.write("\r\x1b[K")
            self.stream.flush()


def text_report(summary: dict, note: str, plot: str) -> str:
    from ..actions.load_stats import PERCENTILES, table_cells

    s = summary
    lines = [f"target      {note}",
             f"requests    {s['completed']} completed, {s['failed']} failed"
             + (f", {s['cancelled']} cancelled" if s.get("cancelled") else "")
             + f"  (concurrency {s['max_concurrency']})",
             f"duration    {s['duration']:.2f} s",
             f"throughput  {s['request_throughput']:.2f} req/s, {s['output_throughput']:.1f} output tok/s, "
             f"{s['total_token_throughput']:.1f} total tok/s",
             f"tokens      {s['total_input_tokens']} in, {s['total_output_tokens']} out"]
    if (line := input_line(s)) is not None:
        lines.append(line)
    lines.append("")
    head = ["ms", "mean", "median"] + [f"p{int(p)}" for p in PERCENTILES]
    lines.append(f"{head[0]:<6}" + "".join(f"{h:>10}" for h in head[1:]))
    for name, cells in table_cells(s):
        lines.append(f"{name:<6}" + "".join(f"{c:>10}" for c in cells))
    if s["errors"]:
        lines.append("")
        lines.append("errors      " + ", ".join(f"{k} {v}" for k, v in s["errors"].items()))
        for k, msg in s.get("error_examples", {}).items():
            lines.append(f"  {k:<10}{msg}")
    if plot:
        lines += ["", plot.rstrip("\n")]
    return "\n".join(lines)


def input_line(s: dict) -> str | None:
    """``input       16.0 tokens a request (min 16, max 16), 16 asked``: the lengths actually sent."""
    mean, asked, note = s.get("mean_input_len"), s.get("random_input_len"), s.get("input_len_note")
    if mean is None and not asked:
        return None
    text = "unknown" if mean is None else \
        f"{mean:.1f} tokens a request (min {s.get('min_input_len')}, max {s.get('max_input_len')})"
    if asked:
        text += f", {asked} asked"
    return f"input       {text}" + (f"; {note}" if note else "")


async def _run(config, spec, bar):
    from ..actions.cli_runner import close_nodes, make_nodes
    from ..actions.load_test import LoadRunner, target_of

    nodes = make_nodes(config)
    runner = None
    try:
        url, model, key, note = await target_of(config, nodes)
        runner = LoadRunner(url, model, key, spec, on_progress=bar)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, runner.stop)
            except (NotImplementedError, RuntimeError):
                pass
        return await runner.run(), note
    finally:
        await close_nodes(nodes)


def run(args) -> int:
    from ..actions.load_stats import latency_plot
    from ..actions.load_test import LoadSpec
    from ..probes.serving import ServingError

    if getattr(args, "read_only", False):  # an observer never loads the API: the registry says why
        from ..actions.registry import entry

        print(f"sparktui: {entry('load-test').read_only_refusal()}", file=sys.stderr)
        return 1
    try:
        spec = LoadSpec(requests=args.requests, duration=args.duration, concurrency=args.concurrency,
                        max_tokens=args.max_tokens, random_input_len=args.random_input_len,
                        random_output_len=args.random_output_len, seed=args.seed,
                        thinking=False if args.no_think else None, timeout=args.timeout)
        spec.validate()
    except ValueError as exc:
        print(f"sparktui load-test: {exc}", file=sys.stderr)
        return 2
    config = load_config(getattr(args, "config", None))
    bar = _Bar()
    try:
        result, note = asyncio.run(_run(config, spec, bar))
    except ServingError as exc:  # not even a route to the API: nothing was sent
        bar.done()
        print(f"sparktui load-test: {exc}", file=sys.stderr)
        return 1
    bar.done()
    s = result.summary
    if args.json:
        print(json.dumps(s, indent=2))
    else:
        from ..colour import use_colour

        width = min(shutil.get_terminal_size((100, 24)).columns, 120)
        print(text_report(s, note, latency_plot(result.records, width - 2, 16, color=use_colour(sys.stdout))))
    if result.stopped:
        print("sparktui: interrupted", file=sys.stderr)
        return 130
    return 0 if s["failed"] == 0 and s["completed"] > 0 else 1
