"""`sparktui prompt` and the prompt screen against the REAL vLLM (the deterministic tiny reasoning
model, served behind an API key by `sparktui launch`, see conftest.real_serving): the exact
reasoning and content, thinking off, thinking that eats max_tokens, streaming and not agreeing, the
API's own 400 and 401, a server that is not there, and the key kept off the screen, the session and
the report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from pilot_helpers import screen_text, wait_for

ROOT = Path(__file__).resolve().parents[2]


def _json(r: subprocess.CompletedProcess) -> dict:
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout)


def _no_key(serving, *texts: str) -> None:
    for t in texts:
        assert serving.api_key not in t


def test_prompt_gives_the_models_exact_reasoning_and_content(real_serving):
    tiny = real_serving.bed.info["tiny"]
    r = real_serving.cli("prompt", "hi", "--json")
    d = _json(r)
    assert d["model"] == "tiny"
    assert d["content"] == tiny["answer"]
    assert d["reasoning"] == tiny["reasoning"]
    assert d["finish_reason"] == "stop"
    assert d["reasoning_tokens"] and 0 < d["reasoning_tokens"] < d["completion_tokens"]
    assert d["prompt_tokens"] > 0 and d["ttft_s"] > 0 and d["tokens_per_s"] > 0
    assert d["note"] is None
    _no_key(real_serving, r.stdout, r.stderr)


def test_no_think_gives_no_reasoning(real_serving):
    d = _json(real_serving.cli("prompt", "hi", "--json", "--no-think"))
    assert d["reasoning"] is None
    assert d["content"] == real_serving.bed.info["tiny"]["answer"]
    assert not d["reasoning_tokens"]


def test_thinking_that_eats_max_tokens_is_explained(real_serving):
    d = _json(real_serving.cli("prompt", "hi", "--json", "--max-tokens", "2"))
    assert d["finish_reason"] == "length" and d["content"] is None and d["reasoning"]
    assert "thinking used up all 2 tokens" in d["note"]
    r = real_serving.cli("prompt", "hi", "--max-tokens", "2")  # the text face says it too
    assert r.returncode == 0, r.stderr
    assert "content:\n(none)" in r.stdout and "thinking used up all 2 tokens" in r.stdout
    assert "turn thinking off" in r.stdout


def test_streaming_and_not_streaming_agree(real_serving):
    a = _json(real_serving.cli("prompt", "What is two plus two?", "--json", "--stream"))
    b = _json(real_serving.cli("prompt", "What is two plus two?", "--json", "--no-stream"))
    for k in ("model", "content", "reasoning", "finish_reason", "prompt_tokens", "completion_tokens"):
        assert a[k] == b[k], k
    assert a["ttft_s"] is not None and b["ttft_s"] is None  # time to first token exists only when streamed


def test_wrong_key_is_the_apis_401(real_serving):
    r = real_serving.cli("prompt", "hi", env={**os.environ, real_serving.key_env: "sk-wrong-key-123"})
    assert r.returncode == 1
    assert "401" in r.stderr and "API key" in r.stderr
    assert "sk-wrong-key-123" not in r.stderr + r.stdout
    r = real_serving.cli("prompt", "hi", env={k: v for k, v in os.environ.items() if k != real_serving.key_env})
    assert r.returncode == 1 and "401" in r.stderr


def test_prompt_longer_than_max_model_len_is_the_apis_400(real_serving):
    r = real_serving.cli("prompt", "word " * 900, "--json")
    assert r.returncode == 1
    d = json.loads(r.stdout)
    assert d["status"] == 400 and "maximum context length" in d["error"]
    assert "400" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_server_down_and_connection_refused(real_serving, tmp_path):
    bed = real_serving.bed
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    # through the head's SSH connection to a serve port with no server behind it
    cfg = bed.write_config(tmp_path / "down.toml", nodes=1, name="tiny_nothing", serve_port=closed)
    r = bed.cli("prompt", "hi", config=cfg, timeout=120)
    assert r.returncode == 1 and r.stderr.startswith("sparktui prompt: "), r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
    # straight to a refused address
    env = {**os.environ, "SPARKTUI_API_BASE": f"http://127.0.0.1:{closed}"}
    r = subprocess.run([sys.executable, "-m", "sparktui", "prompt", "hi", "--config", str(cfg)], capture_output=True,
                       text=True, env=env, cwd=str(ROOT), timeout=60)
    assert r.returncode == 1 and f"127.0.0.1:{closed}" in r.stderr and "Traceback" not in r.stderr


def test_bad_arguments_exit_2(real_serving, tmp_path):
    for args in (["--max-tokens", "0", "hi"], [], ["--canned", "nope"], ["--timeout", "-1", "hi"]):
        r = real_serving.cli("prompt", *args)
        assert r.returncode == 2, (args, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    bad = tmp_path / "bad.toml"
    bad.write_text("[cluster]\nserve_port = 'x'\n")
    r = real_serving.bed.cli("prompt", "hi", config=bad)
    assert r.returncode == 2 and "serve_port" in r.stderr


async def test_prompt_screen_streams_reasoning_and_content_apart_and_keeps_the_key_secret(real_serving, tmp_path,
                                                                                           monkeypatch):
    from sparktui.actions.cli_runner import make_nodes
    from sparktui.config import load_config
    from sparktui.tui.app import SparkApp
    from sparktui.tui.boot import make_engine
    from sparktui.tui.prompt import PromptScreen

    monkeypatch.setenv(real_serving.key_env, real_serving.api_key)
    monkeypatch.setenv("SPARKTUI_STATE_DIR", str(tmp_path / "state"))
    tiny = real_serving.bed.info["tiny"]
    config = load_config(real_serving.config)
    nodes = make_nodes(config)
    engine = make_engine(config, [], "tui")
    app = SparkApp(engine, nodes=lambda: nodes, live=False)

    def text() -> str:
        return screen_text(app)

    async def until(pilot, cond, what: str, rounds: int = 3000) -> None:
        await wait_for(pilot, cond, what, rounds)

    try:
        async with app.run_test(size=(140, 36)) as pilot:
            app.open_action("prompt")
            await until(pilot, lambda: isinstance(app.screen, PromptScreen), "the prompt screen")
            screen = app.screen
            await until(pilot, lambda: screen.target is not None, "the API found through the head node")
            assert screen.target.model == "tiny" and screen.target.via == "forward"  # serve_host is the node's loopback
            await pilot.press(*"hi", "enter")
            await until(pilot, lambda: screen.answer is not None, "the answer")
            await pilot.pause()
            shown = text()
            reasoning = str(screen.query_one("#prompt-reasoning").visual)
            content = str(screen.query_one("#prompt-content").visual)
            assert reasoning == tiny["reasoning"] and content == tiny["answer"]
            assert tiny["reasoning"] in shown and tiny["answer"] in shown and "ttft" in shown
            assert screen.has_class("-done")
            # thinking eats the budget: said, and offered more tokens
            screen.max_tokens = 2
            await pilot.press(*"hi", "enter")
            await until(pilot, lambda: screen.answer.finish_reason == "length", "a 'length' answer")
            await pilot.pause()
            assert screen.has_class("-length")
            assert "thinking used up all 2 tokens" in text() and "Ctrl+R" in text()
            await pilot.press("ctrl+r")  # 4x the tokens, same prompt
            assert screen.max_tokens == 8
            await until(pilot, lambda: not screen._worker.is_running and screen.answer.completion_tokens > 2,
                        "the second answer")
            _no_key(real_serving, text())
        engine.drain()  # live=False: nothing pumped the queue; record what the screen emitted
        engine.session.close()
    finally:
        for n in nodes.values():
            await n.close()
    session_dir = Path(engine.session.path)
    for f in session_dir.rglob("*"):
        if f.is_file():
            assert real_serving.api_key.encode() not in f.read_bytes(), f
    events = (session_dir / "events.jsonl").read_text()
    assert '"prompt"' in events  # each answer is on the session's timeline
    r = subprocess.run([sys.executable, "-m", "sparktui", "report", str(session_dir)], capture_output=True, text=True,
                       cwd=str(ROOT), timeout=60, env={**os.environ, "SPARKTUI_STATE_DIR": str(tmp_path / "state")})
    assert r.returncode == 0, r.stderr
    _no_key(real_serving, r.stdout, r.stderr)
    hist = tmp_path / "state" / "prompts" / "tiny_api.jsonl"
    assert oct(hist.stat().st_mode & 0o777) == "0o600" and '"hi"' in hist.read_text()
