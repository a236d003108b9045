"""`load-test --random-input-len L` sends prompts of L tokens as the served model counts them (issue 32
item 3): real HTTP on 127.0.0.1 against a toy vLLM whose /tokenize, /detokenize and
/v1/chat/completions answer in vLLM's shapes (vllm/entrypoints/serve/tokenize/protocol.py) with one
deterministic tokenizer, so the prompt_tokens it reports are the ground truth the test checks."""

from __future__ import annotations

import asyncio
import json
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator

import pytest

from hostile_http import HOSTILE, endless, json_reply, local_config, raw
from sparktui.actions.load_test import LoadRunner, LoadSpec
from sparktui.cli import main as cli

KEY = "sk-test-tokens-4711"
MODEL = "toy"

# ------------------------------------------------------------------ the toy tokenizer
# specials are single tokens; then merged pieces (greedy longest match), so decode-then-encode is not
# one-to-one ("e" + "r" decodes to "er", one token): the builder has to count, not assume
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>", "<s>"]
PIECES = ["er", "in", "ing", "on", "en", "ar", "st", "ow", "ri", "ve", "ter", " the", " s", " r", "an", "ll", "ee",
          "ck", "et", "ound", "ind", "\n"]
VOCAB = SPECIAL + PIECES + [chr(c) for c in range(32, 127)]
IDS = {t: i for i, t in enumerate(VOCAB)}
BOS = IDS["<s>"]


def encode(text: str) -> list[int]:
    out, i = [], 0
    while i < len(text):
        best = max((t for t in VOCAB if text.startswith(t, i)), key=len, default=None)
        out.append(IDS["?"] if best is None else IDS[best])  # "?": an unknown character
        i += 1 if best is None else len(best)
    return out


def decode(ids: list[int]) -> str:
    return "".join(VOCAB[i] for i in ids)


def chat_prompt(messages: list[dict], kwargs: dict | None) -> str:
    text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
    text += "<|im_start|>assistant\n"
    if (kwargs or {}).get("enable_thinking") is False:
        text += "<think></think>"
    return text


class Toy:
    """The toy server's state: what it was sent, and switches for the cases."""

    def __init__(self, max_model_len: int = 1024, tokenize: bool = True, hold_tokenize: bool = False,
                 tokenize_route=None) -> None:
        self.max_model_len = max_model_len
        self.tokenize = tokenize
        self.tokenize_route = tokenize_route  # a hostile_http route answering /tokenize and /detokenize
        self.prompt_tokens: list[int] = []  # of each chat completion, as the server counted it
        self.tokenize_calls = 0
        self.tokenize_seen = threading.Event()
        self.hold = threading.Event()
        if not hold_tokenize:
            self.hold.set()
        self.lock = threading.Lock()


def _handler(toy: Toy):
    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms wait for an ACK between

        def log_message(self, *a) -> None:
            pass

        def _json(self, obj: object, status: int = 200) -> None:
            body = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _error(self, status: int, message: str, kind: str = "BadRequestError") -> None:
            self._json({"error": {"message": message, "type": kind, "param": None, "code": status}}, status)

        def do_GET(self) -> None:
            if self.path == "/v1/models":
                self._json({"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "vllm",
                                                        "max_model_len": toy.max_model_len}]})
            elif self.path == "/health":
                self._json({})
            else:
                self._json({"detail": "Not Found"}, 404)

        def do_POST(self) -> None:
            try:
                self._post()
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client left (stopped, or capped what it reads)

        def _post(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            path = self.path
            if path in ("/tokenize", "/detokenize") and toy.tokenize_route is not None:
                self.close_connection = True
                return toy.tokenize_route(self)
            if path in ("/tokenize", "/detokenize") and not toy.tokenize:
                return self._json({"detail": "Not Found"}, 404)  # FastAPI's own answer for no route
            if path in ("/tokenize", "/detokenize", "/v1/chat/completions") and body.get("model") != MODEL:
                return self._error(404, f"The model `{body.get('model')}` does not exist.", "NotFoundError")
            if path == "/tokenize":
                with toy.lock:
                    toy.tokenize_calls += 1
                toy.tokenize_seen.set()
                toy.hold.wait(10)
                if "messages" in body:
                    ids = encode(chat_prompt(body["messages"], body.get("chat_template_kwargs")))
                    if body.get("add_special_tokens", False):
                        ids = [BOS, *ids]
                else:
                    ids = encode(body["prompt"])
                    if body.get("add_special_tokens", True):
                        ids = [BOS, *ids]
                return self._json({"count": len(ids), "max_model_len": toy.max_model_len, "tokens": ids,
                                   "token_strs": None})
            if path == "/detokenize":
                if any(not isinstance(t, int) or not 0 <= t < len(VOCAB) for t in body["tokens"]):
                    return self._error(400, "token id out of vocabulary")
                return self._json({"prompt": decode(body["tokens"])})
            if path == "/v1/chat/completions":
                return self._chat(body)
            self._json({"detail": "Not Found"}, 404)

        def _chat(self, body: dict) -> None:
            n = len(encode(chat_prompt(body["messages"], body.get("chat_template_kwargs"))))
            with toy.lock:
                toy.prompt_tokens.append(n)
            max_tokens = body.get("max_tokens") or 16
            if n + max_tokens > toy.max_model_len:  # vLLM's refusal, word for word in its shape
                return self._error(400, f"This model's maximum context length is {toy.max_model_len} tokens. "
                                        f"However, you requested {n + max_tokens} tokens ({n} in the messages, "
                                        f"{max_tokens} in the completion). Please reduce the length of the "
                                        f"messages or completion.")
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()

            def event(choices: list, usage: dict | None = None) -> None:
                obj = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": MODEL,
                       "choices": choices}
                if usage is not None:
                    obj["usage"] = usage
                self.wfile.write(f"data: {json.dumps(obj)}\n\n".encode())

            event([{"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
                    "finish_reason": None}])
            for k in range(max_tokens):
                event([{"index": 0, "delta": {"content": "x"}, "logprobs": None,
                        "finish_reason": "length" if k == max_tokens - 1 else None}])
            if (body.get("stream_options") or {}).get("include_usage"):
                event([], {"prompt_tokens": n, "total_tokens": n + max_tokens, "completion_tokens": max_tokens})
            self.wfile.write(b"data: [DONE]\n\n")
            self.close_connection = True

    return H


@contextmanager
def toy_server(toy: Toy) -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(toy))
    httpd.daemon_threads = True
    httpd.stop = threading.Event()  # ends hostile_http's endless writers
    t = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)  # a quick shutdown
    t.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        toy.hold.set()
        httpd.stop.set()
        httpd.shutdown()
        httpd.server_close()


def test_the_toy_tokenizer_is_not_one_to_one():
    # what makes the builder's counting necessary: two ids that decode into one
    assert encode(decode([IDS["e"], IDS["r"]])) == [IDS["er"]]


# ------------------------------------------------------------------ the runner


@pytest.mark.parametrize("length", [24, 40, 100, 300])
async def test_random_prompts_are_exactly_l_tokens_as_the_server_counts_them(length):
    toy = Toy()
    with toy_server(toy) as url:
        spec = LoadSpec(requests=6, concurrency=3, random_input_len=length, max_tokens=4, seed=3)
        r = await LoadRunner(url, MODEL, KEY, spec).run()
    s = r.summary
    assert s["completed"] == 6 and s["failed"] == 0, s["errors"]
    assert toy.prompt_tokens == [length] * 6  # what the server prefilled
    assert [x.prompt_tokens for x in r.records] == [length] * 6
    assert s["mean_input_len"] == length and s["min_input_len"] == length == s["max_input_len"]
    assert s["random_input_len"] == length and s["input_len_note"] == ""


async def test_thinking_off_is_counted_with_its_template_and_prompts_follow_the_seed():
    texts = []
    for _ in range(2):
        toy = Toy()
        with toy_server(toy) as url:
            spec = LoadSpec(requests=4, concurrency=2, random_input_len=40, max_tokens=2, seed=11, thinking=False)
            runner = LoadRunner(url, MODEL, KEY, spec)
            r = await runner.run()
        assert toy.prompt_tokens == [40] * 4 and r.summary["mean_input_len"] == 40
        texts.append(runner.inputs.texts)
    assert texts[0] == texts[1] and len(set(texts[0])) == 4  # the seed's prompts, each its own


async def test_a_template_longer_than_l_is_said_and_the_real_length_reported():
    toy = Toy()
    with toy_server(toy) as url:
        r = await LoadRunner(url, MODEL, KEY, LoadSpec(requests=2, concurrency=2, random_input_len=4,
                                                       max_tokens=2)).run()
    s = r.summary
    smallest = min(toy.prompt_tokens)
    assert smallest > 4 and s["min_input_len"] == smallest
    assert "the chat template alone is about" in s["input_len_note"] and f"at least {smallest}" in s["input_len_note"]


async def test_too_long_for_the_context_is_refused_and_its_length_still_reported():
    toy = Toy(max_model_len=256)
    with toy_server(toy) as url:
        r = await LoadRunner(url, MODEL, KEY, LoadSpec(requests=3, concurrency=3, random_input_len=300,
                                                       max_tokens=4)).run()
    s = r.summary
    assert s["errors"] == {"http_400": 3} and toy.prompt_tokens == [300] * 3
    # no usage from a refusal: the length counted when the prompt was built
    assert s["mean_input_len"] == 300 and "max_model_len 256" in s["input_len_note"]


async def test_without_tokenize_the_length_is_approximate_and_what_the_server_counted():
    toy = Toy(tokenize=False)
    with toy_server(toy) as url:
        r = await LoadRunner(url, MODEL, KEY, LoadSpec(requests=3, concurrency=3, random_input_len=16,
                                                       max_tokens=2)).run()
    s = r.summary
    assert s["completed"] == 3
    assert s["input_len_note"] == "input length approximate: server has no /tokenize"
    # the words are several toy tokens each: the report says what was really sent, not 16
    assert s["mean_input_len"] == sum(toy.prompt_tokens) / 3 > 16


async def test_stop_while_building_sends_nothing():
    toy = Toy(hold_tokenize=True)
    with toy_server(toy) as url:
        runner = LoadRunner(url, MODEL, KEY, LoadSpec(requests=5, concurrency=2, random_input_len=50))
        task = asyncio.create_task(runner.run())
        assert await asyncio.get_running_loop().run_in_executor(None, toy.tokenize_seen.wait, 10)
        runner.stop()
        r = await asyncio.wait_for(task, 10)
    assert r.stopped and r.records == [] and toy.prompt_tokens == []


@pytest.mark.parametrize("route, says", [
    (endless(b'{"tokens": [', b"1, " * 4096), "passed 1 MiB"),
    (json_reply({"count": 2, "max_model_len": 9, "tokens": ["1", 2.5]}), "no list of token ids"),
    (json_reply({"count": 1, "max_model_len": 9, "tokens": [10 ** 400]}), "no list of token ids"),
    (json_reply({"error": {"message": f"no {HOSTILE} for {KEY}", "code": 400}}, 400), "HTTP 400: no"),
    (raw(b"<html>busy</html>", 200, "text/html"), "not a JSON object"),
], ids=["endless", "strings", "huge", "hostile-error", "html"])
async def test_a_hostile_tokenize_falls_back_in_one_clean_line(route, says):
    toy = Toy(tokenize_route=route)
    with toy_server(toy) as url:
        r = await LoadRunner(url, MODEL, KEY, LoadSpec(requests=2, concurrency=2, random_input_len=8,
                                                       max_tokens=2)).run()
    note = r.summary["input_len_note"]
    assert r.summary["completed"] == 2
    assert note.startswith("input length approximate: /tokenize") and says in note, note
    assert KEY not in note and note.isprintable() and "PWNED" not in note


# ------------------------------------------------------------------ the CLI


@pytest.fixture
def cfg(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    return local_config(tmp_path)


def test_cli_reports_the_input_lengths_sent(cfg, capsys, monkeypatch):
    toy = Toy()
    with toy_server(toy) as url:
        monkeypatch.setenv("SPARKTUI_API_BASE", url)
        args = ["load-test", "--config", cfg, "--requests", "4", "--concurrency", "2", "--max-tokens", "2",
                "--random-input-len", "64"]
        rc = cli([*args, "--json"])
        out, err = capsys.readouterr()
        assert rc == 0, err
        s = json.loads(out)
        assert (s["mean_input_len"], s["min_input_len"], s["max_input_len"], s["random_input_len"]) == (64, 64, 64, 64)
        assert s["total_input_tokens"] == 4 * 64
        rc = cli(args)
        out, err = capsys.readouterr()
    assert rc == 0, err
    assert "input       64.0 tokens a request (min 64, max 64), 64 asked\n" in out
    assert toy.prompt_tokens == [64] * 8


def test_cli_says_when_the_length_is_approximate(cfg, capsys, monkeypatch):
    with toy_server(Toy(tokenize=False)) as url:
        monkeypatch.setenv("SPARKTUI_API_BASE", url)
        rc = cli(["load-test", "--config", cfg, "--requests", "2", "--max-tokens", "2", "--random-input-len", "8"])
        out, err = capsys.readouterr()
    assert rc == 0, err
    line = next(l for l in out.splitlines() if l.startswith("input "))
    assert line.endswith(", 8 asked; input length approximate: server has no /tokenize")
