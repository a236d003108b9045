"""Documentation generated from the project's data files: render, compare with the file, write.

Shared by the ``gen_*.py`` scripts and by the tests that fail when a generated file (or a marked
section of a hand-written one) no longer matches its data.  A *render* function takes the file's
current text ("" when it is missing) and returns the text it should have.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable, Sequence

ROOT = Path(__file__).resolve().parents[1]
Render = Callable[[str], str]


def begin_marker(name: str, script: str) -> str:
    return f"<!-- generated:{name} by {script}; edit the data, not this section -->"


def end_marker(name: str) -> str:
    return f"<!-- end generated:{name} -->"


def splice(text: str, name: str, script: str, body: str) -> str:
    """``text`` with the section between the markers of ``name`` replaced by ``body``."""
    begin, end = begin_marker(name, script), end_marker(name)
    head, found, rest = text.partition(begin)
    if not found or end not in rest:
        raise ValueError(f"no section {name!r}: the file needs the lines {begin!r} and {end!r}")
    return head + begin + "\n" + body.rstrip("\n") + "\n" + end + rest.split(end, 1)[1]


def stale(path: Path, render: Render, script: str) -> str | None:
    """None when ``path`` is what ``render`` makes of it, else the one-line reason."""
    current = path.read_text(encoding="utf-8") if path.is_file() else ""
    if render(current) == current:
        return None
    rel = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    return f"{rel} is stale: run {script}"


def main(argv: Sequence[str] | None, path: Path, render: Render, script: str, about: str) -> int:
    parser = argparse.ArgumentParser(prog=script, description=about)
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when the file is stale")
    args = parser.parse_args(argv)
    problem = stale(path, render, script)
    if args.check:
        if problem:
            print(problem, file=sys.stderr)
        return 1 if problem else 0
    if problem:
        current = path.read_text(encoding="utf-8") if path.is_file() else ""
        path.write_text(render(current), encoding="utf-8")
        print(f"wrote {path}")
    return 0
