"""`sparktui init` writes a stranger's text into cluster.toml (issue 30 item 1 and the init items of
the Low list).

A node's model config.json, its hostname, interface and image names, and the aliases of the user's
own ssh config all end up in the written file.  None of it may become a key: every value goes
through a TOML writer and every note through a one-line comment, and ``tomllib`` reads back exactly
the values written.  The probes run for real on this machine through the local backend, with the
hostile model directories on disk, as `init` probes a node over SSH.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparktui import tomlwrite
from sparktui.commands import init as init_cmd
from sparktui.config import NodeConfig, load_config
from sparktui.model import LinkInfo
from sparktui.nodes.local import LocalNode
from sparktui.probes.inventory import FoundModel, Inventory, RdmaDevice, probe_inventory

from cli_helpers import sparktui_cli

ROOT = Path(__file__).resolve().parents[2]

INJECT = 'X\napi_base = "http://ATTACKER"\n#'
INJECT_ARGS = '"]\nserve_args = ["--api-key", "stolen"]\n['
OSC52 = "\x1b]52;c;cHduZWQ=\x07"
# anything a terminal acts on (C0 but TAB and LF, DEL, C1)
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
CLUSTER_KEYS = {"name", "image", "model_path", "model_mount", "served_model", "tensor_parallel", "serve_port",
                "gpu_memory_utilization", "executor"}
NODE_KEYS = {"name", "role", "host", "docker_socket", "fabric_ip", "fabric_if", "ib_hcas"}


def _assert_inert(text: str) -> dict:
    """The written text parses, holds only init's own keys, and no control character is raw in it."""
    data = tomllib.loads(text)
    assert set(data) == {"cluster", "node"}
    assert set(data["cluster"]) <= CLUSTER_KEYS, set(data["cluster"]) - CLUSTER_KEYS
    for node in data["node"]:
        assert set(node) <= NODE_KEYS, set(node) - NODE_KEYS
    assert "ATTACKER" not in json.dumps(data) and "stolen" not in json.dumps(data)
    assert not CONTROL.findall(text), f"raw control characters in the file: {CONTROL.findall(text)!r}"
    return data


def _probe_here(home: Path) -> Inventory:
    async def go():
        node = LocalNode(NodeConfig(name="spark1", backend="local"))
        try:
            return await probe_inventory(node)
        finally:
            await node.close()

    return asyncio.run(go())


def test_the_issue_case_writes_no_api_base(tmp_path, monkeypatch):
    """Exactly as filed: a plain model directory whose config.json names an `api_base` line."""
    d = tmp_path / "home" / "models" / "Qwen3-0.6B"
    d.mkdir(parents=True)
    (d / "config.json").write_text(json.dumps({"architectures": [INJECT]}))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "no-hub"))
    text = init_cmd.render([init_cmd.SshHost("spark1")], [_probe_here(tmp_path / "home")], Path("/x/config"))
    data = _assert_inert(text)
    assert data["cluster"]["model_path"] == str(d)


def test_a_hostile_model_config_json_writes_no_key(tmp_path, monkeypatch):
    """The issue's case, probed for real: architectures holding a newline and `api_base = ...`."""
    home = tmp_path / "home"
    good = home / "models" / 'Qwen "3" \\ 😀'  # printable but quote, backslash and a non-BMP char
    evil = home / "models" / f"evil{OSC52}"  # a control character: never a setting
    for d, arches in ((good, [INJECT, INJECT_ARGS]), (evil, [f"A{OSC52}"])):
        d.mkdir(parents=True)
        (d / "config.json").write_text(json.dumps({"architectures": arches, "model_type": INJECT}))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "no-hub"))
    inv = _probe_here(home)
    assert {m.path for m in inv.models} >= {str(good), str(evil)}
    text = init_cmd.render([init_cmd.SshHost("spark1")], [inv], Path("/x/config"))
    data = _assert_inert(text)
    assert data["cluster"]["model_path"] == str(good)  # read back exactly, quote and backslash included
    assert data["cluster"]["model_mount"] == data["cluster"]["served_model"] == f"/models/{good.name}"
    # the hostile text is still there for the user to see, as a comment that stays one line
    assert any(ln.startswith("#") and "api_base" in ln for ln in text.splitlines())
    dest = tmp_path / "cluster.toml"
    init_cmd.write_validated(text, dest)
    cfg = load_config(dest)
    assert cfg.cluster.api_base is None and cfg.cluster.serve_args == ()


def test_hostile_model_files_end_in_no_traceback(tmp_path, monkeypatch):
    """config.json nested past the recursion limit, an index whose size is 1e999 or whose shard
    names are lists: each ended `init` in a traceback; now the model is listed without them."""
    home = tmp_path / "home"
    cases = {"deep": (b"[" * 100_000 + b"]" * 100_000, None),
             "inf": (b'{"architectures": ["A"]}', b'{"metadata": {"total_size": 1e999}, "weight_map": {"w": "a"}}'),
             "lists": (b'{"architectures": ["B"]}', b'{"metadata": {"total_size": 5}, "weight_map": {"w": []}}')}
    for name, (cfg, index) in cases.items():
        d = home / "models" / name
        d.mkdir(parents=True)
        (d / "config.json").write_bytes(cfg)
        if index:
            (d / "model.safetensors.index.json").write_bytes(index)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "no-hub"))
    inv = _probe_here(home)
    by = {Path(m.path).name: m for m in inv.models}
    assert set(by) == set(cases)
    assert by["deep"].architectures == () and by["inf"].architectures == ("A",)
    assert by["inf"].total_bytes is None and by["lists"].total_bytes == 5
    _assert_inert(init_cmd.render([init_cmd.SshHost("spark1")], [inv], Path("/x/config")))


def test_every_probed_field_is_inert(tmp_path):
    """Hostname, arch, Docker version, images, interface and RDMA names, ssh config fields: each
    carries an injection; the file holds init's keys only and the printable values come back exact."""
    odd_image = 'reg.io/vllm:"x"\\y'
    rd = [RdmaDevice(f"roce{INJECT}", "enp1", True), RdmaDevice("rocep1s0f1", "enp1", True)]
    # example addresses are data for init's renderer, never contacted (the suite's loopback-only
    # connect guard in tests/conftest.py would fail the test if anything tried)
    fab = LinkInfo("enp1", ("192.168.200.12/24",), 9000, "UP", "rocep1s0f1")
    odd_link = LinkInfo(f"eth{INJECT}", (f"10.0.0.1/24{OSC52}",), 1500, f"UP{INJECT}", INJECT_ARGS)
    inv = Inventory(name="spark1", hostname=INJECT, arch=INJECT_ARGS, docker_socket="/run/docker.sock",
                    docker_version=INJECT, images=[odd_image, f"vllm{INJECT}"],
                    links=[fab, odd_link], rdma=rd, fabric=fab, fabric_ip="192.168.200.12",
                    models=[FoundModel(f"/m/{INJECT}", (INJECT,))])
    inv2 = Inventory(name="spark2", docker_socket=f"/run/d{INJECT}.sock", images=[odd_image],
                     models=[FoundModel(f"/m/{INJECT}")])
    hosts = [init_cmd.SshHost("spark1", hostname=INJECT, user=INJECT_ARGS, identity=f"~/.ssh/{INJECT}"),
             init_cmd.SshHost(f"spark2{OSC52}", hostname="10.0.0.2")]
    text = init_cmd.render(hosts, [inv, inv2], Path(f"/home/{INJECT}/.ssh/config"))
    data = _assert_inert(text)
    assert data["cluster"]["image"] == odd_image  # the one tag on both nodes, exact
    assert "model_path" not in data["cluster"]  # a path with a newline is refused, not written
    n1, n2 = data["node"]
    assert n1["ib_hcas"] == ["rocep1s0f1"]  # the HCA whose name holds a newline is left out
    assert n2["host"] == f"spark2{OSC52}"  # the alias the user wrote, escaped in the file, exact back
    assert "docker_socket" not in n2


# ------------------------------------------------------------------ the TOML writer: round trip
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# every scalar value: text of any code point TOML can hold (no lone surrogates), ints, finite floats
scalars = st.one_of(st.text(), st.text(alphabet=st.characters(max_codepoint=0x20)), st.booleans(),
                    st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1),
                    st.floats(allow_nan=False, allow_infinity=False))


@SETTINGS
@given(name=st.text(min_size=1), v=st.one_of(scalars, st.lists(scalars, max_size=5)), note=st.text())
def test_toml_writer_round_trips_exactly(name, v, note):
    line = tomlwrite.pair(name, v, note or None)
    assert "\n" not in line
    assert tomllib.loads(line + "\n" + tomlwrite.comment(note) + "\n") == {name: v}


@SETTINGS
@given(st.text(alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1))
def test_toml_writer_refuses_what_toml_cannot_hold(s):
    with pytest.raises(tomlwrite.TomlWriteError):
        tomlwrite.string(s)
    assert tomllib.loads(tomlwrite.comment(s)) == {}  # a comment shows it escaped


def test_toml_writer_refuses_nan_and_other_types():
    for bad in (float("nan"), float("inf"), {"a": 1}, None, b"x"):
        with pytest.raises(tomlwrite.TomlWriteError):
            tomlwrite.value(bad)


# ------------------------------------------------------------------ the ssh config (Low items)
def _big_ssh_config(home: Path, n: int, first: str = "") -> Path:
    """n hosts on a closed loopback port, behind a `Match exec` that counts its own runs."""
    (home / ".ssh").mkdir(parents=True)
    count = home / "match-exec-runs"
    lines = [f'Match exec "echo x >> {count}"', "  ServerAliveInterval 10", first]
    lines += [f"Host h{i}\n  HostName 127.0.0.1\n  Port 1" for i in range(n)]
    (home / ".ssh" / "config").write_text("\n".join(lines) + "\n")
    return count


def _runs(count: Path) -> int:
    return len(count.read_text().splitlines()) if count.exists() else 0


def test_a_3000_host_ssh_config_is_read_in_one_pass(tmp_path):
    """`Match exec` ran once per alias (229 s on 3000 hosts): now only the picked host is resolved."""
    count = _big_ssh_config(tmp_path, 3000)
    t0 = time.monotonic()
    r = sparktui_cli("init", "--host", "h2999", "--output", str(tmp_path / "c.toml"), "--timeout", "5", home=tmp_path,
             timeout=30)
    assert r.returncode == 1 and "h2999: cannot connect" in r.stderr, r.stderr
    assert _runs(count) <= 4, f"Match exec ran {_runs(count)} times for one picked host"
    assert time.monotonic() - t0 < 20
    # without --host and no terminal: one line that names some hosts and counts the rest, none resolved
    before = _runs(count)
    r = sparktui_cli("init", "--output", str(tmp_path / "c.toml"), home=tmp_path)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "h19 and 2980 more" in r.stderr, r.stderr
    assert _runs(count) == before


def _at_a_terminal(home: Path, answer: bytes) -> tuple[int, str]:
    """`sparktui init` with no --host on a real pseudo-terminal; ``answer`` typed at the prompt."""
    import pty
    import select

    master, slave = pty.openpty()
    env = dict(os.environ, HOME=str(home), PYTHONPATH=str(ROOT))
    p = subprocess.Popen([sys.executable, "-m", "sparktui", "init", "--output", str(home / "c.toml"),
                          "--timeout", "5"], stdin=slave, stdout=slave, stderr=slave, env=env, cwd=ROOT)
    os.close(slave)
    out, answered = b"", False
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 60)
            assert ready, f"no output from init: {out!r}"
            try:
                data = os.read(master, 4096)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            out += data
            if not answered and b"Nodes to use" in out:
                os.write(master, answer)
                answered = True
    finally:
        p.wait(timeout=30)
        os.close(master)
    assert answered, out
    return p.returncode, out.decode("utf-8", "replace")


def test_the_interactive_host_list_shows_escapes_inert(tmp_path):
    """Aliases and HostNames carrying OSC 52 / CSI reach the terminal inert; a long config is
    listed by name past the first RESOLVE_FOR_LIST hosts, with a note."""
    evil = "evil\x1b]52;c;cHduZWQ=\x07\x1b[2J\u009b2J"
    count = _big_ssh_config(tmp_path, 40, first=f"Host {evil}\n  HostName 127.0.0.1\x1b]0;TITLE\x07\n  Port 1")
    code, text = _at_a_terminal(tmp_path, b"1\n")  # the hostile host, listed first
    assert code == 1, text
    bad = CONTROL.findall(text.replace("\r", ""))
    assert not bad, f"control characters reached the terminal: {bad!r}"
    assert re.search(r"^ +1  evil +\S", text, re.M)  # listed by its name, the escapes taken out whole
    assert f"first {init_cmd.RESOLVE_FOR_LIST} of 41 hosts" in text
    assert _runs(count) <= init_cmd.RESOLVE_FOR_LIST + 4


def test_end_of_input_at_the_host_prompt_is_one_line(tmp_path):
    _big_ssh_config(tmp_path, 2)
    code, text = _at_a_terminal(tmp_path, b"\x04")  # Ctrl-D: the terminal's end of input
    assert code == 1 and "Traceback" not in text, text
    assert "sparktui init: no nodes picked; nothing written" in text
    assert not (tmp_path / "c.toml").exists()
