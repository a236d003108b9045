"""Node-side probe: worker processes, their env/threads/libnccl/logs, read from /proc on the node.

This file is both a module and a script.  Its source is sent to the node and run with the node's
own python3 (``python3 -c SOURCE <command> ...``) over the node's one connection, so it must stay
standard-library only and self-contained (no package imports).  Commands print one JSON object:

    scan  [--pids 1,2] [--run-dir DIR] [--sample SECONDS]   workers, threads (with CPU%), env, libnccl
    tail  PATH... [--head N] [--tail N]                        the start and end of log files
    connect HOST:PORT...                                       TCP connect checks (rendezvous, Ray)
    frdump PID[:RANK]... [--wait S] [--no-trigger] [--run-dir DIR]   Flight Recorder dumps (on demand
                                                               through the debug-info pipe; left in DIR)
"""

import hashlib
import json
import os
import re
import socket
import sys
import time

MARKER = "sparktui-probe"
ENV_KEEP = re.compile(r"^(NCCL_\w+|GLOO_\w+|TORCH_NCCL_\w+|TORCH_FR_\w+|VLLM_HOST_IP|VLLM_\w*NCCL\w*|MASTER_ADDR|"
                      r"MASTER_PORT|RANK|LOCAL_RANK|WORLD_SIZE|CUDA_VISIBLE_DEVICES|RAY_ADDRESS|TP_SOCKET_IFNAME|"
                      r"UCX_NET_DEVICES)$")
WORKER_CMD = re.compile(r"RayWorkerWrapper|VllmWorker|Worker_TP|EngineCore|ray::")
CONTAINER = re.compile(r"(?:docker[-/]|/docker/|containerd/)([0-9a-f]{64})")
NCCL_FILE = re.compile(r"nccl_(.+)_(\d+)\.log$")


def _read(path, limit=1 << 20):
    try:
        with open(path, "rb") as fh:
            return fh.read(limit)
    except OSError:
        return None


def _env(pid):
    raw = _read(f"/proc/{pid}/environ")
    if raw is None:
        return None
    out = {}
    for item in raw.split(b"\0"):
        k, sep, v = item.decode("utf-8", "replace").partition("=")
        if sep and ENV_KEEP.match(k):
            out[k] = v
    return out


def _libnccl(pid):
    raw = _read(f"/proc/{pid}/maps", 16 << 20)
    if not raw:
        return ""
    for line in raw.decode("utf-8", "replace").splitlines():
        path = line.split(None, 5)[-1] if len(line.split(None, 5)) == 6 else ""
        if "libnccl" in path.rsplit("/", 1)[-1] and ".so" in path:
            return path.strip()
    return ""


_SHA = {}


def _sha256(path, pid):
    if not path:
        return ""
    for candidate in (f"/proc/{pid}/root{path}", path):
        if candidate in _SHA:
            return _SHA[candidate]
        try:
            h = hashlib.sha256()
            with open(candidate, "rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    h.update(chunk)
            _SHA[candidate] = h.hexdigest()
            return _SHA[candidate]
        except OSError:
            continue
    return ""


def _threads(pid):
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        base = f"/proc/{pid}/task/{tid}"
        stat = _read(f"{base}/stat")
        if not stat:
            continue
        stat = stat.decode("utf-8", "replace")
        rest = stat[stat.rfind(")") + 2:].split()
        comm = (_read(f"{base}/comm") or b"").decode("utf-8", "replace").strip()
        wchan = (_read(f"{base}/wchan") or b"").decode("utf-8", "replace").strip()
        try:
            ticks = int(rest[11]) + int(rest[12])
        except (IndexError, ValueError):
            ticks = 0
        out[int(tid)] = [comm, rest[0] if rest else "?", "" if wchan == "0" else wchan, ticks]
    return out


def _alive(pid):
    """A zombie (exited, not yet reaped by its parent) is dead for our purposes."""
    raw = _read(f"/proc/{pid}/stat")
    if not raw:
        return False
    text = raw.decode("utf-8", "replace")
    return text[text.rfind(")") + 2:][:1] not in ("Z", "X", "")


def _caught_signals(pid):
    """Bitmask of signals the process handles (SigCgt): SIGUSR1 is safe to send only when caught."""
    raw = _read(f"/proc/{pid}/status") or b""
    for line in raw.decode("utf-8", "replace").splitlines():
        if line.startswith("SigCgt:"):
            try:
                return int(line.split()[1], 16)
            except (IndexError, ValueError):
                return 0
    return 0


def _container(pid):
    raw = _read(f"/proc/{pid}/cgroup") or b""
    m = CONTAINER.search(raw.decode("utf-8", "replace"))
    return m.group(1) if m else ""


def _log_files(pid, env, container):
    files = []
    for fd in (1, 2):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("/") and not target.startswith(("/dev/", "/proc/")):
            path = f"/proc/{pid}/root{target}" if container else target
            if os.path.isfile(path) and path not in files:
                files.append(path)
    tmpl = env.get("NCCL_DEBUG_FILE", "") if env else ""
    if tmpl:
        host = socket.gethostname().split(".")[0]
        path = tmpl.replace("%h", host).replace("%p", str(pid))
        path = f"/proc/{pid}/root{path}" if container else path
        if os.path.isfile(path) and path not in files:
            files.append(path)
    return files


def _is_worker(pid, cmdline, env, lib):
    if lib:
        return True
    if WORKER_CMD.search(cmdline):
        return True
    return bool(env) and "RANK" in env and any(k.startswith(("NCCL_", "MASTER_")) for k in env)


def scan(pids=None, run_dir="", sample=1.0):
    me = {os.getpid(), os.getppid()}
    found = []
    candidates = pids if pids else [int(p) for p in os.listdir("/proc") if p.isdigit()]
    denied = 0
    for pid in candidates:
        if pid in me:
            continue
        raw = _read(f"/proc/{pid}/cmdline")
        if raw is None or not _alive(pid):
            if pids:
                found.append({"pid": pid, "alive": False})
            continue
        cmdline = raw.replace(b"\0", b" ").decode("utf-8", "replace").strip()
        if not cmdline or MARKER in cmdline:
            continue  # this probe, or another node's copy of it on a shared kernel (test bed)
        env = _env(pid)
        if env is None:
            denied += 1
        lib = _libnccl(pid)
        if not pids and not _is_worker(pid, cmdline, env, lib):
            continue
        container = _container(pid)
        env = env or {}
        rank = env.get("RANK")
        world = env.get("WORLD_SIZE")
        found.append({"pid": pid, "alive": True, "cmdline": cmdline[:400], "env": env, "libnccl": lib,
                      "container": container, "rank": int(rank) if rank and rank.isdigit() else None,
                      "world_size": int(world) if world and world.isdigit() else None,
                      "log_files": _log_files(pid, env, container), "sigcgt": _caught_signals(pid)})
    # thread CPU over ``sample`` seconds: spinning (R, ~100 %) versus waiting (S, ~0 %)
    first = {w["pid"]: _threads(w["pid"]) for w in found if w.get("alive")}
    if first and sample > 0:
        time.sleep(sample)
    hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    for w in found:
        if not w.get("alive"):
            continue
        second = _threads(w["pid"])
        rows = []
        for tid, (comm, state, wchan, ticks) in sorted(second.items()):
            before = first.get(w["pid"], {}).get(tid)
            cpu = round(100.0 * (ticks - before[3]) / hz / sample, 1) if before and sample > 0 else None
            rows.append([tid, comm, state, wchan, ticks, cpu])
        w["threads"] = rows
        w["libnccl_sha256"] = _sha256(w["libnccl"], w["pid"])
    logs = []
    if run_dir and os.path.isdir(run_dir):
        for name in sorted(os.listdir(run_dir)):
            path = os.path.join(run_dir, name)
            if not name.endswith(".log") or not os.path.isfile(path):
                continue
            st = os.stat(path)
            m = NCCL_FILE.search(name)
            pid = int(m.group(2)) if m else None
            logs.append({"path": path, "mtime": st.st_mtime, "size": st.st_size, "pid": pid,
                         "alive": _alive(pid) if pid else None})
    return {MARKER: 1, "hostname": socket.gethostname(), "time": time.time(), "workers": found,
            "run_dir_logs": logs, "env_denied": denied}


def _mtime_size(path):
    try:
        st = os.stat(path)
        return st.st_mtime, st.st_size
    except OSError:
        return None


def _started(pid):
    """A process's start time (epoch seconds), from /proc/PID/stat and the boot time."""
    stat = _read(f"/proc/{pid}/stat")
    boot = _read("/proc/stat")
    if not stat or not boot:
        return None
    try:
        ticks = int(stat.decode("utf-8", "replace").rsplit(")", 1)[1].split()[19])
        btime = next(int(l.split()[1]) for l in boot.decode().splitlines() if l.startswith("btime "))
    except (IndexError, ValueError, StopIteration):
        return None
    hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    return btime + ticks / hz


def _looks_like_dump(data):
    # torch writes a pickle (protocol 2+) or JSON: nothing else named like a dump leaves the node
    return data[:1] == b"\x80" or data.lstrip()[:1] == b"{"


FR_FILE = re.compile(r"^(?:fr_|nccl_trace_rank_)(\d{1,5})$")  # prearm's prefix, torch's default


def _run_dir_dumps(run_dir, live_pids, covered, limit):
    """Dumps a rank left in the run folder (written on a timeout or an NCCL error, often by a rank that
    is gone now), for the ranks no live process answered for.  Only this run's: newer than the oldest
    live worker's start, or, with none alive, within 30 min of the newest NCCL debug log there."""
    import base64

    out = []
    try:
        names = sorted(os.listdir(run_dir))
    except OSError:
        return out
    starts = [s for s in (_started(p) for p in live_pids) if s]
    logs = [m[0] for m in (_mtime_size(os.path.join(run_dir, n)) for n in names if n.endswith(".log")) if m]
    since = min(starts) - 60 if starts else (max(logs) - 1800 if logs else None)
    for name in names:
        m = FR_FILE.match(name)
        if not m or int(m.group(1)) in covered:
            continue
        path = os.path.join(run_dir, name)
        st = _mtime_size(path)
        if st is None or not os.path.isfile(path) or os.path.islink(path):
            continue
        item = {"pid": None, "rank": int(m.group(1)), "path": path, "triggered": False}
        if since is None or st[0] < since:
            item["error"] = f"{path}: not from this run"
        elif st[1] > limit:
            item["error"] = f"{path}: over {limit >> 20} MiB"
        else:
            data = _read(path, limit + 1) or b""
            if _looks_like_dump(data):
                item["data"] = base64.b64encode(data[:limit]).decode("ascii")
            else:
                item["error"] = f"{path}: not a Flight Recorder dump"
        covered.add(item["rank"])
        out.append(item)
    return out


def frdump(pids, wait=8.0, limit=16 << 20, trigger=True, run_dir=""):
    """Ask each armed rank for a Flight Recorder dump now and read it back.

    torch (ProcessGroupNCCL, buffer > 0, monitoring on) polls the FIFO
    ``$TORCH_NCCL_DEBUG_INFO_PIPE_FILE<rank>.pipe``; a write there makes it dump its ring buffer to
    ``$TORCH_FR_DUMP_TEMP_FILE<rank>`` (old name TORCH_NCCL_DEBUG_INFO_TEMP_FILE).  The write never
    blocks (O_NONBLOCK: no reader means ENXIO) and the wait is bounded.  A dump already there (written
    on a timeout) is returned too."""
    import base64
    import stat as st_mod

    items = []
    for spec in pids:
        # "PID" or "PID:RANK": the caller may know a rank the env does not say (Ray workers have no RANK)
        pid_s, _, rank = str(spec).partition(":")
        if not pid_s.isdigit():
            continue
        pid = int(pid_s)
        env = _env(pid) or {}
        rank = rank or env.get("RANK", "")
        if not rank.isdigit():
            continue
        root = f"/proc/{pid}/root" if _container(pid) else ""
        prefix = env.get("TORCH_FR_DUMP_TEMP_FILE") or env.get("TORCH_NCCL_DEBUG_INFO_TEMP_FILE") or "/tmp/nccl_trace_rank_"
        buf = env.get("TORCH_FR_BUFFER_SIZE") or env.get("TORCH_NCCL_TRACE_BUFFER_SIZE") or "0"
        item = {"pid": pid, "rank": int(rank), "path": root + prefix + rank, "triggered": False}
        item["before"] = _mtime_size(item["path"])
        pipe = env.get("TORCH_NCCL_DEBUG_INFO_PIPE_FILE", "")
        if trigger and pipe and buf.isdigit() and int(buf) > 0:
            path = root + pipe + rank + ".pipe"
            try:
                # only ever a FIFO: opening some device files for writing has effects of its own
                if not st_mod.S_ISFIFO(os.lstat(path).st_mode):
                    raise OSError("not a FIFO")
                fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
                try:
                    if not st_mod.S_ISFIFO(os.fstat(fd).st_mode):
                        raise OSError("not a FIFO")
                    os.write(fd, b"1\n")
                    item["triggered"] = True
                finally:
                    os.close(fd)
            except OSError as exc:
                item["error"] = f"{path}: {exc.strerror or exc}"
        items.append(item)
    deadline = time.time() + wait
    last = {}
    while time.time() < deadline:
        pending = False
        for it in items:
            now = _mtime_size(it["path"])
            if it["triggered"] and (now is None or now == it["before"]):
                pending = True  # not rewritten yet
            elif now is not None and last.get(it["path"]) != now:
                pending = True  # still growing: read it once its size holds still
            last[it["path"]] = now
        if not pending:
            break
        time.sleep(0.3)
    for it in items:
        it.pop("before", None)
        now = _mtime_size(it["path"])
        started = _started(it["pid"])
        if now is not None and started is not None and now[0] < started - 1:
            # left by an earlier run in the same folder: not this process's story
            it["error"] = f"{it['path']}: older than the process (an earlier run's dump)"
            continue
        data = _read(it["path"], limit + 1)
        if data is None:
            it.setdefault("error", f"{it['path']}: no dump written")
        elif len(data) > limit:
            it["error"] = f"{it['path']}: over {limit >> 20} MiB"
        elif not _looks_like_dump(data):
            it["error"] = f"{it['path']}: not a Flight Recorder dump"
        else:
            it["data"] = base64.b64encode(data).decode("ascii")
    if run_dir:
        covered = {it["rank"] for it in items if "data" in it}
        items += _run_dir_dumps(run_dir, [it["pid"] for it in items], covered, limit)
    return {MARKER: 1, "dumps": items}


def tail(paths, head=200, tail_n=400):
    out = {}
    for path in paths:
        try:
            with open(path, "rb") as fh:
                data = fh.read()
        except OSError as exc:
            out[path] = {"error": exc.strerror or str(exc)}
            continue
        lines = data.decode("utf-8", "replace").splitlines()
        if len(lines) > head + tail_n:
            keep = lines[:head] + [f"### ... {len(lines) - head - tail_n} lines skipped ..."] + lines[-tail_n:]
        else:
            keep = lines
        out[path] = {"lines": keep, "total": len(lines)}
    return {MARKER: 1, "files": out}


def connect(targets, timeout=2.0):
    out = []
    for t in targets:
        host, _, port = t.rpartition(":")
        start = time.time()
        try:
            with socket.create_connection((host, int(port)), timeout=timeout):
                out.append({"target": t, "ok": True, "ms": round(1000 * (time.time() - start), 1)})
        except (OSError, ValueError) as exc:
            out.append({"target": t, "ok": False, "detail": str(exc)[:200]})
    return {MARKER: 1, "connect": out}


def main(argv):
    cmd, args = argv[0], argv[1:]

    def opt(name, default=None):
        if name in args:
            i = args.index(name)
            val = args[i + 1]
            del args[i:i + 2]
            return val
        return default

    if cmd == "scan":
        pids = opt("--pids")
        result = scan([int(p) for p in pids.split(",") if p] if pids else None, opt("--run-dir", ""),
                      float(opt("--sample", "1.0")))
    elif cmd == "tail":
        head, tl = int(opt("--head", "200")), int(opt("--tail", "400"))
        result = tail(args, head, tl)
    elif cmd == "frdump":
        wait = float(opt("--wait", "8"))  # before the pids: "--wait 8" must not read as a pid
        trigger = "--no-trigger" not in args
        run_dir = opt("--run-dir", "")
        result = frdump([p for p in args if p[:1].isdigit()], wait, trigger=trigger, run_dir=run_dir)
    elif cmd == "connect":
        result = connect(args, float(opt("--timeout", "2.0")))
    else:
        result = {MARKER: 1, "error": f"unknown probe command {cmd!r}"}
    sys.stdout.write(json.dumps(result))
    return 0


if __name__ == "__main__" and len(sys.argv) > 1:
    sys.exit(main(sys.argv[1:]))


def source() -> str:
    """This file's text, to run on a node with ``python3 -c``."""
    with open(__file__, encoding="utf-8") as fh:
        return fh.read()
