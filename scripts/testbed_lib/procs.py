"""Process and mount helpers for the test bed, straight from /proc (no third-party modules: the
script must run under whichever python3 root's PATH finds).

What the bed owns is what it started, never what merely names its folder: the daemons it starts are
recorded in ``owned.json`` in the bed's folder (pid with its start time, session and process group)
and carry ``DAEMON_MARK`` in their environment (dockerd hands it to containerd and every shim); what
a node's sshd starts carries ``MARK`` (sshd's SetEnv).  ``down`` ends those and their descendants.
A user's editor, tmux or ``sparktui --config <bed>/cluster.toml`` carries neither and is left alone."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import time
from pathlib import Path

MARK = "SPARKTUI_TESTBED_NODE"  # set by a node's sshd (SetEnv) on every session: <node dir>/
DAEMON_MARK = "SPARKTUI_TESTBED_DAEMON"  # set on the daemons the bed starts, inherited by their children
OWNED = "owned.json"


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError:
        return b""


def _fields(pid: int) -> list[str] | None:
    """/proc/PID/stat from field 3 (state) on, or None when the process is gone."""
    raw = _read(f"/proc/{pid}/stat").decode(errors="replace")
    if not raw:
        return None
    return raw[raw.rfind(")") + 2:].split()


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, ppid) of a process, or None when it is gone."""
    f = _fields(pid)
    return (f[0], int(f[1])) if f else None


def start_time(pid: int) -> int | None:
    """Clock ticks after boot when the process started: with the pid, who it is (pids are reused)."""
    f = _fields(pid)
    return int(f[19]) if f and len(f) > 19 else None


def session_of(pid: int) -> int | None:
    f = _fields(pid)
    return int(f[3]) if f and len(f) > 3 else None


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


def _children() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for p in pids():
        st = _stat(p)
        if st is not None:
            children.setdefault(st[1], []).append(p)
    return children


def descendants(pid: int, children: dict[int, list[int]] | None = None) -> list[int]:
    children = _children() if children is None else children
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


# ------------------------------------------------------------------ what the bed started

def record(bed_dir: Path, pid: int | None, what: str) -> None:
    """Note a process the bed started (pid, start time, session, process group) in owned.json;
    entries whose process is gone (or whose pid now names another process) are dropped."""
    if pid is None or not alive(pid):
        return
    path = bed_dir / OWNED
    with open(bed_dir / ".owned.lock", "w") as lock:  # nodes start in parallel
        fcntl.flock(lock, fcntl.LOCK_EX)
        rows = [r for r in recorded(bed_dir) if _same(r) and r["pid"] != pid]
        rows.append({"pid": pid, "start": start_time(pid), "sid": session_of(pid), "pgid": os.getpgid(pid),
                     "what": what})
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(rows, indent=1) + "\n")
        tmp.rename(path)


def recorded(bed_dir: Path) -> list[dict]:
    try:
        rows = json.loads((bed_dir / OWNED).read_text())
    except (OSError, ValueError):
        return []
    return [r for r in rows if isinstance(r, dict) and isinstance(r.get("pid"), int)] if isinstance(rows, list) else []


def _same(row: dict) -> bool:
    """The recorded process is still the one running under that pid."""
    return alive(row["pid"]) and start_time(row["pid"]) == row.get("start")


def env_mark(pid: int, var: str = MARK) -> str | None:
    for item in _read(f"/proc/{pid}/environ").split(b"\0"):
        if item.startswith(var.encode() + b"="):
            return item.split(b"=", 1)[1].decode(errors="replace")
    return None


def node_mark(pid: int) -> str | None:
    return env_mark(pid, MARK)


def marked(prefix: str, var: str = MARK) -> list[int]:
    """Processes whose environment mark ``var`` names a folder under ``prefix``."""
    return [p for p in pids() if (env_mark(p, var) or "").startswith(prefix)]


def _ancestors(pid: int) -> set[int]:
    out: set[int] = set()
    while pid > 1 and pid not in out:
        out.add(pid)
        st = _stat(pid)
        if st is None:
            break
        pid = st[1]
    return out


def bed_processes(bed_dir: Path) -> list[int]:
    """Every process the bed started and is still running: its recorded daemons, the processes in
    their sessions, everything carrying one of its marks, and all their descendants.  Never this
    process or one of its ancestors (``down`` run from inside a node's session)."""
    prefix = str(bed_dir) + "/"
    live = [r for r in recorded(bed_dir) if _same(r)]
    sids = {r["sid"] for r in live if r.get("sid") == r["pid"]}  # sessions the daemons lead
    roots = {r["pid"] for r in live}
    roots.update(marked(prefix, MARK))
    roots.update(marked(prefix, DAEMON_MARK))
    if sids:
        roots.update(p for p in pids() if session_of(p) in sids)
    children = _children()
    owned = set(roots)
    for p in roots:
        owned.update(descendants(p, children))
    return sorted(owned - _ancestors(os.getpid()))


def naming(prefix: str) -> list[tuple[int, str]]:
    """Processes whose command line names a path under ``prefix``, once the bed's own are gone:
    what ``down`` does not own and leaves alone, said in one line."""
    pre = prefix.encode()
    me = _ancestors(os.getpid())
    out = []
    for p in pids():
        if p in me:
            continue
        cmd = _read(f"/proc/{p}/cmdline")
        if pre in cmd:
            text = cmd.replace(b"\0", b" ").decode(errors="replace").strip()
            out.append((p, "".join(c if c.isprintable() else "?" for c in text)[:100]))  # inert on a terminal
    return out


def kill_bed_processes(bed_dir: Path) -> int:
    """SIGKILL what the bed started and is left after its daemons were stopped, including the
    workloads under any containerd shim (a shim killed alone would orphan its container's
    processes).  Stop the owned first so none starts a new child while the tree is collected."""
    owned = bed_processes(bed_dir)
    _signal(owned, signal.SIGSTOP)
    owned = sorted(set(owned) | set(bed_processes(bed_dir)))
    _signal(owned, signal.SIGKILL)
    _wait_gone(owned, 5)
    return len(owned)


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
