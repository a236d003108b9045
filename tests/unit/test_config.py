"""Config parsing: the example loads; every kind of bad input is one line naming file, key/line, hint."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sparktui.config import ConfigError, demo_config, load_config, parse_config

ROOT = Path(__file__).resolve().parents[2]
GOOD = """
[cluster]
name = "vllm_qwen35"
image = "vllm-node-qwen35"
serve_port = 8001

[[node]]
name = "spark1"
host = "127.0.0.2"
fabric_ip = "192.168.200.12"  # example address: parsed only
role = "head"

[[node]]
name = "spark2"
host = "127.0.0.3"
"""


def test_example_config_loads():
    cfg = load_config(ROOT / "cluster.example.toml")
    assert [n.name for n in cfg.nodes] == ["spark1", "spark2"]
    assert cfg.head.name == "spark1"
    assert cfg.cluster.tensor_parallel == 2
    assert cfg.cluster.serve_port == 8001
    assert ("Qwen3_5MoeForConditionalGeneration", "qwen3_5", "Qwen3_5MoeForConditionalGeneration") in cfg.cluster.add_architectures
    assert cfg.node("spark2").ib_hcas == ("rocep1s0f1", "roceP2p1s0f1")


def test_minimal_config_defaults():
    cfg = parse_config(GOOD, "c.toml")
    assert cfg.node("spark2").docker_socket == "/var/run/docker.sock"
    assert cfg.node("spark2").backend == "ssh"
    assert cfg.head.name == "spark1"


def test_first_node_becomes_head_when_none_declared():
    cfg = parse_config(GOOD.replace('role = "head"', ""), "c.toml")
    assert cfg.head.name == "spark1"


@pytest.mark.parametrize(
    "text, needle, line",
    [
        (GOOD.replace('serve_port = 8001', 'serve_port = 8001\nbogus = 1'), "unknown key 'bogus'", 6),
        (GOOD.replace('name = "spark2"', 'name = "spark1"'), "duplicate node name 'spark1'", 14),
        (GOOD.replace('"127.0.0.3"', '"999.1.2.3"'), "not a valid host name or address", None),
        (GOOD.replace('"192.168.200.12"', '"192.168.200"'), "not an IP address", 10),  # parsed only
        (GOOD.replace('serve_port = 8001', 'serve_port = "x"'), "expected an integer", 5),
        (GOOD.replace('[cluster]', '[cluster'), "not valid TOML", 2),
        (GOOD + '\n[[node]]\nname = "s3"\nbackend = "telnet"\nhost = "a"\n', "unknown backend", None),
        ("[cluster]\n", "no nodes configured", None),
    ],
)
def test_bad_configs_are_one_clear_line(text, needle, line):
    with pytest.raises(ConfigError) as ei:
        parse_config(text, "bad.toml")
    msg = str(ei.value)
    assert needle in msg
    assert "\n" not in msg
    assert msg.startswith("bad.toml")
    if line is not None:
        assert ei.value.line == line, msg


def test_missing_and_unreadable_files(tmp_path):
    with pytest.raises(ConfigError, match="file not found") as ei:
        load_config(tmp_path / "nope.toml")
    assert "hint" in str(ei.value)
    key = tmp_path / "key"
    key.write_text("x")
    key.chmod(0)
    bad = GOOD.replace('host = "127.0.0.3"', f'host = "127.0.0.3"\nidentity_file = "{tmp_path}/missing_key"')
    with pytest.raises(ConfigError, match="missing or unreadable"):
        parse_config(bad, "c.toml")
    p = tmp_path / "latin1.toml"
    p.write_bytes(b"[cluster]\nname = \"\xe9\"\n")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_config(p)


def test_cli_reports_config_error_without_traceback(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text(GOOD.replace('name = "spark2"', 'name = "spark1"'))
    proc = subprocess.run([sys.executable, "-m", "sparktui", "status", "--config", str(p)],
                          capture_output=True, text=True, cwd=ROOT, env={**os.environ})
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "duplicate node name" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_demo_config_shape():
    cfg = demo_config()
    assert [n.name for n in cfg.nodes] == ["spark1", "spark2"]
    assert all(n.backend == "sim" for n in cfg.nodes)
