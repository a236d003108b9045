"""Issue 30 item 7: a failed launch's last lines (a container's own output, quoted in the result)
must not show a secret, in the text and in --json.  Masked where every action's result is printed."""

from __future__ import annotations

import json

from sparktui.actions.base import ActionResult
from sparktui.actions.cli_runner import print_result
from sparktui.commands.launch import _text

SECRETS = ("hf_abcdefghijklmnop123", "sk-live-0123456789abcdef")
TAIL = [f"HF_TOKEN={SECRETS[0]}", f"+ vllm serve /models/tiny --api-key {SECRETS[1]} --port 8000",
        "RuntimeError: Engine core initialization failed."]


def _failed() -> ActionResult:
    return ActionResult("launch", False, "spark1: engine died", data={"last_lines": {"spark1": TAIL}})


def test_a_failed_launchs_last_lines_hide_secrets_in_text(capsys):
    print_result(_failed(), False, extra_text=_text)
    out = capsys.readouterr().out
    assert "Engine core initialization failed" in out and "HF_TOKEN=" in out and "--api-key" in out
    assert not any(s in out for s in SECRETS), out


def test_a_failed_launchs_last_lines_hide_secrets_in_json(capsys):
    print_result(_failed(), True)
    out = capsys.readouterr().out
    lines = json.loads(out)["data"]["last_lines"]["spark1"]
    assert lines[2] == TAIL[2]
    assert not any(s in out for s in SECRETS), out
