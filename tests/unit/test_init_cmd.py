"""`sparktui init` without a test bed: ssh config reading, host picking, the written file (from a
real probe of this machine through the local backend), overwrite refusal, the no-config hint."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sparktui.commands import init as init_cmd
from sparktui.config import NodeConfig, load_config
from sparktui.model import LinkInfo
from sparktui.nodes.local import LocalNode
from sparktui.probes.inventory import FoundModel, Inventory, RdmaDevice, parse_ibdev2netdev_all, pick_fabric, probe_inventory

from cli_helpers import sparktui_cli

ROOT = Path(__file__).resolve().parents[2]

SSH_CONFIG = """\
# a comment
Host spark1
  HostName 10.1.230.180
  User aurora
  IdentityFile ~/.ssh/id_spark
Host spark2 spark2-alt   # two names
  HostName 10.1.230.181
  Port 2222
Host *.corp !nope
  User someone
Host=bastion
  HostName 10.0.0.1
Host *
  ServerAliveInterval 10
"""


def test_host_aliases_skip_patterns_and_keep_order():
    assert init_cmd.host_aliases(SSH_CONFIG) == ["spark1", "spark2", "spark2-alt", "bastion"]


def test_read_hosts_resolves_with_asyncssh(tmp_path):
    p = tmp_path / "config"
    p.write_text(SSH_CONFIG)
    hosts = {h.alias: h for h in init_cmd.read_hosts(p)}
    assert hosts["spark1"].hostname == "10.1.230.180" and hosts["spark1"].user == "aurora"
    assert hosts["spark1"].identity.endswith(".ssh/id_spark")
    assert hosts["spark2-alt"].port == 2222 and hosts["spark2-alt"].where() == "10.1.230.181:2222"


def test_pick_by_name_and_unknown(tmp_path):
    hosts = [init_cmd.SshHost("a"), init_cmd.SshHost("b")]
    assert [h.alias for h in init_cmd.pick(hosts, ["b", "a"])] == ["b", "a"]
    with pytest.raises(init_cmd.InitError, match="c not found"):
        init_cmd.pick(hosts, ["c"])


def test_ibdev2netdev_and_fabric_choice():
    rd = parse_ibdev2netdev_all("rocep1s0f1 port 1 ==> enp1s0f1np1 (Up)\n"
                                "roceP2p1s0f1 port 1 ==> enP2p1s0f1np1 (Up)\n"
                                "mlx5_0 port 1 ==> enp1s0f0np0 (Down)\n")
    assert [d.name for d in rd] == ["rocep1s0f1", "roceP2p1s0f1", "mlx5_0"] and not rd[2].up
    links = [LinkInfo("enP7s7", ("10.1.230.180/24",), 1500, "UP"),
             LinkInfo("enp1s0f0np0", ("192.168.100.12/24",), 9000, "DOWN"),
             LinkInfo("enp1s0f1np1", ("fe80::1/64", "192.168.200.12/24"), 9000, "UP")]
    link, ip = pick_fabric(links, rd)
    assert link.name == "enp1s0f1np1" and ip == "192.168.200.12"
    assert pick_fabric(links, []) == (None, None)  # no RDMA: the management address is never guessed


def _inv(name: str, **kw) -> Inventory:
    base = dict(hostname=name, arch="aarch64", docker_socket="/var/run/docker.sock", docker_version="28.0",
                images=["vllm-node:latest", "ubuntu:24.04"],
                models=[FoundModel("/home/a/models/Qwen3-0.6B", ("Qwen3ForCausalLM",), 1_200_000_000)])
    base.update(kw)
    return Inventory(name=name, **base)


def test_render_round_trips_through_load_config(tmp_path):
    rd = [RdmaDevice("rocep1s0f1", "enp1s0f1np1", True), RdmaDevice("roceP2p1s0f1", "enp1s0f1np1", True)]
    fab1 = LinkInfo("enp1s0f1np1", ("192.168.200.12/24",), 9000, "UP", "rocep1s0f1")
    fab2 = LinkInfo("enp1s0f1np1", ("192.168.200.13/24",), 1500, "UP", "rocep1s0f1")
    invs = [_inv("spark1", links=[fab1], rdma=rd, fabric=fab1, fabric_ip="192.168.200.12"),
            _inv("spark2", links=[fab2], rdma=rd, fabric=fab2, fabric_ip="192.168.200.13")]
    hosts = [init_cmd.SshHost("spark1", "10.1.230.180", "aurora"), init_cmd.SshHost("spark2", "10.1.230.181")]
    text = init_cmd.render(hosts, invs, Path("/home/a/.ssh/config"))
    dest = tmp_path / "cluster.toml"
    init_cmd.write_validated(text, dest)
    cfg = load_config(dest)
    assert [n.name for n in cfg.nodes] == ["spark1", "spark2"] and cfg.head.name == "spark1"
    assert cfg.node("spark2").fabric_ip == "192.168.200.13" and cfg.node("spark2").ib_hcas == ("rocep1s0f1", "roceP2p1s0f1")
    assert cfg.cluster.image == "vllm-node:latest" and cfg.cluster.model_path == "/home/a/models/Qwen3-0.6B"
    assert cfg.cluster.tensor_parallel == 2
    assert "MTU 1500 here, 9000 on spark1" in text  # the MTU mismatch is called out
    assert "# " in text.splitlines()[0]


def test_write_validated_refuses_a_bad_file_and_leaves_the_old_one(tmp_path):
    dest = tmp_path / "cluster.toml"
    dest.write_text("old")
    with pytest.raises(Exception):
        init_cmd.write_validated("[cluster]\nnope = 1\n", dest)
    assert dest.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["cluster.toml"]  # no temp file left


def test_probe_of_this_machine_renders_a_loadable_config(tmp_path):
    inv = _probe_local()
    assert inv.hostname and inv.links  # ip -j addr was read
    assert any(ln.name == "lo" for ln in inv.links)
    socks = [s for s in ("/var/run/docker.sock", "/run/docker.sock") if Path(s).is_socket()]
    if not socks and not os.environ.get("DOCKER_HOST"):  # this machine has no Engine: said in one line
        assert inv.docker_error and "\n" not in inv.docker_error and "no Docker Engine" in inv.docker_error
    text = init_cmd.render([init_cmd.SshHost("local1")], [inv], Path("/x/config"))
    dest = tmp_path / "c.toml"
    init_cmd.write_validated(text, dest)
    assert load_config(dest).nodes[0].name == "local1"


def test_cli_without_hosts_and_no_terminal_lists_the_choices(tmp_path):
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh" / "config").write_text(SSH_CONFIG)
    r = sparktui_cli("init", "--output", str(tmp_path / "c.toml"), home=tmp_path)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "--host NAME" in r.stderr and "spark1, spark2, spark2-alt, bastion" in r.stderr


def test_cli_unknown_host(tmp_path):
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh" / "config").write_text(SSH_CONFIG)
    r = sparktui_cli("init", "--host", "nosuch", "--output", str(tmp_path / "c.toml"), home=tmp_path)
    assert r.returncode == 2 and "nosuch not found" in r.stderr


def test_cli_never_overwrites_without_yes(tmp_path):
    dest = tmp_path / "c.toml"
    dest.write_text("# mine\n")
    r = sparktui_cli("init", "--host", "spark1", "--output", str(dest), home=tmp_path)
    assert r.returncode == 2 and "--yes" in r.stderr
    assert dest.read_text() == "# mine\n"


def test_cli_unreachable_host_one_line_nothing_written(tmp_path):
    (tmp_path / ".ssh").mkdir()
    # a closed port on loopback: refused at once
    (tmp_path / ".ssh" / "config").write_text("Host dead\n  HostName 127.0.0.1\n  Port 1\n")
    dest = tmp_path / "c.toml"
    r = sparktui_cli("init", "--host", "dead", "--output", str(dest), "--timeout", "5", home=tmp_path)
    assert r.returncode == 1, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("sparktui init: dead:")]
    assert len(lines) == 1 and "cannot connect" in lines[0]
    assert not dest.exists()


@pytest.mark.parametrize("argv", [[], ["status"], ["doctor"], ["launch", "--yes"]])
def test_no_config_suggests_init_or_demo(tmp_path, argv):
    r = sparktui_cli(*argv, home=tmp_path)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1
    assert "sparktui init" in r.stderr and "sparktui demo" in r.stderr


def test_interactive_pick_at_a_terminal(tmp_path):
    """At a terminal with no --host: the hosts are listed and a number picks one."""
    import pty
    import select

    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh" / "config").write_text("Host other\n  HostName 127.0.0.1\n  Port 1\n"
                                              "Host dead\n  HostName 127.0.0.1\n  Port 1\n")
    master, slave = pty.openpty()
    env = dict(os.environ, HOME=str(tmp_path), PYTHONPATH=str(ROOT))
    p = subprocess.Popen([sys.executable, "-m", "sparktui", "init", "--output", str(tmp_path / "c.toml"),
                          "--timeout", "5"], stdin=slave, stdout=slave, stderr=slave, env=env, cwd=ROOT)
    os.close(slave)
    out = b""
    answered = False
    deadline = 60.0
    while True:
        ready, _, _ = select.select([master], [], [], deadline)
        assert ready, f"no output from init: {out!r}"
        try:
            data = os.read(master, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        out += data
        if not answered and b"Nodes to use" in out:
            os.write(master, b"2\n")  # the second host listed
            answered = True
    p.wait(timeout=30)
    os.close(master)
    text = out.decode(errors="replace")
    assert "1  other" in text and "2  dead" in text
    assert p.returncode == 1 and "sparktui init: dead: cannot connect" in text


def _probe_local() -> Inventory:
    async def go():
        node = LocalNode(NodeConfig(name="local1", backend="local"))
        try:
            return await probe_inventory(node)
        finally:
            await node.close()

    return asyncio.run(go())


def test_docker_host_is_honoured_and_never_passed_over(tmp_path, monkeypatch):
    # DOCKER_HOST names a socket that is not there: said so, no fallback to another daemon
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/gone.sock")
    inv = _probe_local()
    assert inv.docker_socket is None
    assert inv.docker_error == f"no Docker Engine: no socket at {tmp_path}/gone.sock"


def test_a_socket_that_is_not_docker(tmp_path, monkeypatch):
    import socket
    import threading

    path = str(tmp_path / "fake.sock")
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(path)
    srv.listen(4)

    def serve():  # answers every connection with garbage, as a wrong service would
        while True:
            try:
                c, _ = srv.accept()
            except OSError:
                return
            c.recv(4096)
            c.sendall(b"not http at all\r\n\r\n")
            c.close()

    threading.Thread(target=serve, daemon=True).start()
    monkeypatch.setenv("DOCKER_HOST", f"unix://{path}")
    try:
        inv = _probe_local()
    finally:
        srv.close()
    assert inv.docker_socket is None
    assert inv.docker_error.startswith(f"no Docker Engine answers at {path}: ") and "\n" not in inv.docker_error
