"""The launch's one question in a real terminal (issue 32 item 1): `sparktui` in tmux at 80x24 and
200x50 on the seed bed, `l`: the plan is one summary line per node, the Yes/No buttons are whole with
their key hints, `v` shows the full `docker run` commands, and `n` declines: nothing started.

tmux and the TUI are external processes: the test polls `capture-pane` with deadlines.
"""

from __future__ import annotations

import socket
import sys
import tomllib
import uuid
from pathlib import Path

import pytest
from tmux_helpers import TMUX_MARKS, TmuxServer

ROOT = Path(__file__).resolve().parents[2]
pytestmark = TMUX_MARKS


@pytest.mark.parametrize("size", [(80, 24), (200, 50)], ids=["80x24", "200x50"])
def test_the_launch_question_fits_the_terminal_and_n_starts_nothing(seed_bed, tmp_path, size):
    sys.path.insert(0, str(ROOT / "scripts" / "testbed_scenarios"))
    import seed as seed_mod  # the scenario's TOML writer

    data = tomllib.loads((seed_bed.dir / "cluster.toml").read_text())
    ports = []
    for _ in range(3):  # serve, Ray and rendezvous ports of its own: the real-vLLM bed's Ray shares the namespace
        with socket.socket() as sk:
            sk.bind(("127.0.0.1", 0))
            ports.append(sk.getsockname()[1])
    cluster = f"lq{uuid.uuid4().hex[:6]}"  # a cluster of its own: no containers, its own lock
    data["cluster"].update(name=cluster, serve_port=ports[0], ray_port=ports[1], master_port=ports[2])
    config = tmp_path / "cluster.toml"
    seed_mod.write_config(config, data)

    tmux = TmuxServer("sparktui-plan")
    name = f"plan{size[0]}"
    env = [f"SPARKTUI_STATE_DIR={tmp_path / 'state'}", f"PYTHONPATH={ROOT}", "TERM=xterm-256color"]
    cmd = ("unset COLUMNS LINES; " + " ".join(env) + f" {sys.executable} -m sparktui --config {config}"
           "; echo SPARKTUI-EXITED-$?; sleep 60")
    tmux("new-session", "-d", "-s", name, "-x", str(size[0]), "-y", str(size[1]), cmd)
    try:
        tmux.poll(name, lambda s: "spark1" in s and "reachable" in s, "the main screen", timeout=60)
        tmux("send-keys", "-t", name, "l")
        asked = tmux.poll(name, lambda s: "Yes [y]" in s and "No [n]" in s, "the launch question", timeout=120)
        lines = asked.splitlines()
        # whole buttons, inside the terminal, with their keys; the plan as a line per node, no raw command
        assert all(len(ln) <= size[0] for ln in lines) and len(lines) <= size[1]
        assert any("spark1" in ln and "head" in ln for ln in lines), asked
        assert any("spark2" in ln and "worker" in ln for ln in lines), asked
        assert "docker run" not in asked and "v show the full commands" in asked
        tmux("send-keys", "-t", name, "v")
        full = tmux.poll(name, lambda s: "docker run" in s, "the full commands")
        assert "Yes [y]" in full and "No [n]" in full  # still on screen under the commands
        tmux("send-keys", "-t", name, "n")
        tmux.poll(name, lambda s: "Yes [y]" not in s, "the question closed")
        for n in seed_bed.nodes:  # declined: nothing started
            names = seed_bed.docker(n, "ps", "-a", "--format", "{{.Names}}").stdout.split()
            assert cluster not in names, (n, names)
    finally:
        tmux("kill-server", check=False)
        for n in seed_bed.nodes:
            seed_bed.docker(n, "rm", "-f", cluster, check=False)
