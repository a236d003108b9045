"""A log flood on the test bed (issue 13): a container on spark1 prints ~90k lines/s for
FLOOD_S seconds while the TUI (headless, real SSH + Docker sources, its own process) follows it.

Sampled every second in the TUI's process: its RSS, how far the view is behind the source (the
newest line the store holds vs the newest the container printed, in seconds of the container's
own clock), and what the pane reports (skipped / lost / not saved).  Afterwards the session file
is counted against what the container printed: every line is there, or the lost count says how
many are not.  One run (it takes minutes); FLOOD_S from $SPARKTUI_FLOOD_S (default 300).

The anchor, in the same run, after it: the same flood read by ``docker logs -f`` alone on the node
($SPARKTUI_FLOOD_ANCHOR_S seconds, default min(FLOOD_S, 60); 0 for none): how far behind the bed's
own Engine serves a follower on this machine, with nothing of ours in the way.
Needs root (the bed runs sshd + dockerd).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
BED_ENV = {"SPARKTUI_TESTBED_DIR": "/tmp/tb-flood", "SPARKTUI_TESTBED_NET": "127.0.9"}
RATE = 90_000
AFTER_S = 30  # watched after the flood ends: RSS must stay flat

# the printer: real vLLM serving lines (shared fixture), numbered, RATE a second for FLOOD_S seconds
PRINTER = r"""
import sys, time
lines = [l.rstrip("\n") for l in open("/serve.log") if l.strip()]
rate, dur = int(sys.argv[1]), float(sys.argv[2])
out = sys.stdout
step = rate // 20
n = 0
t0 = time.monotonic()
while True:
    el = time.monotonic() - t0
    if el >= dur:
        break
    want = int(el * rate) + step
    chunk = []
    while n < want:
        n += 1
        chunk.append(f"{lines[n % len(lines)]} #{n}\n")
    out.write("".join(chunk))
    out.flush()
    time.sleep(0.05)
out.write(f"FLOOD DONE {n}\n")
out.flush()
"""

# the TUI, headless, in its own process: the figures are its own
DRIVER = r"""
import asyncio, json, os, sys, time, psutil
from sparktui.config import load_config
from sparktui.collectors import make_sources
from sparktui.nodes import make_node
from sparktui.tui.app import SparkApp
from sparktui.tui.boot import make_engine

cfg_path, total_s, source = sys.argv[1], float(sys.argv[2]), sys.argv[3]

def dirty_kb():  # the kernel's dirty and in-writeback page cache: the floods' files going to disk
    with open("/proc/meminfo") as fh:
        return sum(int(l.split()[1]) for l in fh if l.startswith(("Dirty:", "Writeback:")))

def steal_s():  # CPU time the hypervisor gave others (a virtual machine's cores are not all ours)
    with open("/proc/stat") as fh:
        f = fh.readline().split()
    return int(f[8]) / os.sysconf("SC_CLK_TCK") if len(f) > 8 else 0.0

async def main():
    config = load_config(cfg_path)
    nodes = {n.name: make_node(n) for n in config.nodes}
    engine = make_engine(config, make_sources(config, nodes), "bench", offload=os.environ.get("OFFLOAD", "1") == "1")
    app = SparkApp(engine, nodes=lambda: nodes, read_only=True, subtitle="flood")
    proc = psutil.Process()
    async with app.run_test(size=(200, 50)) as pilot:
        t0 = time.monotonic()
        print(json.dumps({"ready": True, "session": str(engine.session.path)}), flush=True)
        while time.monotonic() - t0 < total_s:
            await asyncio.sleep(1.0)
            s = engine.logs.find("spark1", source)
            row = {"t": time.monotonic() - t0, "rss": proc.memory_info().rss, "pending": len(engine._pending),
                   "dirty_kb": dirty_kb(), "steal_s": steal_s()}
            if s is not None and s.total:
                row.update(seq=s.last_seq, newest_ts=s.stamp(s.total - 1), skipped=s.skipped, lost=s.lost,
                           unsaved=s.unsaved, now=time.time())
            print(json.dumps(row), flush=True)
    print(json.dumps({"done": True}), flush=True)

asyncio.run(main())
"""


def _row(what, value, unit, budget="-", ok=None):
    return {"what": what, "value": value, "unit": unit, "budget": budget, "ok": ok}


def _steal(rows: list[dict]) -> float | None:
    """Cores' worth of CPU the hypervisor took over ``rows`` (none on a machine of its own)."""
    got = [(r["t"], r["steal_s"]) for r in rows if "steal_s" in r]
    if len(got) < 2 or got[-1][0] <= got[0][0]:
        return None
    return (got[-1][1] - got[0][1]) / (got[-1][0] - got[0][0])


def _docker_env(env: dict) -> dict:
    """``env`` with spark1's DOCKER_HOST (the docker CLI talks to that node's Engine)."""
    denv = dict(env)
    for line in subprocess.run([str(ROOT / "scripts" / "testbed"), "env", "spark1"], capture_output=True, text=True,
                               env=env, check=True).stdout.splitlines():
        if line.startswith("export "):
            k, _, v = line[len("export "):].partition("=")
            denv[k] = v.strip("'\"")
    return denv


def _start_printer(denv: dict, name: str, flood_s: float) -> None:
    work = Path(BED_ENV["SPARKTUI_TESTBED_DIR"]) / "flood"
    work.mkdir(exist_ok=True)
    (work / "printer.py").write_text(PRINTER)
    shared = ROOT.parent / "shared" / "fixtures" / "vllm-cpu" / "serve.log"
    serve = shared if shared.exists() else ROOT / "tests" / "fixtures" / "vllm-cpu" / "serve.log"
    subprocess.run(["docker", "rm", "-f", name], capture_output=True, env=denv)
    # SPARKTUI_FLOOD_LOG_MAX (e.g. 256m): the container's json log rotates at that size (two files),
    # as a node configured with log-opts would; unset, the Engine's default: one file, no bound
    rotate = os.environ.get("SPARKTUI_FLOOD_LOG_MAX")
    opts = ["--log-opt", f"max-size={rotate}", "--log-opt", "max-file=2"] if rotate else []
    subprocess.run(["docker", "run", "-d", "--name", name, "--network", "host", *opts,
                    "-v", f"{work / 'printer.py'}:/printer.py:ro", "-v", f"{serve}:/serve.log:ro",
                    "sparktui-base:bookworm", "python3", "/printer.py", str(RATE), str(flood_s)],
                   check=True, capture_output=True, env=denv)


def _anchor(flood_s: float) -> list[dict]:
    """The same flood read by ``docker logs -f --timestamps`` alone on the node (no TUI, no SSH):
    how far behind the bed's own Engine serves a follower on this machine, measured in the same run."""
    from sparktui.logs.follow import docker_ns

    denv = _docker_env({**os.environ, **BED_ENV})
    name = "flood-anchor"
    _start_printer(denv, name, flood_s)
    reader = subprocess.Popen(["docker", "logs", "-f", "--timestamps", name], stdout=subprocess.PIPE, env=denv)
    behind: list[float] = []
    started = last = time.time()
    tail = b""
    try:
        fd = reader.stdout.fileno()  # type: ignore[union-attr]
        while block := os.read(fd, 1 << 20):
            tail = (tail + block)[-8192:]
            now = time.time()
            if now - last >= 1.0 and now - started <= flood_s:  # once a second, while it floods
                last = now
                i = tail.rfind(b"\n", 0, len(tail) - 1) + 1
                ns = docker_ns(tail[i:tail.find(b" ", i)].decode("ascii", "replace"))
                if ns is not None:
                    behind.append(now - ns / 1e9)
    finally:
        reader.kill()
        subprocess.run(["docker", "rm", "-f", name], capture_output=True, env=denv)
    return [
        _row("flood anchor: `docker logs -f` alone behind the source, max", max(behind, default=None), "s"),
        _row("flood anchor: `docker logs -f` alone behind the source, median",
             statistics.median(behind) if behind else None, "s"),
    ]


def _run(flood_s: float) -> list[dict]:
    env = {**os.environ, **BED_ENV}
    bed = Path(BED_ENV["SPARKTUI_TESTBED_DIR"])
    denv = _docker_env(env)
    name = "flood"
    subprocess.run(["docker", "rm", "-f", name], capture_output=True, env=denv)
    work = bed / "flood"
    work.mkdir(exist_ok=True)
    state = work / "state"
    tui = subprocess.Popen([sys.executable, "-c", DRIVER, str(bed / "cluster.toml"), str(flood_s + AFTER_S + 20), name],
                           stdout=subprocess.PIPE, text=True, cwd=ROOT,
                           env={**env, "PYTHONPATH": str(ROOT), "SPARKTUI_STATE_DIR": str(state)})
    samples: list[dict] = []
    session = None
    try:
        first = json.loads(tui.stdout.readline())
        session = Path(first["session"])
        time.sleep(5)  # the sources connect; the follower attaches to the container when it starts
        _start_printer(denv, name, flood_s)
        started = time.time()
        for line in tui.stdout:
            row = json.loads(line)
            if row.get("done"):
                break
            row["since_start"] = time.time() - started
            samples.append(row)
    finally:
        tui.wait(timeout=120)
        logs = subprocess.run(["docker", "logs", "--tail", "1", name], capture_output=True, text=True, env=denv).stdout
        subprocess.run(["docker", "rm", "-f", name], capture_output=True, env=denv)
    printed = int(logs.split()[-1]) + 1 if "FLOOD DONE" in logs else None  # +1: the DONE line itself
    dump = os.environ.get("SPARKTUI_FLOOD_SAMPLES")  # every sample, for a closer look
    if dump:
        Path(dump).write_text(json.dumps(samples))
    flood = [r for r in samples if "seq" in r and r["since_start"] <= flood_s]
    after = [r for r in samples if r["since_start"] > flood_s + 5]
    # behind = the age of the newest line held, on the container's clock, while the flood runs
    behind = [r["now"] - r["newest_ts"] for r in flood if r.get("newest_ts")]
    rss = [r["rss"] / 2**20 for r in samples]
    end_of_flood = max((r["rss"] for r in flood), default=0) / 2**20
    last = samples[-1] if samples else {}
    path = session / "logs" / "spark1" / f"{name}.log" if session else None
    # the file's lines, less the one note a capped file ends with (not a line of the container's)
    in_file = notes = 0
    if path and path.exists():
        with open(path, "rb") as fh:
            for line in fh:
                in_file += 1
                notes += line.startswith(b"[sparktui: this session log reached its cap")
    in_file -= notes
    lost = last.get("lost", 0)
    unsaved = last.get("unsaved", 0)
    rows = [
        _row(f"flood: lines printed ({RATE}/s for {flood_s:.0f} s)", printed, "lines"),
        _row("flood: RSS of the TUI, max", max(rss, default=0), "MiB", "<= 400 MB", max(rss, default=0) * 2**20 <= 400e6),
        _row("flood: RSS growth in the 30 s after the flood ended", (max((r["rss"] for r in after), default=0) / 2**20
                                                                     - end_of_flood) if after else None, "MiB", "flat (<= 20)",
             bool(after) and max(r["rss"] for r in after) / 2**20 - end_of_flood <= 20),
        _row("flood: view behind the source, max", max(behind, default=None), "s", "<= 2 s",
             bool(behind) and max(behind) <= 2.0),
        _row("flood: view behind the source, median", statistics.median(behind) if behind else None, "s"),
        _row("flood: the machine's dirty + writeback page cache, max",
             max((r.get("dirty_kb", 0) for r in samples), default=0) / 1024, "MiB"),
        _row("flood: CPU stolen by the hypervisor during the flood, mean", _steal(flood), "cores"),
        _row("flood: lines the pane reports skipped (in the session file)", last.get("skipped"), "lines"),
        _row("flood: lines the pane reports lost", lost, "lines"),
        _row("flood: lines the pane reports not saved (the session file reached its cap)", unsaved, "lines"),
        _row("flood: session file lines + reported lost + not saved - printed",
             (in_file + lost + unsaved - printed) if printed else None, "lines", "0",
             printed is not None and in_file + lost + unsaved == printed),
    ]
    return rows


def main(args) -> list[dict]:
    if os.geteuid() != 0:
        return [_row("flood: skipped (needs root for the test bed)", None, "")]
    env = {**os.environ, **BED_ENV}
    testbed = str(ROOT / "scripts" / "testbed")
    up = subprocess.run([testbed, "up", "--nodes", "2"], capture_output=True, text=True, env=env)
    if up.returncode != 0:
        return [_row("flood: test bed failed", None, "", up.stderr.strip()[-200:], False)]
    flood_s = float(os.environ.get("SPARKTUI_FLOOD_S", "300"))
    anchor_s = float(os.environ.get("SPARKTUI_FLOOD_ANCHOR_S", str(min(flood_s, 60))))  # 0: none
    try:
        rows = _run(flood_s)
        return rows + (_anchor(anchor_s) if anchor_s > 0 else [])
    finally:
        subprocess.run([testbed, "down"], capture_output=True, env=env)


if __name__ == "__main__":
    for r in main(sys.argv[1:]):
        print(r)
