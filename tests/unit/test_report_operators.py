"""`sparktui report` says who did what: a Notes section and the actions of every operator (this
session's, and the others' read from the cluster's shared timeline), from a real recorded session."""

from __future__ import annotations

from sparktui.commands.report import build_report
from sparktui.config import demo_config
from sparktui.engine import Engine
from sparktui.model import ActionEvent, Note, TimelineEntry
from sparktui.session import Session


def test_report_has_notes_and_actions_by_operator(tmp_path):
    s = Session.create("vllm_qwen35", meta={"kind": "tui", "operator": "ana@laptop"}, root=tmp_path)
    Engine(demo_config(), session=s).process([
        ActionEvent("doctor", "ssh", "started", node="spark1", ts=100.0),
        ActionEvent("doctor", "ssh", "progress", "halfway", node="spark1", ts=100.5),  # chatter: left out
        ActionEvent("doctor", "ssh", "ok", "spark1 reachable", node="spark1", ts=101.0),
        Note("restarted rank 1, HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz12", author="ana@laptop", ts=102.0),
        TimelineEntry(kind="action", operator="bo@desk", session="s-b", action="stop", step="containers",
                      status="ok", node="spark2", message="stopped 2", ts=103.0),
        TimelineEntry(kind="note", operator="bo@desk", session="s-b", message="bo took over", ts=104.0),
    ])
    s.close()
    md = build_report(s.path)
    notes = md.split("## Notes", 1)[1].split("\n## ", 1)[0]
    assert "ana@laptop: restarted rank 1" in notes and "bo@desk: bo took over" in notes
    assert notes.index("restarted rank 1") < notes.index("bo took over")  # oldest first
    assert "hf_abc" not in md
    acts = md.split("## Actions by operator", 1)[1].split("\n## ", 1)[0]
    mine = acts.split("### ana@laptop (this session)", 1)[1].split("###", 1)[0]
    assert "doctor/ssh: started [spark1]" in mine and "doctor/ssh: ok [spark1] spark1 reachable" in mine
    assert "halfway" not in mine
    assert "stop/containers: ok [spark2] stopped 2" in acts.split("### bo@desk", 1)[1]
    assert "bo@desk: action stop/containers: ok stopped 2" in md.split("## Timeline", 1)[1]


def test_report_of_a_session_without_notes_or_actions_says_so(tmp_path):
    s = Session.create("vllm_qwen35", meta={"kind": "tui"}, root=tmp_path)
    s.close()
    md = build_report(s.path)
    assert "## Notes\n\nNone recorded." in md and "## Actions by operator\n\nNone recorded." in md
