#!/usr/bin/env python3
"""Is a candidate excerpt new to the corpus?  For whoever gathers cases, blind to the held-out parts.

    corpus_novelty.py URL ...          "known" or "new" per thread URL (any part, the frozen set too)
    corpus_novelty.py --file F ...     per candidate file: its thread URL known or new, and how many of its
                                       distinctive lines some existing case already holds

Answers name no case, part or line: a gatherer learns only that a thread or a line is taken, so the
held-out and frozen parts stay unread by anyone who writes rules.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ROOTS = (ROOT / "tests" / "fixtures" / "corpus", ROOT / "tests" / "fixtures" / "corpus-frozen")
# a line long and specific enough that sharing it means sharing the paste (not a banner every log prints)
MIN_LINE = 40
_STAMP = re.compile(r"^[\d\s:.,/TZ+\-\[\]]*")


def thread_key(url: str) -> str:
    """One thread, however linked: no scheme, fragment, query, trailing slash or comment anchor."""
    u = url.strip().lower()
    u = re.sub(r"^https?://(www\.)?", "", u)
    u = u.split("#", 1)[0].split("?", 1)[0].rstrip("/")
    # forum posts: discourse's /t/slug/123/4 is post 4 of thread 123
    u = re.sub(r"(/t/[^/]+/\d+)/\d+$", r"\1", u)
    return u


def _norm(line: str) -> str:
    return _STAMP.sub("", line.strip())


def _known() -> tuple[set[str], set[str]]:
    """The threads the corpus holds, and its distinctive lines: long ones that one case alone has (a
    banner or a traceback's boilerplate that several cases share says nothing of a paste)."""
    threads: set[str] = set()
    seen: dict[str, int] = {}
    for root in ROOTS:
        for p in root.rglob("*.log"):
            mine: set[str] = set()
            for raw in p.read_text(encoding="utf-8", errors="replace").splitlines():
                m = re.match(r"^# (?:source|thread): ?(\S+)", raw)
                if m:
                    threads.add(thread_key(m.group(1)))
                    continue
                if raw.startswith("# "):
                    continue
                n = _norm(raw)
                if len(n) >= MIN_LINE:
                    mine.add(n)
            for n in mine:
                seen[n] = seen.get(n, 0) + 1
    return threads, {n for n, k in seen.items() if k == 1}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("urls", nargs="*")
    ap.add_argument("--file", nargs="*", default=[], type=Path)
    args = ap.parse_args(argv)
    threads, lines = _known()
    rc = 0
    for u in args.urls:
        known = thread_key(u) in threads
        rc |= known
        print(f"{'known' if known else 'new  '} {u}")
    for f in args.file:
        text = f.read_text(encoding="utf-8", errors="replace").splitlines()
        src = next((m.group(1) for raw in text if (m := re.match(r"^# source: ?(\S+)", raw))), "")
        body = [_norm(r) for r in text if not r.startswith("# ")]
        body = [b for b in body if len(b) >= MIN_LINE]
        shared = sum(1 for b in body if b in lines)
        known = bool(src) and thread_key(src) in threads
        # its own lines are in the corpus once it is written there: compare before copying it in
        rc |= known or shared > 0
        print(f"{f}: thread {'known' if known else 'new' if src else 'missing'}, "
              f"{shared}/{len(body)} distinctive lines already in the corpus")
    return 1 if rc else 0


if __name__ == "__main__":
    sys.exit(main())
