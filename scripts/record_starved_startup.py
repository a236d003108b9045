#!/usr/bin/env python3
"""Record a healthy mp cluster starting up on a CPU-starved machine: the live stall detector's healthy
counterpart for slow start-ups (tests/fixtures/vllm-cpu/mp_starved_*).

    record_starved_startup.py BED_DIR [OUT_DIR] [--hogs N] [--churn M]
    record_starved_startup.py --decay OUT_FILE [--hogs N]

Needs a bed made with `scripts/testbed up --nodes 2 --scenario real-vllm` (its cluster.toml: TP=2,
the mp executor over spark1 and spark2).  N busy loops (default 3 per core) compete with the cluster
at the same priority, as the test suite's other workers do in CI, and M disk churners (default 0)
write, read and drop the page cache, as the suite's image loads and pushes do; `sparktui launch` starts the real
vLLM and waits until it serves; /proc/pressure/cpu is read once a second meanwhile (the nodes of the
bed share this host's CPUs, and /proc/pressure is host-wide, as sparktui's memory loop reads it over
SSH).  Written to OUT_DIR (default tests/fixtures/vllm-cpu):

    mp_starved_head.log, mp_starved_rank1.log   each rank's container log from its start until the
                                                server answered, stdout and stderr merged by the
                                                daemon's stamps, the stamps dropped
    mp_starved_pressure.txt                     "HH:MM:SS.s cpu io memory": each one's ``some avg10``
                                                (UTC, the clock of vLLM's stamps)

--decay needs no bed: it records how the pressure falls once the work stops (N busy loops for 30 s,
then 40 s of quiet), what a start-up that hangs on a busy node leaves the stall detector to read.
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _hog() -> None:
    while True:
        pass


def _churn(folder: str) -> None:
    """Disk and page-cache churn (the suite's image loads and pushes): write 1 GiB, read it back, drop
    the page cache (the ranks' libraries are paged in again from disk), again."""
    path = Path(folder) / "churn.bin"
    block = os.urandom(1 << 20)
    while True:
        with open(path, "wb") as f:
            for _ in range(1024):
                f.write(block)
        with open(path, "rb") as f:
            while f.read(1 << 22):
                pass
        Path("/proc/sys/vm/drop_caches").write_text("3\n")


def _pressure(stop: threading.Event, rows: list[str]) -> None:
    """Each second: the time, then cpu, io and memory ``some avg10``."""
    while not stop.is_set():
        vals = [Path(f"/proc/pressure/{k}").read_text().split()[1].partition("=")[2] for k in ("cpu", "io", "memory")]
        rows.append(datetime.now(timezone.utc).strftime("%H:%M:%S.%f")[:10] + " " + " ".join(vals))
        stop.wait(1.0)


def decay(out: Path, hogs: int) -> int:
    """The pressure's fall when the work stops (a start-up that hangs): 30 s of N busy loops, then 40 s
    of quiet, each second's "seconds-since-start cpu io memory" (some avg10)."""
    rows: list[str] = []
    procs = [multiprocessing.Process(target=_hog, daemon=True) for _ in range(hogs)]
    for p in procs:
        p.start()
    t0 = time.monotonic()
    while time.monotonic() - t0 < 70:
        if time.monotonic() - t0 >= 30 and procs:
            for p in procs:
                p.kill()
            procs = []
        vals = [Path(f"/proc/pressure/{k}").read_text().split()[1].partition("=")[2] for k in ("cpu", "io", "memory")]
        rows.append(f"{time.monotonic() - t0:.1f} " + " ".join(vals))
        time.sleep(1.0)
    out.write_text("\n".join(rows) + "\n")
    print(f"record: {hogs} hogs for 30 s, then quiet; {len(rows)} samples -> {out}")
    return 0


def main(argv: list[str]) -> int:
    hogs = 3 * (os.cpu_count() or 1)
    churn = 0
    if "--churn" in argv:
        i = argv.index("--churn")
        churn = int(argv[i + 1])
        del argv[i:i + 2]
    if "--hogs" in argv:
        i = argv.index("--hogs")
        hogs = int(argv[i + 1])
        del argv[i:i + 2]
    if argv[:1] == ["--decay"] and len(argv) == 2:
        return decay(Path(argv[1]), hogs)
    if not argv:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    bed = Path(argv[0])
    out = Path(argv[1]) if len(argv) > 1 else ROOT / "tests" / "fixtures" / "vllm-cpu"
    cfg = bed / "cluster.toml"
    name = "tiny_vllm"

    def docker(node: str, *args: str) -> subprocess.CompletedProcess:
        sock = bed / "nodes" / node / "docker.sock"
        return subprocess.run(["docker", "-H", f"unix://{sock}", *args], capture_output=True, text=True)

    def sparktui(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "sparktui", args[0], "--config", str(cfg), *args[1:]],
                              capture_output=True, text=True, cwd=str(ROOT), timeout=timeout)

    rows: list[str] = []
    stop = threading.Event()
    sampler = threading.Thread(target=_pressure, args=(stop, rows), daemon=True)
    procs = [multiprocessing.Process(target=_hog, daemon=True) for _ in range(hogs)]
    for i in range(churn):
        (bed / f"churn{i}").mkdir(exist_ok=True)
        procs.append(multiprocessing.Process(target=_churn, args=(str(bed / f"churn{i}"),), daemon=True))
    sampler.start()
    for p in procs:
        p.start()
    t0 = time.monotonic()
    try:
        r = sparktui("launch", "--yes", "--json")
    finally:
        for p in procs:
            p.kill()
        stop.set()
        sampler.join()
        for i in range(churn):
            shutil.rmtree(bed / f"churn{i}", ignore_errors=True)
    took = time.monotonic() - t0
    if r.returncode != 0:
        sys.stderr.write(r.stdout[-3000:] + r.stderr[-3000:])
        raise SystemExit(f"record: the launch failed after {took:.0f} s")
    out.mkdir(parents=True, exist_ok=True)
    for node, rank in (("spark1", "head"), ("spark2", "rank1")):
        logs = docker(node, "logs", "--timestamps", name)
        stamped = sorted((logs.stdout + logs.stderr).splitlines(), key=lambda l: l.split(" ", 1)[0])
        log = "".join(l.split(" ", 1)[1] + "\n" if " " in l else "\n" for l in stamped)
        log = log.replace(str(bed / "models"), "/models").replace(str(bed), "/bed")
        (out / f"mp_starved_{rank}.log").write_text(log)
    (out / "mp_starved_pressure.txt").write_text("\n".join(rows) + "\n")
    sparktui("stop", "--yes", "--json", timeout=300)
    print(f"record: {hogs} hogs, ready after {took:.0f} s, {len(rows)} pressure samples -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
