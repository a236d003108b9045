#!/usr/bin/env python3
"""Missed failures under stress: failing logs, reshaped, must still be named.

    failing_stress.py [-v] [--only KIND] [--json FILE]

The mirror of healthy_stress.py.  Every held-in failing case of the corpus (scripts/score_corpus.py
``part_of``; the held-out and frozen parts are never read) is reshaped the ways a user's paste
differs from the log that was gathered, and diagnosed again:

  tail     only its last 10 / 40 lines (a paste of the end)
  prefix   every line re-prefixed: docker compose, a docker timestamp, journald, mpirun, a launcher
           name, a time of day, a Ray actor, the CRI (kubectl logs on a node) format
  ansi     the level words and exception names coloured (a terminal's copy with escapes kept), and the
           same with the ESC byte lost ("[31mERROR[0m") or spelled out ("ESC[31m", as a pager shows it)
  crlf     Windows line ends
  wrap     lines hard-wrapped at 100 columns (a terminal's copy of long lines)
  json     docker's json-file driver: one {"log": ..., "stream": ..., "time": ...} object per line
  after    a healthy log first (a failure in the second run of one file)
  prompt   the shell's prompt after the log (what a paste of a terminal ends with)
  markdown   the raw text of an issue's collapsed log: <details>, <summary>, a code fence around it
  numbered   `cat -n`'s line numbers before every line
  ipython    the Python tracebacks as IPython 8 prints them (a notebook, Colab)
  env-after  a real environment report (torch's collect_env, 74 lines) pasted after the log
  interrupt  Ctrl+C after the log: the echoed ^C, a KeyboardInterrupt traceback, the prompt (how a
           person ends a hang)

Counted per kind, against the whole log's own result: **silent** (the whole log was named, the
variant names nothing), **lost** (the expected id no longer named), **top-1 lost**.  A tail that
cuts the cause away may fairly lose it; it should not go silent while the log still ends failing.
Exit status 1 when any variant is silent whose whole log was not.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scripts.healthy_stress import ENV_REPORT, INTERRUPT, MARKDOWN_CLOSE, MARKDOWN_OPEN, PREFIXES, docker_json  # noqa: E402
from scripts.score_corpus import CORPUS, _info_ids, load_cases, read_header  # noqa: E402

_LEVEL = re.compile(r"\b(ERROR|CRITICAL|FATAL|WARNING|INFO|[A-Z]\w*(?:Error|Exception))\b")
_COLOUR = {"ERROR": 31, "CRITICAL": 31, "FATAL": 31, "WARNING": 33, "INFO": 32}
WRAP = 100



def _ansi(line: str) -> str:
    return _LEVEL.sub(lambda m: f"\x1b[{_COLOUR.get(m.group(1), 31)}m{m.group(1)}\x1b[0m", line, count=1)


def _wrap(line: str) -> list[str]:
    return [line[i:i + WRAP] for i in range(0, len(line), WRAP)] or [""]


_FRAME = re.compile(r'^(?P<ind>\s*)File "(?P<path>[^"]+)", line (?P<n>\d+)(?:, in (?P<fn>\S+))?\s*$')
_EXC = re.compile(r"^(?P<cls>[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit|Warning|Failure))(?::|$)")


def _ipython(lines: list[str]) -> list[str]:
    """The log's Python tracebacks as IPython 8 prints them in a notebook (checked against a real
    `ipython --colors=NoColor` run): a rule and "<Class>  Traceback (most recent call last)" for the
    header, "File <path>:<n>, in <f>()" for each frame, "----> <n> <source>" for its line."""
    out: list[str] = []
    k = 0
    while k < len(lines):
        ln = lines[k]
        if ln.strip() == "Traceback (most recent call last):":
            cls = next((m["cls"] for t in lines[k + 1:k + 200] if (m := _EXC.match(t.strip()))), "Exception")
            out += ["-" * 75, f"{cls:<42}Traceback (most recent call last)"]
            k += 1
            continue
        m = _FRAME.match(ln)
        if m:
            fn = m["fn"]
            out.append(f"File {m['path']}:{m['n']}" + (f", in {fn}()" if fn and fn != "<module>" else ""))
            if k + 1 < len(lines) and lines[k + 1].startswith(m["ind"] + "  ") and not _FRAME.match(lines[k + 1]):
                out.append(f"----> {m['n']} {lines[k + 1].strip()}")
                k += 1
            out.append("")
            k += 1
            continue
        out.append(ln)
        k += 1
    return out


def _body(path: Path) -> list[str]:
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    return lines[len(read_header(path)):]


def variants(files: list[list[str]], healthy: list[str]) -> dict[str, tuple[list[list[str]], str]]:
    """kind -> (lines of each file, line end)."""
    out: dict[str, tuple[list[list[str]], str]] = {"whole": (files, "\n")}
    for n in (10, 40):
        out[f"tail{n}"] = ([f[-n:] for f in files], "\n")
    for key, pre in PREFIXES.items():
        out[f"prefix:{key}"] = ([[pre + ln for ln in f] for f in files], "\n")
    out["ansi"] = ([[_ansi(ln) for ln in f] for f in files], "\n")
    out["ansi-no-esc"] = ([[_ansi(ln).replace("\x1b", "") for ln in f] for f in files], "\n")
    out["ansi-spelled"] = ([[_ansi(ln).replace("\x1b", "ESC") for ln in f] for f in files], "\n")
    out["crlf"] = (files, "\r\n")
    out["wrap"] = ([[w for ln in f for w in _wrap(ln)] for f in files], "\n")
    out["json"] = ([docker_json(f) for f in files], "\n")
    out["after"] = ([[*healthy, *f] for f in files], "\n")
    out["prompt"] = ([[*f, "user@spark1:~$ "] for f in files], "\n")
    out["interrupt"] = ([[*f, *INTERRUPT] for f in files], "\n")
    out["env-after"] = ([[*f, "", *ENV_REPORT] for f in files], "\n")
    out["markdown"] = ([[*MARKDOWN_OPEN, *f, *MARKDOWN_CLOSE] for f in files], "\n")
    out["ipython"] = ([_ipython(f) for f in files], "\n")
    out["numbered"] = ([[f"{k + 1:6d}\t{ln}" for k, ln in enumerate(f)] for f in files], "\n")
    return out


def _named(found: list[tuple[str, str]], expect: list[str], facts: set[str]) -> list[str]:
    named = [i for i, sev in found if sev != "info"]
    if expect[0] in facts and (expect[0], "info") in found:
        named.append(expect[0])
    return named


def run(only: str | None = None) -> tuple[dict, list[dict]]:
    from sparktui.commands.diagnose import analyse

    cases = [c for c in load_cases(CORPUS) if c.part == "in"]
    healthy = next(_body(c.files[0]) for c in cases if c.healthy and len(c.files) == 1
                   and len(_body(c.files[0])) >= 20)
    facts = _info_ids()
    per: dict[str, dict[str, int]] = defaultdict(lambda: {"n": 0, "silent": 0, "lost": 0, "top1_lost": 0})
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        for c in cases:
            if c.healthy:
                continue
            files = [_body(p) for p in c.files]
            base: list[str] | None = None
            for kind, (vfiles, end) in variants(files, healthy).items():
                if only and kind not in ("whole", only):
                    continue
                paths = []
                for p, lines in zip(c.files, vfiles):
                    q = Path(tmp) / p.name
                    q.write_bytes((end.join(lines) + end).encode("utf-8"))
                    paths.append(str(q))
                dg = analyse(paths)
                named = _named([(f.id, f.severity) for f in dg.findings], c.expect, facts)
                if kind == "whole":
                    base = named
                    continue
                assert base is not None
                row = per[kind]
                row["n"] += 1
                silent = bool(base) and not named
                lost = bool(set(c.expect) & set(base)) and not set(c.expect) & set(named)
                top_lost = bool(base) and base[0] == c.expect[0] and (not named or named[0] != c.expect[0])
                row["silent"] += silent
                row["lost"] += lost
                row["top1_lost"] += top_lost
                if silent or lost or top_lost:
                    rows.append({"case": c.name, "kind": kind, "expect": c.expect[0], "whole": base[:3],
                                 "variant": named[:3], "silent": silent})
    return dict(per), rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-v", "--verbose", action="store_true", help="list each variant that went silent or lost its id")
    ap.add_argument("--only", help="one kind of variant (e.g. wrap, prefix:cri)")
    ap.add_argument("--json", type=Path, help="write the per-kind numbers and the rows here")
    args = ap.parse_args(argv)
    per, rows = run(args.only)
    for kind, r in per.items():
        print(f"{kind:<20} {r['n']:>4} variants  silent {r['silent']:>3}  lost {r['lost']:>3}  "
              f"top-1 lost {r['top1_lost']:>3}")
    if args.verbose:
        for r in rows:
            print(f"{'SILENT' if r['silent'] else 'lost  '} {r['kind']:<16} {r['case']}: expect {r['expect']}; "
                  f"whole {' '.join(r['whole'])}; variant {' '.join(r['variant']) or 'nothing'}")
    if args.json:
        args.json.write_text(json.dumps({"per_kind": per, "rows": rows}, indent=1))
    silent = sum(r["silent"] for k, r in per.items() if not k.startswith("tail"))
    print(f"failing_stress: {sum(r['n'] for r in per.values())} variants; {silent} silent (tails aside)")
    return 1 if silent else 0


if __name__ == "__main__":
    sys.exit(main())
