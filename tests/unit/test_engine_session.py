"""Engine wiring (reduce + processors + store + session + subscribers) and the session files."""

from __future__ import annotations

import asyncio
import json
import threading

from sparktui.config import demo_config
from sparktui.engine import Engine
from sparktui.logs.sanitize import clean_line
from sparktui.logs.store import LogStore
from sparktui.model import Finding, FindingRaised, LogBatch, LogLine, MemoryInfo, MemorySample, Note
from sparktui.session import Session, redact, sessions_dir
from sparktui.session_read import from_jsonable


class EchoFinder:
    """A processor that raises a finding for every line containing 'WARN'."""

    def feed(self, ev):
        if isinstance(ev, LogBatch):
            return [FindingRaised(Finding("x", "warning", ln.text, node=ev.node, source=ev.source, line=ln.seq))
                    for ln in ev.lines if "WARN" in ln.text]
        return []


def _batch(node, source, texts, start=1):
    return LogBatch(node, source, tuple(
        LogLine(node, source, t, ts=1000.0 + i, seq=start + i, raw_ts=f"2026-11-29T20:00:{i:02d}.000000001Z")
        for i, t in enumerate(texts)))


def test_process_reduces_stores_persists_and_derives(tmp_path):
    session = Session.create("demo", root=tmp_path)
    eng = Engine(demo_config(), processors=[EchoFinder()], session=session)
    seen = []
    eng.subscribe(lambda batch: seen.extend(batch))
    eng.process([_batch("spark1", "vllm", ["hello", "NCCL WARN boom", "bye"])])
    assert "vllm" in eng.state.node("spark1").logs
    assert [f.title for f in eng.state.findings] == ["NCCL WARN boom"]
    assert eng.logs.find("spark1", "vllm").total == 3
    assert any(isinstance(e, FindingRaised) for e in seen)
    session.close()
    text = session.log_path("spark1", "vllm").read_text()
    assert text.splitlines() == [
        "2026-11-29T20:00:00.000000001Z hello",
        "2026-11-29T20:00:01.000000001Z NCCL WARN boom",
        "2026-11-29T20:00:02.000000001Z bye",
    ]
    events = Session.open(session.path).read_events()
    assert events and events[0]["type"] == "FindingRaised"


async def test_emit_from_threads_is_delivered_in_order():
    eng = Engine(demo_config())
    done = asyncio.Event()
    total = []

    def sub(batch):
        total.extend(batch)
        if len(total) >= 2000:
            done.set()

    eng.subscribe(sub)
    await eng.start()

    def worker(k):
        for i in range(1000):
            eng.emit(LogLine("spark1", f"s{k}", f"{i}", seq=i + 1))

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    await asyncio.wait_for(done.wait(), 5)
    await eng.stop()
    for k in range(2):
        series = eng.logs.find("spark1", f"s{k}")
        assert series.texts == [str(i) for i in range(1000)]


def test_store_trims_in_chunks_and_keeps_numbering():
    store = LogStore(max_lines_per_source=100)
    for start in range(0, 1000, 10):
        store.append("n", "s", [LogLine("n", "s", str(i), seq=i + 1) for i in range(start, start + 10)])
    s = store.find("n", "s")
    assert s.total == 1000
    assert len(s.texts) <= 110
    assert s.get(999) == "999" and s.get(0) is None
    assert [t for _, _, t in s.slice(995, 2000)] == ["995", "996", "997", "998", "999"]


def test_clean_line_neutralises_escapes_and_keeps_markup_text():
    assert clean_line("\x1b[31mred\x1b[0m [bold red]x[/]") == "red [bold red]x[/]"
    assert clean_line(b"a\x00b\xffc\r") == "a\u2400b\ufffdc"
    assert clean_line("\x1b]0;title\x07after") == "after"
    assert "\x1b" not in clean_line("\x1b[2J\x1b[Hcleared")


def test_redaction_of_secrets_in_session(tmp_path):
    assert redact("HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz12 rest") == "HF_TOKEN=*** rest"
    assert "sk-" not in redact("key sk-abcdefghijklmnopqrstuvwx")
    session = Session.create("c", root=tmp_path)
    session.record(Note("export HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz12"))
    session.record(_batch("a", "b", ["OPENAI_API_KEY=sk-abcdefghijklmnopqrstuvwx"]))
    session.close()
    blob = (session.path / "events.jsonl").read_text() + session.log_path("a", "b").read_text()
    assert "hf_abc" not in blob and "sk-abc" not in blob


def test_token_shapes_are_masked_where_they_stand_alone_only():
    # each shape at the start, after a space or punctuation, and (not) glued to a word before it
    for tok in ("hf_" + "a1" * 12, "sk-" + "b2" * 9, "ghp_" + "c3" * 11, "github_pat_" + "d4" * 11,
                "AKIA" + "E5" * 8):
        assert redact(tok) == "***", tok
        assert redact(f"x ({tok}) y") == "x (***) y", tok
        assert redact(f"mask{tok}") == f"mask{tok}", tok  # part of a longer word: no token
    assert redact("task-" + "f6" * 9) == "task-" + "f6" * 9  # "sk-" inside a word
    assert redact("sk-short") == "sk-short"  # too short to be a key


def test_sessions_dir_honours_state_env(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARKTUI_STATE_DIR", str(tmp_path / "st"))
    assert sessions_dir() == tmp_path / "st" / "sessions"
    s = Session.create("weird name/../x")
    assert s.path.parent == tmp_path / "st" / "sessions"
    assert ".." not in s.path.name


def test_memory_sample_roundtrip_to_json(tmp_path):
    session = Session.create("c", root=tmp_path)
    session.record(MemorySample("a", MemoryInfo(total=10, available=4)))
    session.close()
    ev = Session.open(session.path).read_events()[0]
    assert ev["type"] == "MemorySample" and ev["memory"]["total"] == 10


def test_an_older_sessions_failed_step_reads_back_as_fail(tmp_path):
    # sparktui before the status words were one wrote "failed" for a step (and a shared-timeline entry)
    session = Session.create("c", root=tmp_path)
    session.close()
    old = [{"type": "ActionEvent", "action": "launch", "step": "start", "status": "failed", "message": "port in use",
            "node": "spark1", "ts": 1000.0},
           {"type": "TimelineEntry", "kind": "action", "operator": "bo@desk", "session": "s", "action": "stop",
            "step": "remove", "status": "failed", "ts": 1001.0}]
    (session.path / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in old))
    events = Session.open(session.path).read_events()
    assert [(e["type"], e["status"]) for e in events] == [("ActionEvent", "fail"), ("TimelineEntry", "fail")]
    assert [from_jsonable(e).status for e in events] == ["fail", "fail"]  # replay rebuilds today's word
