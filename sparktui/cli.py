"""Command line.  Parsing lives here and stays cheap; each subcommand's work is in
``sparktui/commands/<name>.py`` (``run(args) -> int``), imported only when chosen, so
``sparktui --help`` never imports Textual, asyncssh or docker.

Exit codes: 0 ok, 1 problem found / failure, 2 usage or config error.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

THEMES = ("sparktui-dark", "sparktui-light", "sparktui-256", "sparktui-contrast")
SCENARIOS = ("healthy", "nccl-hang", "oom", "unsupported-arch")


def _byte_size(text: str) -> int:
    """'512M', '2G', '1048576' -> bytes (argparse type: a bad value is one line, exit 2)."""
    units = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    t = text.strip().upper().removesuffix("IB").removesuffix("B")
    num, unit = (t[:-1], t[-1]) if t and t[-1] in units else (t, "")
    try:
        n = int(float(num) * units[unit])
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 512M, 2G)") from None
    if n <= 0:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (must be above 0)")
    return n


def _common(p: argparse.ArgumentParser, top: bool = False) -> None:
    # subcommands accept --config too; SUPPRESS keeps `sparktui --config X status` from losing X
    p.add_argument("--config", metavar="PATH", default=None if top else argparse.SUPPRESS,
                   help="cluster config (default: $SPARKTUI_CONFIG or ~/.config/sparktui/cluster.toml)")
    p.add_argument("--operator", metavar="NAME", type=_operator, default=None if top else argparse.SUPPRESS,
                   help="who you are in the cluster lock and the shared timeline "
                        "(default: $SPARKTUI_OPERATOR or user@host)")


def _operator(text: str) -> str:
    from .identity import OperatorError, check

    try:
        return check(text)
    except OperatorError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _lenient(kind: type):
    """A number parser that hands back what it cannot parse, so the command can refuse it in ONE line."""

    def parse(text: str):
        try:
            return kind(text)
        except ValueError:
            return text

    parse.__name__ = kind.__name__
    return parse


class _VersionAction(argparse.Action):
    """--version: versions from package metadata (nothing heavy imported), then exit 0."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        from .versions import version_text

        print(version_text())
        parser.exit(0)


class _Parser(argparse.ArgumentParser):
    """argparse echoes what it was given ("unrecognized arguments: X"): an argument is the user's or a
    script's text, and its escapes would reach the terminal. Every message leaves line by line through
    the one sanitiser (subcommand parsers are of this class too: add_subparsers uses the parent's)."""

    def _print_message(self, message, file=None):
        if message:
            from .logs.sanitize import safe

            super()._print_message("\n".join(safe(line) for line in message.split("\n")), file)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="sparktui",
        description="Watch, launch and debug a vLLM cluster across DGX Spark nodes. "
        "With no subcommand, opens the TUI on the configured cluster.",
    )
    _common(p, top=True)
    p.add_argument("--read-only", action="store_true", help="hide and refuse every mutating action (observer mode)")
    p.add_argument("--no-mouse", action="store_true", help="do not capture the mouse (keeps tmux copy-mode simple)")
    p.add_argument("--theme", choices=THEMES, default=None, help="colour theme")
    p.add_argument("--version", action=_VersionAction,
                   help="print the versions of sparktui, Python, textual, asyncssh and the docker SDK")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    d = sub.add_parser("demo", help="the TUI on the embedded simulated two-node cluster (no hardware needed)")
    d.add_argument("--scenario", choices=SCENARIOS, default="healthy", help="what happens in the demo")
    d.add_argument("--speed", type=float, default=1.0, help="simulation speed factor (default 1.0)")
    d.add_argument("--read-only", action="store_true", dest="sub_read_only", help=argparse.SUPPRESS)
    d.add_argument("--no-mouse", action="store_true", dest="sub_no_mouse", help=argparse.SUPPRESS)
    d.add_argument("--theme", choices=THEMES, default=None, dest="sub_theme", help=argparse.SUPPRESS)

    s = sub.add_parser("status", help="one snapshot of every node: reachability, containers, memory, GPU")
    _common(s)
    s.add_argument("--json", action="store_true")
    s.add_argument("--timeout", type=float, default=10.0, help="seconds per node (default 10)")

    dr = sub.add_parser("doctor", help="preflight checks on every node")
    _common(dr)
    dr.add_argument("--json", action="store_true")
    dr.add_argument("--deep", action="store_true",
                    help="also run the fabric check (iperf3 and all_reduce_perf between the nodes)")

    fb = sub.add_parser("fabric", help="the node-to-node fabric: path MTU, iperf3, all_reduce_perf, verdict with the fix")
    _common(fb)
    fb.add_argument("--json", action="store_true")
    fb.add_argument("--size", type=_byte_size, default=1 << 30, metavar="SIZE",
                    help="largest all_reduce_perf message and iperf3 bytes per pair (default 1G)")
    fb.add_argument("--quick", action="store_true", help="path checks and a short iperf3 only (no all_reduce_perf)")

    dg = sub.add_parser("diagnose", help="offline analysis of log files ('-' = stdin, .gz ok, a folder: its logs)")
    dg.add_argument("files", nargs="+", metavar="FILE")
    dg.add_argument("--json", action="store_true")
    dg.add_argument("--max-bytes", type=_byte_size, default=None, metavar="SIZE",
                    help="stop reading an input after this much (decompressed), e.g. 2G; default 16G")

    inv = sub.add_parser("investigate", help="live NCCL hang investigation (or --offline DIR)")
    _common(inv)
    inv.add_argument("--json", action="store_true")
    inv.add_argument("--bundle", metavar="DIR", help="save the evidence bundle here")
    inv.add_argument("--offline", metavar="DIR", help="analyse a saved bundle, or a folder of rank logs, Flight Recorder dumps, "
                     "py-spy, RAS and nvidia-smi output, instead")
    inv.add_argument("--interval", type=float, default=None, help="seconds between the two RAS/py-spy rounds")

    for name, helptext in (
        ("validate", "single-node validation of the image + model"),
        ("build-image", "build the hybrid (registry-patched) image on the head node"),
        ("push-image", "copy the image node-to-node and verify identical IDs"),
        ("launch", "launch the multi-node cluster"),
        ("stop", "stop the cluster's containers on every node"),
    ):
        a = sub.add_parser(name, help=helptext)
        _common(a)
        a.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
        a.add_argument("--json", action="store_true")
        # the cluster lock on the head node (one mutating action at a time, across operators)
        a.add_argument("--wait", action="store_true", help="queue behind another operator's action instead of refusing")
        a.add_argument("--break-lock", action="store_true",
                       help="break a STALE cluster lock (its holder's sparktui is gone) without asking")
        if name == "validate":
            a.add_argument("--node", help="node to validate on (default: the head)")
            a.add_argument("--image", help="image to validate (default: cluster.hybrid_image or cluster.image)")
            a.add_argument("--timeout", type=float, default=600.0)
        if name == "build-image":
            a.add_argument("--base", help="base image (default: cluster.base_image or cluster.image)")
            a.add_argument("--tag", help="tag of the result (default: cluster.hybrid_image)")
            a.add_argument("--node", help="node to build on (default: the head)")
            a.add_argument("--no-nccl-tests", dest="nccl_tests", action="store_false",
                           help="do not build nccl-tests' all_reduce_perf into the image (for `sparktui fabric`)")
        if name == "launch":
            a.add_argument("--replace", action="store_true",
                           help="remove a stale container with the cluster's name first (else refused)")
            a.add_argument("--timeout", type=float, default=None,
                           help="seconds to wait for the API (default: cluster.ready_timeout)")
            a.add_argument("--verbose", "-v", action="store_true",
                           help="show the full docker run commands with the plan (even with --yes)")
        if name == "push-image":
            a.add_argument("--image", help="image to push (default: cluster.hybrid_image or cluster.image)")
            a.add_argument("--from", dest="source", help="source node (default: the head)")
            a.add_argument("--to", dest="targets", action="append", help="target node (repeatable; default: all others)")
            a.add_argument("--full", action="store_true",
                           help="send every layer (default: only those the target does not hold)")

    pr = sub.add_parser("prompt", help="send a test prompt through the OpenAI-compatible API")
    _common(pr)
    pr.add_argument("text", nargs="?", help="the prompt (or --canned NAME)")
    pr.add_argument("--json", action="store_true")
    pr.add_argument("--no-think", action="store_true", help="chat_template_kwargs.enable_thinking = false")
    pr.add_argument("--max-tokens", type=int, default=None, metavar="N",
                    help="default: the server's limit (what max_model_len leaves after the prompt)")
    pr.add_argument("--stream", action=argparse.BooleanOptionalAction, default=True,
                    help="stream the answer (default) or ask for it whole")
    pr.add_argument("--timeout", type=float, default=120.0, metavar="S",
                    help="seconds to wait for bytes before giving up (a stalled stream; default 120)")
    pr.add_argument("--canned", metavar="NAME", help="a canned smoke prompt (hello, arithmetic, no-think, long, tool)")
    lt = sub.add_parser("load-test", help="a short concurrent load test through the API")
    _common(lt)
    lt.add_argument("--requests", type=_lenient(int), metavar="M",
                    help="stop after M requests (default 32, or unlimited with --duration)")
    lt.add_argument("--duration", type=_lenient(float), metavar="T", help="stop starting requests after T seconds")
    lt.add_argument("--concurrency", type=_lenient(int), default=8, metavar="N", help="requests in flight (default 8)")
    lt.add_argument("--max-tokens", type=_lenient(int), default=64, metavar="K", help="max tokens per answer (default 64)")
    lt.add_argument("--random-input-len", type=_lenient(int), metavar="L",
                    help="random prompts of L tokens as the server counts them (its /tokenize; chat template included)")
    lt.add_argument("--random-output-len", type=_lenient(int), metavar="L",
                    help="answers of exactly L tokens (max_tokens=L, ignore_eos)")
    lt.add_argument("--seed", type=_lenient(int), default=0, help="seed of the random prompts (default 0)")
    lt.add_argument("--no-think", action="store_true", help="send enable_thinking=false (default: the server's)")
    lt.add_argument("--timeout", type=_lenient(float), default=120.0, metavar="S", help="seconds per request (default 120)")
    lt.add_argument("--json", action="store_true", help="the result with `vllm bench serve` field names")

    rp = sub.add_parser("report", help="Markdown incident report of a session (default: the latest)")
    _common(rp)
    rp.add_argument("session", nargs="?")
    rp.add_argument("--json", action="store_true", help="the report's findings, milestones and verdicts as JSON")
    rp.add_argument("--output", "-o", metavar="PATH", default=None, help="write the report to PATH")
    ss = sub.add_parser("sessions", help="list the recorded sessions, newest first")
    _common(ss)
    ss.add_argument("--json", action="store_true")
    rl = sub.add_parser("replay", help="replay a recorded session in the TUI")
    _common(rl)
    rl.add_argument("session")
    rl.add_argument("--speed", type=_lenient(float), default=1.0, metavar="X",
                    help="playback speed factor (default 1.0; keys < and > halve and double it)")
    rl.add_argument("--at", metavar="TIME", default=None,
                    help="where to start: start (default), end, HH:MM:SS, or +SECONDS from the start")
    it = sub.add_parser("init", help="write cluster.toml from ~/.ssh/config hosts, probing each node")
    it.add_argument("--host", action="append", metavar="NAME",
                    help="an ssh config Host to use (repeatable, the first is the head; default: ask)")
    it.add_argument("--output", "-o", metavar="PATH", default=None,
                    help="where to write (default: $SPARKTUI_CONFIG or ~/.config/sparktui/cluster.toml)")
    it.add_argument("--yes", "-y", action="store_true", help="overwrite an existing file without asking")
    it.add_argument("--timeout", type=float, default=10.0, help="seconds to connect to each node (default 10)")
    cp = sub.add_parser("completion", help="print a shell completion script (bash or zsh)")
    cp.add_argument("shell", nargs="?", choices=("bash", "zsh"))
    # what the generated scripts ask at completion time: session, node, ssh host or canned prompt names
    cp.add_argument("--words", choices=("sessions", "canned", "hosts", "nodes"), default=None, help=argparse.SUPPRESS)
    # --help lists only the commands this build has (find_spec imports nothing); main() answers the
    # others in one line
    import importlib.util

    sub._choices_actions[:] = [a for a in sub._choices_actions
                               if importlib.util.find_spec("sparktui.commands." + a.dest.replace("-", "_")) is not None]
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    # global flags may also be given after `demo`
    for flag in ("read_only", "no_mouse", "theme"):
        sub_val = getattr(args, f"sub_{flag}", None)
        if sub_val:
            setattr(args, flag, sub_val)
    # one operator name for the whole process (lock, timeline, container labels): checked here, once
    from .identity import ENV, OperatorError, operator_id

    if getattr(args, "operator", None):
        os.environ[ENV] = args.operator
    try:
        operator_id()
    except OperatorError as exc:
        print(f"sparktui: ${ENV}: {exc}", file=sys.stderr)
        return 2
    command = args.command or "tui"
    module_name = "sparktui.commands." + command.replace("-", "_")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name:
            print(f"sparktui: '{command}' is not available in this build", file=sys.stderr)
            return 2
        raise
    from .config import ConfigError

    try:
        return int(module.run(args) or 0)
    except ConfigError as exc:
        from .logs.sanitize import safe

        # the path given, and a key or value read from the file: echoed inert, on one line
        print(f"sparktui: {safe(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("sparktui: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
