"""Everything the investigation reads from one node, as async calls on its Node handle.

The /proc and RAS readers run on the node itself (their stdlib sources are sent with
``python3 -c``), so an SSH node costs one round trip per probe and nothing is installed there.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from ..diagnosis.evidence import Worker
from ..nodes.base import NodeError
from . import procfs, ras

if TYPE_CHECKING:
    from ..nodes.base import Node

PYTHON = "python3"
GPU_QUERY = "--query-gpu=index,utilization.gpu,power.draw,memory.used,clocks.sm"


def script_argv(module, *args: str) -> list[str]:
    return [PYTHON, "-c", module.source(), *args]


class ProbeError(Exception):
    pass


async def _json(node: "Node", argv: list[str], timeout: float) -> dict[str, Any]:
    try:
        res = await node.run(argv, timeout=timeout)
    except NodeError as exc:
        raise ProbeError(str(exc)) from None
    if res.returncode == 127:
        raise ProbeError(f"{argv[0]} not found on {node.name}")
    try:
        data = json.loads(res.text)
    except json.JSONDecodeError:
        msg = (res.err_text or res.text).strip().splitlines()
        raise ProbeError(f"probe failed on {node.name} (exit {res.returncode}): {msg[-1][:200] if msg else 'no output'}") from None
    if not isinstance(data, dict) or procfs.MARKER not in data:
        raise ProbeError(f"unexpected probe answer from {node.name}")
    return data


async def scan(node: "Node", *, pids: list[int] | None = None, run_dir: str = "", sample: float = 1.0,
               timeout: float = 60.0) -> dict[str, Any]:
    args = ["scan", "--sample", str(sample)]
    if pids:
        args += ["--pids", ",".join(str(p) for p in pids)]
    if run_dir:
        args += ["--run-dir", run_dir]
    return await _json(node, script_argv(procfs, *args), timeout)


def workers_from_scan(data: dict[str, Any]) -> list[Worker]:
    out = []
    for w in data.get("workers", []):
        out.append(Worker(pid=int(w["pid"]), rank=w.get("rank"), world_size=w.get("world_size"),
                          alive=w.get("alive", True), cmdline=w.get("cmdline", ""), container=w.get("container", ""),
                          env=w.get("env", {}), libnccl=w.get("libnccl", ""),
                          libnccl_sha256=w.get("libnccl_sha256", ""), log_files=list(w.get("log_files", []))))
    return out


SIGUSR1_BIT = 1 << (10 - 1)


def usr1_caught(data: dict[str, Any]) -> set[int]:
    """Pids whose SIGUSR1 has a handler (NCCL installs it at comm init when NCCL_PROXY_DUMP_SIGNAL=10).
    Before that the default action would kill the process."""
    return {int(w["pid"]) for w in data.get("workers", []) if int(w.get("sigcgt") or 0) & SIGUSR1_BIT}


def threads_text(data: dict[str, Any], pids: set[int] | None = None) -> str:
    """The scan's thread rows in the bundle's threads.txt form (only ``pids`` when given)."""
    lines = []
    for w in data.get("workers", []):
        if not w.get("alive") or (pids is not None and int(w["pid"]) not in pids):
            continue
        lines.append(f"## rank {w.get('rank') if w.get('rank') is not None else '?'} pid {w['pid']}")
        for tid, comm, state, wchan, ticks, cpu in w.get("threads", []):
            lines.append("\t".join([str(tid), comm.replace("\t", " "), state, wchan or "0", str(ticks),
                                    "" if cpu is None else str(cpu)]))
    return "\n".join(lines) + ("\n" if lines else "")


async def tail(node: "Node", paths: list[str], *, timeout: float = 30.0) -> dict[str, Any]:
    if not paths:
        return {}
    data = await _json(node, script_argv(procfs, "tail", *paths), timeout)
    return data.get("files", {})


async def connect(node: "Node", targets: list[str], *, timeout: float = 20.0) -> list[dict]:
    if not targets:
        return []
    data = await _json(node, script_argv(procfs, "connect", *targets), timeout)
    return data.get("connect", [])


async def ras_status(node: "Node", *, fmt: str = "json", port: int = ras.DEFAULT_PORT, timeout: float = 5.0) -> str:
    if node.opens_tcp:  # a channel on the node's existing connection: no process per poll
        return await ras.query_async("127.0.0.1", port, timeout=timeout, fmt=fmt, opener=node.open_tcp)
    argv = script_argv(ras, "ras", "--port", str(port), "--timeout", str(int(timeout)), "--format", fmt)
    try:
        res = await node.run(argv, timeout=timeout + 20)
    except NodeError as exc:
        return f"### {exc}\n"
    if res.returncode == 127:
        return f"### {PYTHON} not found on {node.name}\n"
    return res.text or f"### no answer ({res.err_text.strip()[:200]})\n"


async def gpu_csv(node: "Node", *, timeout: float = 15.0) -> str:
    try:
        res = await node.run(["nvidia-smi", GPU_QUERY, "--format=csv"], timeout=timeout)
    except NodeError as exc:
        return f"### {exc}\n"
    if res.returncode == 127:
        return "### nvidia-smi not found\n"
    return res.text if res.ok else f"### nvidia-smi exited {res.returncode}: {res.err_text.strip()[:200]}\n"


async def container_settings(node: "Node", cid: str, *, timeout: float = 20.0) -> dict[str, Any]:
    try:
        res = await node.run(["docker", "inspect", cid], timeout=timeout)
    except NodeError as exc:
        return {"error": str(exc)}
    if not res.ok:
        return {"error": (res.err_text.strip() or f"docker inspect exited {res.returncode}")[:200]}
    try:
        data = json.loads(res.text)[0]
    except (json.JSONDecodeError, IndexError, KeyError):
        return {"error": "unreadable docker inspect output"}
    hc = data.get("HostConfig") or {}
    return {"Name": data.get("Name", "").lstrip("/"), "Image": (data.get("Config") or {}).get("Image", ""),
            "NetworkMode": hc.get("NetworkMode"), "IpcMode": hc.get("IpcMode"), "ShmSize": hc.get("ShmSize"),
            "Devices": [d.get("PathOnHost") for d in hc.get("Devices") or []], "CapAdd": hc.get("CapAdd") or [],
            "Ulimits": hc.get("Ulimits") or [], "Privileged": bool(hc.get("Privileged"))}


async def container_logs(node: "Node", cid: str, *, lines: int = 400, timeout: float = 20.0) -> list[str]:
    try:
        res = await node.run(["docker", "logs", "--tail", str(lines), cid], timeout=timeout)
    except NodeError:
        return []
    if not res.ok:
        return []
    text = res.text + res.err_text  # docker logs writes the container's stderr to stderr
    return text.splitlines()[-lines:]


async def ping_mtu(node: "Node", ip: str, *, size: int = 8972, timeout: float = 10.0) -> dict[str, Any]:
    argv = ["ping", "-c", "3", "-W", "1", "-M", "do", "-s", str(size), ip]
    try:
        res = await node.run(argv, timeout=timeout)
    except NodeError as exc:
        return {"check": "ping_mtu", "target": ip, "ok": None, "detail": str(exc)}
    if res.returncode == 127:
        return {"check": "ping_mtu", "target": ip, "ok": None, "detail": "ping not installed"}
    last = (res.text.strip().splitlines() or [""])[-1]
    return {"check": "ping_mtu", "target": ip, "ok": res.ok, "detail": (last or res.err_text.strip())[:200]}


async def kernel_log(node: "Node", *, timeout: float = 10.0) -> list[str]:
    try:
        res = await node.run(["dmesg", "--ctime"], timeout=timeout)
    except NodeError:
        return []
    if not res.ok:
        return []
    keep = re.compile(r"NVRM: Xid|Out of memory: Killed process|oom-kill|mlx5_core.*(?:[Ll]ink down|error|timeout)")
    return [l for l in res.text.splitlines()[-2000:] if keep.search(l)][-50:]


async def fr_dumps(node: "Node", ranks: dict[int, int], *, wait: float = 8.0, trigger: bool = True,
                   run_dir: str = "") -> list[dict[str, Any]]:
    """Flight Recorder dumps of the ranks ``{pid: rank}`` (see procfs.frdump): taken now through the
    debug-info pipe where one is armed (``trigger``), else the dump already written (on a timeout).
    ``[{"pid", "rank", "path", "triggered", "data" (bytes) | "error"}]``.  Bounded by ``wait``."""
    import base64
    import binascii

    if not ranks and not run_dir:
        return []
    args = ["frdump", "--wait", str(wait), *(["--run-dir", run_dir] if run_dir else []),
            *(f"{pid}:{rank}" for pid, rank in ranks.items())]
    data = await _json(node, script_argv(procfs, *args, *([] if trigger else ["--no-trigger"])), wait + 30)
    out = []
    for d in data.get("dumps", []):
        if not isinstance(d, dict) or not isinstance(d.get("rank"), int):
            continue
        if isinstance(d.get("data"), str):
            try:
                d["data"] = base64.b64decode(d["data"], validate=True)
            except (binascii.Error, ValueError):
                d = {**d, "data": None, "error": "undecodable dump"}
        out.append(d)
    return out


async def proxy_dump(node: "Node", pid: int, *, timeout: float = 5.0) -> bool:
    """SIGUSR1 makes NCCL print its ACTIVE OPS, but only when NCCL_PROXY_DUMP_SIGNAL=10 armed it:
    the caller checks the worker's env first (an unarmed process would be killed by the signal)."""
    try:
        res = await node.run(["kill", "-USR1", str(pid)], timeout=timeout)
    except NodeError:
        return False
    return res.ok
