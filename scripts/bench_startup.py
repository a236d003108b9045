"""Startup figures: `sparktui --help` wall time and `sparktui demo` time to first full paint.

First paint: the demo runs under a pseudo-terminal with SPARKTUI_EXIT_AFTER_FIRST_PAINT=1; the app
prints `sparktui-first-paint=<epoch>` once every node pane has containers and memory painted,
then exits.  Figures are medians over >= 5 runs.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import resource
import select
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUNS = 7
_MARK = re.compile(rb"sparktui-first-paint=([0-9.]+)")


def _env(state: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["SPARKTUI_STATE_DIR"] = state
    env.setdefault("TERM", "xterm-256color")
    return env


def help_time(state: str) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "sparktui", "--help"], env=_env(state), check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def first_paint_time(state: str, size: tuple[int, int] = (160, 48), timeout: float = 30.0) -> tuple[float, float]:
    """(wall seconds from spawn to first full paint, CPU seconds the child used in all)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", size[1], size[0], 0, 0))
    env = _env(state)
    env["SPARKTUI_EXIT_AFTER_FIRST_PAINT"] = "1"
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.time()
    proc = subprocess.Popen([sys.executable, "-m", "sparktui", "demo"], stdin=slave, stdout=slave, stderr=slave,
                            env=env, close_fds=True, start_new_session=True)
    os.close(slave)
    out = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # the child closed the terminal
                    break
                if not chunk:
                    break
                out += chunk
            elif proc.poll() is not None:
                break
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)
    m = _MARK.search(bytes(out))
    if not m:
        raise RuntimeError(f"no first-paint mark (rc={proc.returncode}): {bytes(out)[-300:]!r}")
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    return float(m.group(1)) - t0, cpu


def main(args: list[str]) -> list[dict]:
    with tempfile.TemporaryDirectory() as state:
        helps = [help_time(state) for _ in range(RUNS)]
        paints = [first_paint_time(state) for _ in range(RUNS)]
        load = os.getloadavg()[0]
    h = statistics.median(helps)
    p = statistics.median(w for w, _ in paints)
    c = statistics.median(c for _, c in paints)
    return [
        {"what": f"sparktui --help wall time (median of {RUNS})", "value": h, "unit": "s", "budget": "<= 0.3 s", "ok": h <= 0.3},
        {"what": f"demo time to first full paint, 160x48 (median of {RUNS})", "value": p, "unit": "s",
         "budget": "<= 1.0 s", "ok": p <= 1.0},
        # the CPU the whole demo process used (to first paint + exit): comparable on a busy machine
        {"what": f"demo CPU seconds, start to exit after first paint (load avg {load:.1f})", "value": c, "unit": "s",
         "budget": "-", "ok": None},
    ]


if __name__ == "__main__":
    for row in main(sys.argv[1:]):
        print(row)
