"""`sparktui init` against the test bed: the config it writes passes `status` on the first try,
and a node whose Docker Engine is down is named in one line (nothing written)."""

from __future__ import annotations

import os
import signal
import subprocess
import select
from pathlib import Path

import pytest

from sparktui.config import load_config

from cli_helpers import sparktui_cli

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]


def _home(bed, tmp_path: Path) -> Path:
    """A HOME whose ~/.ssh/config names the bed's nodes by alias (what a user would have)."""
    cfg = load_config(bed.config)
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    lines = ["# the test bed's nodes\n"]
    for n in cfg.nodes:
        lines.append(f"Host {n.name}\n  HostName {n.host}\n  Port {n.port or 22}\n  User {n.user}\n"
                     f"  IdentityFile {n.identity_file}\n  IdentitiesOnly yes\n  UserKnownHostsFile {n.known_hosts}\n")
    (home / ".ssh" / "config").write_text("".join(lines))
    return home


def test_init_then_status_passes(bed, tmp_path):
    home = _home(bed, tmp_path)
    out = tmp_path / "cluster.toml"
    r = sparktui_cli("init", "--host", "spark1", "--host", "spark2", "--output", str(out), "--yes", home=home,
                     timeout=120)
    assert r.returncode == 0, r.stderr
    cfg = load_config(out)
    assert [n.name for n in cfg.nodes] == ["spark1", "spark2"] and cfg.head.name == "spark1"
    for n in cfg.nodes:  # the socket found is the node's own dockerd (DOCKER_HOST of its session)
        assert n.docker_socket == bed.nodes[n.name]["docker_socket"]
    assert "sparktui-base:bookworm" in out.read_text()  # the bed's image was seen on both nodes
    st = sparktui_cli("status", "--config", str(out), home=home, timeout=120)
    assert st.returncode == 0, st.stdout + st.stderr
    # without --yes the file is kept
    again = sparktui_cli("init", "--host", "spark1", "--output", str(out), home=home, timeout=120)
    assert again.returncode == 2 and "--yes" in again.stderr


def _pid(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_node_without_docker_is_one_line(bed, tmp_path):
    home = _home(bed, tmp_path)
    pid = _pid(bed.dir / "nodes" / "spark2" / "docker.pid")
    assert pid and _alive(pid)
    fd = os.pidfd_open(pid)  # readable when the process has exited: waiting without sleeping
    os.kill(pid, signal.SIGTERM)  # the bed's dockerd for spark2 (the bed this test session brought up)
    try:
        ready, _, _ = select.select([fd], [], [], 60)
        os.close(fd)
        assert ready, "dockerd of spark2 did not stop within 60 s"  # (exited; maybe not reaped yet)
        out = tmp_path / "c.toml"
        r = sparktui_cli("init", "--host", "spark1", "--host", "spark2", "--output", str(out), "--yes", home=home,
                         timeout=120)
        assert r.returncode == 1
        about = [ln for ln in r.stderr.splitlines() if ln.startswith("sparktui init: spark2:")]
        assert len(about) == 1 and "Docker" in about[0], r.stderr
        assert not any(ln.startswith("sparktui init: spark1:") for ln in r.stderr.splitlines())
        assert not out.exists()
    finally:
        subprocess.run([str(ROOT / "scripts" / "testbed"), "restart-docker", "spark2"], env=bed.env,
                       capture_output=True, timeout=120)
