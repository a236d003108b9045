"""Prompts: what an answer means (explain), the per-cluster history, where the API is (serving_target),
and the errors a broken server gives, from small REAL HTTP servers on 127.0.0.1 that misbehave the
way a proxy or a wedged engine does: a stream that stalls, a chunk that is not JSON, a 500."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from contextlib import contextmanager
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from sparktui.actions.prompt import History, canned, explain
from sparktui.actions.serving_target import base_url, configured_base, pick_model
from sparktui.config import demo_config
from sparktui.nodes.base import Node
from sparktui.probes.serving import ChatAnswer, ServingError, chat

ROOT = Path(__file__).resolve().parents[2]


def answer(content, reasoning, finish, **kw) -> ChatAnswer:
    return ChatAnswer("m", content, reasoning, finish, **kw)


# ------------------------------------------------------------------ explain

def test_thinking_that_used_up_max_tokens_is_said_with_the_way_out():
    note = explain(answer(None, "Let me think", "length"), max_tokens=64, thinking=None)
    assert "thinking used up all 64 tokens" in note and "thinking off" in note
    assert "server's token limit" in explain(answer(None, "x", "length"), max_tokens=None, thinking=None)


def test_other_finishes():
    assert "cut at all 10 tokens" in explain(answer("partial", None, "length"), max_tokens=10, thinking=None)
    assert "--reasoning-parser" in explain(answer("<think>hmm</think> hi", None, "stop"), max_tokens=None, thinking=None)
    assert "never closed its thinking" in explain(answer("", "all of it", "stop"), max_tokens=None, thinking=None)
    assert "tool" in explain(answer(None, None, "tool_calls"), max_tokens=None, thinking=None)
    assert "ignores enable_thinking" in explain(answer("hi", "thought", "stop"), max_tokens=None, thinking=False)
    assert "abort" in explain(answer("hi", None, "abort"), max_tokens=None, thinking=None)
    assert explain(answer("hi", "thought", "stop"), max_tokens=None, thinking=None) is None


def test_canned_prompts_are_data_with_a_purpose():
    items = canned()
    assert len(items) >= 4 and len({c.name for c in items}) == len(items)
    assert all(c.text and c.what for c in items)
    tool = next(c for c in items if c.tool)
    assert tool.tools and tool.tools[0]["function"]["name"] == tool.tool


# ------------------------------------------------------------------ history

def test_history_keeps_order_dedupes_caps_and_is_private(tmp_path):
    h = History(tmp_path / "p" / "c.jsonl")
    for t in ("a", "b", "a", "  ", "c"):
        h.add(t)
    assert h.items == ["b", "a", "c"]
    assert oct(h.path.stat().st_mode & 0o777) == "0o600"
    assert oct(h.path.parent.stat().st_mode & 0o777) == "0o700"
    with h.path.open("a") as f:
        f.write('{"text": "torn')  # a crash mid-write leaves half a line
    assert History(h.path).items == ["b", "a", "c"]
    for i in range(History.LIMIT + 10):
        h.add(f"p{i}")
    assert len(History(h.path).items) == History.LIMIT and History(h.path).items[-1] == f"p{History.LIMIT + 9}"


def test_history_in_an_unwritable_place_does_not_break_prompting(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    h = History(blocker / "sub" / "c.jsonl")  # a file where a directory should be
    h.add("still works")
    assert h.items == ["still works"]


def test_history_file_name_from_any_cluster_name(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARKTUI_STATE_DIR", str(tmp_path))
    h = History.for_cluster("../../etc/x y")
    assert h.path.parent == tmp_path / "prompts" and "/" not in h.path.name


# ------------------------------------------------------------------ where the API is

def test_configured_base_wins_and_loses_its_v1(monkeypatch):
    cfg = demo_config()
    monkeypatch.delenv("SPARKTUI_API_BASE", raising=False)
    assert configured_base(cfg) is None
    cfg2 = replace(cfg, cluster=replace(cfg.cluster, api_base="http://127.0.0.1:9/v1/"))
    assert configured_base(cfg2) == "http://127.0.0.1:9"
    monkeypatch.setenv("SPARKTUI_API_BASE", "http://127.0.0.1:7")
    assert configured_base(cfg2) == "http://127.0.0.1:7"


async def test_a_loopback_serve_host_goes_through_the_head_node(monkeypatch):
    monkeypatch.delenv("SPARKTUI_API_BASE", raising=False)
    cfg = demo_config()
    cfg = replace(cfg, cluster=replace(cfg.cluster, serve_host="127.0.0.1"))

    class Head(Node):
        name = cfg.head.name
        asked = None

        async def local_port(self, host, port):
            Head.asked = (host, port)
            return "127.0.0.1", 4242

    url, node, via = await base_url(cfg, {cfg.head.name: Head()})
    assert (url, node, via) == ("http://127.0.0.1:4242", cfg.head.name, "forward")
    assert Head.asked == ("127.0.0.1", cfg.cluster.serve_port)  # the node's own loopback, as the node sees it


def test_pick_model_prefers_the_served_name():
    cfg = demo_config()
    c = replace(cfg, cluster=replace(cfg.cluster, serve_args=("--served-model-name", "qwen"), served_model="/m"))
    assert pick_model(c, ("other", "qwen")) == "qwen"
    c = replace(cfg, cluster=replace(cfg.cluster, serve_args=("--served-model-name=qwen",), served_model="/m"))
    assert pick_model(c, ("/m", "qwen")) == "qwen"
    assert pick_model(c, ("x", "y")) == "x"


def test_api_base_must_be_a_url(tmp_path):
    from sparktui.config import ConfigError, load_config

    p = tmp_path / "c.toml"
    p.write_text('[cluster]\napi_base = "localhost:8000"\n\n[[node]]\nname = "a"\nbackend = "local"\n')
    with pytest.raises(ConfigError) as e:
        load_config(p)
    assert "api_base" in str(e.value)


# ------------------------------------------------------------------ misbehaving servers (real HTTP)

@contextmanager
def server(kind: str):
    release = threading.Event()

    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def do_GET(self):  # enough of /health and /v1/models for the target lookup
            body = json.dumps({"object": "list", "data": [{"id": "m", "object": "model"}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if kind == "500":
                body = json.dumps({"error": {"message": "EngineCore encountered an issue.", "code": 500}}).encode()
                self.send_response(500)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            first = {"id": "x", "object": "chat.completion.chunk", "created": 0, "model": "m",
                     "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hel"}, "finish_reason": None}]}
            self.wfile.write(f"data: {json.dumps(first)}\n\n".encode())
            self.wfile.flush()
            if kind == "stall":
                release.wait(30)  # the engine is wedged: the connection stays open, nothing more comes
            elif kind == "malformed":
                self.wfile.write(b'data: {"id": "x", "choices": [{"delta": {"content": "lo"\n\n')
                self.wfile.flush()
            elif kind == "cut":
                return  # the server drops the connection mid-answer
            elif kind == "tool":  # a tool call streamed in pieces, as vLLM's tool parsers send it
                for piece in ({"index": 0, "id": "call_1", "type": "function",
                               "function": {"name": "get_weather", "arguments": ""}},
                              {"index": 0, "function": {"arguments": '{"city": '}},
                              {"index": 0, "function": {"arguments": '"Paris"}'}}):
                    chunk = {"id": "x", "object": "chat.completion.chunk", "created": 0, "model": "m",
                             "choices": [{"index": 0, "delta": {"tool_calls": [piece]}, "finish_reason": None}]}
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                end = {"id": "x", "object": "chat.completion.chunk", "created": 0, "model": "m",
                       "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}
                self.wfile.write(f"data: {json.dumps(end)}\n\n".encode())
            self.wfile.write(b"data: [DONE]\n\n")

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
    httpd.daemon_threads = True
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        release.set()
        httpd.shutdown()
        httpd.server_close()


async def test_a_stream_that_stalls_ends_in_a_timeout():
    with server("stall") as url:
        got = []
        with pytest.raises(ServingError) as e:
            # 3 s, not 1: on a loaded 2-core runner making the client and connecting took over 1 s, so the
            # deadline fell before the first chunk (flaky); the server stalls for 30 s either way
            await chat(url, "m", "hi", stream=True, timeout=3.0, on_delta=lambda k, t: got.append(t))
    assert e.value.kind == "timeout" and "stalled" in str(e.value)
    assert got == ["Hel"]  # what came before the stall was shown


async def test_a_malformed_chunk_is_a_clear_error():
    with server("malformed") as url:
        with pytest.raises(ServingError) as e:
            await chat(url, "m", "hi", stream=True, timeout=5.0)
    assert e.value.kind == "malformed" and "malformed answer" in str(e.value)
    assert "\n" not in str(e.value)


async def test_a_500_carries_the_servers_message():
    with server("500") as url:
        with pytest.raises(ServingError) as e:
            await chat(url, "m", "hi", stream=False, timeout=5.0)
    assert e.value.status == 500 and "EngineCore encountered an issue" in str(e.value)


async def test_a_connection_cut_mid_answer_is_an_error_not_a_short_answer():
    with server("cut") as url:
        try:
            a = await chat(url, "m", "hi", stream=True, timeout=5.0)
        except ServingError as exc:
            assert exc.kind in ("connection", "api", "malformed")
        else:  # the stream ended without [DONE] and without a finish_reason: never 'stop'
            assert a.finish_reason is None


# the malformed answer comes at once: its timeout is long, so a loaded machine cannot turn it into a stall
@pytest.mark.parametrize("kind,expect,timeout", [("stall", "stalled", "2"), ("malformed", "malformed", "30")])
def test_cli_prompt_on_a_broken_server_is_one_line_exit_1(kind, expect, timeout, tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('[cluster]\nname = "t"\n\n[[node]]\nname = "a"\nbackend = "local"\n')
    with server(kind) as url:
        env = {**os.environ, "SPARKTUI_API_BASE": url, "SPARKTUI_STATE_DIR": str(tmp_path / "s")}
        r = subprocess.run([sys.executable, "-m", "sparktui", "prompt", "hi", "--config", str(cfg), "--timeout", timeout],
                           capture_output=True, text=True, env=env, cwd=str(ROOT), timeout=60)
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr and expect in r.stderr


async def test_a_streamed_tool_call_is_assembled_and_explained():
    with server("tool") as url:
        pieces = []
        a = await chat(url, "m", "weather?", stream=True, timeout=5.0, on_delta=lambda k, t: pieces.append((k, t)))
    assert a.finish_reason == "tool_calls"
    assert a.tool_calls[0]["function"] == {"name": "get_weather", "arguments": '{"city": "Paris"}'}
    assert [k for k, _ in pieces].count("tool") == 3
    assert "called a tool" in explain(a, max_tokens=None, thinking=None)
