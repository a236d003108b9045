#!/usr/bin/env python3
"""Score `sparktui diagnose` on the corpus of real log excerpts (tests/fixtures/corpus/).

    score_corpus.py [--part in|out|all|frozen] [--json] [--misses] [--with-headers] [--no-patterns] [--corpus DIR]

Each excerpt file starts with header lines (``# source:``, ``# expect:``, ``# cause:``,
``# origin:``); ``expect`` names the root-cause finding id first, then other ids that are also
right, or ``healthy``.  Files named ``X.rank0.log``, ``X.rank1.log`` ... are one case, diagnosed
together.  The split is fixed by the file name alone (see ``part_of``), decided once: patterns are
written from the held-in part only, the held-out part is only ever measured.

Scores per part: **any** (a failure case where some expected id is among the error/warning
findings, or is the info-level fact the case expects), **top-1** (the first error/warning finding
is the expected root cause), **healthy clean** (a healthy case with no error finding).  Per-cause
rows follow with ``--json`` or on the text output.
Each excerpt is diagnosed without our header lines, as a user's log would come: a header's words (the
cause line names the error) can match a catalogue pattern that the log itself does not, which put
the scores about a point high.  ``--with-headers`` feeds the files whole (the former measure).

``--part frozen`` scores the frozen held-out set (tests/fixtures/corpus-frozen/, see its README): a
set that rule writers never read.  For it only aggregate and per-cause numbers are printed, plus the
count of failing cases with no finding at all ("silent failures") and, per finding id, how many
healthy cases raised it as an error ("false alarms"); no case names, lines or misses (``--misses`` is
refused).  Its files carry one more header, ``# thread:``, stripped like the others.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
CORPUS = ROOT / "tests" / "fixtures" / "corpus"
FROZEN = ROOT / "tests" / "fixtures" / "corpus-frozen"
HEADER_KEYS = ("source", "expect", "cause", "origin", "thread")
HELD_OUT_PER_TEN = 4  # 40 % held out
_RANK = re.compile(r"^(?P<case>.+)\.rank\d+\.log$")


def part_of(case: str) -> str:
    """'in' or 'out', from the case name only: stable, and blind to what the file holds."""
    h = int(hashlib.sha256(case.encode()).hexdigest()[:8], 16)
    return "out" if h % 10 < HELD_OUT_PER_TEN else "in"


@dataclass
class Case:
    name: str
    files: list[Path]
    expect: list[str]
    cause: str = ""
    origin: str = ""
    source: str = ""
    part: str = "in"
    thread: str = ""
    found: list[str] = field(default_factory=list)

    @property
    def healthy(self) -> bool:
        return self.expect == ["healthy"]


def read_header(path: Path) -> dict[str, str]:
    head: dict[str, str] = {}
    with path.open(encoding="utf-8", errors="replace") as fh:
        for line in fh:
            m = re.match(r"^# (" + "|".join(HEADER_KEYS) + r"): ?(.*)$", line.rstrip("\n"))
            if not m:
                break
            head[m.group(1)] = m.group(2).strip()
    return head


def load_cases(root: Path, part: str | None = None) -> list[Case]:
    """The cases under ``root``; ``part`` forces every case's part (the frozen set is one part)."""
    groups: dict[str, list[Path]] = defaultdict(list)
    for p in sorted(root.rglob("*.log")):
        m = _RANK.match(p.name)
        key = str(p.parent / (m.group("case") if m else p.stem))
        groups[key].append(p)
    cases = []
    for key, files in sorted(groups.items()):
        head = read_header(files[0])
        if "expect" not in head:
            raise SystemExit(f"score_corpus: {files[0]}: no '# expect:' header")
        name = str(Path(key).relative_to(root))
        cases.append(Case(name, files, head["expect"].split(), head.get("cause", ""), head.get("origin", ""),
                          head.get("source", ""), part or part_of(Path(key).name), head.get("thread", "")))
    return cases


def diagnose(case: Case, bare: bool = False) -> list[str]:
    from sparktui.commands.diagnose import analyse

    if not bare:
        dg = analyse([str(p) for p in case.files])
        return [f"{f.id}:{f.severity}" for f in dg.findings]
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for p in case.files:  # same file names: rank files keep their names
            lines = p.read_text(encoding="utf-8", errors="replace").splitlines(keepends=True)
            skip = len(read_header(p))
            (Path(tmp) / p.name).write_text("".join(lines[skip:]), encoding="utf-8")
            paths.append(str(Path(tmp) / p.name))
        dg = analyse(paths)
    return [f"{f.id}:{f.severity}" for f in dg.findings]


def _info_ids() -> set[str]:
    from sparktui.diagnosis.catalogue import default_catalogue

    return {i for i, e in default_catalogue().entries.items() if e.severity == "info"}


def _named(c: Case, facts: set[str]) -> list[str]:
    """The ids a case's diagnosis named, as a user reads them: errors and warnings in their order; an
    info finding counts only where the case's root cause is itself an info-level fact (nvidia-smi
    reporting no memory on a GB10), and then after every error and warning."""
    named = [f.split(":")[0] for f in c.found if not f.endswith(":info")]
    if c.expect[0] in facts and f"{c.expect[0]}:info" in c.found:
        named.append(c.expect[0])
    return named


def score(cases: list[Case]) -> dict:
    fail = [c for c in cases if not c.healthy]
    healthy = [c for c in cases if c.healthy]
    per: dict[str, dict] = defaultdict(lambda: {"n": 0, "any": 0, "top1": 0, "silent": 0})
    any_ok = top_ok = 0
    facts = _info_ids()
    for c in fail:
        named = _named(c, facts)
        a = bool(set(c.expect) & set(named))
        t = bool(named) and named[0] == c.expect[0]
        any_ok += a
        top_ok += t
        row = per[c.expect[0]]
        row["n"] += 1
        row["any"] += a
        row["top1"] += t
        row["silent"] += not named
    clean = sum(1 for c in healthy if not any(f.endswith(":error") for f in c.found))
    # which error findings healthy cases raised: per finding id, like the per-cause rows (the frozen
    # set's false alarms can be chased without reading its cases)
    alarms: dict[str, int] = defaultdict(int)
    for c in healthy:
        for fid in {f.split(":")[0] for f in c.found if f.endswith(":error")}:
            alarms[fid] += 1
    silent = sum(1 for c in fail if not _named(c, facts))
    return {
        "cases": len(cases), "failures": len(fail), "healthy": len(healthy),
        "any": round(any_ok / len(fail), 3) if fail else None,
        "top1": round(top_ok / len(fail), 3) if fail else None,
        "healthy_clean": f"{clean}/{len(healthy)}",
        "silent_failures": silent,
        "false_alarms": dict(sorted(alarms.items(), key=lambda kv: (-kv[1], kv[0]))),
        "per_cause": dict(sorted(per.items(), key=lambda kv: (-kv[1]["n"], kv[0]))),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--part", choices=("in", "out", "all", "frozen"), default="all",
                    help="frozen: the frozen held-out set, aggregate and per-cause numbers only")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--misses", action="store_true", help="list the cases that were not named right")
    ap.add_argument("--with-headers", action="store_true", help="diagnose the files whole, our header lines too")
    ap.add_argument("--corpus", type=Path, default=CORPUS)
    ap.add_argument("--no-patterns", action="store_true",
                    help="switch the catalogue's line patterns off: what the structural readings (last words, "
                         "facts, exception shapes, NCCL state) name alone, a stand-in for wording nobody has seen")
    args = ap.parse_args(argv)
    if args.no_patterns:
        from sparktui.diagnosis import catalogue as _cat

        _cat.default_catalogue()  # loaded (its examples checked) before its patterns are switched off
        _cat.Entry.search = lambda self, line: None
    if args.part == "frozen" and args.misses:
        print("score_corpus: --misses is refused for the frozen set: only its aggregate and per-cause numbers are shown",
              file=sys.stderr)
        return 2
    if args.part == "frozen":
        cases = load_cases(args.corpus if args.corpus != CORPUS else FROZEN, part="frozen")
    else:
        cases = load_cases(args.corpus)
    for c in cases:
        c.found = diagnose(c, bare=not args.with_headers)
    parts = ("in", "out") if args.part == "all" else (args.part,)
    result = {p: score([c for c in cases if c.part == p]) for p in parts}
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for p, r in result.items():
            print(f"{p if p == 'frozen' else 'held-' + p}: {r['cases']} cases ({r['failures']} failures, {r['healthy']} healthy): "
                  f"any {r['any']}, top-1 {r['top1']}, healthy clean {r['healthy_clean']}, "
                  f"silent failures {r['silent_failures']}")
            for cause, row in r["per_cause"].items():
                print(f"    {cause:<32} {row['any']:>3}/{row['n']:<3} any   {row['top1']:>3}/{row['n']:<3} top-1"
                      + (f"   {row['silent']} silent" if row["silent"] else ""))
            if r["false_alarms"]:
                print("    false alarms on healthy cases: "
                      + ", ".join(f"{fid} x{n}" for fid, n in r["false_alarms"].items()))
    if args.misses:
        facts = _info_ids()
        for c in cases:
            if c.part not in parts:
                continue
            named = _named(c, facts)  # as the scores read it
            bad = (c.healthy and any(f.endswith(":error") for f in c.found)) or \
                  (not c.healthy and (not named or named[0] != c.expect[0]))
            if bad:
                print(f"MISS [{c.part}] {c.name}: expect {' '.join(c.expect)}; got {' '.join(c.found) or 'nothing'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
