"""`sparktui status` against the test bed: real SSH, real Docker, real host keys, bad configs."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from ssh_helpers import key_fingerprint

pytestmark = pytest.mark.e2e


def _config_with(bed, tmp_path: Path, **node_overrides: str) -> Path:
    """The bed's cluster.toml with some spark1 keys replaced (first [[node]] only)."""
    text = bed.config.read_text()
    head, sep, rest = text.partition("[[node]]")
    first, sep2, others = rest.partition("[[node]]")
    for key, value in node_overrides.items():
        first, n = re.subn(rf'(?m)^{key} = .*$', f"{key} = {json.dumps(value)}", first)
        if n == 0:
            first += f"{key} = {json.dumps(value)}\n"
    p = tmp_path / "cluster.toml"
    p.write_text(head + sep + first + sep2 + others)
    return p


def test_status_json_shows_both_nodes_containers_and_memory(bed, e2e, container_name, cleanup):
    cleanup.append(("spark2", container_name))
    bed.docker("spark2", "run", "-d", "--name", container_name, "--network", "host", "sparktui-base:bookworm",
               "sleep", "600")
    r = e2e.run_cli("status", "--json", "--config", str(bed.config))
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    nodes = {n["name"]: n for n in doc["nodes"]}
    assert set(nodes) == {"spark1", "spark2"} and doc["ok"] is True
    for n in nodes.values():
        assert n["reachable"] and n["error"] is None and n["docker_error"] is None
        assert n["memory"]["total"] > 0 and 0 <= n["memory"]["used_fraction"] <= 1
        assert set(n["memory"]["pressure"]) == {"cpu", "io", "memory"}  # over ssh, as the local node reads it
        assert n["gpu"]["available"] is False  # no nvidia-smi on the bed's nodes by default
    c = next(c for c in nodes["spark2"]["containers"] if c["name"] == container_name)
    assert c["state"] == "running" and c["image"] == "sparktui-base:bookworm"
    assert all(c["name"] != container_name for c in nodes["spark1"]["containers"])
    text = e2e.run_cli("status", "--config", str(bed.config))
    assert text.returncode == 0 and container_name in text.stdout and "memory" in text.stdout


def test_unreachable_node_exits_1(bed, e2e, tmp_path):
    addr = bed.nodes["spark1"]["address"].rsplit(".", 1)[0] + ".250"  # loopback, nothing listens
    cfg = _config_with(bed, tmp_path, host=addr)
    r = e2e.run_cli("status", "--json", "--config", str(cfg))
    assert r.returncode == 1
    nodes = {n["name"]: n for n in json.loads(r.stdout)["nodes"]}
    assert not nodes["spark1"]["reachable"] and addr in nodes["spark1"]["error"]
    assert nodes["spark2"]["reachable"]


@pytest.mark.parametrize("changed", [False, True], ids=["unknown", "changed"])
def test_host_key_refused_with_fingerprint_nothing_else_sent(bed, e2e, tmp_path, changed):
    kh = tmp_path / "known_hosts"
    addr = bed.nodes["spark1"]["address"]
    if changed:  # a different, valid key on record for this address
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "other")], check=True)
        kh.write_text(f"{addr} " + " ".join((tmp_path / "other.pub").read_text().split()[:2]) + "\n")
    else:
        kh.write_text("")
    cfg = _config_with(bed, tmp_path, known_hosts=str(kh))
    log = bed.sshd_log("spark1")
    start = log.stat().st_size
    r = e2e.run_cli("status", "--config", str(cfg))
    assert r.returncode == 1
    fp = key_fingerprint(bed.host_key_pub("spark1"))
    assert fp.startswith("SHA256:") and fp in r.stderr
    assert ("CHANGED" if changed else "unknown") in r.stderr
    # the hint adds exactly the key shown (no ssh-keyscan re-fetch) and names the fingerprint to compare
    assert "ssh-keyscan" not in r.stderr and str(kh) in r.stderr and f"compare with {fp}" in r.stderr
    if changed:
        assert "ssh-keygen -R" in r.stderr
    assert "Traceback" not in r.stderr
    assert kh.read_text().count("\n") == (1 if changed else 0)  # nothing was written
    with open(log, "rb") as fh:
        fh.seek(start)
        seen = fh.read().decode(errors="replace")
    assert "Connection from" in seen  # the refusal happened on the wire, at key exchange...
    for word in ("publickey", "Accepted", "Failed", "Postponed", "userauth", "Starting session"):
        assert word not in seen, f"sshd saw {word!r}: something was sent after the host key"
    # spark2 (key known) is still reported
    assert "spark2" in r.stdout and "reachable" in r.stdout
    if not changed:  # following the printed advice works
        cmd = r.stderr.split("only if they match: ", 1)[1].splitlines()[0].strip()
        subprocess.run(["sh", "-c", cmd], check=True, timeout=30)
        assert kh.read_text().split()[1:] == bed.host_key_pub("spark1").read_text().split()[:2]
        again = e2e.run_cli("status", "--config", str(cfg))
        assert again.returncode == 0, again.stderr


def _bad_unknown_key(bed, tmp_path):
    return _config_with(bed, tmp_path, colour="blue"), "unknown key 'colour'"


def _bad_duplicate(bed, tmp_path):
    text = bed.config.read_text().replace('name = "spark2"', 'name = "spark1"')
    p = tmp_path / "dup.toml"
    p.write_text(text)
    return p, "duplicate node name 'spark1'"


def _bad_address(bed, tmp_path):
    return _config_with(bed, tmp_path, host="127.0.0.300"), "not a valid host name or address"


def _missing(bed, tmp_path):
    return tmp_path / "nope.toml", "file not found"


def _bad_key_file(bed, tmp_path):
    key = tmp_path / "id_broken"
    key.write_text("this is not a private key\n")
    return _config_with(bed, tmp_path, identity_file=str(key)), "is not a private key"


def _missing_key_file(bed, tmp_path):
    return _config_with(bed, tmp_path, identity_file=str(tmp_path / "id_none")), "missing or unreadable"


@pytest.mark.parametrize("make", [_bad_unknown_key, _bad_duplicate, _bad_address, _missing, _bad_key_file,
                                  _missing_key_file],
                         ids=["unknown-key", "duplicate-name", "bad-address", "missing-file", "unreadable-key",
                              "missing-key"])
def test_bad_config_one_line_exit_2(bed, e2e, tmp_path, make):
    path, expected = make(bed, tmp_path)
    r = e2e.run_cli("status", "--config", str(path))
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert expected in lines[0] and str(path) in lines[0]
    assert "hint:" in lines[0]
    assert "Traceback" not in r.stderr and r.stdout == ""


@pytest.mark.parametrize("spark2", ["exited", "stale"])
def test_half_or_stale_cluster_exits_1(bed, e2e, container_name, cleanup, spark2):
    """A cluster whose spark2 container exited (half), or a container of the cluster's name that no
    launch of sparktui made (stale): status prints its ERROR line and exits 1 (issue 32 item 2)."""
    import tomllib

    name = tomllib.loads(bed.config.read_text())["cluster"]["name"]
    labels = ["--label", f"sparktui.cluster={name}", "--label", "sparktui.launch=e2e-half"]
    cleanup += [("spark1", container_name), ("spark2", container_name)]
    bed.docker("spark1", "run", "-d", "--name", container_name, *labels, "--label", "sparktui.rank=0",
               "--network", "host", "sparktui-base:bookworm", "sleep", "600")
    if spark2 == "exited":
        bed.docker("spark2", "run", "--name", container_name, *labels, "--label", "sparktui.rank=1",
                   "sparktui-base:bookworm", "sh", "-c", "exit 3", check=False)
    else:  # no labels: started by hand, not one launch with spark1's
        bed.docker("spark2", "create", "--name", name, "sparktui-base:bookworm", "true")
        cleanup.append(("spark2", name))
    r = e2e.run_cli("status", "--json", "--config", str(bed.config))
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr
    doc = json.loads(r.stdout)
    assert doc["ok"] is False and all(n["reachable"] for n in doc["nodes"])
    assert doc["cluster"]["state"] == ("half" if spark2 == "exited" else "stale")
    text = e2e.run_cli("status", "--config", str(bed.config))
    assert text.returncode == 1 and "ERROR" in text.stdout
