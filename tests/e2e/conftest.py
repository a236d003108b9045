"""The test bed for e2e tests: real sshd + real dockerd per node (scripts/testbed).

Uses the bed at $SPARKTUI_TESTBED_DIR (default /tmp/sparktui-testbed) when its cluster.toml exists
and every node is up; otherwise brings one up for the session and takes it down afterwards.
Under CI=true a bed that cannot come up is a failure; elsewhere the tests skip (with the reason)
only when this machine cannot run one at all (not root, no dockerd/sshd).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

ROOT = Path(__file__).resolve().parents[2]
TESTBED = ROOT / "scripts" / "testbed"


@dataclass
class Bed:
    dir: Path
    config: Path
    nodes: dict[str, dict]  # name -> testbed status row (address, docker_socket, bin, ...)

    def docker(self, node: str, *args: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
        sock = self.nodes[node]["docker_socket"]
        return subprocess.run(["docker", "-H", f"unix://{sock}", *args], capture_output=True, text=True,
                              check=check, timeout=timeout)

    def testbed(self, *args: str) -> list[str]:
        return [str(TESTBED), *args]

    def sshd_log(self, node: str) -> Path:
        return self.dir / "nodes" / node / "sshd.log"

    def host_key_pub(self, node: str) -> Path:
        return self.dir / "nodes" / node / "ssh_host_ed25519_key.pub"


def _status(env: dict) -> dict | None:
    r = subprocess.run([str(TESTBED), "status", "--json"], capture_output=True, text=True, env=env, timeout=60)
    if r.returncode != 0:
        return None
    return json.loads(r.stdout)


@pytest.fixture(scope="session")
def bed() -> Bed:
    ci = os.environ.get("CI", "").lower() == "true"
    env = dict(os.environ)
    bed_dir = Path(env.get("SPARKTUI_TESTBED_DIR") or "/tmp/sparktui-testbed")
    cannot = None
    if os.geteuid() != 0:
        cannot = "the test bed needs root (it runs sshd and dockerd)"
    elif not (shutil.which("dockerd") or Path("/usr/sbin/dockerd").exists()):
        cannot = "docker.io (dockerd) is not installed"
    elif not Path("/usr/sbin/sshd").exists():
        cannot = "openssh-server (sshd) is not installed"
    if cannot:
        if ci:
            pytest.fail(f"CI: test bed cannot run: {cannot}")
        pytest.skip(cannot)
    ours = False
    st = _status(env) if (bed_dir / "cluster.toml").exists() else None
    if st is None:
        r = subprocess.run([str(TESTBED), "up"], capture_output=True, text=True, env=env, timeout=600)
        if r.returncode != 0:
            pytest.fail(f"scripts/testbed up failed: {r.stderr.strip()[-2000:]}")
        ours = True
        st = _status(env)
        if st is None:
            pytest.fail("scripts/testbed up succeeded but status says a node is down")
    yield Bed(dir=bed_dir, config=Path(st["config"]), nodes={n["name"]: n for n in st["nodes"]})
    if ours:
        subprocess.run([str(TESTBED), "down"], capture_output=True, env=env, timeout=300)


@pytest.fixture
def container_name():
    """A unique container name; the test removes its containers (see ``cleanup``)."""
    return f"e2e-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def cleanup(bed):
    todo: list[tuple[str, str]] = []
    yield todo
    for node, name in todo:
        bed.docker(node, "rm", "-f", name, check=False)


def run_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sparktui", *args], capture_output=True, text=True,
                          cwd=str(ROOT), timeout=timeout)


class Watcher:
    """Wait on engine events (no sleeping): a predicate over (batch, state) re-checked per batch."""

    def __init__(self, engine) -> None:
        self.engine = engine
        self._waits: list[tuple[Callable, asyncio.Event]] = []
        self.events: list = []
        engine.subscribe(self._on_batch)

    def _on_batch(self, batch) -> None:
        self.events.extend(batch)
        for pred, ev in list(self._waits):
            if not ev.is_set() and pred(batch, self.engine.state):
                ev.set()

    async def until(self, pred: Callable, timeout: float, what: str) -> float:
        """Return the seconds it took; fail the test with ``what`` on timeout."""
        t0 = time.monotonic()
        if pred([], self.engine.state):
            return 0.0
        ev = asyncio.Event()
        entry = (pred, ev)
        self._waits.append(entry)
        try:
            await asyncio.wait_for(ev.wait(), timeout)
        except asyncio.TimeoutError:
            pytest.fail(f"{what}: not within {timeout:.0f} s")
        finally:
            self._waits.remove(entry)
        return time.monotonic() - t0


async def run_async(*argv: str, timeout: float = 120) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    out, _ = await asyncio.wait_for(proc.communicate(), timeout)
    return proc.returncode or 0, out.decode(errors="replace")


@pytest.fixture
def e2e():
    """Helpers for e2e tests (test modules import nothing from conftest)."""
    from types import SimpleNamespace

    return SimpleNamespace(ROOT=ROOT, Watcher=Watcher, run_async=run_async, run_cli=run_cli)
