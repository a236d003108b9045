"""Generated docs match their data: docs/findings.md the catalogue (scripts/gen_findings_doc.py),
the README's table of keys the keymap (scripts/gen_readme_keys.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import docgen  # noqa: E402
import gen_findings_doc  # noqa: E402
import gen_readme_keys  # noqa: E402

from sparktui.diagnosis.catalogue import default_catalogue  # noqa: E402
from sparktui.tui import keymap  # noqa: E402


@pytest.mark.parametrize("gen", [gen_findings_doc, gen_readme_keys], ids=["findings.md", "README keys"])
def test_generated_text_is_current(gen):
    # the message names the file and the script to run, e.g.
    # "docs/findings.md is stale: run scripts/gen_findings_doc.py"
    problem = docgen.stale(gen.TARGET, gen.render, gen.SCRIPT)
    assert problem is None, problem


def test_every_id_has_its_section_meaning_and_fix():
    text = gen_findings_doc.render()
    for e in default_catalogue().entries.values():
        section = text.split(f"### `{e.id}`\n", 1)[1].split("\n### ", 1)[0]
        assert e.explanation.strip() in section and e.advice.strip() in section, e.id
        assert f"**{e.severity}**" in section, e.id


def test_a_changed_file_is_reported_stale(tmp_path):
    copy = tmp_path / "findings.md"
    copy.write_text(gen_findings_doc.render().replace("NCCL", "NCC L", 1))
    problem = docgen.stale(copy, gen_findings_doc.render, gen_findings_doc.SCRIPT)
    assert problem == f"{copy} is stale: run scripts/gen_findings_doc.py"
    copy.write_text(gen_findings_doc.render())
    assert docgen.stale(copy, gen_findings_doc.render, gen_findings_doc.SCRIPT) is None


def test_check_flag_exits_0_when_current():
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_findings_doc.py"), "--check"],
                          capture_output=True, text=True, cwd=ROOT)
    assert (done.returncode, done.stderr) == (0, ""), done.stderr


def test_every_binding_is_in_the_keys_table():
    table = gen_readme_keys.table()
    for e in keymap.entries():
        assert f"| {e.description}" in table, e.id


def test_only_the_marked_section_is_rewritten():
    begin, end = docgen.begin_marker("keys", gen_readme_keys.SCRIPT), docgen.end_marker("keys")
    out = gen_readme_keys.render(f"before\n{begin}\n| old |\n{end}\nafter\n")
    assert out.startswith(f"before\n{begin}\n| key |") and out.endswith(f"\n{end}\nafter\n")
    assert "| old |" not in out
    with pytest.raises(ValueError, match="no section 'keys'"):
        gen_readme_keys.render("no markers here\n")
