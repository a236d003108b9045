"""Process and mount helpers for the test bed, straight from /proc (no third-party modules: the
script must run under whichever python3 root's PATH finds)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

MARK = "SPARKTUI_TESTBED_NODE"


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError:
        return b""


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, ppid) of a process, or None when it is gone."""
    raw = _read(f"/proc/{pid}/stat").decode(errors="replace")
    if not raw:
        return None
    rest = raw[raw.rfind(")") + 2:].split()
    return rest[0], int(rest[1])


def pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def alive(pid: int | None) -> bool:
    if pid is None:
        return False
    st = _stat(pid)
    return st is not None and st[0] != "Z"


def read_pid(pidfile: Path) -> int | None:
    try:
        pid = int(pidfile.read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if alive(pid) else None


def descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for p in pids():
        st = _stat(p)
        if st is not None:
            children.setdefault(st[1], []).append(p)
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def _signal(pids_: list[int], sig: int) -> None:
    for p in pids_:
        try:
            os.kill(p, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _wait_gone(pids_: list[int], timeout: float) -> bool:
    end = time.monotonic() + timeout
    while any(alive(p) for p in pids_):
        if time.monotonic() > end:
            return False
        time.sleep(0.02)
    return True


def kill_tree(pid: int | None) -> None:
    """SIGKILL a process and every descendant (sshd listener + its per-connection children)."""
    if pid is None or not alive(pid):
        return
    _signal([pid], signal.SIGSTOP)  # no new children while we collect them
    allp = [pid, *descendants(pid)]
    _signal(allp, signal.SIGKILL)
    _wait_gone(allp, 5)


def stop_gracefully(pid: int | None, timeout: float = 20.0) -> None:
    """SIGTERM, wait, then SIGKILL (dockerd needs the time to detach from live containers)."""
    if pid is None or not alive(pid):
        return
    _signal([pid], signal.SIGTERM)
    if not _wait_gone([pid], timeout):
        kill_tree(pid)


def _belongs(pid: int, prefix: str) -> bool:
    pre = prefix.encode()
    if any(pre in a for a in _read(f"/proc/{pid}/cmdline").split(b"\0")):
        return True
    for var in _read(f"/proc/{pid}/environ").split(b"\0"):
        if var.startswith(MARK.encode() + b"=" + pre):
            return True
    return False


def bed_processes(prefix: str) -> list[int]:
    """Processes whose command line names a path under ``prefix``, or that an sshd of the bed
    started (marked through sshd's SetEnv)."""
    me = os.getpid()
    return [p for p in pids() if p != me and _belongs(p, prefix)]


def node_mark(pid: int) -> str | None:
    for var in _read(f"/proc/{pid}/environ").split(b"\0"):
        if var.startswith(MARK.encode() + b"="):
            return var.split(b"=", 1)[1].decode(errors="replace")
    return None


def kill_bed_processes(prefix: str) -> int:
    """Kill leftovers, including the workloads under any containerd shim (a shim killed alone
    would orphan its container's processes)."""
    found = bed_processes(prefix)
    allp = set(found)
    for p in found:
        allp.update(descendants(p))
    _signal(sorted(allp), signal.SIGKILL)
    _wait_gone(sorted(allp), 5)
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
