"""Real-node figures on a private test bed (scripts/testbed, own dir and addresses):

- SSH connect time (asyncssh handshake + auth against a real sshd)
- one sampling cycle per node: /proc/meminfo + PSI over SFTP, the container list through the
  forwarded Docker socket, one nvidia-smi query (the GB10 stand-in: a Python script, so this
  over-states what a real nvidia-smi costs)
- the cost on the node of the collectors running: CPU seconds per minute of the sshd session
  processes and everything they spawned (budget: 1 % of a core = 0.6 s/min), dockerd shown apart
- memory sampling at 1 Hz two ways: SFTP reads vs one long-lived remote `sh` loop
Medians over >= 5 runs.  Needs root (the bed runs sshd + dockerd); skipped rows say why.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
RUNS = 5
WINDOW_S = 12.0
CLK = os.sysconf("SC_CLK_TCK")
BED_ENV = {"SPARKTUI_TESTBED_DIR": "/tmp/tb-bench", "SPARKTUI_TESTBED_NET": "127.0.8"}


def _row(what, value, unit, budget="-", ok=None):
    return {"what": what, "value": value, "unit": unit, "budget": budget, "ok": ok}


def _cpu(pid: int) -> float:
    """CPU seconds of one process: its threads' run time in ns (schedstat; ticks are too coarse
    for these small numbers) plus the cutime+cstime ticks of children it already reaped."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
        own = sum(int(Path(f"/proc/{pid}/task/{t}/schedstat").read_text().split()[0])
                  for t in os.listdir(f"/proc/{pid}/task")) / 1e9
    except OSError:
        return 0.0
    f = raw[raw.rfind(")") + 2:].split()
    return own + (int(f[13]) + int(f[14])) / CLK


def _tree(root: int) -> list[int]:
    kids: dict[int, list[int]] = {}
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                raw = Path(f"/proc/{p}/stat").read_text()
            except OSError:
                continue
            kids.setdefault(int(raw[raw.rfind(")") + 2:].split()[1]), []).append(int(p))
    out, todo = [], [root]
    while todo:
        for c in kids.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def _node_cpu(listener: int) -> float:
    # per-connection sshd processes and their children; the listener itself only accepts
    return sum(_cpu(p) for p in _tree(listener))


async def _bench(cfg_path: Path, bed_dir: Path) -> list[dict]:
    from sparktui.collectors import NodeCollectors
    from sparktui.config import load_config
    from sparktui.nodes.ssh import SshNode
    from sparktui.probes import gpu
    from sparktui.probes.memory import MEMINFO, PSI_MEMORY

    config = load_config(cfg_path)
    rows = []
    # -- connect
    times = []
    for _ in range(RUNS + 2):
        n = SshNode(config.nodes[0])
        await n.connect()
        times.append(n.connect_seconds)
        await n.close()
    rows.append(_row("ssh connect (handshake + key auth)", statistics.median(times[2:]) * 1000, "ms"))
    # -- one cycle per node
    for cfg in config.nodes:
        n = SshNode(cfg)
        await n.connect()
        client = await n.docker()
        cyc = []
        for _ in range(RUNS + 1):
            t = time.perf_counter()
            await asyncio.gather(n.read_file(MEMINFO), n.read_file(PSI_MEMORY), n.run(gpu.QUERY_GPU),
                                 asyncio.to_thread(client.api.containers, all=True))
            cyc.append(time.perf_counter() - t)
        rows.append(_row(f"{cfg.name}: one sampling cycle (mem+psi, docker ps, nvidia-smi)",
                         statistics.median(cyc[1:]) * 1000, "ms"))
        await n.close()
    # -- cost on the node of the real collectors
    listeners = {c.name: int((bed_dir / "nodes" / c.name / "sshd.pid").read_text()) for c in config.nodes}
    dockerds = {c.name: int((bed_dir / "nodes" / c.name / "docker.pid").read_text()) for c in config.nodes}
    nodes = {c.name: SshNode(c) for c in config.nodes}
    cols = [NodeCollectors(nodes[c.name], c, config) for c in config.nodes]
    tasks = [asyncio.create_task(col.run(lambda e: None)) for col in cols]
    await asyncio.sleep(3)  # connected, loops started
    per_min: dict[str, list[float]] = {c.name: [] for c in config.nodes}
    dock: dict[str, list[float]] = {c.name: [] for c in config.nodes}
    for _ in range(RUNS):
        before = {k: _node_cpu(v) for k, v in listeners.items()}
        dbefore = {k: _cpu(v) for k, v in dockerds.items()}
        t = time.monotonic()
        await asyncio.sleep(WINDOW_S)
        dt = time.monotonic() - t
        for k in listeners:
            per_min[k].append((_node_cpu(listeners[k]) - before[k]) * 60 / dt)
            dock[k].append((_cpu(dockerds[k]) - dbefore[k]) * 60 / dt)
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    for col in cols:
        await col.close()
    for k in listeners:
        v = statistics.median(per_min[k])
        rows.append(_row(f"{k}: collectors' cost on the node (sshd + spawned)", v, "cpu-s/min", "<= 0.6 (1% core)",
                         v <= 0.6))
        rows.append(_row(f"{k}: dockerd while watched (info)", statistics.median(dock[k]), "cpu-s/min"))
    rows += await _memory_methods(config.nodes[0], listeners[config.nodes[0].name])
    return rows


async def _memory_methods(cfg, listener: int) -> list[dict]:
    """1 Hz /proc/meminfo + PSI: SFTP reads vs a long-lived remote shell loop (both: no spawn)."""
    from sparktui.nodes.ssh import SshNode
    from sparktui.probes.memory import MEMINFO, PSI_MEMORY

    loop_script = ("while read _; do for f in /proc/meminfo /proc/pressure/memory; do "
                   "while IFS= read -r l; do echo \"$l\"; done < $f; done; echo .; done")
    out = []
    for method in ("sftp", "sh-loop"):
        n = SshNode(cfg)
        await n.connect()
        proc = None
        if method == "sh-loop":
            proc = await n._conn.create_process(  # bench-only: a raw channel to compare with
                "sh -c " + __import__("shlex").quote(loop_script), encoding=None)

        async def sample() -> None:
            if proc is None:
                await n.read_file(MEMINFO)
                await n.read_file(PSI_MEMORY)
                return
            proc.stdin.write(b"\n")
            while (await proc.stdout.readline()).strip() != b".":
                pass

        await sample()
        vals, lat = [], []
        for _ in range(RUNS):
            before = _node_cpu(listener)
            t0 = time.monotonic()
            for _ in range(6):
                t = time.perf_counter()
                await sample()
                lat.append(time.perf_counter() - t)
                await asyncio.sleep(1.0)
            vals.append((_node_cpu(listener) - before) * 60 / (time.monotonic() - t0))
        if proc is not None:
            proc.close()
        await n.close()
        out.append(_row(f"memory @1 Hz via {method}: cost on the node", statistics.median(vals), "cpu-s/min"))
        out.append(_row(f"memory @1 Hz via {method}: latency", statistics.median(lat) * 1000, "ms"))
    return out


def main(args) -> list[dict]:
    if os.geteuid() != 0:
        return [_row("nodes: skipped (needs root for the test bed)", None, "")]
    env = {**os.environ, **BED_ENV}
    bed_dir = Path(BED_ENV["SPARKTUI_TESTBED_DIR"])
    up = subprocess.run([str(ROOT / "scripts" / "testbed"), "up"], capture_output=True, text=True, env=env)
    if up.returncode != 0:
        return [_row("nodes: test bed failed", None, "", up.stderr.strip()[-200:], False)]
    try:
        shutil.copy(ROOT / "tests" / "fixtures" / "nvidia-smi" / "gb10-nvidia-smi",
                    bed_dir / "nodes" / "spark1" / "bin" / "nvidia-smi")
        return asyncio.run(_bench(bed_dir / "cluster.toml", bed_dir))
    finally:
        subprocess.run([str(ROOT / "scripts" / "testbed"), "down"], capture_output=True, env=env)


if __name__ == "__main__":
    for r in main(sys.argv[1:]):
        print(r)
