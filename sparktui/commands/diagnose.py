"""`sparktui diagnose FILE... [--json]`: offline analysis of log files.

``-`` reads stdin; ``.gz`` files are decompressed transparently.  Exit codes (DESIGN.md): 0 no
error finding, 1 error findings, 2 unreadable input (one line on stderr, nothing else printed).
"""

from __future__ import annotations

import gzip
import io
import os
import sys
from typing import IO, Iterator

CHUNK_LINES = 20_000


class InputError(Exception):
    pass


def _open(path: str) -> tuple[IO[bytes], str]:
    if path == "-":
        fh: IO[bytes] = sys.stdin.buffer
        name = "<stdin>"
    else:
        if os.path.isdir(path):
            raise InputError(f"sparktui diagnose: cannot read {path}: is a directory")
        try:
            fh = open(path, "rb")
        except OSError as exc:
            raise InputError(f"sparktui diagnose: cannot read {path}: {exc.strerror or exc}") from None
        name = path
    if not hasattr(fh, "peek"):
        fh = io.BufferedReader(fh)  # type: ignore[arg-type]
    try:
        head = fh.peek(2)[:2]  # type: ignore[attr-defined]
    except OSError as exc:
        raise InputError(f"sparktui diagnose: cannot read {name}: {exc.strerror or exc}") from None
    if path.endswith(".gz") or head == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=fh), name  # type: ignore[return-value]
    return fh, name


def _chunks(fh: IO[bytes], path: str) -> Iterator[list[str]]:
    reader = io.TextIOWrapper(fh, encoding="utf-8", errors="replace", newline="")
    buf: list[str] = []
    try:
        for line in reader:
            # newline="" keeps "\r\n" and lone "\r" as part of the line: one line per "\n"
            if line.endswith("\n"):
                line = line[:-1]
            buf.append(line)
            if len(buf) >= CHUNK_LINES:
                yield buf
                buf = []
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise InputError(f"sparktui diagnose: cannot read {path}: {exc}") from None
    if buf:
        yield buf


def analyse(paths: list[str]):
    """Run the Diagnoser over the files; returns it (finished)."""
    from ..diagnosis import Diagnoser

    dg = Diagnoser()
    seen: dict[str, int] = {}
    for path in paths:
        fh, name = _open(path)
        # the same name twice (e.g. "-" and a file named like it) keeps separate sources
        seen[name] = seen.get(name, 0) + 1
        key = name if seen[name] == 1 else f"{name}#{seen[name]}"
        sc = dg.scanner(key)
        try:
            for chunk in _chunks(fh, name):
                sc.feed(chunk)
        finally:
            if path != "-":
                fh.close()
    dg.finish()
    return dg


def to_json(dg) -> dict:
    return {
        "findings": [f.to_json() for f in dg.findings],
        "milestones": [
            {"id": m.id, "line": m.line, "text": m.text, "source": m.source} for m in dg.milestones()
        ],
        "summary": dg.summary(),
    }


_COLOURS = {"error": "\x1b[1;31m", "warning": "\x1b[33m", "info": "\x1b[36m"}


def render_text(dg, colour: bool) -> str:
    from ..logs.redact import redact
    from ..logs.sanitize import safe

    def clean_line(text) -> str:  # file text and names are data: no escapes, no secrets
        return redact(safe(text))

    def c(sev: str, s: str) -> str:
        return f"{_COLOURS.get(sev, '')}{s}\x1b[0m" if colour else s

    out: list[str] = []
    fs = dg.findings
    summ = dg.summary()
    counts = summ["counts"]
    out.append(
        f"{len(summ['files'])} file(s), {summ['lines']} lines: "
        f"{counts['error']} error(s), {counts['warning']} warning(s), {counts['info']} info"
    )
    for f in fs:
        out.append("")
        where = clean_line(f"{f.source}:{f.line}" if f.line else f.source)
        out.append(c(f.severity, f"{f.severity.upper():7} {clean_line(f.title)}") + f"  [{f.id}]  {where}")
        for ev in f.evidence[:6]:
            out.append(f"    | {clean_line(ev)}")
        out.append(f"    fix: {clean_line(f.advice)}")
    ms = dg.milestones()
    if ms:
        out.append("")
        out.append("milestones:")
        for m in ms:
            out.append(f"    {clean_line(m.source)}:{m.line or '-'}  {clean_line(m.text)}")
    if summ["nccl"]:
        out.append("")
        out.append("NCCL ranks:")
        for r in summ["nccl"]:
            inits = ", ".join(f"{cm['comm_id'] or cm['comm']} {cm['init']}" for cm in r["comms"]) or "no comm"
            out.append(clean_line(f"    rank {r['rank'] if r['rank'] is not None else '?'} ({r['source']}): "
                                  f"NCCL {r['version'] or '?'}, {r['transport'] or 'transport ?'}, {inits}"))
            if r["last_nccl_line"]:
                out.append(f"        last NCCL line {r['last_nccl_line_no']}: {clean_line(r['last_nccl_line'])[:160]}")
    for m in summ.get("mismatches", []):
        a, b2 = m["a"], m["b"]
        def side(o: dict) -> str:
            n = f" {o['numel_in']} elements" if o.get("numel_in") is not None else ""
            return f"rank {o['rank']} {o['op']}{n} ({o['source']})"

        out.append(c("error", clean_line(f"mismatch at SeqNum {m['seq']} ({m['what']}): {side(a)} vs {side(b2)}")))
    for b in summ["behind"]:
        out.append(c("error", clean_line(f"behind: rank {b['rank']} ({b['source']}): {b['reason']}")))
    return "\n".join(out)


def run(args) -> int:
    try:
        dg = analyse(list(args.files))
    except InputError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    has_error = any(f.severity == "error" for f in dg.findings)
    try:
        if getattr(args, "json", False):
            from ..logs.redact import redact_obj
            from ..logs.sanitize import json_dumps

            # controls only as JSON escapes (a raw U+009B is a CSI), secrets masked
            sys.stdout.write(json_dumps(redact_obj(to_json(dg))) + "\n")
        else:
            from ..colour import use_colour

            print(render_text(dg, colour=use_colour(sys.stdout)))
        sys.stdout.flush()
    except BrokenPipeError:  # `sparktui diagnose x | head`: the reader left, not an error of ours
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return 1 if has_error else 0
