"""pytest imports test modules by basename (rootdir import mode): two test files of one name in two
test directories stop the whole run at collection.  Caught here, in the unit run, with the names."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_test_module_basenames_are_unique():
    seen: dict[str, list[str]] = defaultdict(list)
    for f in TESTS.rglob("test_*.py"):
        if "__snapshots__" not in f.parts:
            seen[f.name].append(str(f.relative_to(TESTS)))
    dup = {k: v for k, v in seen.items() if len(v) > 1}
    assert not dup, f"test modules with the same basename: {dup}"
