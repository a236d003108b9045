"""Process and mount helpers for the test bed: find what belongs to a bed, stop it, unmount it."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import psutil

MARK = "SPARKTUI_TESTBED_NODE"


def read_pid(pidfile: Path) -> int | None:
    try:
        pid = int(pidfile.read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if psutil.pid_exists(pid) else None


def alive(pid: int | None) -> bool:
    if pid is None:
        return False
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _kill_many(procs: list[psutil.Process], sig: int) -> None:
    for p in procs:
        try:
            p.send_signal(sig)
        except psutil.Error:
            pass


def kill_tree(pid: int | None, *, term_wait: float = 0.0) -> None:
    """Kill a process and every descendant (sshd listener + its per-connection children)."""
    if pid is None:
        return
    try:
        root = psutil.Process(pid)
        procs = root.children(recursive=True) + [root]
    except psutil.Error:
        return
    if term_wait:
        _kill_many(procs, signal.SIGTERM)
        psutil.wait_procs(procs, timeout=term_wait)
    _kill_many(procs, signal.SIGKILL)
    psutil.wait_procs(procs, timeout=5)


def stop_gracefully(pid: int | None, timeout: float = 20.0) -> None:
    """SIGTERM, wait, then SIGKILL (dockerd needs the time to detach from live containers)."""
    if pid is None:
        return
    try:
        p = psutil.Process(pid)
        p.terminate()
        p.wait(timeout)
    except psutil.TimeoutExpired:
        kill_tree(pid)
    except psutil.Error:
        pass


def _belongs(p: psutil.Process, prefix: str) -> bool:
    try:
        if any(prefix in a for a in p.cmdline()):
            return True
        return p.environ().get(MARK, "").startswith(prefix)
    except psutil.Error:
        return False


def bed_processes(prefix: str) -> list[psutil.Process]:
    """Every process whose command line names a path under ``prefix`` or that an sshd of the
    bed started (marked through sshd's SetEnv)."""
    me = os.getpid()
    return [p for p in psutil.process_iter() if p.pid != me and _belongs(p, prefix)]


def kill_bed_processes(prefix: str) -> int:
    """Kill leftovers, including the workloads under any containerd shim (a shim killed alone
    would orphan its container's processes)."""
    procs = bed_processes(prefix)
    everything: dict[int, psutil.Process] = {}
    for p in procs:
        everything[p.pid] = p
        try:
            for c in p.children(recursive=True):
                everything[c.pid] = c
        except psutil.Error:
            pass
    allp = list(everything.values())
    _kill_many(allp, signal.SIGKILL)
    psutil.wait_procs(allp, timeout=5)
    return len(allp)


def mounts_under(prefix: str) -> list[str]:
    out = []
    with open("/proc/self/mountinfo", encoding="utf-8") as fh:
        for line in fh:
            mp = line.split()[4].replace("\\040", " ")
            if mp == prefix.rstrip("/") or mp.startswith(prefix):
                out.append(mp)
    return out


def unmount_all(prefix: str) -> None:
    for _ in range(3):
        mps = sorted(set(mounts_under(prefix)), key=len, reverse=True)
        if not mps:
            return
        for mp in mps:
            if subprocess.run(["umount", mp], capture_output=True).returncode != 0:
                subprocess.run(["umount", "-l", mp], capture_output=True)


def wait_for(cond, timeout: float, what: str, interval: float = 0.05) -> None:
    """Poll a cheap condition (a socket, a pid) until true; raise with ``what`` on timeout."""
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)
