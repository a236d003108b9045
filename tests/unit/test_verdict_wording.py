"""Every sentence the hang verdict says is in verdict_rules.toml: each key the code asks for is there,
and each table entry there is asked for (no dead or missing wording)."""

from __future__ import annotations

import re
from pathlib import Path

from sparktui.diagnosis.facts import rules_data

DIAG = Path(__file__).resolve().parents[2] / "sparktui" / "diagnosis"


def _asked(call: str, *files: str) -> set[str]:
    # the keys are the string literals of the call's first argument (`fix("a" if x else "b")` asks for both)
    text = "".join((DIAG / f).read_text() for f in files)
    firsts = re.findall(rf"\b{call}\(([^,)]*)", text)
    return {key for arg in firsts for key in re.findall(r"\"(\w+)\"", arg)}


def test_fix_sentences_come_from_the_rules_file():
    asked = _asked("fix", "verdict.py", "rules_faults.py", "rules_runtime.py")
    assert asked == set(rules_data()["fixes"])


def test_latent_items_come_from_the_rules_file():
    asked = _asked("_item", "latent.py")
    assert asked == set(rules_data()["latent"])
    assert all({"id", "title", "advice"} <= set(spec) for spec in rules_data()["latent"].values())


def test_rule_modules_write_no_fix_sentence_of_their_own():
    for name in ("rules_faults.py", "rules_runtime.py", "verdict.py"):
        assert not re.search(r"\bfix\s*=\s*\(?f?\"", (DIAG / name).read_text()), name
