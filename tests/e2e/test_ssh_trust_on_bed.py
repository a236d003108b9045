"""Issue 14 items 6-8 against real sshd (the test bed): host-key checking cannot be switched off by
ssh config (`UserKnownHostsFile none` in ~/.ssh/config, the node's ssh_config or a jump host's),
an unknown key still reaches the trust prompt, and investigate says a node it could not reach
was not inspected instead of calling it a dead peer."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from sparktui.config import load_config

from ssh_helpers import key_fingerprint

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]


def _config(bed, tmp_path: Path, node: str = "spark1", **overrides: str | None) -> Path:
    """The bed's cluster.toml with keys of one [[node]] replaced (None: removed)."""
    text = bed.config.read_text()
    parts = re.split(r"(?m)^(?=\[\[node\]\])", text)
    for i, part in enumerate(parts):
        if re.search(rf'(?m)^name = "{node}"$', part):
            for key, value in overrides.items():
                part = re.sub(rf"(?m)^{key} = .*\n", "", part)
                if value is not None:
                    part += f"{key} = {json.dumps(value)}\n"
            parts[i] = part
    p = tmp_path / "cluster.toml"
    p.write_text("".join(parts))
    return p


def _cli(home: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    # HOME decides ~/.ssh/config and ~/.ssh/known_hosts for the child (Path.home() reads it)
    env = {**os.environ, "HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "sparktui", *args], capture_output=True, text=True,
                          cwd=str(ROOT), env=env, timeout=timeout)


def _home(tmp_path: Path, ssh_config: str | None = None, known_hosts: str | None = None) -> Path:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True, exist_ok=True, mode=0o700)
    if ssh_config is not None:
        (home / ".ssh" / "config").write_text(ssh_config)
    if known_hosts is not None:
        (home / ".ssh" / "known_hosts").write_text(known_hosts)
    return home


def _key_line(bed, node: str) -> str:
    pub = bed.host_key_pub(node).read_text().split()
    n = bed.nodes[node]
    port = int(n.get("port") or 22)
    host = n["address"] if port == 22 else f"[{n['address']}]:{port}"
    return f"{host} {pub[0]} {pub[1]}\n"


def _other_key_line(bed, node: str, tmp_path: Path) -> str:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "other")], check=True)
    real = _key_line(bed, node).split()
    return f"{real[0]} " + " ".join((tmp_path / "other.pub").read_text().split()[:2]) + "\n"


class SshdLog:
    """What one node's sshd logged since the test began."""

    def __init__(self, bed, node: str) -> None:
        self.path = bed.sshd_log(node)
        self.start = self.path.stat().st_size

    def since(self) -> str:
        with open(self.path, "rb") as fh:
            fh.seek(self.start)
            return fh.read().decode(errors="replace")


def _status(r: subprocess.CompletedProcess) -> dict[str, dict]:
    return {n["name"]: n for n in json.loads(r.stdout)["nodes"]}


def test_home_ssh_config_known_hosts_none_does_not_turn_checking_off(bed, tmp_path):
    # spark1 has no known_hosts of its own: ssh config decides, and it says "none"
    cfg = _config(bed, tmp_path, known_hosts=None)
    home = _home(tmp_path, "Host *\n    UserKnownHostsFile none\n", known_hosts="")
    log = SshdLog(bed, "spark1")
    r = _cli(home, "status", "--json", "--config", str(cfg))
    assert r.returncode == 1, r.stderr
    nodes = _status(r)
    assert not nodes["spark1"]["reachable"]
    err = nodes["spark1"]["error"]
    assert "UserKnownHostsFile none" in err and "refusing to connect" in err and str(home / ".ssh" / "config") in err
    assert "\n" not in err
    assert "Connection from" not in log.since()  # refused before a packet went to the host
    assert nodes["spark2"]["reachable"]  # its own known_hosts: unaffected


def test_home_ssh_config_user_known_hosts_file_is_honoured(bed, tmp_path):
    """The same ~/.ssh/config mechanism, with a real file: the right key connects, another is refused."""
    cfg = _config(bed, tmp_path, known_hosts=None)
    home = _home(tmp_path, "Host *\n    UserKnownHostsFile ~/.ssh/bed_hosts\n", known_hosts="")
    kh = home / ".ssh" / "bed_hosts"
    kh.write_text(_key_line(bed, "spark1"))
    r = _cli(home, "status", "--json", "--config", str(cfg))
    assert r.returncode == 0, r.stderr + r.stdout
    kh.write_text(_other_key_line(bed, "spark1", tmp_path))
    r = _cli(home, "status", "--json", "--config", str(cfg))
    assert r.returncode == 1
    err = _status(r)["spark1"]["error"]
    assert "CHANGED" in err and key_fingerprint(bed.host_key_pub("spark1")) in err and str(kh) in err


def test_node_ssh_config_known_hosts_none_is_refused(bed, tmp_path):
    conf = tmp_path / "node ssh_config"
    # the hostile input under test: a node ssh_config that turns verification off must be refused
    conf.write_text("UserKnownHostsFile none\nStrictHostKeyChecking no\n")
    cfg = _config(bed, tmp_path, known_hosts=None, ssh_config=str(conf))
    log = SshdLog(bed, "spark1")
    r = _cli(_home(tmp_path), "status", "--json", "--config", str(cfg))
    assert r.returncode == 1
    err = _status(r)["spark1"]["error"]
    assert "UserKnownHostsFile none" in err and str(conf) in err
    assert "Connection from" not in log.since()


def test_changed_key_is_refused_whatever_ssh_config_says(bed, tmp_path):
    conf = tmp_path / "ssh_config"
    conf.write_text("UserKnownHostsFile none\n")
    kh = tmp_path / "known_hosts"
    kh.write_text(_other_key_line(bed, "spark1", tmp_path))
    cfg = _config(bed, tmp_path, known_hosts=str(kh), ssh_config=str(conf))
    log = SshdLog(bed, "spark1")
    r = _cli(_home(tmp_path, "UserKnownHostsFile none\n"), "status", "--json", "--config", str(cfg))
    assert r.returncode == 1
    n = _status(r)["spark1"]
    assert not n["reachable"] and n["host_key"]["changed"] is True
    assert n["host_key"]["fingerprint"] == key_fingerprint(bed.host_key_pub("spark1"))
    seen = log.since()
    assert "Connection from" in seen and "Accepted" not in seen and "publickey" not in seen


async def test_unknown_key_in_default_known_hosts_still_reaches_the_prompt(bed, tmp_path, monkeypatch):
    """No known_hosts anywhere: the key is "unknown" (what the TUI's modal asks about), a yes records
    it in ~/.ssh/known_hosts and the next connect succeeds."""
    from sparktui.nodes.base import HostKeyError
    from sparktui.nodes.ssh import SshNode

    home = _home(tmp_path, "Host nothing-here\n    User nobody\n")
    monkeypatch.setenv("HOME", str(home))
    cfg = load_config(_config(bed, tmp_path, node="spark2", known_hosts=None)).node("spark2")
    node = SshNode(cfg, connect_timeout=5)
    try:
        with pytest.raises(HostKeyError) as ei:
            await node.connect()
        assert not ei.value.changed and node.offered_key is not None
        assert node.offered_key.known_hosts == str(home / ".ssh" / "known_hosts")
        node.trust_offered_key(ei.value.fingerprint)
        await node.connect()
        assert (await node.run(["true"])).ok
    finally:
        await node.close()
    assert (home / ".ssh" / "known_hosts").read_text() == _key_line(bed, "spark2")


async def test_proxyjump_hop_cannot_skip_host_key_checking(bed, tmp_path):
    """asyncssh would open a ProxyJump hop with the config's own known_hosts, none included."""
    from sparktui.config import NodeConfig
    from sparktui.nodes.base import NodeError
    from sparktui.nodes.ssh import SshNode

    config = load_config(bed.config)
    s1, s2 = config.node("spark1"), config.node("spark2")
    conf = tmp_path / "ssh_config"
    kh2 = tmp_path / "kh2"
    kh2.write_text(_key_line(bed, "spark2"))
    conf.write_text(f"""\
Host hop
    HostName {s1.host}
    Port {s1.port or 22}
    User root
    IdentityFile {s1.identity_file}
    UserKnownHostsFile none
Host far
    HostName {s2.host}
    Port {s2.port or 22}
    User root
    ProxyJump hop
    IdentityFile {s2.identity_file}
    UserKnownHostsFile {kh2}
""")
    log = SshdLog(bed, "spark1")
    node = SshNode(NodeConfig(name="far", host="far", ssh_config=str(conf)), connect_timeout=5)
    try:
        with pytest.raises(NodeError, match="checking off for jump host hop"):
            await node.connect()
    finally:
        await node.close()
    assert "Connection from" not in log.since()
    # the hop's key checked against a file that lacks it: refused too, nothing authenticated there
    conf.write_text(conf.read_text().replace("UserKnownHostsFile none", f"UserKnownHostsFile {tmp_path / 'empty'}"))
    (tmp_path / "empty").write_text("")
    node = SshNode(NodeConfig(name="far", host="far", ssh_config=str(conf)), connect_timeout=5)
    try:
        with pytest.raises(NodeError, match="(?i)host key"):
            await node.connect()
    finally:
        await node.close()
    assert "Accepted" not in log.since()


def test_investigate_with_a_changed_host_key_says_not_inspected(bed, tmp_path):
    kh = tmp_path / "known_hosts"
    kh.write_text(_other_key_line(bed, "spark2", tmp_path))
    cfg = _config(bed, tmp_path, node="spark2", known_hosts=str(kh))
    r = _cli(_home(tmp_path), "investigate", "--config", str(cfg), "--json", "--interval", "1")
    assert r.returncode == 1, r.stderr[-2000:]
    out = json.loads(r.stdout)
    v = out["verdict"]
    assert v["rule"] == "uninspected" and "Peer dead" not in v["title"]
    assert v["title"].startswith("spark2 could not be inspected: host key of") and "CHANGED" in v["title"]
    assert "host key" in v["next_action"] and "Restart BOTH" not in v["next_action"]
    assert key_fingerprint(bed.host_key_pub("spark2")) in "\n".join(v["evidence"]["spark2"])
    nodes = out["data"]["nodes"]
    assert nodes["spark1"]["reachable"] is True and nodes["spark2"]["reachable"] is False
    assert v["details"]["uninspected"]["spark2"].startswith("host key of")
    assert "rule" in v["details"]["others"]  # spark1's evidence went through the rules all the same
