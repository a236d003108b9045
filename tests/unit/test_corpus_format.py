"""The corpus of real excerpts stays well-formed: every case has its headers, every expected id is
a catalogue id or one documented in a _new_ids.md, and the held-out split is what the script says."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

from sparktui.diagnosis.catalogue import default_catalogue

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "fixtures" / "corpus"
spec = importlib.util.spec_from_file_location("score_corpus", ROOT / "scripts" / "score_corpus.py")
score_corpus = importlib.util.module_from_spec(spec)
sys.modules["score_corpus"] = score_corpus  # its dataclasses look their module up
spec.loader.exec_module(score_corpus)


def documented_new_ids() -> set[str]:
    out = set()
    for f in CORPUS.glob("*/_new_ids.md"):
        out |= set(re.findall(r"^- ([a-z][a-z0-9_]*):", f.read_text(), re.M))
    return out


def test_every_case_is_well_formed_and_names_known_ids():
    cases = score_corpus.load_cases(CORPUS)
    assert len(cases) >= 300
    known = set(default_catalogue().entries) | documented_new_ids() | {"healthy"}
    for c in cases:
        head = score_corpus.read_header(c.files[0])
        assert head.get("source", "").startswith("http"), c.name
        assert head.get("cause"), c.name
        assert set(c.expect) <= known, (c.name, set(c.expect) - known)
        body = c.files[0].read_text(errors="replace").splitlines()[len(head):]
        # at least the line a user pasted: a thread's one error line is a shape users bring too
        assert len([l for l in body if l.strip()]) >= 1, c.name
    assert sum(c.healthy for c in cases) >= 60


def test_split_depends_on_the_name_only_and_holds_out_about_forty_percent():
    cases = score_corpus.load_cases(CORPUS)
    out = [c for c in cases if c.part == "out"]
    assert 0.3 < len(out) / len(cases) < 0.5
    assert all(score_corpus.part_of(Path(c.name).name) == c.part for c in cases)


FROZEN = ROOT / "tests" / "fixtures" / "corpus-frozen"


def _norm(url: str) -> str:
    url = url.split("#", 1)[0].rstrip("/")
    return url.replace("/pull/", "/issues/")


def test_frozen_set_is_well_formed_and_shares_no_thread_with_the_corpus():
    # Checks headers only: never diagnoses, never prints a line of an excerpt.
    known = set(default_catalogue().entries) | {"healthy"}
    main_sources = {
        _norm(score_corpus.read_header(f).get("source", ""))
        for f in CORPUS.rglob("*.log")
    }
    files = sorted(FROZEN.glob("*.log"))
    assert len(files) >= 100
    threads = set()
    for f in files:
        head = score_corpus.read_header(f)
        for key in ("source", "expect", "cause", "origin", "thread"):
            assert head.get(key), (f.name, key)
        assert head["source"].startswith("http"), f.name
        assert set(head["expect"].split()) <= known, (f.name, set(head["expect"].split()) - known)
        assert _norm(head["source"]) not in main_sources, f.name
        body = f.read_text(errors="replace").splitlines()[len(head):]
        assert any(l.strip() for l in body), f.name
        threads.add(head["thread"])
    assert not {_norm(t) for t in threads} & main_sources
    cases = score_corpus.load_cases(FROZEN, part="frozen")
    assert sum(c.healthy for c in cases) >= 20


def test_frozen_misses_are_refused():
    assert score_corpus.main(["--part", "frozen", "--misses"]) == 2
