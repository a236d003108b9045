"""Wrong shapes in what a user hands us end in one line and exit 2, never a traceback: bundle JSON,
py-spy JSON, Flight Recorder dumps (`investigate --offline`), session files (`report`, `replay`).
Odd values inside an otherwise good Flight Recorder dump are dropped with a note instead."""

from __future__ import annotations

import json
import pickle
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from sparktui.cli import main
from sparktui.commands.replay import ReplayError, load_session
from sparktui.model import Finding, FindingRaised, LogBatch, LogLine, Note
from sparktui.session import Session

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures"
CAP = FIX / "nccl-2gpu"
DEV_BUNDLE = FIX / "device-runs" / "desync" / "bundle"
DEEP = 100_000


def _exit_2(argv: list[str], capsys, *words: str) -> str:
    rc = main(argv)
    cap = capsys.readouterr()
    assert rc == 2, (rc, cap.out[-500:], cap.err)
    assert cap.err.count("\n") == 1 and "Traceback" not in cap.err, cap.err
    for w in words:
        assert w in cap.err, cap.err
    return cap.err


# --------------------------------------------------------------------------- bundle JSON


@pytest.fixture
def bundle(tmp_path) -> Path:
    d = tmp_path / "bundle"
    shutil.copytree(DEV_BUNDLE, d)
    return d


def _edit(path: Path, fn) -> None:
    data = fn(json.loads(path.read_text()))
    path.write_text(data if isinstance(data, str) else json.dumps(data))


def _worker0(**kw):
    def fn(n):
        n["workers"][0].update(kw)
        return n
    return fn


META_CASES = {
    "a list": (lambda m: [m], "top level: a list, expected an object"),
    "nodes a string": (lambda m: {**m, "nodes": "spark1"}, "nodes: a string, expected a list of node names"),
    "nodes of numbers": (lambda m: {**m, "nodes": [1]}, "nodes[0]: an integer, expected a node name"),
    "interval text": (lambda m: {**m, "interval": "abc"}, "interval: a string, expected a number"),
    "fabric_ips a list": (lambda m: {**m, "fabric_ips": ["x"]}, "fabric_ips: a list, expected an object"),
    "expected_hcas values": (lambda m: {**m, "expected_hcas": {"gpuhost": "mlx5_0"}}, "expected_hcas.gpuhost"),
    "version": (lambda m: {**m, "sparktui_bundle": 99}, "not a sparktui bundle (version 99"),
    "deep": (lambda m: "[" * DEEP + "]" * DEEP, "JSON nested too deeply"),
    "not json": (lambda m: "{oops", "not JSON"),
}


@pytest.mark.parametrize("case", META_CASES)
def test_meta_json_of_the_wrong_shape(bundle, capsys, case):
    fn, words = META_CASES[case]
    _edit(bundle / "meta.json", fn)
    err = _exit_2(["investigate", "--offline", str(bundle)], capsys, "meta.json", words)
    assert "Peer dead" not in err


def test_nodes_as_a_string_is_never_iterated_into_characters(bundle, capsys):
    _edit(bundle / "meta.json", lambda m: {**m, "nodes": "spark1"})
    assert main(["investigate", "--offline", str(bundle), "--json"]) == 2
    cap = capsys.readouterr()
    assert cap.out == "" and "s, p, a" not in cap.err


NODE_CASES = {
    "a list": (lambda n: [n], "top level: a list, expected an object"),
    "unknown worker key": (_worker0(gpu_uuid="GPU-1"), "workers[0]: unknown key 'gpu_uuid'"),
    "pid text": (_worker0(pid="abc"), "workers[0].pid: a string, expected an integer"),
    "rank negative": (_worker0(rank=-3), "workers[0].rank"),
    "alive text": (_worker0(alive="yes"), "workers[0].alive"),
    "env values": (_worker0(env={"NCCL_DEBUG": 1}), "workers[0].env.NCCL_DEBUG: an integer, expected a string"),
    "log_files a string": (_worker0(log_files="/tmp/x.log"), "workers[0].log_files"),
    "workers an object": (lambda n: {**n, "workers": {"pid": 1}}, "workers: an object, expected a list"),
    "worker a string": (lambda n: {**n, "workers": ["rank 0"]}, "workers[0]: a string, expected an object"),
    "CapAdd a number": (lambda n: {**n, "containers": {"c1": {"CapAdd": 5}}}, "containers.c1.CapAdd"),
    "fabric item text": (lambda n: {**n, "fabric": ["ping ok"]}, "fabric[0]: a string, expected an object"),
    "log_growth text": (lambda n: {**n, "log_growth": {"rank 0": "3"}}, "log_growth.rank 0"),
    "dmesg a string": (lambda n: {**n, "dmesg": "oops"}, "dmesg: a string, expected a list of strings"),
    "unknown key": (lambda n: {**n, "extra": 1}, "unknown key 'extra'"),
}


@pytest.mark.parametrize("case", NODE_CASES)
def test_node_json_of_the_wrong_shape(bundle, capsys, case):
    fn, words = NODE_CASES[case]
    _edit(bundle / "gpuhost" / "node.json", fn)
    _exit_2(["investigate", "--offline", str(bundle)], capsys, "gpuhost/node.json", words)


PYSPY_CASES = {
    "numbers": ("[1, 2]", "[0]: an integer, expected an object"),
    "frames text": ('[{"pid": 1, "frames": "abc"}]', "[0].frames: a string, expected a list"),
    "pid text": ('[{"pid": "abc", "frames": []}]', "[0].pid: a string, expected an integer"),
    "frame line text": ('[{"frames": [{"name": "f", "line": "12"}]}]', "[0].frames[0].line"),
    "a string": ('"MainThread"', "top level: a string, expected a list of threads"),
    "deep": ("[" * DEEP + "]" * DEEP, "JSON nested too deeply"),
    "torn": ('[{"pid": 1, "fra', "not JSON"),
}


@pytest.mark.parametrize("case", PYSPY_CASES)
def test_pyspy_json_of_the_wrong_shape(bundle, capsys, case):
    text, words = PYSPY_CASES[case]
    (bundle / "gpuhost" / "ev.t20.pyspy.rank1.json").write_text(text)
    _exit_2(["investigate", "--offline", str(bundle)], capsys, "ev.t20.pyspy.rank1.json", words)


def test_ras_json_of_the_wrong_shape_is_no_answer_not_a_crash(bundle, capsys):
    # RAS answers come off the wire: the parser treats a wrong shape as "no answer" (live and offline alike)
    for f in (bundle / "gpuhost").glob("ev.*.ras.json"):
        f.write_text('SERVER PROTOCOL 2\nOK\n{"communicators": [{"ranks": "x", "size": "2"}, 5], "ras": []}\n')
    rc = main(["investigate", "--offline", str(bundle)])
    assert rc in (0, 1) and "Traceback" not in capsys.readouterr().err


# --------------------------------------------------------------------------- Flight Recorder dumps


@pytest.fixture
def capture(tmp_path) -> Path:
    d = tmp_path / "cap"
    d.mkdir()
    for f in CAP.glob("watchdog.*"):
        shutil.copy(f, d / f.name)
    return d


def _dump() -> dict:
    return pickle.loads((CAP / "watchdog.fr_trace_1").read_bytes())


class _Boom:
    def __reduce__(self):
        return (Path.touch, (Path("/tmp/sparktui-fr-pwned"),))


def _deep_pickle() -> bytes:
    # a list nested DEEP levels, written with opcodes (the pickler itself would recurse)
    return b"\x80\x02" + b"]" * DEEP + b"a" * (DEEP - 1) + b"."


FR_FATAL = {
    "garbage": (b"\x00not a pickle at all", "not a Flight Recorder dump"),
    "a list": (pickle.dumps([1, 2, 3]), "top level is a list, expected a mapping"),
    "a class": (pickle.dumps(_Boom()), "refused"),
    "deep list": (_deep_pickle(), "top level is a list"),
    "truncated": (pickle.dumps(_dump())[:200], "not a Flight Recorder dump"),
    "json list": (b"[1, 2]", "top level is a list"),
}


@pytest.mark.parametrize("case", FR_FATAL)
def test_flight_recorder_dump_that_is_not_one_alone(tmp_path, capsys, case):
    # the only evidence is unreadable: one line, exit 2, never a verdict on nothing
    blob, words = FR_FATAL[case]
    (tmp_path / "watchdog.fr_trace_1").write_bytes(blob)
    Path("/tmp/sparktui-fr-pwned").unlink(missing_ok=True)
    _exit_2(["investigate", "--offline", str(tmp_path)], capsys, "watchdog.fr_trace_1", words)
    assert not Path("/tmp/sparktui-fr-pwned").exists()


@pytest.mark.parametrize("case", FR_FATAL)
def test_flight_recorder_dump_that_is_not_one_among_others(capture, capsys, case):
    # issue 30 item 11: the other ranks keep their verdict, the bad dump is named and skipped
    blob, words = FR_FATAL[case]
    (capture / "watchdog.fr_trace_1").write_bytes(blob)
    Path("/tmp/sparktui-fr-pwned").unlink(missing_ok=True)
    rc = main(["investigate", "--offline", str(capture)])
    cap = capsys.readouterr()
    assert rc in (0, 1), (rc, cap.err)
    assert "Traceback" not in cap.err
    note = [ln for ln in cap.err.splitlines() if "watchdog.fr_trace_1" in ln]
    assert len(note) == 1 and words in note[0] and "skipped" in note[0], cap.err
    assert not Path("/tmp/sparktui-fr-pwned").exists()


def _set(path: tuple, value):
    def fn(d):
        cur = d
        for k in path[:-1]:
            cur = cur[k]
        cur[path[-1]] = value
        return d
    return fn


FR_ODD = {
    "enqueued text": (_set(("pg_status", "0", "last_enqueued_collective"), "abc"),
                      "last_enqueued_collective is a string"),
    "pg_status a list": (_set(("pg_status",), [1, 2]), "pg_status is a list, expected a mapping"),
    "group a number": (_set(("pg_status", "0"), 7), "pg_status['0'] is an integer"),
    "completed a bool": (_set(("pg_status", "0", "last_completed_collective"), True), "is a boolean"),
    "entries a dict": (_set(("entries",), {"a": 1}), "entries is an object, expected a list"),
    "entry a string": (_set(("entries", 0), "x"), "1 entry without an object"),
    "deep entries": (_set(("entries",), None), ""),  # replaced below by a deeply nested list
}


@pytest.mark.parametrize("case", FR_ODD)
def test_odd_values_in_a_flight_recorder_dump_are_dropped_with_a_note(capture, capsys, case):
    fn, note = FR_ODD[case]
    data = fn(_dump())
    blob = pickle.dumps(data)
    if case == "deep entries":
        # splice a DEEP-nested list in as "entries": build the dict by opcodes around it
        blob = (b"\x80\x02}X" + struct.pack("<I", 7) + b"entries" + _deep_pickle()[2:-1] + b"s.")
        note = "1 entry without an object"
    (capture / "watchdog.fr_trace_1").write_bytes(blob)
    rc = main(["investigate", "--offline", str(capture)])
    cap = capsys.readouterr()
    # the logs still show the desync: the verdict stands without rank 1's dump status
    assert rc == 1 and cap.out.startswith("R4: Collective desync"), (rc, cap.out[:300], cap.err)
    assert "Traceback" not in cap.err
    notes = [ln for ln in cap.err.splitlines() if "note:" in ln]
    assert any("watchdog.fr_trace_1" in ln and note in ln for ln in notes), cap.err
    if case.startswith(("enqueued", "pg_status", "group", "completed")):
        assert "rank 1: Flight Recorder" not in cap.out


# --------------------------------------------------------------------------- session files


@pytest.fixture
def session() -> Path:
    s = Session.create("t", meta={"kind": "demo", "nodes": ["spark1", "spark2"], "config": "<demo>"})
    s.record(FindingRaised(Finding("cuda_oom", "error", "CUDA out of memory", source="spark1/x", line=3,
                                   evidence=("torch.OutOfMemoryError",), node="spark1", ts=100.0)))
    s.record(Note("restarted", author="ana", ts=101.0))
    s.record(LogBatch("spark1", "vllm", (LogLine("spark1", "vllm", "hello", seq=1),)))
    s.close()
    return s.path


def _events(path: Path, lines: list) -> None:
    (path / "events.jsonl").write_text("".join((ln if isinstance(ln, str) else json.dumps(ln)) + "\n" for ln in lines))


FINDING = {"type": "FindingRaised", "ts": 100.0,
           "finding": {"type": "Finding", "id": "x", "severity": "error", "title": "t", "evidence": ["a"], "ts": 1.0}}

SESSION_CASES = {
    "meta a list": ("meta", [1, 2], "meta.json: a list, expected an object"),
    "meta nodes a string": ("meta", {"nodes": "spark1"}, "nodes: a string, expected a list"),
    "meta started text": ("meta", {"started": "yesterday"}, "started: a string"),
    "meta deep": ("meta", "[" * DEEP + "]" * DEEP, "nested too deeply"),
    "event a list": ("events", [[1, 2]], "line 1: a list, expected an event object"),
    "event type a number": ("events", [{"type": 5}], "line 1: type: an integer"),
    "evidence a string": ("events", [{**FINDING, "finding": {**FINDING["finding"], "evidence": "boom"}}],
                          "finding.evidence: a string, expected a list"),
    "finding ts text": ("events", [{**FINDING, "finding": {**FINDING["finding"], "ts": "abc"}}], "finding.ts"),
    "finding a list": ("events", [{**FINDING, "finding": ["x"]}], "finding: a list, expected an object"),
    "finding missing id": ("events", [{**FINDING, "finding": {"severity": "error", "title": "t"}}],
                           "without finding.id"),
    "severity unknown": ("events", [{**FINDING, "finding": {**FINDING["finding"], "severity": "fatal"}}], "severity"),
    "ts out of range": ("events", [{"type": "Note", "text": "x", "ts": 1e300}], "ts: a number, expected a timestamp"),
    "nested wrong type": ("events", [{**FINDING, "finding": {**FINDING["finding"], "type": "Note"}}],
                          "finding.type: 'Note', expected 'Finding'"),
    "deep event": ("events", ['{"type": "Note", "text": ' + "[" * DEEP + "]" * DEEP + "}"], "nested too deeply"),
}


def _break(path: Path, where: str, value) -> None:
    if where == "meta":
        (path / "meta.json").write_text(value if isinstance(value, str) else json.dumps(value))
    else:
        _events(path, value)


@pytest.mark.parametrize("case", SESSION_CASES)
def test_report_on_a_session_of_the_wrong_shape(session, capsys, case):
    where, value, words = SESSION_CASES[case]
    _break(session, where, value)
    _exit_2(["report", str(session)], capsys, words)


@pytest.mark.parametrize("case", SESSION_CASES)
def test_replay_of_a_session_of_the_wrong_shape(session, capsys, case):
    where, value, words = SESSION_CASES[case]
    _break(session, where, value)
    with pytest.raises(ReplayError, match="meta.json|events.jsonl"):
        load_session(session)
    _exit_2(["replay", str(session)], capsys, words)  # refused before any screen opens


def test_session_torn_line_and_unknown_types_are_skipped(session, capsys):
    _events(session, [FINDING, {"type": "SomethingNewer", "x": 1}, '{"type": "Note", "te'])
    assert main(["report", str(session)]) == 0
    assert "[error] t (`x`)" in capsys.readouterr().out
    meta, events = load_session(session)
    assert [type(e).__name__ for e in events] == ["FindingRaised", "LogBatch"]


def test_session_log_planted_as_a_link_is_refused(session, tmp_path, capsys):
    secret = tmp_path / "secret"
    secret.write_text("root:$6$not-for-you\n")
    (session / "logs" / "spark1" / "stolen.log").symlink_to(secret)
    _exit_2(["report", str(session)], capsys, "stolen.log", "symbolic link")
    with pytest.raises(ReplayError, match="symbolic link"):
        load_session(session)


def test_report_cli_prints_no_traceback(session):
    (session / "meta.json").write_text('{"nodes": "spark1"}')
    res = subprocess.run([sys.executable, "-m", "sparktui", "report", str(session)], capture_output=True, text=True,
                         cwd=ROOT, timeout=60)
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.count("\n") == 1 and "Traceback" not in res.stderr and "s, p, a" not in res.stderr
