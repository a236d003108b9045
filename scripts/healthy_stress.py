#!/usr/bin/env python3
"""False alarms under stress: healthy logs, reshaped, must not gain an error finding.

    healthy_stress.py [--base REF] [--keep DIR] [-v]

Every held-in healthy case of the corpus (scripts/score_corpus.py ``part_of``; the held-out part is
never read) and the real vLLM CPU logs of tests/fixtures/vllm-cpu/ (the healthy servers whole, the
recorded failures only up to the line before their first error finding: serving, idle workers and
slow start-ups) are reshaped the ways a user's paste differs from the log that was gathered:

  cut      the head of the log up to 20/40/60/80 % of its lines (a log that is still going)
  tail     only its last 10 / 40 lines (a paste of the end)
  join     two healthy logs one after the other (two runs in one file)
  prefix   every line re-prefixed: a docker compose service ("vllm-1  | "), a docker timestamp,
           journald, mpirun's tag, a bracketed launcher name, a time of day, a Ray actor, the CRI format
  cut+prefix  the 60 % head, re-prefixed with a compose service name
  json     docker's json-file log (one JSON record per line)
  colour-no-esc  the level words coloured, the ESC byte lost in the copy ("[31mINFO[0m")
  prompt   the shell's prompt after the log
  env-after   a real environment report (torch's collect_env) pasted after the log
  markdown    the raw text of an issue's collapsed log (<details>, <summary>, a code fence)
  numbered    `cat -n`'s line numbers before every line
  interrupt   Ctrl+C after the log (the echoed ^C, Python's KeyboardInterrupt, the prompt), after the
           whole log and after its 60 % head

Each variant is diagnosed by this tree and by ``--base`` (default ``main``: its ``sparktui/`` is
taken with ``git archive`` into a temporary directory and run in a subprocess).  Listed: the error
findings this tree gives that the base does not (by id, per variant).  Exit status 1 when any is
listed.  Warnings are not listed: a healthy log cut while it retries a connect is a fair warning.
"""

from __future__ import annotations

import argparse
import io
import json
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VLLM_CPU = ROOT / "tests" / "fixtures" / "vllm-cpu"
# a real environment report (torch's collect_env in the real vLLM CPU image), pasted after a log
ENV_REPORT = (ROOT / "tests" / "fixtures" / "collect_env" / "torch-2.13-cpu.txt").read_text().splitlines()

_FAILING = re.compile(r"\bERROR\b|\bTraceback\b|^\S*Error: ")
PREFIXES = {
    "compose": "vllm-1  | ",
    "docker-ts": "2025-11-29T19:11:29.002992818Z ",
    "journald": "Nov 29 19:11:29 spark1 vllm[394]: ",
    "mpirun": "[1,0]<stderr>:",
    "bracket-name": "[worker]: ",
    "time-of-day": "19:11:29 ",
    "ray-actor": "(RayWorkerWrapper pid=1234, ip=127.0.0.2) ",  # text only: never contacted
    "cri": "2025-11-29T19:11:29.002992818Z stderr F ",  # a pod's log file (containerd, CRI-O)
}
MARKDOWN_OPEN = ["<details>", "<summary>Full log</summary>", "", "```text"]
MARKDOWN_CLOSE = ["```", "", "</details>"]
# Ctrl+C at a terminal: Python's KeyboardInterrupt traceback (as CPython 3.10 prints it), the prompt back
INTERRUPT = ["^CTraceback (most recent call last):",
             '  File "/usr/local/bin/vllm", line 8, in <module>',
             "    sys.exit(main())",
             '  File "/usr/lib/python3.10/threading.py", line 1116, in _wait_for_tstate_lock',
             "    if lock.acquire(block, timeout):",
             "KeyboardInterrupt",
             "user@spark1:~$ "]


_LEVEL = re.compile(r"\b(ERROR|CRITICAL|FATAL|WARNING|INFO|[A-Z]\w*(?:Error|Exception))\b")


def docker_json(lines: list[str]) -> list[str]:
    """The lines as docker's json-file driver writes them (its key order, compact separators)."""
    return [json.dumps({"log": ln + "\n", "stream": "stderr", "time": f"2025-11-29T19:11:{k % 60:02d}.002992818Z"},
                       separators=(",", ":")) for k, ln in enumerate(lines)]


def _body_lines(path: Path) -> list[str]:
    sys.path.insert(0, str(ROOT))
    from scripts.score_corpus import read_header

    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    return lines[len(read_header(path)):] if path.suffix == ".log" and "corpus" in path.parts else lines


def sources() -> list[tuple[str, list[list[str]]]]:
    """(name, [lines of each file]) of every healthy input: held-in healthy corpus cases, the vLLM
    CPU servers, and the vLLM CPU failures up to the line before their first error finding."""
    sys.path.insert(0, str(ROOT))
    from scripts.score_corpus import CORPUS, load_cases

    out: list[tuple[str, list[list[str]]]] = []
    for c in load_cases(CORPUS):
        if c.part == "in" and c.healthy:
            out.append((c.name, [_body_lines(p) for p in c.files]))
    for p in sorted(VLLM_CPU.glob("*.log")):
        out.append((f"vllm-cpu/{p.name}", [p.read_text(encoding="utf-8", errors="replace").splitlines()]))
    return out


def variants(srcs: list[tuple[str, list[list[str]]]]) -> dict[str, list[list[str]]]:
    out: dict[str, list[list[str]]] = {}
    for i, (name, files) in enumerate(srcs):
        out[f"{name} whole"] = files
        for pct in (20, 40, 60, 80):
            out[f"{name} cut{pct}"] = [f[:max(1, len(f) * pct // 100)] for f in files]
        for n in (10, 40):
            out[f"{name} tail{n}"] = [f[-n:] for f in files]
        for key, pre in PREFIXES.items():
            out[f"{name} prefix:{key}"] = [[pre + ln for ln in f] for f in files]
        out[f"{name} cut60+compose"] = [[PREFIXES["compose"] + ln for ln in f[:max(1, len(f) * 60 // 100)]]
                                        for f in files]
        out[f"{name} json"] = [docker_json(f) for f in files]
        out[f"{name} colour-no-esc"] = [[_LEVEL.sub(lambda m: f"[31m{m.group(1)}[0m", ln, count=1) for ln in f]
                                        for f in files]
        out[f"{name} prompt"] = [[*f, "user@spark1:~$ "] for f in files]
        out[f"{name} env-after"] = [[*f, "", *ENV_REPORT] for f in files]
        out[f"{name} markdown"] = [[*MARKDOWN_OPEN, *f, *MARKDOWN_CLOSE] for f in files]
        out[f"{name} numbered"] = [[f"{k + 1:6d}\t{ln}" for k, ln in enumerate(f)] for f in files]
        out[f"{name} interrupt"] = [[*f, *INTERRUPT] for f in files]
        # a terminal's hard wrap at 100 columns (a paste copied off a fixed-width window)
        out[f"{name} wrap"] = [[ln[i:i + 100] for ln in f for i in range(0, max(1, len(ln)), 100)] for f in files]
        out[f"{name} cut60+interrupt"] = [[*f[:max(1, len(f) * 60 // 100)], *INTERRUPT] for f in files]
        other = srcs[(i + 1) % len(srcs)]
        if other[0] != name:
            out[f"{name} join {other[0]}"] = [[*files[0], *other[1][0]]]
    return out


# ---------------------------------------------------------------------------------------- worker
def _worker(engine: str, spec: str) -> None:
    """Diagnose every variant of ``spec`` (JSON {name: [[lines], ...]}) with the sparktui under
    ``engine``; print {name: [error ids]} (and, for the vLLM CPU failures, the first error line)."""
    sys.path.insert(0, engine)
    from sparktui.commands.diagnose import analyse

    todo = json.loads(Path(spec).read_text())
    res: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, files in todo.items():
            paths = []
            for k, lines in enumerate(files):
                p = Path(tmp) / f"v.rank{k}.log" if len(files) > 1 else Path(tmp) / "v.log"
                p.write_text("\n".join(lines) + "\n", encoding="utf-8")
                paths.append(str(p))
            dg = analyse(paths)
            errs = [f for f in dg.findings if f.severity == "error"]
            res[name] = {"errors": sorted({f.id for f in errs}),
                         "warnings": sorted({f.id for f in dg.findings if f.severity == "warning"}),
                         "first_error_line": min((f.line or 0 for f in errs if f.line), default=0)}
            for p in paths:
                Path(p).unlink()
    print(json.dumps(res))


def _run(engine: str, spec: str) -> dict[str, dict]:
    out = subprocess.run([sys.executable, __file__, "--worker", engine, spec], capture_output=True, text=True,
                         check=False)
    if out.returncode != 0:
        raise SystemExit(f"healthy_stress: the worker on {engine} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout)


def _base_tree(ref: str, into: str) -> str:
    data = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "sparktui"], capture_output=True,
                          check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tf:
        tf.extractall(into, filter="data")
    return into


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", default="main", help="git ref to compare with (default: main)")
    ap.add_argument("--keep", type=Path, help="write each variant's findings (both trees) as JSON here")
    ap.add_argument("-v", "--verbose", action="store_true", help="also list the error findings both trees give")
    ap.add_argument("-w", "--warnings", action="store_true",
                    help="also list the warnings only this tree gives (not counted: a fair suspicion on a cut log)")
    ap.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        _worker(*args.worker)
        return 0
    srcs = sources()
    with tempfile.TemporaryDirectory() as tmp:
        # the vLLM CPU failures: only their part before the first error finding is healthy
        fails = {n: f for n, f in srcs if n.startswith("vllm-cpu/") and not n.startswith("vllm-cpu/serve")}
        spec = Path(tmp) / "first.json"
        spec.write_text(json.dumps({n: f for n, f in fails.items()}))
        base = _base_tree(args.base, str(Path(tmp) / "base"))
        first = _run(base, str(spec))
        cut: list[tuple[str, list[list[str]]]] = []
        for n, files in srcs:
            if n in fails:
                # the line before the first error finding, or before the first line that shows
                # a failure (a traceback's head, an ERROR level), whichever comes first
                line = first[n]["first_error_line"] or len(files[0]) + 1
                line = min([line, *(k + 1 for k, t in enumerate(files[0]) if _FAILING.search(t))])
                if line <= 1:
                    continue
                files = [files[0][:line - 1]]
                n = f"{n}[:{line - 1}]"
            cut.append((n, files))
        todo = variants(cut)
        spec.write_text(json.dumps(todo))
        mine = _run(str(ROOT), str(spec))
        theirs = _run(base, str(spec))
    listed = 0
    for name in todo:
        new = sorted(set(mine[name]["errors"]) - set(theirs[name]["errors"]))
        if new:
            listed += 1
            print(f"NEW ERROR {name}: {' '.join(new)}")
        warn = sorted(set(mine[name]["warnings"]) - set(theirs[name]["warnings"]) - set(theirs[name]["errors"]))
        if args.warnings and warn:
            print(f"new warning {name}: {' '.join(warn)}")
        if not new and args.verbose and mine[name]["errors"]:
            print(f"both      {name}: {' '.join(mine[name]['errors'])}")
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        (args.keep / "stress.json").write_text(json.dumps({"mine": mine, "base": theirs}, indent=1))
    print(f"healthy_stress: {len(todo)} variants of {len(cut)} healthy inputs; "
          f"{listed} with an error finding only this tree gives")
    return 1 if listed else 0


if __name__ == "__main__":
    sys.exit(main())
