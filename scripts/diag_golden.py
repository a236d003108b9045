#!/usr/bin/env python3
"""Correctness gate for changes to the `sparktui diagnose` path: record its JSON output on every
fixture, then check a later tree gives byte-identical output.

    diag_golden.py record DIR      # run every case, save DIR/<case>.json (stdout, stderr, exit code)
    diag_golden.py check DIR       # run again, compare with DIR; exit 1 on any difference
    [--cli]                        # one `python -m sparktui diagnose --json` process per case
                                   # (default: the same `cli.main` in this process, much faster)

Cases: every file under tests/fixtures alone, and the logs of one folder that tests diagnose
together: ``X.rankN.log`` / ``X.nodeN.log`` / ``rankN.log`` / ``ev.nccl_vm_*.log`` of one folder,
and all ``*.log`` of a folder.  Held-out corpus cases (scripts/score_corpus.py ``part_of``) are
compared but their differences are reported by name only: their content is never shown.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
FIX = ROOT / "tests" / "fixtures"
_GROUP = re.compile(r"^(?P<prefix>.*?)(?:rank|node)\d+\.log$")


def cases() -> dict[str, list[Path]]:
    out: dict[str, list[Path]] = {}
    files = sorted(p for p in FIX.rglob("*") if p.is_file())
    groups: dict[tuple[Path, str], list[Path]] = defaultdict(list)
    logs: dict[Path, list[Path]] = defaultdict(list)
    for p in files:
        out[str(p.relative_to(FIX))] = [p]
        m = _GROUP.match(p.name)
        if m:
            groups[(p.parent, m["prefix"])].append(p)
        elif p.name.startswith("ev.nccl_vm_") and p.name.endswith(".log"):
            groups[(p.parent, "ev.nccl_vm_")].append(p)
        if p.name.endswith(".log"):
            logs[p.parent].append(p)
    for (d, prefix), ps in groups.items():
        if len(ps) > 1:
            out[f"{d.relative_to(FIX)}/{prefix}*group"] = ps
    for d, ps in logs.items():
        if len(ps) > 1:
            out[f"{d.relative_to(FIX)}/*.log"] = ps
    return out


def held_out(name: str) -> bool:
    if not name.startswith("corpus/"):
        return False
    from scripts.score_corpus import part_of

    case = Path(name).name
    case = re.sub(r"\.rank\d+\.log$|\.log$|/\*\.log$", "", case)
    # a folder-wide case of the corpus holds held-out files too: never shown
    return name.endswith("*.log") or name.endswith("group") or part_of(case) == "out"


def run_case(paths: list[Path], cli: bool) -> dict:
    argv = ["diagnose", "--json", *map(str, paths)]
    if cli:
        env = dict(os.environ, PYTHONPATH=str(ROOT), NO_COLOR="1")
        r = subprocess.run([sys.executable, "-m", "sparktui", *argv], capture_output=True, text=True,
                           env=env, cwd=ROOT, check=False)
        return {"rc": r.returncode, "stdout": r.stdout, "stderr": r.stderr}
    from sparktui.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as exc:
            rc = exc.code
    return {"rc": rc, "stdout": out.getvalue(), "stderr": err.getvalue()}


def _file(d: Path, name: str) -> Path:
    return d / (hashlib.sha1(name.encode()).hexdigest()[:16] + ".json")


def main(argv: list[str]) -> int:
    cli = "--cli" in argv
    args = [a for a in argv if not a.startswith("--")]
    if len(args) != 2 or args[0] not in ("record", "check"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    mode, d = args[0], Path(args[1])
    d.mkdir(parents=True, exist_ok=True)
    all_cases = cases()
    diffs: list[str] = []
    for name, paths in all_cases.items():
        got = dict(run_case(paths, cli), case=name, files=[str(p.relative_to(ROOT)) for p in paths])
        f = _file(d, name)
        if mode == "record":
            f.write_text(json.dumps(got, sort_keys=True), encoding="utf-8")
            continue
        want = json.loads(f.read_text(encoding="utf-8")) if f.exists() else None
        if want != got:
            diffs.append(name)
            print(f"DIFFERS: {name}", flush=True)
            if not held_out(name) and want is not None:
                for key in ("rc", "stdout", "stderr"):
                    if want[key] != got[key]:
                        print(f"  {key}: before {str(want[key])[:600]!r}\n  {key}: after  {str(got[key])[:600]!r}")
    print(f"{mode}: {len(all_cases)} cases" + (f", {len(diffs)} differ" if mode == "check" else ""))
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
