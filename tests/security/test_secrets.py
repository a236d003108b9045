"""Secrets stay secret (issue 14, item 5): every secret form, through every place text leaves.

Places: the session's log files and events.jsonl, `report`, `diagnose` (text and --json), the TUI's
log store (what the screen, a --read-only observer included, and the save-log export read), the
export file itself, and the action echo.  File modes: session dirs 0700, files 0600.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from sparktui.logs.redact import is_secret_key, redact, redact_argv, redact_bytes, redact_lines, redact_obj
from sparktui.logs.store import LogStore
from sparktui.model import ActionEvent, ContainerChanged, ContainerInfo, Finding, FindingRaised, LogBatch, LogLine
from sparktui.session import Session, state_dir

from pilot_helpers import screen_text, wait_for

ROOT = Path(__file__).resolve().parents[2]

SECRET = "Zq9sEcReTvAlUe4711"  # a value that matches no token shape: only the key form can hide it
HF = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWx12"
SK = "sk-" + "proj-AbCdEfGhIjKlMnOpQrSt"
GHP = "ghp_" + "AbCdEfGhIjKlMnOpQrStUvWxYz0123"

# (line as a node or a file would give it, the secret that must not survive)
FORMS = [
    pytest.param(f"+ vllm serve /models/q --api-key {SECRET} --port 8000", SECRET, id="flag-space"),
    pytest.param(f"+ vllm serve /models/q --api-key={SECRET}", SECRET, id="flag-equals"),
    pytest.param(f"+ vllm serve /models/q --hf-token {SECRET}", SECRET, id="hf-token-flag"),
    pytest.param("+ vllm serve /models/q --api-key 9876543210", "9876543210", id="flag-numeric"),
    pytest.param(f'["vllm", "serve", "--api-key", "{SECRET}"]', SECRET, id="argv-json"),
    pytest.param(f"HF_TOKEN={SECRET} VLLM_HOST_IP=127.0.0.9", SECRET, id="env-assign"),
    pytest.param(f"export VLLM_API_KEY='{SECRET}'", SECRET, id="env-quoted"),
    pytest.param(f'{{"HF_TOKEN": "{SECRET}", "model": "/models/q"}}', SECRET, id="json-key"),
    pytest.param(f"non-default args: {{'api_key': ['{SECRET}'], 'port': 8000}}", SECRET, id="python-repr"),
    pytest.param(f"curl -H 'Authorization: Bearer {SECRET}' http://127.0.0.1:8000/v1/models", SECRET, id="bearer"),
    pytest.param(f"POST /v1/chat authorization: Basic {SECRET}", SECRET, id="basic-auth"),
    pytest.param(f"pulling with {HF} from the hub", HF, id="bare-hf"),
    pytest.param(f"openai client key {SK} set", SK, id="bare-sk"),
    pytest.param(f"git clone with {GHP}", GHP, id="bare-ghp"),
    pytest.param(f"proxy https://user:{SECRET}@proxy.example:3128", SECRET, id="url-credentials"),
]


# ------------------------------------------------------------------ the masking itself

@pytest.mark.parametrize("line,secret", FORMS)
def test_every_form_is_masked_and_its_name_kept(line, secret):
    out = redact(line)
    assert secret not in out
    assert "***" in out
    # the bytes path (session files) agrees with the text path
    assert redact_bytes(line.encode()).decode() == out


def test_names_and_diagnostic_values_stay_readable():
    keep = [
        "max_num_batched_tokens=8192, max_model_len=32768, tokenizer_mode=auto",
        "Avg prompt throughput: 12.0 tokens/s, Time to first token: 0.31",
        "{'api_key': None, 'hf_token': None}",  # "not set" is a fact worth keeping
        "bos_token='<s>' eos_token='</s>'",
        "HF_TOKEN_PATH=/root/.cache/huggingface/token --api-key-file /run/key",
        "PWD=/workspace disk-usage sk-short",
    ]
    for line in keep:
        assert redact(line) == line, line
    assert redact(keep[0]) is keep[0]  # nothing matched: the same object, no copy


def test_lines_batch_and_structures():
    batch = ["plain line one", f"HF_TOKEN={SECRET}", "plain three"]
    out = redact_lines(batch)
    assert out == ["plain line one", "HF_TOKEN=***", "plain three"]
    assert redact_lines(["a", "b"]) == ["a", "b"]
    assert redact_argv(["vllm", "serve", "--api-key", SECRET, "--port", "1"]) == \
        ["vllm", "serve", "--api-key", "***", "--port", "1"]
    obj = redact_obj({"Env": [f"HF_TOKEN={SECRET}", "PATH=/bin"], "api_key": SECRET,
                      "labels": [["OPENAI_API_KEY", SECRET], ["tier", "gold"]], "n": 3})
    assert SECRET not in json.dumps(obj)
    assert obj["Env"][1] == "PATH=/bin" and obj["labels"][1] == ["tier", "gold"] and obj["n"] == 3
    assert is_secret_key("HF_TOKEN") and is_secret_key("--api-key") and is_secret_key("apikey")
    assert not is_secret_key("max_tokens") and not is_secret_key("PWD") and not is_secret_key("tokenizer")


# ------------------------------------------------------------------ session files and events

def _session_with(tmp_path: Path, line: str) -> Session:
    s = Session.create("c1", {"argv": ["sparktui", "--api-key", SECRET]}, root=tmp_path / "sessions")
    s.record(LogBatch("spark1", "vllm", (LogLine("spark1", "vllm", line, raw_ts="2026-01-01T00:00:00Z", seq=1),)))
    s.record(LogLine("spark1", "vllm", f"single {line}", seq=2))
    info = ContainerInfo(id="c" * 64, name="vllm", image="img", command=f"vllm serve {line}",
                         labels=(("HF_TOKEN", SECRET), ("role", "head")))
    s.record(ContainerChanged("spark1", info))
    s.record(ActionEvent("launch", "start", "ok", message=f"started: {line}", node="spark1"))
    s.record(FindingRaised(Finding("engine_dead", "error", "dead", evidence=(line,), node="spark1")))
    s.close()
    return s


@pytest.mark.parametrize("line,secret", FORMS)
def test_session_logs_and_events_hold_no_secret(tmp_path, line, secret):
    s = _session_with(tmp_path, line)
    everything = b"".join(p.read_bytes() for p in s.path.rglob("*") if p.is_file())
    assert secret.encode() not in everything
    assert SECRET.encode() not in everything  # argv in meta.json, the label by key
    log = s.log_path("spark1", "vllm").read_text()
    assert "***" in log and "2026-01-01T00:00:00Z" in log
    events = s.read_events()
    assert {e["type"] for e in events} >= {"ContainerChanged", "ActionEvent", "FindingRaised"}
    labels = next(e for e in events if e["type"] == "ContainerChanged")["container"]["labels"]
    assert ["role", "head"] in labels and ["HF_TOKEN", "***"] in labels


def test_session_dirs_0700_and_files_0600_whatever_the_umask(tmp_path):
    old = os.umask(0)
    try:
        s = _session_with(tmp_path, "a line")
    finally:
        os.umask(old)
    paths = [s.path, *s.path.rglob("*")]
    assert any(p.name == "events.jsonl" for p in paths) and any(p.suffix == ".log" for p in paths)
    for p in paths:
        mode = stat.S_IMODE(p.stat().st_mode)
        assert mode == (0o700 if p.is_dir() else 0o600), f"{p}: {oct(mode)}"
    assert stat.S_IMODE((tmp_path / "sessions").stat().st_mode) == 0o700


def test_an_old_world_readable_log_file_is_tightened(tmp_path):
    s = Session.create("c1", root=tmp_path / "sessions")
    p = s.log_path("spark1", "vllm")
    p.parent.mkdir(parents=True)
    p.write_text("old\n")
    os.chmod(p, 0o644)
    s.record(LogLine("spark1", "vllm", "new", seq=1))
    s.close()
    assert stat.S_IMODE(p.stat().st_mode) == 0o600
    assert p.read_text() == "old\nnew\n"


# ------------------------------------------------------------------ report

@pytest.mark.parametrize("line,secret", FORMS)
def test_report_prints_no_secret_even_from_a_raw_session(tmp_path, line, secret):
    # a session written by hand (or by an older sparktui): its files hold the raw secret
    d = tmp_path / "20260101-000000-c1"
    (d / "logs" / "spark1").mkdir(parents=True)
    (d / "meta.json").write_text(json.dumps({"started": 1.0, "cluster": "c1"}))
    (d / "logs" / "spark1" / "vllm.log").write_text(f"{line}\n")
    ev = {"type": "FindingRaised", "finding": {"id": "engine_dead", "severity": "error", "title": "dead",
                                               "source": "spark1/vllm", "line": 1, "evidence": [line],
                                               "advice": "", "node": "spark1"}}
    (d / "events.jsonl").write_text(json.dumps(ev) + "\n")
    r = subprocess.run([sys.executable, "-m", "sparktui", "report", str(d)], capture_output=True, text=True,
                       cwd=ROOT, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "# Incident report" in r.stdout and "***" in r.stdout
    assert secret not in r.stdout


# ------------------------------------------------------------------ diagnose

@pytest.mark.parametrize("line,secret", FORMS)
def test_diagnose_text_and_json_hold_no_secret(tmp_path, line, secret):
    f = tmp_path / "rank0.log"
    # the secret sits in the evidence line of a finding and in a milestone's text
    f.write_text(f"INFO Starting vLLM API server on http://0.0.0.0:8000 {line}\n"
                 f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB {line}\n")
    for extra in ([], ["--json"]):
        r = subprocess.run([sys.executable, "-m", "sparktui", "diagnose", *extra, str(f)], capture_output=True,
                           text=True, cwd=ROOT, timeout=60)
        assert r.returncode == 1, r.stderr
        assert "cuda_oom" in r.stdout and "***" in r.stdout
        assert secret not in r.stdout, extra
    assert json.loads(r.stdout)["findings"][0]["evidence"]


# ------------------------------------------------------------------ the TUI: store, screen, export

@pytest.mark.parametrize("line,secret", FORMS)
def test_log_store_holds_what_the_screen_may_show(line, secret):
    store = LogStore()
    store.append("spark1", "vllm", [LogLine("spark1", "vllm", "before", seq=1),
                                     LogLine("spark1", "vllm", line, seq=2),
                                     LogLine("spark1", "vllm", "after", seq=3)])
    s = store.find("spark1", "vllm")
    assert s.total == 3 and s.texts[0] == "before" and s.texts[2] == "after"
    assert secret not in s.texts[1] and "***" in s.texts[1]


def test_save_log_export_is_redacted_and_private(tmp_path):
    from sparktui.tui.screens.main import _write_lines

    target = tmp_path / "session" / "exports" / "spark1-vllm.log"
    old = os.umask(0)
    try:
        _write_lines(target, [f"HF_TOKEN={SECRET}", f"key {HF}", "plain"])
    finally:
        os.umask(old)
    text = target.read_text()
    assert SECRET not in text and HF not in text and text.endswith("plain\n")
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert stat.S_IMODE(target.parent.stat().st_mode) == 0o700


def _demo_app(**kw):
    from sparktui.config import demo_config
    from sparktui.engine import Engine
    from sparktui.sim import DEMO_EPOCH, SimCluster
    from sparktui.tui.app import SparkApp

    config = demo_config()
    sim = SimCluster(config, "healthy", 1.0)
    engine = Engine(config, [])
    engine.process(sim.events_until(30))
    return SparkApp(engine, nodes=lambda: {n.name: sim.node(n.name) for n in config.nodes}, live=False,
                    clock=lambda: DEMO_EPOCH + 30, **kw)


_screen, _wait = screen_text, wait_for


async def test_read_only_observer_sees_no_token_and_export_writes_none():
    app = _demo_app(read_only=True)
    async with app.run_test(size=(200, 50)) as pilot:
        app.refresh_now()
        pane = app.screen.active_pane
        node, source = pane.node, pane.log_view.source
        assert source
        series = app.engine.logs.find(node, source)
        start = series.total
        lines = [f"+ vllm serve --api-key {SECRET} --port 8000", f"using {HF}", f"'Authorization: Bearer {SECRET}'"]
        app.engine.process([LogBatch(node, source, tuple(LogLine(node, source, t, seq=start + i + 1)
                                                         for i, t in enumerate(lines)))])
        app.refresh_now()
        await _wait(pilot, lambda: "--api-key ***" in _screen(app), "the new lines on screen")
        screen = _screen(app)
        assert SECRET not in screen and HF not in screen
        assert "Bearer ***" in screen
        # save-log (read-only safe: it writes a file of what is shown): nothing secret in it
        await pilot.press("s")
        exports = app.engine.session.path / "exports" if app.engine.session else None
        folder = exports or state_dir() / "exports"
        await _wait(pilot, lambda: folder.is_dir() and any(folder.iterdir()), "the export file")
        await app.workers.wait_for_complete()
        data = b"".join(p.read_bytes() for p in folder.iterdir())
        assert b"--api-key ***" in data
        assert SECRET.encode() not in data and HF.encode() not in data


def _leaky_action_cls():
    """A real Action whose step message quotes a command line with a token, as launch's would."""
    from sparktui.actions.base import Action, ActionContext, ActionResult

    class Leaky(Action):
        name = "leaky"
        title = "Leaky"
        mutating = False

        async def execute(self, ctx: ActionContext) -> ActionResult:
            ctx.emit("start", "ok", f"docker run -e HF_TOKEN={SECRET} img vllm serve --api-key {SECRET}",
                     node="spark1")
            return ActionResult(self.name, True, "done")

    return Leaky


async def test_action_echo_masks_secrets():
    from textual.widgets import DataTable, Log

    from sparktui.actions.registry import ActionEntry
    from sparktui.tui.screens.action import ActionScreen

    app = _demo_app()
    async with app.run_test(size=(200, 50)) as pilot:
        screen = ActionScreen(ActionEntry("leaky", "Leaky", "x", "Leaky", False, "z"), _leaky_action_cls())
        app.push_screen(screen)
        await _wait(pilot, lambda: screen.result is not None, "the action to finish")
        await pilot.pause()
        log_text = "\n".join(screen.query_one(Log).lines)
        assert "HF_TOKEN=***" in log_text and "--api-key ***" in log_text
        assert SECRET not in log_text
        table = screen.query_one(DataTable)
        cells = " ".join(str(c) for row in range(table.row_count) for c in table.get_row_at(row))
        assert "HF_TOKEN=***" in cells and SECRET not in cells
        assert SECRET not in _screen(app)
