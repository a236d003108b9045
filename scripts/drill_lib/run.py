"""A drill on the real-vLLM test bed: the bed (its own directory and 127.x network, never the CI's
/tmp/sparktui-testbed), the drill's cluster (mp, TP=2 over spark1+spark2, its own name and ports),
the headless TUI engine and the CLI channels around one fault.  ``FAULTS`` is the only code per drill.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import time
import tomllib
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Awaitable, Callable

from .measure import (DrillResult, Outcome, RankRecorder, evaluate, healthy_plan, judge_answer,
                      judge_investigate)
from .table import Drill

ROOT = Path(__file__).resolve().parents[2]
TESTBED = ROOT / "scripts" / "testbed"
CI_BED = Path("/tmp/sparktui-testbed")  # the CI's bed: a drill never uses it
NODES = ("spark1", "spark2")  # the drill's cluster: TP=2 over the bed's first two nodes


class DrillError(Exception):
    """The drill could not run (bed, launch): its one line is the drill's reason."""


def one_line(text: str, limit: int = 300) -> str:
    lines = [l.strip() for l in str(text).splitlines() if l.strip()]
    return (lines[-1] if lines else "")[:limit]


class DrillBed:
    """A `scripts/testbed --scenario real-vllm` bed of 3 nodes at ``dir`` on ``net`` (127.A.B)."""

    def __init__(self, dir: Path, net: str, keep: bool) -> None:
        dir = Path(dir).resolve()
        if dir == CI_BED.resolve():
            raise ValueError(f"{CI_BED} is the CI's bed; give the drills another directory")
        if not re.fullmatch(r"127\.\d{1,3}\.\d{1,3}", net) or any(int(x) > 255 for x in net.split(".")):
            raise ValueError(f"network {net!r}: the bed's nodes live on 127.A.B (loopback only)")
        self.dir, self.net, self.keep = dir, net, keep
        self.env = {**os.environ, "SPARKTUI_TESTBED_DIR": str(dir), "SPARKTUI_TESTBED_NET": net}

    @property
    def config(self) -> Path:
        return self.dir / "cluster.toml"

    @property
    def info(self) -> dict:
        return json.loads((self.dir / "real-vllm.json").read_text())

    def up(self) -> None:
        r = subprocess.run([str(TESTBED), "up", "--nodes", "3", "--scenario", "real-vllm"], capture_output=True,
                           text=True, env=self.env, timeout=1800)
        if r.returncode != 0:
            raise DrillError(f"testbed up failed: {one_line(r.stderr + r.stdout)}")

    def down(self) -> None:
        if not self.keep:
            subprocess.run([str(TESTBED), "down"], capture_output=True, env=self.env, timeout=600)

    def testbed(self, *args: str, timeout: float = 300) -> None:
        r = subprocess.run([str(TESTBED), *args], capture_output=True, text=True, env=self.env, timeout=timeout)
        if r.returncode != 0:
            raise DrillError(f"testbed {' '.join(args)}: {one_line(r.stderr + r.stdout)}")

    def ctl(self, method: str, node: str) -> None:
        """One of testbed_lib's Bed.start_sshd / stop_sshd / start_dockerd / stop_dockerd on a node:
        finer than the CLI's stop-node (sshd and dockerd together)."""
        code = ("import sys; sys.path.insert(0, sys.argv[1]); from testbed_lib.bed import Bed; b = Bed(); "
                "getattr(b, sys.argv[2])(b.node(sys.argv[3]))")
        r = subprocess.run([sys.executable, "-c", code, str(ROOT / "scripts"), method, node], capture_output=True,
                           text=True, env=self.env, timeout=300)
        if r.returncode != 0:
            raise DrillError(f"{method} {node}: {one_line(r.stderr)}")

    def docker(self, node: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        sock = self.dir / "nodes" / node / "docker.sock"
        return subprocess.run(["docker", "-H", f"unix://{sock}", *args], capture_output=True, text=True,
                              timeout=timeout)

    def write_config(self, out: Path, name: str, node_env: dict | None = None, **cluster) -> Path:
        """The bed's cluster.toml cut to spark1+spark2 (TP=2), [cluster] keys replaced, env merged,
        ``node_env`` added to those nodes' own env (the scenario's writer writes it)."""
        sys.path.insert(0, str(ROOT / "scripts" / "testbed_scenarios"))
        import seed as seed_mod

        data = tomllib.loads(self.config.read_text())
        data["node"] = [n for n in data["node"] if n["name"] in NODES]
        for n in data["node"]:
            if n["name"] in (node_env or {}):
                n["env"] = {**n.get("env", {}), **node_env[n["name"]]}
        env = {**data["cluster"].get("env", {}), **cluster.pop("env", {})}
        data["cluster"].update({"name": name, "tensor_parallel": len(NODES), **cluster}, env=env)
        seed_mod.write_config(out, data)
        return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def cli(cfg: Path, *args: str, timeout: float = 300) -> tuple[int, str, str]:
    """``sparktui CMD --config cfg ARGS`` as a child the drill can kill: (rc, stdout, stderr)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "sparktui", args[0], "--config", str(cfg), *args[1:], cwd=str(ROOT),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except (asyncio.TimeoutError, asyncio.CancelledError):
        proc.kill()
        await proc.wait()
        raise
    return proc.returncode or 0, out.decode(errors="replace"), err.decode(errors="replace")


def as_json(out: str) -> dict:
    try:
        return json.loads(out)
    except ValueError:
        return {}


@dataclass
class Ctx:
    """What a fault works with; it registers how to undo itself in ``undo`` (run in reverse)."""

    bed: DrillBed
    drill: Drill
    cfg: Path
    name: str
    port: int
    minutes: float
    undo: list[Callable[[], object]] = field(default_factory=list)
    master: int = 0  # the cluster's master_port
    action: "asyncio.Task | None" = None  # the launch / push that meets the fault: (rc, json, seconds)
    action_name: str = ""

    def rewrite(self, node_env: dict | None = None, **cluster) -> None:
        self.bed.write_config(self.cfg, self.name, {**self.drill.node_env, **(node_env or {})},
                              **{"serve_port": self.port, "master_port": self.master, **self.drill.cluster, **cluster})

    def start_action(self, *args: str, timeout: float = 600) -> float:
        """Start ``sparktui ARGS --yes --json`` in the background; the fault's moment is its start."""
        t0 = time.monotonic()

        async def go():
            rc, out, err = await cli(self.cfg, *args, "--yes", "--json", timeout=timeout)
            doc = as_json(out)
            if not doc:
                doc = {"findings": [], "summary": one_line(err) or f"exit {rc}, no JSON"}
            return rc, doc, time.monotonic() - t0

        self.action_name = args[0]
        self.action = asyncio.create_task(go())
        return t0

    async def launch_ready(self) -> None:
        rc, out, err = await cli(self.cfg, "launch", "--yes", "--json", timeout=900)
        doc = as_json(out)
        if rc != 0 or not doc.get("ok"):
            raise DrillError(f"launch before the fault failed: {doc.get('summary') or one_line(err)}")

    def kill(self, node: str) -> float:
        t = time.monotonic()
        r = self.bed.docker(node, "kill", "-s", "KILL", self.name)
        if r.returncode != 0:
            raise DrillError(f"docker kill {self.name} on {node}: {one_line(r.stderr)}")
        return t

    def load(self, seconds: float) -> asyncio.Task:
        """A load test in the background (its process killed by the undo list if still running)."""
        task = asyncio.create_task(cli(self.cfg, "load-test", "--duration", f"{seconds:g}", "--concurrency", "4",
                                       "--max-tokens", "32", "--json", timeout=seconds + 180))
        self.undo.append(task.cancel)
        return task

    async def until_serving(self, timeout: float = 60) -> None:
        """Requests running on the head (its /metrics), so a fault lands under load."""
        url = f"http://127.0.0.1:{self.port}/metrics"

        def running() -> float:
            try:
                with urllib.request.urlopen(url, timeout=5) as r:
                    text = r.read().decode()
            except OSError:
                return 0.0
            m = re.search(r"^vllm:num_requests_running(?:\{[^}]*\})?\s+(\S+)", text, re.M)
            return float(m.group(1)) if m else 0.0

        deadline = time.monotonic() + timeout
        while await asyncio.to_thread(running) <= 0:
            if time.monotonic() > deadline:
                raise DrillError(f"no request running on the head within {timeout:.0f} s of the load test")
            await asyncio.sleep(0.5)


async def run_plan(cfg: Path, plan: list[tuple[str, float]]) -> None:
    """Mixed load (measure.healthy_plan): load tests, prompts, idle; a failed request fails the drill."""
    for kind, amount in plan:
        if kind == "load":
            rc, out, err = await cli(cfg, "load-test", "--duration", f"{amount:g}", "--concurrency", "4",
                                     "--max-tokens", "32", "--json", timeout=amount + 300)
            if rc != 0:
                raise DrillError(f"load-test failed on the healthy cluster: {one_line(err or out)}")
        elif kind == "prompt":
            for _ in range(int(amount)):
                rc, out, err = await cli(cfg, "prompt", "hi", "--no-stream", timeout=180)
                if rc != 0:
                    raise DrillError(f"prompt failed on the healthy cluster: {one_line(err or out)}")
        else:
            await asyncio.sleep(amount)  # idle is the drill: nothing to wait on


# ------------------------------------------------------------------ the faults (the code per drill)

async def _mixed_load(ctx: Ctx) -> float:
    await ctx.launch_ready()
    t = time.monotonic()
    await run_plan(ctx.cfg, healthy_plan(ctx.minutes))
    return t


async def _kill_worker(ctx: Ctx) -> float:
    await ctx.launch_ready()
    return ctx.kill("spark2")


async def _kill_worker_under_load(ctx: Ctx) -> float:
    await ctx.launch_ready()
    ctx.load(60)
    await ctx.until_serving()
    return ctx.kill("spark2")


async def _kill_head(ctx: Ctx) -> float:
    await ctx.launch_ready()
    return ctx.kill("spark1")


def unaddressed_interface() -> str | None:
    """An interface of this host (the containers run with --network host) without an IPv4 address:
    it exists, and nothing bound to it reaches the peer.  SPARKTUI_DRILL_BAD_IF names one instead."""
    if os.environ.get("SPARKTUI_DRILL_BAD_IF"):
        return os.environ["SPARKTUI_DRILL_BAD_IF"]
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    addressed = subprocess.run(["ip", "-o", "-4", "addr"], capture_output=True, text=True).stdout
    return pick_unaddressed(links, addressed)


def pick_unaddressed(links: str, addressed: str) -> str | None:
    """From `ip -o link` and `ip -o -4 addr`: the first interface with no IPv4 address."""
    have = {l.split()[1] for l in addressed.splitlines() if len(l.split()) > 1}
    for l in links.splitlines():
        parts = l.split(": ")
        if len(parts) > 1:
            name = parts[1].split("@")[0]
            if name not in have:
                return name
    return None


async def _wrong_interface(ctx: Ctx) -> float:
    bad = unaddressed_interface()
    if not bad:
        raise DrillError("no interface without an IPv4 address on this host (set SPARKTUI_DRILL_BAD_IF): the bed's "
                         "nodes share the host's loopback, so every addressed interface reaches the peer")
    ctx.rewrite(node_env={"spark2": {"GLOO_SOCKET_IFNAME": bad, "NCCL_SOCKET_IFNAME": bad}})
    return ctx.start_action("launch", timeout=600)


async def _port_taken(ctx: Ctx) -> float:
    holder = socket.socket()  # someone else listens on the serve port (the launch's own address)
    holder.bind(("127.0.0.1", ctx.port))
    holder.listen()
    ctx.undo.append(holder.close)
    return ctx.start_action("launch", timeout=600)


async def _kv_too_big(ctx: Ctx) -> float:
    total_gib = int(Path("/proc/meminfo").read_text().split()[1]) // (1 << 20)
    ctx.rewrite(env={"VLLM_CPU_KVCACHE_SPACE": str(max(1, total_gib) * 4)})
    return ctx.start_action("launch", timeout=600)


async def _unknown_arch(ctx: Ctx) -> float:
    ctx.rewrite(model_path=f"{ctx.bed.info['models']}/tiny-newarch")
    return ctx.start_action("launch", timeout=600)


async def _stale_container(ctx: Ctx) -> float:
    r = ctx.bed.docker("spark2", "run", "-d", "--name", ctx.name, ctx.bed.info["image"], "sleep", "infinity")
    if r.returncode != 0:
        raise DrillError(f"stale container on spark2: {one_line(r.stderr)}")
    ctx.undo.append(lambda: ctx.bed.docker("spark2", "rm", "-f", ctx.name))
    return ctx.start_action("launch", timeout=300)


async def _sshd_stopped(ctx: Ctx) -> float:
    ctx.start_action("launch", timeout=600)

    def both_running() -> bool:
        for n in NODES:
            r = ctx.bed.docker(n, "inspect", "--format", "{{.State.Running}}", ctx.name)
            if r.stdout.strip() != "true":
                return False
        return True

    deadline = time.monotonic() + 300
    while not await asyncio.to_thread(both_running):
        if ctx.action.done() or time.monotonic() > deadline:
            raise DrillError("the launch never had both containers running (nothing to cut off)")
        await asyncio.sleep(0.5)
    t = time.monotonic()
    ctx.undo.append(lambda: ctx.bed.ctl("start_sshd", "spark2"))  # first: a half-done stop is undone too
    ctx.bed.ctl("stop_sshd", "spark2")
    return t


async def _restart_dockerd(ctx: Ctx) -> float:
    await ctx.launch_ready()
    load = ctx.load(40)
    await ctx.until_serving()
    t = time.monotonic()
    await asyncio.to_thread(ctx.bed.testbed, "restart-docker", "spark2")
    rc, out, err = await load
    if rc != 0:
        raise DrillError(f"serving stopped across the dockerd restart: {one_line(err or out)}")
    return t


async def _disk_full(ctx: Ctx) -> float:
    data = ctx.bed.dir / "nodes" / "spark2" / "docker" / "data"

    def restore() -> None:  # spark2's own data root back, whatever happened
        ctx.bed.ctl("stop_dockerd", "spark2")
        if subprocess.run(["umount", str(data)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(data)], capture_output=True)
        ctx.bed.ctl("start_dockerd", "spark2")

    ctx.undo.append(restore)
    ctx.bed.ctl("stop_dockerd", "spark2")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(data)], capture_output=True, text=True)
    if r.returncode != 0:
        raise DrillError(f"tmpfs on spark2's data root: {one_line(r.stderr)}")
    ctx.bed.ctl("start_dockerd", "spark2")
    return ctx.start_action("push-image", "--image", ctx.bed.info["image"], "--to", "spark2", timeout=600)


# every process of the container but its PID 1 (the headless rank's own main process, which waits on its
# worker): SIGSTOP leaves the container running, as a rank stuck in a call looks from outside
_STOP_WORKERS = ("for p in /proc/[0-9]*; do read -r stat < $p/stat 2>/dev/null || continue; "
                 "set -- ${stat##*) }; [ \"$2\" = 1 ] && kill -%s ${p#/proc/}; done; true")


async def _rank_stopped_at_rendezvous(ctx: Ctx) -> float:
    """Launch; the moment rank 1 (spark2) has printed its rendezvous line, stop its worker: rank 0
    then waits for it in the process group's set-up, both containers still running."""
    launch = asyncio.create_task(cli(ctx.cfg, "launch", "--yes", "--json", timeout=900))
    ctx.undo.append(launch.cancel)

    def joined() -> bool:
        r = ctx.bed.docker("spark2", "logs", ctx.name)
        return "distributed_init_method=" in r.stdout + r.stderr

    deadline = time.monotonic() + 600
    while not await asyncio.to_thread(joined):
        if launch.done() or time.monotonic() > deadline:
            raise DrillError("rank 1 never reached the rendezvous (nothing to stop there)")
        await asyncio.sleep(0.2)
    t = time.monotonic()
    r = ctx.bed.docker("spark2", "exec", ctx.name, "sh", "-c", _STOP_WORKERS % "STOP")
    if r.returncode != 0:
        raise DrillError(f"SIGSTOP of rank 1's worker: {one_line(r.stderr)}")
    ctx.undo.append(lambda: ctx.bed.docker("spark2", "exec", ctx.name, "sh", "-c", _STOP_WORKERS % "CONT"))
    return t


FAULTS: dict[str, Callable[[Ctx], Awaitable[float]]] = {
    "mixed_load": _mixed_load, "kill_worker": _kill_worker, "kill_worker_under_load": _kill_worker_under_load,
    "kill_head": _kill_head, "wrong_interface": _wrong_interface, "port_taken": _port_taken, "kv_too_big": _kv_too_big,
    "unknown_arch": _unknown_arch, "stale_container": _stale_container, "sshd_stopped": _sshd_stopped,
    "restart_dockerd": _restart_dockerd, "disk_full": _disk_full, "rank_stopped": _rank_stopped_at_rendezvous,
}


# ------------------------------------------------------------------ the channels

async def _status(ctx: Ctx, fault_t: float, until: float) -> Outcome:
    """Poll `status --json` from the fault: the first answer naming the fault (or, healthy, one answer)."""
    d = ctx.drill
    last: dict = {}
    rc = None
    while True:
        rc, out, _ = await cli(ctx.cfg, "status", "--json", timeout=120)
        last = as_json(out).get("cluster", {})
        secs = time.monotonic() - fault_t
        o = judge_answer("status", last.get("findings", []), d.expected, secs, d.budget_s,
                         {"state": last.get("state"), "rc": rc})
        if d.healthy:
            if o.ok and (rc != 0 or last.get("state") != "running"):
                o.ok, o.why = False, f"status exit {rc}, state {last.get('state')!r} on a healthy cluster"
            o.seconds = None
            return o
        if o.got in d.expected or time.monotonic() > until:
            return o
        await asyncio.sleep(1)


async def _investigate(ctx: Ctx, fault_t: float) -> Outcome:
    rc, out, err = await cli(ctx.cfg, "investigate", "--json", "--interval", "2", timeout=300)
    doc = as_json(out)
    o = judge_investigate(rc, doc.get("verdict"), ctx.drill.investigate or "problem", ctx.drill.expected,
                          None if ctx.drill.healthy else time.monotonic() - fault_t)
    if not doc:
        o.why = f"investigate exit {rc}, no JSON: {one_line(err)}"
    return o


def _sweep(bed: DrillBed) -> None:
    """Before a drill: no container of an earlier drill on any node (named or labelled drill_*).  The
    clean-up after each drill removes its own, yet once in a full run (node-unreachable, then
    dockerd-restart) one was still on spark2 and its exit was raised, by the next drill's engine, as
    that old cluster's half_cluster; a drill is judged on a bed that holds only its own cluster."""
    for node in NODES:
        r = bed.docker(node, "ps", "-a", "--format", '{{.ID}} {{.Names}} {{.Label "sparktui.cluster"}}')
        ids = [f[0] for f in (ln.split() for ln in r.stdout.splitlines()) if len(f) >= 2
               and any(x.startswith("drill_") for x in f[1:])] if r.returncode == 0 else []
        if ids:
            print(f"drill: removing {len(ids)} container(s) an earlier drill left on {node}", file=sys.stderr)
            bed.docker(node, "rm", "-f", *ids)


async def run_drill(bed: DrillBed, drill: Drill, workdir: Path, minutes: float | None = None) -> DrillResult:
    """One drill on ``bed`` (up already): its own cluster, the fault, every channel; always cleaned up."""
    from sparktui.collectors import make_sources
    from sparktui.config import load_config
    from sparktui.engine import Engine
    from sparktui.nodes import make_node
    from sparktui.tui.boot import default_processors

    res = DrillResult(drill.name, drill.expected, must=drill.must)
    name = "drill_" + re.sub(r"[^a-z0-9]", "_", drill.name)[:24]
    ctx = Ctx(bed, drill, workdir / f"{drill.name}.toml", name, free_port(),
              drill.minutes if minutes is None else minutes, master=free_port())
    ctx.rewrite()
    _sweep(bed)
    config = load_config(ctx.cfg)
    engine = Engine(config, make_sources(config, {n.name: make_node(n) for n in config.nodes}),
                    processors=default_processors())
    rec = RankRecorder(engine)
    await engine.start()
    try:
        fault_t = await FAULTS[drill.fault](ctx)
        until = fault_t + drill.budget_s * 1.5  # a late answer is still reported, with its time
        status = None
        if "status" in drill.must or not ctx.action:
            status = asyncio.create_task(_status(ctx, fault_t, until))
        if drill.expected and "engine" in drill.must:  # else it is only reported: no waiting on it
            await rec.until_first(drill.expected, fault_t, max(1.0, until - time.monotonic()))
        if ctx.action:
            try:
                rc, doc, secs = await asyncio.wait_for(asyncio.shield(ctx.action), max(300.0, until - time.monotonic()))
                res.outcomes["action"] = judge_answer("action", doc.get("findings", []), drill.expected, secs,
                                                      drill.budget_s, {"command": ctx.action_name, "rc": rc,
                                                                       "summary": doc.get("summary", "")[:200]})
            except asyncio.TimeoutError:
                res.outcomes["action"] = Outcome("action", why=f"{ctx.action_name} still running after 300 s")
        if status:
            res.outcomes["status"] = await status
        if drill.investigate:
            res.outcomes["investigate"] = await _investigate(ctx, fault_t)
        # judged last: a healthy drill's cry-wolf raised while status and investigate ran counts too
        res.outcomes["engine"] = evaluate(rec.samples, fault_t, drill.expected, drill.budget_s, rec.errors)
        if os.environ.get("SPARKTUI_DRILL_TRACE"):  # what the engine ranked first, when (fault at 0 s)
            for s in rec.samples:
                print(f"  {drill.name}: {s.t - fault_t:+8.2f} s  first {s.id} ({s.severity}): {s.title}", file=sys.stderr)
    except DrillError as exc:
        res.error = str(exc)
    except Exception as exc:  # a drill's crash is its result, in one line; the others still run
        res.error = f"{type(exc).__name__}: {one_line(str(exc))}"
    finally:
        if ctx.action and not ctx.action.done():
            ctx.action.cancel()  # kills its sparktui (cli()): its lock is then stale, hence --break-lock
            await asyncio.gather(ctx.action, return_exceptions=True)
        for undo in reversed(ctx.undo):
            try:
                undo()
            except Exception as exc:  # undo everything else still
                res.error = res.error or f"cleanup: {one_line(str(exc))}"
        await engine.stop()
        try:
            await cli(ctx.cfg, "stop", "--yes", "--break-lock", timeout=300)
        except Exception:
            pass
        # and whatever `stop` could not reach (a node whose sshd was just restarted): a shared bed's next
        # drill must not meet this one's containers (dockerd-restart once cried wolf on one)
        for node in NODES:
            ids: set[str] = set()
            for what in (f"label=sparktui.cluster={name}", f"name=^{name}$"):  # a planted stale one has no label
                left = bed.docker(node, "ps", "-aq", "--filter", what)
                ids |= set(left.stdout.split()) if left.returncode == 0 else set()
            if ids:
                bed.docker(node, "rm", "-f", *sorted(ids))
    return res


def run_all(names: list[str], minutes: float | None = None, bed_dir: str | None = None,
            net: str | None = None, say=None) -> list[DrillResult]:
    """The drills named (all by default), one after another.  ``bed_dir``: one bed for all, brought
    up when missing and kept; else each drill brings up its own (/tmp/drill-PID-N) and takes it down."""
    import tempfile

    from .table import select

    say = say or (lambda m: print(m, file=sys.stderr, flush=True))
    drills = select(names)
    work = Path(tempfile.mkdtemp(prefix="sparktui-drill-"))
    shared = DrillBed(Path(bed_dir), net or "127.79.1", keep=True) if bed_dir else None
    if shared and not (shared.config.exists() and (shared.dir / "real-vllm.json").exists()):
        shared.up()
    results = []
    for i, d in enumerate(drills):
        bed = shared or DrillBed(Path(f"/tmp/drill-{os.getpid()}-{i}"), f"127.78.{(os.getpid() + i) % 250 + 1}",
                                 keep=False)
        say(f"drill {d.name}: {d.what} ...")
        try:
            if bed is not shared:
                bed.up()
            r = asyncio.run(run_drill(bed, d, work, minutes))
        except DrillError as exc:
            r = DrillResult(d.name, d.expected, must=d.must, error=str(exc))
        finally:
            if bed is not shared:
                bed.down()
        say(f"drill {d.name}: {'ok' if r.ok else 'FAIL: ' + r.why}")
        results.append(r)
    return results
