"""The diagnosis corpus (tests/fixtures/corpus) as tests read it: held-in cases only, the findings
`sparktui diagnose` names first, a verbatim line.  Held-out cases are only ever measured by
``scripts/score_corpus.py --part out``; ``score_corpus.part_of`` decides which is which.
tests/ is on sys.path (the rootdir conftest's folder)."""

from __future__ import annotations

import sys
from pathlib import Path

from sparktui.commands.diagnose import analyse

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "fixtures" / "corpus"
NCCL_2GPU = ROOT / "tests" / "fixtures" / "nccl-2gpu"  # a real two-GPU run's logs and captures
sys.path.insert(0, str(ROOT / "scripts"))
from score_corpus import load_cases, part_of, read_header  # noqa: E402,F401 (the tests' way to them)


def held_in(rel: str) -> list[str]:
    """The files of one held-in case (refuses a held-out one: those are only ever measured)."""
    assert part_of(Path(rel).name) == "in", f"{rel} is held out"
    files = sorted(CORPUS.glob(f"{rel}.log")) or sorted(CORPUS.glob(f"{rel}.rank*.log"))
    assert files, rel
    return [str(p) for p in files]


def named(paths: list[str]) -> list[str]:
    """Error/warning finding ids in ranked order (what `sparktui diagnose` lists first)."""
    return [f.id for f in analyse(paths).findings if f.severity != "info"]


def line_of(rel: str, needle: str) -> str:
    """A verbatim line of a held-in excerpt."""
    (path,) = held_in(rel)
    return next(ln for ln in Path(path).read_text(encoding="utf-8").splitlines() if needle in ln)


def bare_findings(rel: str, tmp_path: Path) -> list:
    """`sparktui diagnose`'s findings on a held-in case fed without our header lines (as a user's
    log comes: a header's words could match a pattern by themselves)."""
    out = []
    for p in map(Path, held_in(rel)):
        lines = p.read_text(encoding="utf-8").splitlines(keepends=True)
        q = tmp_path / p.name
        q.write_text("".join(lines[len(read_header(p)):]), encoding="utf-8")
        out.append(str(q))
    return analyse(out).findings


def diagnose_lines(lines: list[str]) -> list:
    """The findings of lines fed as one source (a counterpart line, a cut excerpt)."""
    from sparktui.diagnosis.diagnoser import Diagnoser

    d = Diagnoser()
    d.feed_lines("t", lines)
    d.finish()
    return d.findings


# the fields every catalogue entry needs, for a test's own one-entry catalogue (``parse_catalogue``)
CATALOGUE_ENTRY = '''
[[finding]]
id = "x"
severity = "error"
title = "t"
explanation = "e"
advice = "a"
'''


def body(rel: str) -> list[str]:
    """The log lines of a held-in excerpt, without the header."""
    (path,) = held_in(rel)
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    return lines[len(read_header(Path(path))):]


def scan_named(lines: list[str]) -> list[str]:
    """Error/warning ids of one scanner over ``lines``, ranked as `sparktui diagnose` ranks them."""
    from sparktui.diagnosis.catalogue import default_catalogue
    from sparktui.diagnosis.classifier import SourceScanner
    from sparktui.diagnosis.ranking import rank_findings

    sc = SourceScanner("t")
    sc.feed(lines)
    sc.finish()
    return [f.id for f in rank_findings(sc.findings, default_catalogue()) if f.severity != "info"]


def ranked(rel: str, tmp_path: Path) -> list[str]:
    """Error/warning ids, ranked, of a held-in case fed without its header (``bare_findings``)."""
    return [f.id for f in bare_findings(rel, tmp_path) if f.severity != "info"]


def bare_errors(rel: str, tmp_path: Path) -> list[str]:
    """The error ids of a held-in case fed without its header (``bare_findings``)."""
    return [f.id for f in bare_findings(rel, tmp_path) if f.severity == "error"]


def line_errors(lines: list[str]) -> list[str]:
    """The error ids of lines fed as one source (``diagnose_lines``)."""
    return [f.id for f in diagnose_lines(lines) if f.severity == "error"]


def fact_of(line: str):
    """The catalogue fact one line states (last_words' structural facts), or None."""
    from sparktui.diagnosis.catalogue import default_catalogue
    from sparktui.diagnosis.last_words import facts

    got = facts([(1, line)], default_catalogue().entries)
    return got[1] if got else None
