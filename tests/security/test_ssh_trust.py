"""Issue 14 items 6 and 8 without a bed: which known_hosts a node is checked against (never none),
and the fix-it command the host-key hint prints (run for real in a shell).  The sshd side is in
tests/e2e/test_ssh_trust.py."""

from __future__ import annotations

import subprocess
from pathlib import Path

import asyncssh
import pytest

from sparktui.nodes import hostkeys


def offered(tmp_path: Path, kh: Path, host="127.0.0.99", port=22, changed=False) -> hostkeys.OfferedKey:
    key = asyncssh.generate_private_key("ssh-ed25519")
    pub = tmp_path / f"offered-{port}.pub"
    key.write_public_key(str(pub))
    k = hostkeys.classify(key.convert_to_public(), host, "127.0.0.99", port, str(kh))
    assert k.changed is changed
    return k


def command_of(hint: str) -> str:
    return hint.split("only if they match: ", 1)[1]


def fingerprint_of(line: str, tmp_path: Path) -> str:
    f = tmp_path / "one.pub"
    f.write_text(line.split(" ", 1)[1] + "\n")
    return subprocess.run(["ssh-keygen", "-lf", str(f)], capture_output=True, text=True, check=True).stdout.split()[1]


@pytest.mark.parametrize("dirname", ["plain", "with space", "it's \"quoted\" $(touch pwned)"])
@pytest.mark.parametrize("port", [22, 2222])
def test_hint_command_adds_exactly_the_shown_key(tmp_path, dirname, port):
    d = tmp_path / dirname
    d.mkdir()
    kh = d / "known hosts"
    kh.write_text("other.example ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEx7b2Hc2Zq1T6oUQd0b8I8v0k3m7e3w1N5o5Gm6u5oR\n")
    before = kh.read_text()
    k = offered(tmp_path, kh, port=port)
    hint = hostkeys.hint(k)
    assert k.fingerprint in hint and "ssh-keyscan" not in hint  # compare this, no re-fetch
    r = subprocess.run(["sh", "-c", command_of(hint)], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    added = kh.read_text()[len(before):]
    assert kh.read_text().startswith(before)
    assert added == hostkeys.known_hosts_line(k) + "\n"
    assert fingerprint_of(added.strip(), tmp_path) == k.fingerprint
    assert not (tmp_path / "pwned").exists()
    # OpenSSH itself now finds that key for the host (and port)
    target = k.host if port == 22 else f"[{k.host}]:{port}"
    found = subprocess.run(["ssh-keygen", "-F", target, "-f", str(kh)], capture_output=True, text=True)
    assert found.returncode == 0 and k.public_line in found.stdout


def test_hint_for_a_changed_key_replaces_the_old_one(tmp_path):
    d = tmp_path / "a b'c"
    d.mkdir()
    kh = d / "known_hosts"
    old = asyncssh.generate_private_key("ssh-ed25519").export_public_key("openssh").decode().split()
    keep = "other.example " + " ".join(old[:2])
    kh.write_text(f"127.0.0.99 {old[0]} {old[1]}\n{keep}\n")
    k = offered(tmp_path, kh, changed=True)
    hint = hostkeys.hint(k)
    assert "really reinstalled" in hint and k.fingerprint in hint
    r = subprocess.run(["sh", "-c", command_of(hint)], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in kh.read_text().splitlines() if ln and not ln.startswith("#")]
    assert sorted(lines) == sorted([keep, hostkeys.known_hosts_line(k)])


def test_trust_writes_the_same_line_as_the_hint(tmp_path):
    kh = tmp_path / "kh"
    k = offered(tmp_path, kh, port=2201)
    hostkeys.trust(k)
    assert kh.read_text() == hostkeys.known_hosts_line(k) + "\n"


# ----------------------------------------------------------------------------- which known_hosts


def store_for(tmp_path, conf_text: str | None, host="spark2", known_hosts=None) -> hostkeys.TrustStore:
    paths = []
    if conf_text is not None:
        conf = tmp_path / "ssh_config"
        conf.write_text(conf_text)
        paths = [str(conf)]
    return hostkeys.trust_store(known_hosts, paths, hostkeys.read_ssh_config(paths, host, None, None), host)


@pytest.mark.parametrize("conf", [
    "UserKnownHostsFile none\n",
    "Host spark2\n    UserKnownHostsFile none\n",
    "Host spark*\n    UserKnownHostsFile NONE\n",
    "Host spark2\n    UserKnownHostsFile /dev/null\n",
])
def test_user_known_hosts_none_is_refused(tmp_path, conf):
    with pytest.raises(hostkeys.CheckingOff, match="checking off for spark2"):
        store_for(tmp_path, conf)


def test_none_for_another_host_does_not_matter(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    s = store_for(tmp_path, "Host other\n    UserKnownHostsFile none\n")
    assert s.write_to == str(tmp_path / ".ssh" / "known_hosts")
    assert s.files[0] == s.write_to and "/etc/ssh/ssh_known_hosts" in s.files


def test_node_known_hosts_wins_over_ssh_config_none(tmp_path):
    s = store_for(tmp_path, "UserKnownHostsFile none\n", known_hosts=str(tmp_path / "kh"))
    assert s.files == (str(tmp_path / "kh"),)


def test_ssh_config_files_are_used(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    s = store_for(tmp_path, "Host spark2\n    UserKnownHostsFile ~/a /b\n    GlobalKnownHostsFile none\n")
    assert s.files == (str(tmp_path / "a"), "/b") and s.write_to == str(tmp_path / "a")


def test_asyncssh_arg_is_never_none(tmp_path):
    s = hostkeys.TrustStore((str(tmp_path / "missing"),), str(tmp_path / "missing"))
    arg = s.asyncssh_arg()
    assert arg is not None and isinstance(arg, asyncssh.SSHKnownHosts)
    assert arg.match("spark2", "10.0.0.2", None)[0] == []  # trusts nothing: every key is "unknown"
    (tmp_path / "missing").write_text("")
    assert s.asyncssh_arg() == [str(tmp_path / "missing")]
