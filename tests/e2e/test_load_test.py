"""`sparktui load-test` against the REAL vLLM (the tiny model served behind an API key by
`sparktui launch`, see conftest.real_serving): completions, vllm bench serve's field names, ordered
percentiles, errors by kind, and the key never printed."""

from __future__ import annotations

import json
import tomllib

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1800)]  # a cold bed takes minutes


def _no_key(serving, *texts: str) -> None:
    for t in texts:
        assert serving.api_key not in t


def test_load_test_32_requests_at_8(real_serving):
    r = real_serving.cli("load-test", "--requests", "32", "--concurrency", "8", "--json")
    _no_key(real_serving, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    assert r.returncode == 0, r.stderr[-2000:]
    s = json.loads(r.stdout)
    assert s["completed"] == 32 and s["failed"] == 0 and s["errors"] == {}
    assert s["max_concurrency"] == 8 and s["model"] == real_serving.model
    for m in ("ttft", "itl", "e2el", "tpot"):
        assert 0 <= s[f"p50_{m}_ms"] <= s[f"p90_{m}_ms"] <= s[f"p99_{m}_ms"], m
        assert s[f"mean_{m}_ms"] > 0
    assert s["p50_ttft_ms"] < s["p50_e2el_ms"]
    assert s["total_output_tokens"] > 32 and s["request_throughput"] > 0 and s["output_throughput"] > 0


def test_load_test_text_and_wrong_key(real_serving):
    r = real_serving.cli("load-test", "--requests", "4", "--concurrency", "2")
    _no_key(real_serving, r.stdout, r.stderr)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "4 completed, 0 failed" in r.stdout and "TTFT" in r.stdout and "E2EL" in r.stdout
    key_env = tomllib.loads(real_serving.config.read_text())["api_key_env"]
    env = {**real_serving.env, key_env: "sk-not-the-key"}
    bad = real_serving.cli("load-test", "--requests", "4", "--concurrency", "2", "--json", env=env)
    _no_key(real_serving, bad.stdout, bad.stderr)
    assert "Traceback" not in bad.stderr and "sk-not-the-key" not in bad.stdout + bad.stderr
    assert bad.returncode == 1
    s = json.loads(bad.stdout)
    assert s["failed"] == 4 and s["errors"] == {"http_401": 4}


def test_load_test_server_down_is_counted_by_kind(real_serving):
    import socket

    with socket.socket() as sk:
        sk.bind(("127.0.0.1", 0))
        port = sk.getsockname()[1]
    env = {**real_serving.env, "SPARKTUI_API_BASE": f"http://127.0.0.1:{port}"}
    r = real_serving.cli("load-test", "--requests", "3", "--concurrency", "3", "--json", env=env)
    assert "Traceback" not in r.stderr and r.returncode == 1
    s = json.loads(r.stdout)
    assert s["completed"] == 0 and s["errors"] == {"connection": 3}


@pytest.mark.parametrize("length", [16, 64, 200])
def test_random_input_len_is_what_the_server_prefills(real_serving, length):
    """Issue 32 item 3: the tiny model's tokenizer made ~5 tokens of each random word (16 -> 89,
    64 -> 314, and 200 past its 512-token context: a 400 for every request).  Built with the
    server's /tokenize, usage.prompt_tokens (the chat template included) is L."""
    r = real_serving.cli("load-test", "--requests", "8", "--concurrency", "4", "--max-tokens", "16",
                         "--random-input-len", str(length), "--json")
    _no_key(real_serving, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    assert r.returncode == 0, r.stderr[-2000:] + r.stdout[-2000:]
    s = json.loads(r.stdout)
    assert s["completed"] == 8 and s["failed"] == 0 and s["errors"] == {}
    assert s["random_input_len"] == length and s["input_len_note"] == ""
    assert abs(s["mean_input_len"] - length) <= 1, s
    assert length - 1 <= s["min_input_len"] <= s["max_input_len"] <= length + 1, s
    assert abs(s["total_input_tokens"] - 8 * length) <= 8
