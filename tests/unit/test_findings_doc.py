"""docs/findings.md is generated from the catalogue: it must match it (scripts/gen_findings_doc.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import docgen  # noqa: E402
import gen_findings_doc  # noqa: E402

from sparktui.diagnosis.catalogue import default_catalogue  # noqa: E402


def test_findings_doc_is_current():
    problem = docgen.stale(gen_findings_doc.TARGET, gen_findings_doc.render, gen_findings_doc.SCRIPT)
    assert problem is None, "docs/findings.md is stale: run scripts/gen_findings_doc.py"


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
