"""The test tree's layout, checked in the unit run with the names: pytest imports test modules by
basename (rootdir import mode), so two test files of one name in two test directories stop the
whole run at collection; and a test module is named after its subject, never after the issue or
work round that added it (``_issue32``, ``_12n``, ``_31``, ``_more``), so a reader finds the tests of
a subject in one place."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
# an issue or round number, or a catch-all suffix, in a test module's name
NOT_A_SUBJECT = re.compile(r"issue_?\d|round_?\d|_\d+[a-z]?(_|$)|_(more|misc|extra|new)(_|$)")


def _modules() -> list[Path]:
    return [f for f in TESTS.rglob("test_*.py") if "__snapshots__" not in f.parts]


def test_test_module_basenames_are_unique():
    seen: dict[str, list[str]] = defaultdict(list)
    for f in _modules():
        seen[f.name].append(str(f.relative_to(TESTS)))
    dup = {k: v for k, v in seen.items() if len(v) > 1}
    assert not dup, f"test modules with the same basename: {dup}"


def test_test_modules_are_named_by_subject():
    bad = sorted(str(f.relative_to(TESTS)) for f in _modules() if NOT_A_SUBJECT.search(f.stem))
    assert not bad, f"name these after their subject, not the issue or round that added them: {bad}"


def test_the_subject_rule_catches_round_and_issue_names():
    for stem in ("test_diag_generalise_12n", "test_diag_structure_31", "test_cli_issue32", "test_issue32_tui",
                 "test_diag_generalise_more"):
        assert NOT_A_SUBJECT.search(stem), stem
    for stem in ("test_diag_nccl_failures", "test_load_stats", "test_tui_main_screen", "test_diag_interfaces"):
        assert not NOT_A_SUBJECT.search(stem), stem
