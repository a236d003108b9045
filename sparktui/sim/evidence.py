"""Hang evidence on sim nodes: what the investigation's probes read, in the real formats.

``SimCluster`` calls ``register(node)`` for every node it makes.  The handlers answer the same argument lists
the investigation sends to a real node:

- ``python3 -c <probes/procfs.py> scan|tail|connect`` -> the probe's JSON (workers, /proc thread
  rows with the NCCL thread names of fixtures/nccl-2gpu/*.threads.txt, env, libnccl),
- ``python3 -c <probes/ras.py> ras`` -> a RAS answer laid out like fixtures/nccl-2gpu/*.ras.json|txt,
- ``py-spy dump --pid P --json`` -> py-spy's JSON (fixtures/nccl-2gpu/*.pyspy.rank*.json layout),
- ``kill``, ``ping``, ``dmesg`` as those tools print.
The facts come from the scenario (sim/scripts/*.toml): ranks, pids, phases (``spin``/``stall``)
and the lines each rank has logged so far; everything else is the format of real output.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING

from ..probes import procfs, ras as ras_probe

if TYPE_CHECKING:
    from .node import SimNode

LIBNCCL = "/usr/local/lib/python3.12/dist-packages/nvidia/nccl/lib/libnccl.so.2"


def _phase(node: "SimNode") -> str:
    scene, _ = node.cluster.live_scene()
    t = node.now_t()
    current = ""
    for ph in scene.phases.get(node.name, []):
        if ph.at <= t:
            current = ph.name
    return current


def _lines(node: "SimNode", source: str) -> list[str]:
    scene, _ = node.cluster.live_scene()
    t = node.now_t()
    return [ln.text for ln in scene.lines.get(node.name, []) if ln.t <= t and ln.source == source]


def _nccl_started(node: "SimNode") -> bool:
    spec = node.spec
    return bool(spec.worker_log) and any("NCCL INFO" in l for l in _lines(node, spec.worker_log))


def _container_id(node: "SimNode") -> str:
    for c in node.containers():
        if c.name == node.spec.container:
            return c.id
    return ""


def _threads(node: "SimNode", pid: int) -> list[list]:
    """Thread rows (tid, comm, state, wchan, ticks, cpu%) like /proc/PID/task/* on a stuck rank."""
    spin = _phase(node) == "spin"
    rows = [[pid, "ray::RayWorkerW", "R" if spin else "S", "" if spin else "futex_do_wait",
             int(node.now_t() * (100 if spin else 1)), 99.7 if spin else 0.0]]
    names = ["pt_nccl_watchdg", "pt_nccl_heartbt", "NCCL RAS", "NCCL Service 0", "NCCL UDS Servic",
             "NCCL Progress 1", "cuda-EvtHandlr"] if _nccl_started(node) else ["cuda-EvtHandlr"]
    for i, name in enumerate(names, start=1):
        wchan = "poll_schedule_timeout.constprop.0" if "NCCL" in name or "cuda" in name else "futex_do_wait"
        rows.append([pid + i, name, "S", wchan, 3 * i, 0.0])
    rows += [[pid + 20 + i, "ray::RayWorkerW", "S", "futex_do_wait", 1, 0.0] for i in range(6)]
    return rows


def _scan(node: "SimNode") -> dict:
    spec = node.spec
    workers = []
    if spec.rank is not None and node.now_t() >= 12.0:
        env = {"NCCL_SOCKET_IFNAME": spec.ifname, "GLOO_SOCKET_IFNAME": spec.ifname, "VLLM_HOST_IP": spec.ip,
               "NCCL_IB_HCA": f"={spec.hca0},{spec.hca1}", "NCCL_DEBUG": "INFO", "NCCL_RAS_ENABLE": "1"}
        workers.append({"pid": spec.pid, "alive": True, "cmdline": "ray::RayWorkerWrapper.execute_method",
                        "env": env, "libnccl": LIBNCCL if _nccl_started(node) else "",
                        "libnccl_sha256": hashlib.sha256(b"nccl-2.28.9-pip").hexdigest() if _nccl_started(node) else "",
                        "container": _container_id(node), "rank": None, "world_size": None,
                        "log_files": [spec.worker_log] if spec.worker_log else [], "sigcgt": 0,
                        "threads": _threads(node, spec.pid)})
    return {procfs.MARKER: 1, "hostname": node.name, "time": node.cluster.start + node.now_t(), "workers": workers,
            "run_dir_logs": [], "env_denied": 0}


def _tail(node: "SimNode", paths: list[str]) -> dict:
    files = {}
    for p in paths:
        if p == node.spec.worker_log:
            lines = _lines(node, p)
            files[p] = {"lines": lines[-400:], "total": len(lines)}
        else:
            files[p] = {"error": "No such file or directory"}
    return {procfs.MARKER: 1, "files": files}


def _ras_json(node: "SimNode") -> str:
    scene, _ = node.cluster.live_scene()
    specs = [s for s in scene.specs if s.rank is not None]
    ranks = []
    for s in sorted(specs, key=lambda s: s.rank):
        other = node.cluster.node(s.name)
        done = _phase(other) == "spin"
        ranks.append({"rank": s.rank, "host": s.ip, "pid": s.pid, "cuda_dev": 0, "nvml_dev": 0,
                      "status": {"init_state": 0 if done else 7, "async_error": 0, "finalize_called": False,
                                 "destroy_flag": False, "abort_flag": False},
                      "collective_counts": {"Broadcast": 0, "Reduce": 0, "AllGather": 0, "ReduceScatter": 0,
                                            "AllReduce": 1 if done else 0}})
    body = {"nccl_version": "2.28.9", "cuda_runtime_version": 13000, "cuda_driver_version": 13000,
            "timestamp": "", "communicators_count": 1,
            "communicators": [{"hash": "0xfcdd0a2b5e1d7c31", "secondary_hash": "0x0:0x0", "size": len(ranks),
                               "ranks_count": len(ranks), "missing_ranks_count": 0, "ranks": ranks, "missing_ranks": []}],
            "ras": {"collection_time_sec": 0.0, "timeouts_count": 0}}
    return "SERVER PROTOCOL 2\nOK\nOK\n" + json.dumps(body, indent=2) + "\n"


def _ras_text(node: "SimNode") -> str:
    st = json.loads(_ras_json(node).split("\n", 3)[3])
    comm = st["communicators"][0]
    counts = {r["rank"]: r["collective_counts"]["AllReduce"] for r in comm["ranks"]}
    init = any(r["status"]["init_state"] for r in comm["ranks"])
    mismatch = len(set(counts.values())) > 1
    out = ["SERVER PROTOCOL 2", "OK", "NCCL version 2.28.9 compiled with CUDA 13.0",
           "CUDA runtime version 13000, driver version 13000", "", "Job summary", "===========", "",
           "  Nodes  Processes         GPUs  Processes     GPUs",
           "(total)   per node  per process    (total)  (total)",
           f"{len(counts):>7} {1:>10} {1:>12} {len(counts):>10} {len(counts):>8}", "",
           "Communicators... (0.000s)", "=============", "",
           "Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors",
           "    #  in group  per comm  per node  per comm  in group",
           f"    0         1 {len(counts):>9}         1 {len(counts):>9} {len(counts):>9} {'INIT' if init else 'RUNNING':>9}"
           f"  {'MISMATCH' if mismatch else 'OK':>6}", "", "Errors", "======", "", "Warnings", "========", ""]
    if mismatch:
        out.append(f"#0-0 ({comm['hash'][2:]}) MISMATCH")
        out.append("  Communicator ranks have different AllReduce operation counts")
        for r in comm["ranks"]:
            out.append(f"  Rank {r['rank']} has launched up to operation {counts[r['rank']]} -- GPU 0 managed by "
                       f"process {r['pid']} on node {r['host']}")
    return "\n".join(out) + "\n\n"


def _frame(name: str, path: str, line: int, entry: bool = False) -> dict:
    return {"name": name, "filename": path, "module": None, "short_filename": path.split("dist-packages/")[-1],
            "line": line, "locals": None, "is_entry": False, "is_shim_entry": entry}


PKG = "/usr/local/lib/python3.12/dist-packages/"


def _pyspy(node: "SimNode", pid: int) -> str:
    spin = _phase(node) == "spin"
    if spin:  # pynccl's warm-up all_reduce, then the stream sync that never returns
        frames = [_frame("synchronize", PKG + "torch/cuda/streams.py", 105),
                  _frame("__init__", PKG + "vllm/distributed/device_communicators/pynccl.py", 147)]
    else:  # still inside ncclCommInitRank (transport connect)
        frames = [_frame("ncclCommInitRank", PKG + "vllm/distributed/device_communicators/pynccl_wrapper.py", 401),
                  _frame("__init__", PKG + "vllm/distributed/device_communicators/pynccl.py", 128)]
    frames += [_frame("__init__", PKG + "vllm/distributed/device_communicators/cuda_communicator.py", 58),
               _frame("init_model_parallel_group", PKG + "vllm/distributed/parallel_state.py", 1008),
               _frame("init_worker_distributed_environment", PKG + "vllm/v1/worker/gpu_worker.py", 687),
               _frame("execute_method", PKG + "vllm/executor/ray_utils.py", 132, entry=True)]
    return json.dumps([{"pid": pid, "thread_id": 281473161527328, "thread_name": "MainThread", "os_thread_id": pid,
                        "active": spin, "owns_gil": False, "frames": frames, "process_info": None}], indent=2) + "\n"


def _python3(prev):
    def handler(node: "SimNode", argv: list[str], stdin):
        if len(argv) >= 4 and argv[1] == "-c" and procfs.MARKER in argv[2] and "def scan" in argv[2]:
            cmd, args = argv[3], argv[4:]
            if cmd == "scan":
                return 0, json.dumps(_scan(node)), b""
            if cmd == "tail":
                paths = [a for a in args if not a.startswith("--") and not a.isdigit()]
                return 0, json.dumps(_tail(node, paths)), b""
            if cmd == "connect":
                targets = [a for a in args if ":" in a]
                return 0, json.dumps({procfs.MARKER: 1, "connect": [{"target": t, "ok": True, "ms": 0.2} for t in targets]}), b""
        if len(argv) >= 4 and argv[1] == "-c" and "VERBOSE STATUS" in argv[2] and argv[3] == "ras":
            if not _nccl_started(node):
                return 0, "### connect failed: [Errno 111] Connection refused\n", b""
            fmt = argv[argv.index("--format") + 1] if "--format" in argv else "json"
            return 0, _ras_json(node) if fmt == "json" else _ras_text(node), b""
        if prev is not None:
            return prev(node, argv, stdin)
        return 127, b"", f"bash: {argv[0]}: command not found\n".encode()
    return handler


def _pyspy_cmd(node: "SimNode", argv: list[str], stdin):
    if len(argv) < 2 or argv[1] != "dump" or "--pid" not in argv:
        return 2, b"", b"error: unsupported py-spy invocation\n"
    pid = int(argv[argv.index("--pid") + 1])
    if pid != node.spec.pid:
        return 1, b"", f"Error: Failed to find process {pid}\n".encode()
    return 0, _pyspy(node, pid), b""


def _kill(node: "SimNode", argv: list[str], stdin):
    pid = argv[-1]
    if pid.isdigit() and int(pid) == node.spec.pid:
        return 0, b"", b""
    return 1, b"", f"kill: ({pid}) - No such process\n".encode()


def _ping(node: "SimNode", argv: list[str], stdin):
    ip, size = argv[-1], argv[argv.index("-s") + 1] if "-s" in argv else "56"
    body = "".join(f"{int(size) + 8} bytes from {ip}: icmp_seq={i} ttl=64 time=0.21{i} ms\n" for i in (1, 2, 3))
    return 0, (f"PING {ip} ({ip}) {size}({int(size) + 28}) bytes of data.\n{body}\n--- {ip} ping statistics ---\n"
               "3 packets transmitted, 3 received, 0% packet loss, time 2003ms\n"
               "rtt min/avg/max/mdev = 0.211/0.212/0.213/0.001 ms\n"), b""


def _docker(prev):
    """``docker ps -q --no-trunc`` (which containers are this node's own); the rest as before."""
    def handler(node: "SimNode", argv: list[str], stdin):
        if argv[1:2] == ["ps"] and "-q" in argv:
            full = "--no-trunc" in argv
            ids = [c.id if full else c.short_id for c in node.containers() if c.state.value == "running"]
            return 0, "".join(i + "\n" for i in ids), b""
        return prev(node, argv, stdin) if prev else (127, b"", b"bash: docker: command not found\n")
    return handler


def register(node: "SimNode") -> None:
    node.register_command("docker", _docker(node.commands.get("docker")))
    node.register_command("python3", _python3(node.commands.get("python3")))
    node.register_command("py-spy", _pyspy_cmd)
    node.register_command("kill", _kill)
    node.register_command("ping", _ping)
    node.register_command("dmesg", lambda n, a, s: (0, b"", b""))
    _ = ras_probe  # the RAS script is recognised by its protocol text above
