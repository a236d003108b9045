"""The serving URL of launch/validate/prompt is a temporary forward (issue 32 item 6): the output
says so and gives the ssh line that keeps one open."""

from __future__ import annotations

import io
import shlex
from contextlib import redirect_stdout
from dataclasses import replace
from pathlib import Path

from sparktui.actions.base import ActionResult
from sparktui.actions.cli_runner import print_result
from sparktui.actions.serving_target import forward_note, keep_forward_command
from sparktui.config import load_config

EXAMPLE = Path(__file__).resolve().parents[2] / "cluster.example.toml"


def _config(**head):
    cfg = load_config(str(EXAMPLE))
    nodes = [replace(cfg.nodes[0], **head), *cfg.nodes[1:]]
    return replace(cfg, nodes=nodes, cluster=replace(cfg.cluster, serve_port=8123, serve_host="0.0.0.0"))


def test_the_keep_line_comes_from_the_config_and_is_quoted():
    cfg = _config(host="127.0.0.5", user="ops team", port=2222, identity_file="/keys/my key")
    argv = shlex.split(keep_forward_command(cfg, cfg.nodes[0].name))
    assert argv == ["ssh", "-N", "-L", "8123:127.0.0.1:8123", "-p", "2222", "-i", "/keys/my key",
                    "ops team@127.0.0.5"]
    plain = _config(host="spark1", user=None, port=None, identity_file=None, ssh_config=None)
    assert keep_forward_command(plain, plain.nodes[0].name) == "ssh -N -L 8123:127.0.0.1:8123 spark1"


def test_a_result_with_a_forwarded_url_says_it_closes_and_how_to_keep_one():
    cfg = _config(host="spark1", user=None, port=None, identity_file=None, ssh_config=None)
    hint = forward_note(cfg, cfg.nodes[0].name, "http://127.0.0.1:41234")
    out = io.StringIO()
    with redirect_stdout(out):
        print_result(ActionResult("launch", True, "launched on 2 nodes: http://127.0.0.1:41234 answers",
                                  data={"serve_hint": hint}), as_json=False)
    text = out.getvalue()
    assert "http://127.0.0.1:41234 is a temporary forward" in text and "closes when this command exits" in text
    assert "run: ssh -N -L 8123:127.0.0.1:8123 spark1" in text and "http://127.0.0.1:8123" in text
