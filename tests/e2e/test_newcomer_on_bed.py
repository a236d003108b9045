"""Issue 14 items 10-16 on the test bed ("as a new user"): the doctor flow in the real TUI inside tmux
(readable MESSAGE and NODE columns, its failures in the findings strip, no probe rows left on the
main screen), doctor's probe containers never reaching the live engine, one meminfo source per node,
doctor's CLI printing each check once, and `scripts/testbed up` saying why an sshd did not start
(and not taking port 22 when this host's sshd holds it).  Unit halves: tests/security/test_newcomer.py."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import tomllib
import uuid
from pathlib import Path

import pytest

from sparktui.config import load_config
from sparktui.engine import Engine
from sparktui.model import ContainerChanged, ContainersSnapshot, MemorySample, MilestoneReached
from sparktui.collectors import make_sources
from sparktui.nodes import make_node

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
TESTBED = ROOT / "scripts" / "testbed"
PROBE = "sparktui-probe-"
MEM_TOTAL_KB = 124_571_068  # 118.8 GiB: the bed's GB10-shaped figure, not this host's


def newcomer_config(bed, tmp_path: Path) -> Path:
    """The bed's config with a model on the shared filesystem (so doctor runs its probes in the image)
    and a GB10-shaped meminfo file per node."""
    sys.path.insert(0, str(ROOT / "scripts" / "testbed_scenarios"))
    import seed as seed_mod  # the scenario's own TOML writer

    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "model_type": "llama"}))
    (model / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {"total_size": 2_000_000_000}, "weight_map": {"a": "model-00001-of-00001.safetensors"}}))
    meminfo = tmp_path / "meminfo"
    meminfo.write_text(f"MemTotal:       {MEM_TOTAL_KB} kB\nMemFree:        100000000 kB\n"
                       f"MemAvailable:   110000000 kB\nCached:          2000000 kB\n")
    data = tomllib.loads(bed.config.read_text())
    data["cluster"]["model_path"] = str(model)
    data["cluster"]["name"] = f"newcomer_{uuid.uuid4().hex[:6]}"
    # the lean base image (no vLLM) whether or not `--scenario seed` ran on this bed before
    data["cluster"]["image"] = "sparktui-base:bookworm"
    data["cluster"].pop("hybrid_image", None)
    for n in data["node"]:
        n["meminfo_path"] = str(meminfo)
    out = tmp_path / "cluster.toml"
    seed_mod.write_config(out, data)
    return out


def cli(config: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sparktui", args[0], "--config", str(config), *args[1:]],
                          capture_output=True, text=True, cwd=str(ROOT), timeout=timeout)


# ------------------------------------------------------------------ items 11 + 13: the live engine

async def test_doctor_probes_never_reach_the_live_engine_and_memory_is_the_configured_file(
        bed, e2e, tmp_path, container_name, cleanup):
    from sparktui.actions.base import ActionContext
    from sparktui.actions.doctor import DoctorAction
    from sparktui.diagnosis.diagnoser import Diagnoser

    config = load_config(newcomer_config(bed, tmp_path))
    nodes = {n.name: make_node(n) for n in config.nodes}
    engine = Engine(config, make_sources(config, nodes), processors=[Diagnoser()])
    watch = e2e.Watcher(engine)
    await engine.start()
    try:
        await watch.until(lambda b, s: all(s.nodes[n].reachable and s.nodes[n].memory for n in nodes), 20,
                          "both nodes reachable with a memory sample")
        # item 13: the TUI's sampler reads what doctor/validate read
        assert all(s.memory.total == MEM_TOTAL_KB * 1024 for s in engine.state.nodes.values())
        own = {n.name: make_node(n) for n in config.nodes}
        try:
            result = await DoctorAction().run(ActionContext(config, own))
        finally:
            for n in own.values():
                await n.close()
        arch = next(c for c in result.data["checks"] if c["check"] in ("architecture", "transformers"))
        assert arch["status"] == "fail" and "vLLM" in (arch["title"] + " ".join(arch["evidence"]))  # a probe ran
        # a container started after doctor: once the engine has it, every earlier docker event was seen
        cleanup.append(("spark1", container_name))
        bed.docker("spark1", "run", "-d", "--name", container_name, "--network", "host", "sparktui-base:bookworm",
                   "sleep", "300")
        await watch.until(lambda b, s: container_name in s.nodes["spark1"].containers, 20, "the sentinel container")
    finally:
        await engine.stop()
    seen = [c.name for ev in watch.events if isinstance(ev, ContainerChanged) for c in (ev.container,)]
    seen += [c.name for ev in watch.events if isinstance(ev, ContainersSnapshot) for c in ev.containers]
    assert not [n for n in seen if n.startswith(PROBE)]
    assert not [s for n in nodes for s in engine.logs.sources(n) if s.startswith(PROBE)]
    assert not [ev for ev in watch.events if isinstance(ev, MilestoneReached) and PROBE in ev.milestone.source]
    assert all(isinstance(ev.memory.total, int) and ev.memory.total == MEM_TOTAL_KB * 1024
               for ev in watch.events if isinstance(ev, MemorySample))


def test_status_shows_the_configured_meminfo(bed, tmp_path):
    r = cli(newcomer_config(bed, tmp_path), "status", "--json")
    assert r.returncode == 0, r.stderr
    assert [n["memory"]["total"] for n in json.loads(r.stdout)["nodes"]] == [MEM_TOTAL_KB * 1024] * 2


# ------------------------------------------------------------------ item 16: doctor's CLI, each check once

def test_doctor_cli_prints_each_check_once(bed, tmp_path):
    r = cli(newcomer_config(bed, tmp_path), "doctor")
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    rows = [ln for ln in r.stdout.splitlines() if ln[:4] in ("ok  ", "WARN", "FAIL", "skip")]
    assert len(rows) >= 8, r.stdout
    both = r.stdout + r.stderr
    for row in rows:
        title = row.split(None, 2)[2]
        assert both.count(title) == 1, (title, both)


# ------------------------------------------------------------------ item 10-12: the doctor flow in tmux

def _tmux(sock: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["tmux", "-L", sock, *args], capture_output=True, text=True, timeout=20, check=check)


def _poll(sock: str, cond, what: str, timeout: float = 60.0) -> str:
    # tmux is another process: poll its screen in a bounded loop
    deadline, screen = time.monotonic() + timeout, ""
    while time.monotonic() < deadline:
        screen = _tmux(sock, "capture-pane", "-p", "-t", "app").stdout
        if cond(screen):
            return screen
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}; screen was:\n{screen}")


@pytest.mark.tmux
@pytest.mark.skipif(shutil.which("tmux") is None and os.environ.get("CI", "").lower() != "true",
                    reason="tmux not installed")
def test_doctor_flow_in_tmux_readable_columns_findings_and_no_probe_rows(bed, tmp_path):
    cfg = newcomer_config(bed, tmp_path)
    sock = f"sparktui-newcomer-{uuid.uuid4().hex[:8]}"
    env = [f"SPARKTUI_STATE_DIR={tmp_path / 'state'}", f"PYTHONPATH={ROOT}", "TERM=xterm-256color"]
    # COLUMNS/LINES inherited from the test process would override the pane's size for Textual
    cmd = "env -u COLUMNS -u LINES " + " ".join(env) + f" {sys.executable} -m sparktui --config {cfg}; " \
          "echo SPARKTUI-EXITED-$?; sleep 30"
    _tmux(sock, "new-session", "-d", "-s", "app", "-x", "160", "-y", "48", cmd)
    try:
        _poll(sock, lambda s: s.count("reachable") >= 2 and "MEM" in s, "both nodes on the main screen")
        _tmux(sock, "send-keys", "-t", "app", "d")
        screen = _poll(sock, lambda s: "PASSED" in s or "FAILED" in s, "doctor's result", timeout=180)
        rows = [ln for ln in screen.splitlines() if ln.strip().startswith(("ssh ", "docker ", "model "))]
        for node in ("spark1", "spark2"):
            ssh = next((r for r in rows if r.split()[:1] == ["ssh"] and node in r.split()), None)
            assert ssh is not None, screen
            assert "reachable: SSH (BatchMode: key, no prompt)" in ssh, ssh  # the whole message, not "started"
            docker = next(r for r in rows if r.split()[:1] == ["docker"] and node in r.split())
            assert "Docker" in docker and "reachable" in docker, docker
        assert "FAILED" in screen  # the base image has no vLLM: the architecture check fails
        _tmux(sock, "send-keys", "-t", "app", "Escape")
        main = _poll(sock, lambda s: "MEM" in s and "FAILED" not in s, "back on the main screen")
        # item 12: doctor's failures are the cluster's findings now
        main = _poll(sock, lambda s: "findings" in s and " error" in s.split("findings", 1)[1], "the findings strip")
        assert "none so far" not in main
        # item 11: the probes it ran left no row, log source or milestone behind
        assert PROBE not in main and "container started" not in main, main
        assert "d Doctor" in main.splitlines()[-1]  # item 16: the footer shows the action keys
        _tmux(sock, "send-keys", "-t", "app", "q")
        assert "SPARKTUI-EXITED-0" in _poll(sock, lambda s: "SPARKTUI-EXITED-" in s, "the app to exit")
    finally:
        _tmux(sock, "kill-server", check=False)


# ------------------------------------------------------------------ item 15: testbed up and a busy port 22

def _listen(addr: str, port: int) -> socket.socket:
    s = socket.socket()
    s.bind((addr, port))
    s.listen()
    return s


@pytest.fixture
def own_bed_env(bed):
    """A throw-away bed of one node (needs what `bed` needs); removed afterwards."""
    pid = os.getpid()
    env = {**os.environ, "SPARKTUI_TESTBED_DIR": f"/tmp/tbn-{pid}", "SPARKTUI_TESTBED_NET": f"127.84.{pid % 250}"}
    env.pop("SPARKTUI_TESTBED_PORT", None)
    yield env
    subprocess.run([str(TESTBED), "down"], capture_output=True, env=env, timeout=300)


def test_testbed_up_says_why_sshd_did_not_start(own_bed_env):
    addr = own_bed_env["SPARKTUI_TESTBED_NET"] + ".2"
    holder = _listen(addr, 22)  # as this host's sshd on 0.0.0.0:22 would
    try:
        r = subprocess.run([str(TESTBED), "up", "--nodes", "1"], capture_output=True, text=True,
                           env={**own_bed_env, "SPARKTUI_TESTBED_PORT": "22"}, timeout=600)
    finally:
        holder.close()
    assert r.returncode != 0
    assert "Address already in use" in r.stderr and "sshd of spark1" in r.stderr, r.stderr


def test_testbed_up_takes_another_port_when_22_is_held(own_bed_env):
    addr = own_bed_env["SPARKTUI_TESTBED_NET"] + ".2"
    holder = _listen(addr, 22)
    try:
        r = subprocess.run([str(TESTBED), "up", "--nodes", "1"], capture_output=True, text=True, env=own_bed_env,
                           timeout=600)
        assert r.returncode == 0, r.stderr
        st = json.loads(subprocess.run([str(TESTBED), "status", "--json"], capture_output=True, text=True,
                                       env=own_bed_env, timeout=60).stdout)
    finally:
        holder.close()
    node = st["nodes"][0]
    assert node["port"] != 22 and node["sshd"] and node["dockerd"]
    assert f"port = {node['port']}" in Path(st["config"]).read_text()  # sparktui reaches it there (up checked ssh)
