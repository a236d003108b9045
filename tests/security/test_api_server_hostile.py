"""The OpenAI-compatible API server as a hostile stranger (issue 30, items 2, 4, 5, 6, 8 and the
statistics): real HTTP servers on 127.0.0.1 (tests/hostile_http.py) send escapes, endless bodies and
lines, drips and pings, an echoed key and absurd token counts; `prompt`, `load-test` and the prompt
screen must show text only, stay bounded in memory and time, and end with one line."""

from __future__ import annotations

import json
import math
import os
import re
import sys
import time
from pathlib import Path

import pytest

from hostile_http import (HOSTILE, chunk, drip, endless, json_reply, local_config, models, raw, run_measured, serve,
                          sse)
from sparktui.cli import main as cli
from sparktui.probes.serving import ServingError, chat

ROOT = Path(__file__).resolve().parents[2]
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # what a terminal acts on (TAB and LF aside)
KEY = "sk-test-0123456789abcdef"
MIB = 1 << 20
PEAK_MB = 200


def _clean(text: str) -> None:
    bad = CONTROL.findall(text)
    assert not bad, f"control characters reached the output: {bad!r}"
    assert "PWNED" not in text and "cHduZWQ" not in text


@pytest.fixture
def cfg(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    return local_config(tmp_path)


def _cli(capsys, monkeypatch, url: str, *argv: str) -> tuple[int, str, str]:
    monkeypatch.setenv("SPARKTUI_API_BASE", url)
    rc = cli(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def _env(url: str) -> dict[str, str]:
    return {**os.environ, "SPARKTUI_API_BASE": url, "PYTHONPATH": str(ROOT)}


# ------------------------------------------------------------------ item 2: server text is data

HOSTILE_ANSWER = sse(chunk(f"the answer{HOSTILE}", reasoning=f"think{HOSTILE}", model=f"m{HOSTILE}"),
                     chunk(finish=f"stop{HOSTILE}", model=f"m{HOSTILE}"))


def test_prompt_prints_no_escape_a_server_sends(cfg, capsys, monkeypatch):
    with serve(get=models(f"m{HOSTILE}"), post=HOSTILE_ANSWER) as url:
        rc, out, err = _cli(capsys, monkeypatch, url, "prompt", "hi", "--config", cfg, "--timeout", "5")
        _clean(out + err)
        assert rc == 0 and "the answer" in out and "finish_reason stop" in out
        rc, out, _ = _cli(capsys, monkeypatch, url, "prompt", "hi", "--config", cfg, "--json", "--timeout", "5")
        assert rc == 0 and "\\u001b" not in out  # not escaped JSON: gone before any face
        assert json.loads(out)["finish_reason"].startswith("stop")
    with serve(post=json_reply({"error": {"message": f"engine died{HOSTILE}"}}, 500)) as url:
        rc, out, err = _cli(capsys, monkeypatch, url, "prompt", "hi", "--config", cfg, "--timeout", "5")
    assert rc == 1 and "engine died" in err and err.count("\n") == 1
    _clean(out + err)


def test_load_test_prints_no_escape_a_server_sends(cfg, capsys, monkeypatch):
    error = json_reply({"error": {"message": f"bad request{HOSTILE}"}}, 400)
    with serve(get=models(f"m{HOSTILE}"), post=error) as url:
        rc, out, err = _cli(capsys, monkeypatch, url, "load-test", "--config", cfg, "--requests", "2")
        assert rc == 1 and "bad request" in out and "http_400" in out
        _clean(out + err)
        rc, out, err = _cli(capsys, monkeypatch, url, "load-test", "--config", cfg, "--requests", "2", "--json")
    s = json.loads(out)
    assert "bad request" in s["error_examples"]["http_400"] and "\x1b" not in json.dumps(s, ensure_ascii=False)
    assert "\x1b" not in s["model"]


# ------------------------------------------------------------------ item 8: the caller's key, echoed

ECHO = json_reply({"error": {"message": f"Incorrect API key provided: {KEY}. You can find your key ...",
                             "type": "invalid_request_error", "code": "invalid_api_key"}}, 401)


def test_prompt_scrubs_the_key_a_server_echoes(cfg, capsys, monkeypatch):
    with serve(post=ECHO) as url:
        rc, out, err = _cli(capsys, monkeypatch, url, "prompt", "hi", "--config", cfg, "--timeout", "5")
        assert rc == 1 and "Incorrect API key provided: ***" in err
        rc2, out2, err2 = _cli(capsys, monkeypatch, url, "prompt", "hi", "--config", cfg, "--json", "--timeout", "5")
    assert rc2 == 1 and json.loads(out2.splitlines()[0])["status"] == 401
    assert KEY not in out + err + out2 + err2
    # an answer that quotes the key (a proxy's banner, a model reciting its prompt) loses it too
    with serve(post=sse(chunk(f"your key is {KEY}"), chunk(finish="stop"))) as url:
        a = _run(chat(url, "m", "hi", api_key=KEY, stream=True, timeout=5))
    assert a.content == "your key is ***"


def test_load_test_and_prompt_share_one_scrubber():
    from sparktui.actions import load_test
    from sparktui.probes import serving

    assert load_test.server_line is serving.server_line  # the one helper, not two


# ------------------------------------------------------------------ item 5: bounded reads

def _measured_cli(url: str, *argv: str, timeout: float = 60):
    return run_measured([sys.executable, "-m", "sparktui", *argv], _env(url), str(ROOT), timeout)


@pytest.mark.parametrize("what,get,post,argv", [
    ("models", endless(b'{"object": "list", "data": [{"id": "', b"a" * 65536), None, ("prompt", "hi")),
    ("sse line", None, endless(b"data: ", b"x" * 65536, "text/event-stream"), ("prompt", "hi")),
    ("sse line", None, endless(b"data: ", b"x" * 65536, "text/event-stream"),
     ("load-test", "--requests", "2", "--concurrency", "2")),
])
def test_an_endless_body_or_line_is_refused_in_bounded_memory(what, get, post, argv, cfg, record_property):
    with serve(get=get, post=post) as url:
        m = _measured_cli(url, *argv, "--config", cfg, "--timeout", "30")
    record_property("peak_rss_mb", m.peak_mb)
    print(f"{argv[0]} vs endless {what}: peak RSS {m.peak_mb:.0f} MB in {m.wall_s:.1f} s")
    assert m.rc == 1, m.out + m.err
    assert "1 MiB" in m.out + m.err and "Traceback" not in m.err
    if argv[0] == "prompt":
        assert m.err.count("\n") == 1
    else:
        assert "too_large 2" in m.out
    assert m.peak_mb <= PEAK_MB


async def test_every_other_way_to_send_too_much_is_refused():
    one_event = sse(b"data: x\n" * (MIB // 6), done=False)  # short lines, never a blank one: one event
    nonstream = endless(b'{"id": "x", "choices": [{"message": {"content": "', b"y" * 65536)
    error_body = endless(b'{"error": {"message": "', b"z" * 65536, status=500)
    for post, stream in ((one_event, True), (nonstream, False), (error_body, False), (error_body, True)):
        with serve(post=post) as url:
            with pytest.raises(ServingError) as e:
                await chat(url, "m", "hi", stream=stream, timeout=10)
        assert e.value.kind == "too_large" and "1 MiB" in str(e.value), (post, stream, e.value)
    # a compressed body was not asked for: its size would not bound what it inflates to
    import gzip

    body = gzip.compress(b'{"choices": [{"message": {"content": "' + b"a" * (2 * MIB) + b'"}}]}')
    with serve(post=raw(body, headers={"Content-Encoding": "gzip"})) as url:
        with pytest.raises(ServingError) as e:
            await chat(url, "m", "hi", stream=False, timeout=10)
    assert "compressed" in str(e.value)


# ------------------------------------------------------------------ item 6: one deadline

PING = drip([chunk("a")], b": ping\n\n", 0.2)
DRIP = drip([chunk("a")], chunk("b"), 0.3)  # each wait for bytes is short: only a whole-request deadline ends it


@pytest.mark.parametrize("post", [DRIP, PING], ids=["drip", "ping"])
def test_prompt_timeout_bounds_the_whole_request(post, cfg, capsys, monkeypatch):
    with serve(post=post) as url:
        t0 = time.monotonic()
        rc, out, err = _cli(capsys, monkeypatch, url, "prompt", "hi", "--config", cfg, "--timeout", "1")
        took = time.monotonic() - t0
    assert rc == 1 and "timeout" in err and err.count("\n") == 1, err
    assert took < 4, took


def test_load_test_duration_ends_the_run(cfg, capsys, monkeypatch):
    with serve(post=PING) as url:
        t0 = time.monotonic()
        rc, out, err = _cli(capsys, monkeypatch, url, "load-test", "--config", cfg, "--duration", "0.5",
                            "--concurrency", "2", "--json")
        took = time.monotonic() - t0
    s = json.loads(out)
    assert rc == 1 and s["completed"] == 0 and s["cancelled"] == 2
    assert took < 6, took  # 0.5 s, then at most 2 s for the requests in flight


def test_load_test_timeout_bounds_each_request(cfg, capsys, monkeypatch):
    with serve(post=DRIP) as url:
        t0 = time.monotonic()
        rc, out, err = _cli(capsys, monkeypatch, url, "load-test", "--config", cfg, "--requests", "2",
                            "--concurrency", "2", "--timeout", "1", "--json")
        took = time.monotonic() - t0
    s = json.loads(out)
    assert rc == 1 and s["errors"] == {"timeout": 2} and took < 5, (s, took)


# ------------------------------------------------------------------ low: absurd token counts

HUGE = 10 ** 400


def _absurd_usage() -> bytes:
    # json.dumps cannot write NaN inside a dict passed as data here, so the event is written by hand
    c = chunk()  # the usage chunk carries no token
    c["usage"] = "USAGE"
    return ("data: " + json.dumps(c).replace('"USAGE"', f'{{"prompt_tokens": NaN, "completion_tokens": {HUGE}}}')
            + "\n\n").encode()


def test_absurd_token_counts_do_not_traceback(cfg, capsys, monkeypatch):
    post = sse(chunk("a"), chunk("b", finish="stop"), _absurd_usage())
    with serve(post=post) as url:
        rc, out, err = _cli(capsys, monkeypatch, url, "load-test", "--config", cfg, "--requests", "2", "--json")
        s = json.loads(out)
        assert rc == 0 and s["completed"] == 2 and s["total_output_tokens"] == 4  # counted from the chunks
        assert all(not isinstance(v, float) or math.isfinite(v) for v in s.values())
        a = _run(chat(url, "m", "hi", stream=True, timeout=5))
    assert a.completion_tokens is None and a.prompt_tokens is None and a.content == "ab"


def _run(coro):
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    raise RuntimeError("call from a sync test")


# ------------------------------------------------------------------ items 2, 4, 8 on the prompt screen

def _prompt_app():
    from sparktui.config import demo_config
    from sparktui.engine import Engine
    from sparktui.sim import DEMO_EPOCH, SimCluster
    from sparktui.tui.app import SparkApp

    config = demo_config()
    sim = SimCluster(config, "healthy", 1.0)
    engine = Engine(config, [])
    engine.process(sim.events_until(30))
    return SparkApp(engine, nodes=lambda: {n.name: sim.node(n.name) for n in config.nodes}, live=False,
                    clock=lambda: DEMO_EPOCH + 30)


async def test_the_prompt_screen_shows_a_hostile_answer_and_an_echoed_key_as_text(monkeypatch):
    from pilot_helpers import screen_text, wait_for
    from sparktui.tui.prompt import PromptScreen

    answers = iter([HOSTILE_ANSWER, ECHO])  # the first prompt gets escapes, the second echoes the key
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with serve(get=models(f"m{HOSTILE}"), post=lambda h: next(answers)(h)) as url:
        monkeypatch.setenv("SPARKTUI_API_BASE", url)
        app = _prompt_app()
        kept_events: list = []  # what the screen gives the engine, so the session and its report
        emit = app.engine.emit
        app.engine.emit = lambda ev: (kept_events.append(ev), emit(ev))  # type: ignore[method-assign]
        async with app.run_test(size=(160, 40)) as pilot:
            await pilot.press("P")
            await wait_for(pilot, lambda: isinstance(app.screen, PromptScreen), "the prompt screen")
            screen = app.screen
            await wait_for(pilot, lambda: screen.target is not None, "the API found", rounds=2000)
            await pilot.press(*"hi", "enter")
            await wait_for(pilot, lambda: screen.answer is not None, "the answer", rounds=2000)
            await pilot.pause()
            shown = screen_text(app)
            # a finish_reason with escapes is explained as text (it crashed #prompt-note before)
            assert "finish_reason 'stop" in shown and "the answer" in shown
            await pilot.press(*"hi", "enter")
            await wait_for(pilot, lambda: screen.has_class("-fail"), "the 401", rounds=2000)
            await pilot.pause()
            shown += screen_text(app)
            assert "Incorrect API key provided: ***" in shown
            kept = " ".join(f"{e.step} {e.status} {e.message}" for e in kept_events)
            assert app.is_running  # nothing crashed the app
    _clean(shown + kept)
    assert KEY not in shown + kept and "401" in kept
