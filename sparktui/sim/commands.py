"""Commands a sim node answers (``SimNode.run``), in the real tools' output formats.

nvidia-smi as a GB10 answers it (memory `[N/A]`/`Not Supported`), cat/test over the node's virtual
files, `ip -j addr`, `ss -Hltn`, `ibdev2netdev`, and the docker CLI's read-only subcommands
(`ps`, `logs`, `inspect`) over the simulated containers.  ``COMMANDS`` is the table SimCluster hands each node.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING

from . import formats
from ..timefmt import format_ns as rfc3339_ns
from .node import Handler, SimFileNotFound, model_dir

if TYPE_CHECKING:
    from .node import SimNode


async def _cat(node: "SimNode", argv: list[str], stdin):
    out, err, rc = b"", b"", 0
    for path in [a for a in argv[1:] if a != "--"]:
        try:
            out += await node.read_file(path)
        except SimFileNotFound:
            err += f"cat: {path}: No such file or directory\n".encode()
            rc = 1
    return rc, out, err


async def _test(node: "SimNode", argv: list[str], stdin):
    args = argv[1:]
    if args and args[-1] == "]":
        args = args[:-1]
    if len(args) != 2 or args[0] not in ("-d", "-f", "-e", "-r", "-s"):
        return 2, b"", f"test: unsupported expression {' '.join(args)}\n".encode()
    op, path = args
    path = path.rstrip("/") or "/"
    model = model_dir(node)
    dirs = {"/", "/proc", "/tmp", "/home", "/etc"}
    if model:
        parts = model.split("/")
        dirs.update("/".join(parts[:i]) or "/" for i in range(2, len(parts) + 1))
    if path in dirs:
        return (0 if op in ("-d", "-e", "-r") else 1), b"", b""
    try:
        await node.read_file(path)
    except SimFileNotFound:
        return 1, b"", b""
    return (1 if op == "-d" else 0), b"", b""


def _parse_smi(argv: list[str]) -> tuple[str | None, str | None, bool, bool]:
    query = apps = None
    noheader = nounits = False
    for a in argv[1:]:
        if a.startswith("--query-gpu="):
            query = a.split("=", 1)[1]
        elif a.startswith("--query-compute-apps="):
            apps = a.split("=", 1)[1]
        elif a.startswith("--format="):
            opts = a.split("=", 1)[1].split(",")
            noheader = "noheader" in opts
            nounits = "nounits" in opts
    return query, apps, noheader, nounits


def _nvidia_smi(node: "SimNode", argv: list[str], stdin):
    query, apps, noheader, nounits = _parse_smi(argv)
    snap = node.snapshot()
    if query or apps:
        fields = [f.strip() for f in (query or apps).split(",") if f.strip()]
        cols = []
        for f in fields:
            v = (formats.query_gpu_value(f, snap, node.spec.index, nounits) if query
                 else formats.compute_apps_value(f, snap, nounits))
            if v is None:
                return 2, f'Field "{f}" is not a valid field to query.\n\n', b""
            cols.append([v] if query else v)
        head = formats.header_for if query else formats.compute_apps_header
        lines = [] if noheader else [", ".join(head(f, nounits) for f in fields)]
        lines.extend(", ".join(row) for row in zip(*cols))
        return 0, "".join(ln + "\n" for ln in lines), b""
    if argv[1:2] == ["-L"]:
        return 0, f"GPU 0: NVIDIA GB10 (UUID: {formats.GPU_UUID.format(node.spec.index)})\n", b""
    now = time.strftime("%a %b %d %H:%M:%S %Y", time.localtime()) + "       "
    return 0, formats.smi_table(snap, now), b""


def _hostname(node: "SimNode", argv: list[str], stdin):
    if "-I" in argv[1:]:
        spec = node.spec
        return 0, f"10.1.230.{180 + spec.index} {spec.ip} \n", b""
    return 0, node.name + "\n", b""


def _uname(node: "SimNode", argv: list[str], stdin):
    flags = "".join(a.lstrip("-") for a in argv[1:])
    if flags == "r":
        return 0, "6.11.0-1016-nvidia\n", b""
    if flags == "m":
        return 0, "aarch64\n", b""
    if "a" in flags:
        return 0, (f"Linux {node.name} 6.11.0-1016-nvidia #16-Ubuntu SMP PREEMPT_DYNAMIC aarch64 aarch64 "
                   "aarch64 GNU/Linux\n"), b""
    return 0, "Linux\n", b""


def _ibdev2netdev(node: "SimNode", argv: list[str], stdin):
    s = node.spec
    return 0, (f"{s.hca0} port 1 ==> {s.ifname} (Up)\n"
               f"{s.hca1} port 1 ==> enP2p1s0f1np1 (Up)\n"
               "rocep1s0f0 port 1 ==> enp1s0f0np0 (Down)\n"
               "roceP2p1s0f0 port 1 ==> enP2p1s0f0np0 (Down)\n"), b""


def _ip(node: "SimNode", argv: list[str], stdin):
    args = argv[1:]
    if "-j" not in args or not any(a in ("addr", "address", "a") for a in args):
        return 1, b"", b"sim: only `ip -j addr` is simulated\n"
    links = node.cluster.timeline(node.name, live=True).links()
    out = [{"ifindex": 1, "ifname": "lo", "flags": ["LOOPBACK", "UP", "LOWER_UP"], "mtu": 65536,
            "operstate": "UNKNOWN", "addr_info": [{"family": "inet", "local": "127.0.0.1", "prefixlen": 8,
                                                   "scope": "host", "label": "lo"}]}]
    for i, ln in enumerate(links, start=2):
        out.append({"ifindex": i, "ifname": ln.name, "flags": ["BROADCAST", "MULTICAST", "UP", "LOWER_UP"],
                    "mtu": ln.mtu, "operstate": ln.state,
                    "addr_info": [{"family": "inet", "local": a.split("/")[0], "prefixlen": int(a.split("/")[1]),
                                   "scope": "global", "label": ln.name} for a in ln.addresses]})
    return 0, json.dumps(out) + "\n", b""


def _ss(node: "SimNode", argv: list[str], stdin):
    """Listening TCP sockets: Ray's ports once `ray start` ran, the API port once vLLM serves."""
    t = node.now_t()
    ports = [22]
    if t >= 2.0:
        ports += [6379, 8265] if node.spec.head else []
    snap = node.snapshot()
    if node.spec.head and snap.phase == "serving":
        ports.append(node.cluster.config.cluster.serve_port)
    rows = [f"LISTEN 0      4096         0.0.0.0:{p}       0.0.0.0:*          " for p in ports]
    if "-H" not in argv[1:] and not any("H" in a for a in argv[1:] if a.startswith("-") and not a.startswith("--")):
        rows.insert(0, "State  Recv-Q Send-Q Local Address:Port  Peer Address:Port")
    return 0, "".join(r + "\n" for r in rows), b""


def _date(node: "SimNode", argv: list[str], stdin):
    now = time.time()
    if argv[1:] == ["+%s.%N"]:
        return 0, f"{now:.9f}\n", b""
    if argv[1:] == ["+%s"]:
        return 0, f"{int(now)}\n", b""
    return 0, time.strftime("%a %b %d %H:%M:%S UTC %Y\n", time.gmtime(now)), b""


# ---------------------------------------------------------------------- docker CLI (read-only)


def _find_container(node: "SimNode", ref: str):
    for c in node.containers():
        if ref in (c.name, c.id) or (len(ref) >= 4 and c.id.startswith(ref)):
            return c
    return None


def _docker_logs(node: "SimNode", args: list[str]):
    tail, stamps, ref = None, False, None
    it = iter(args)
    for a in it:
        if a in ("-t", "--timestamps"):
            stamps = True
        elif a in ("-n", "--tail"):
            tail = next(it, "all")
        elif a.startswith("--tail="):
            tail = a.split("=", 1)[1]
        elif a in ("-f", "--follow"):
            continue
        elif not a.startswith("-"):
            ref = a
    c = _find_container(node, ref or "")
    if c is None:
        return 1, b"", f"Error response from daemon: No such container: {ref}\n".encode()
    tl = node.cluster.timeline(node.name, live=True)
    lines = []
    for ev in tl.advance(node.now_t()):
        for ln in getattr(ev, "lines", ()):
            if ln.source == c.name:
                lines.append((rfc3339_ns(ln.ts) + " " if stamps else "") + ln.text)
    if tail not in (None, "all"):
        lines = lines[-int(tail):] if int(tail) > 0 else []
    return 0, "".join(ln + "\n" for ln in lines), b""


def _docker_ps(node: "SimNode", args: list[str]):
    show_all = any(a in ("-a", "--all") for a in args)
    fmt = next((args[i + 1] for i, a in enumerate(args[:-1]) if a == "--format"), None)
    rows = []
    for c in node.containers():
        if not show_all and c.state.value != "running":
            continue
        if fmt and "json" in fmt:
            rows.append(json.dumps({"ID": c.short_id, "Names": c.name, "Image": c.image,
                                    "Command": json.dumps(c.command[:20] + "…"), "State": c.state.value,
                                    "Status": c.status, "CreatedAt": time.strftime(
                                        "%Y-%m-%d %H:%M:%S +0000 UTC", time.gmtime(c.started_at or 0))}))
        else:
            rows.append(f"{c.short_id}   {c.image:<40} {c.status:<28} {c.name}")
    if not fmt:
        rows.insert(0, f"{'CONTAINER ID':<15}{'IMAGE':<41}{'STATUS':<29}NAMES")
    return 0, "".join(r + "\n" for r in rows), b""


def _docker_inspect(node: "SimNode", args: list[str]):
    refs = [a for a in args if not a.startswith("-")]
    out, missing = [], []
    for ref in refs:
        c = _find_container(node, ref)
        if c is None:
            missing.append(ref)
            continue
        running = c.state.value == "running"
        out.append({
            "Id": c.id, "Name": "/" + c.name, "Image": c.image_id, "Created": rfc3339_ns(c.started_at or 0),
            "State": {"Status": c.state.value, "Running": running, "ExitCode": c.exit_code or 0,
                      "StartedAt": rfc3339_ns(c.started_at or 0),
                      "FinishedAt": rfc3339_ns(c.finished_at) if c.finished_at else "0001-01-01T00:00:00Z"},
            "Config": {"Image": c.image, "Cmd": c.command.split(), "Entrypoint": None, "WorkingDir": "/workspace/vllm",
                       "Env": [f"VLLM_HOST_IP={node.spec.ip}", f"NCCL_SOCKET_IFNAME={node.spec.ifname}",
                               f"NCCL_IB_HCA={node.spec.hca0},{node.spec.hca1}", "NCCL_IB_DISABLE=0"]},
            "HostConfig": {"NetworkMode": "host", "IpcMode": "host", "Privileged": True, "ShmSize": 67108864,
                           "AutoRemove": True},
        })
    if missing:
        return 1, (json.dumps(out, indent=4) + "\n").encode(), "".join(
            f"Error: No such object: {m}\n" for m in missing).encode()
    return 0, json.dumps(out, indent=4) + "\n", b""


def _docker(node: "SimNode", argv: list[str], stdin):
    sub, args = (argv[1] if len(argv) > 1 else ""), argv[2:]
    if sub == "container" and args:
        sub, args = args[0], args[1:]
    if sub == "logs":
        return _docker_logs(node, args)
    if sub == "ps" or sub == "ls":
        return _docker_ps(node, args)
    if sub == "inspect":
        return _docker_inspect(node, args)
    return 1, b"", f"sim: `docker {sub}` is not simulated (read-only: ps, logs, inspect)\n".encode()


COMMANDS: dict[str, Handler] = {
    "cat": _cat,
    "test": _test,
    "[": _test,
    "nvidia-smi": _nvidia_smi,
    "hostname": _hostname,
    "uname": _uname,
    "ibdev2netdev": _ibdev2netdev,
    "ip": _ip,
    "ss": _ss,
    "date": _date,
    "docker": _docker,
    "true": lambda n, a, i: (0, b"", b""),
    "false": lambda n, a, i: (1, b"", b""),
    "nproc": lambda n, a, i: (0, b"20\n", b""),
}
