"""`scripts/testbed down` ends what the bed started, and only that (issue 35).

A user's processes that merely name the bed's folder (an editor on its cluster.toml, a tmux server,
`sparktui --config <bed>/cluster.toml`) are not the bed's: down names them in one line and leaves
them alone, while every sshd, dockerd, containerd, shim, container and node session of the bed ends.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tmux_helpers import TmuxServer

ROOT = Path(__file__).resolve().parents[2]
TESTBED = ROOT / "scripts" / "testbed"

pytestmark = pytest.mark.e2e


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] != "Z"  # a killed child of ours lingers as a zombie


def _pids_of(pattern: str) -> list[int]:
    r = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True)
    return [int(p) for p in r.stdout.split()]


@pytest.fixture
def lone_bed(bed):
    """A throw-away one-node bed of its own (`bed` only says whether this machine can run one)."""
    pid = os.getpid()
    env = {**os.environ, "SPARKTUI_TESTBED_DIR": f"/tmp/tbd-{pid}", "SPARKTUI_TESTBED_NET": f"127.86.{pid % 250}"}
    env.pop("SPARKTUI_TESTBED_PORT", None)
    r = subprocess.run([str(TESTBED), "up", "--nodes", "1"], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    yield Path(env["SPARKTUI_TESTBED_DIR"]), env
    subprocess.run([str(TESTBED), "down"], capture_output=True, env=env, timeout=300)


def test_down_ends_the_beds_processes_and_leaves_a_users_alone(lone_bed):
    bed_dir, env = lone_bed
    node = bed_dir / "nodes" / "spark1"
    port = json.loads((bed_dir / "bed.json").read_text())["port"]
    addr = env["SPARKTUI_TESTBED_NET"] + ".2"
    tag = uuid.uuid4().hex[:8]
    nap = str(7000 + int(tag[:4], 16) % 1000)  # the container's sleep, told apart from any other
    # the bed's: a container (under containerd's shim) and a session left running on the node
    subprocess.run(["docker", "-H", f"unix://{node}/docker.sock", "run", "-d", "--network", "host",
                    "sparktui-base:bookworm", "sleep", nap],
                   check=True, capture_output=True, timeout=60)
    subprocess.run(["ssh", "-F", "/dev/null", "-i", str(bed_dir / "client" / "id_ed25519"), "-p", str(port),
                    "-o", f"UserKnownHostsFile={bed_dir / 'client' / 'known_hosts'}", "-o", "BatchMode=yes",
                    f"root@{addr}", f"setsid nohup python3 -c 'import time; time.sleep(600)' node-{tag} "
                    "</dev/null >/dev/null 2>&1 &"], check=True, capture_output=True, timeout=30)
    ours = [int((node / "sshd.pid").read_text()), int((node / "docker.pid").read_text()),
            *_pids_of(f"containerd.*{node}"), *_pids_of(f"node-{tag}")]
    ours += [p for shim in _pids_of(f"containerd-shim.*{node}") for p in (shim, *_pids_of(f"^sleep {nap}$"))]
    assert len(ours) >= 6 and all(_alive(p) for p in ours), ours
    # a user's: a program given the bed's cluster.toml, and a tmux server whose command names the folder
    editor = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", str(bed_dir / "cluster.toml")])
    tmux = TmuxServer("tbd")
    tmux("-f", "/dev/null", "new-session", "-d", "-s", "u", "-x", "80", "-y", "24",
         f"{sys.executable} -c 'import time; time.sleep(600)' {bed_dir}/nodes")
    tmux_server = int(tmux("display-message", "-p", "#{pid}").stdout)
    pane = int(tmux("display-message", "-p", "-t", "u", "#{pane_pid}").stdout)
    try:
        r = subprocess.run([str(TESTBED), "down"], capture_output=True, text=True, env=env, timeout=300)
        assert r.returncode == 0, r.stderr
        users = {editor.pid: "the editor", tmux_server: "the tmux server", pane: "the tmux pane"}
        for pid, what in users.items():
            assert _alive(pid), f"down killed {what} ({pid}), a process the bed did not start"
        left = [ln for ln in r.stderr.splitlines() if "left alone" in ln]
        assert len(left) == 1 and all(str(pid) in left[0] for pid in users), r.stderr
        assert not [p for p in ours if _alive(p)], f"bed processes still running: {[p for p in ours if _alive(p)]}"
        assert not _pids_of(f"{node}/(sshd_config|docker)"), "a bed sshd or dockerd is still running"
        mounts = Path("/proc/self/mountinfo").read_text()
        assert str(bed_dir) + "/" not in mounts and f" {bed_dir} " not in mounts
        assert not bed_dir.exists()
    finally:
        editor.kill()
        editor.wait()
        tmux("kill-server", check=False)
