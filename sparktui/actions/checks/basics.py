"""Node-level checks: SSH without prompts, Docker, stale cluster container, ports, clocks, versions."""

from __future__ import annotations

import asyncio
import re
import time

from ...nodes.base import HostKeyError, Node, NodeError
from . import CheckResult, fail, ok, skip, warn

RAY_DASHBOARD_PORT = 8265


def head_ports(cluster) -> list[int]:
    """The ports the launch will bind on the head: the serve port, and the executor's own (Ray's GCS
    and dashboard, or mp's torch.distributed master port)."""
    own = [cluster.master_port] if cluster.executor == "mp" else [cluster.ray_port, RAY_DASHBOARD_PORT]
    return [cluster.serve_port, *own]


async def check_ssh(node: Node, backend: str) -> CheckResult:
    try:
        await asyncio.wait_for(node.connect(), 40)
        res = await node.run(["true"], timeout=40)
    except HostKeyError as exc:
        return fail("ssh", "host key not trusted", node.name, [str(exc)],
                    exc.hint or "check the fingerprint, then add the key to known_hosts", "ssh_unreachable")
    except (NodeError, OSError, asyncio.TimeoutError) as exc:
        return fail("ssh", "cannot reach the node without a prompt", node.name, [str(exc) or type(exc).__name__],
                    "check the host/user/port in the config, that your key is loaded (ssh-add) and that "
                    "`ssh -o BatchMode=yes HOST true` works", "ssh_unreachable")
    if not res.ok:
        return fail("ssh", f"`true` exited {res.returncode}", node.name, [res.err_text.strip()[:200]],
                    "fix the login shell on the node", "ssh_unreachable")
    what = "SSH (BatchMode: key, no prompt)" if backend == "ssh" else f"{backend} node"
    return ok("ssh", f"reachable: {what}", node.name)


async def check_docker(node: Node) -> CheckResult:
    try:
        client = await node.docker()
        info = await asyncio.to_thread(client.info)
        ver = await asyncio.to_thread(client.version)
    except Exception as exc:  # docker SDK raises many types
        return fail("docker", "Docker Engine not reachable", node.name, [f"{type(exc).__name__}: {exc}"[:300]],
                    "start docker (systemctl start docker) and add the user to the docker group", "docker_unreachable")
    return ok("docker", f"Docker {ver.get('Version', '?')} reachable", node.name,
              [f"storage driver {info.get('Driver', '?')}, data root {info.get('DockerRootDir', '?')}"],
              data={"driver": info.get("Driver", ""), "version": ver.get("Version", "")})


async def check_stale_container(node: Node, name: str) -> CheckResult:
    client = await node.docker()
    found = await asyncio.to_thread(lambda: client.api.containers(all=True, filters={"name": f"^/{name}$"}))
    if not found:
        return ok("stale_container", f"no container named {name}", node.name)
    c = found[0]
    ev = [f"{name}: {c.get('State')} ({c.get('Status')}), image {c.get('Image')}"]
    if c.get("State") == "running":
        return fail("stale_container", f"a container named {name} is already running", node.name, ev,
                    f"the launcher would skip the start and run in the old container: `sparktui stop` or "
                    f"`docker rm -f {name}` first", "stale_container")
    return warn("stale_container", f"an exited container named {name} is left", node.name, ev,
                f"`docker rm {name}` (its name blocks a new start)", "stale_container")


def listening_ports(ss_output: str) -> set[int]:
    ports = set()
    for line in ss_output.splitlines():
        cols = line.split()
        if len(cols) >= 4:
            m = re.search(r":(\d+)$", cols[3])
            if m:
                ports.add(int(m.group(1)))
    return ports


async def check_ports(node: Node, ports: list[int]) -> CheckResult:
    res = await node.run(["ss", "-Hltn"], timeout=15)
    if not res.ok:
        return skip("ports", f"cannot list listening ports (ss exited {res.returncode})", node.name,
                    [res.err_text.strip()[:200]])
    busy = sorted(set(ports) & listening_ports(res.text))
    if busy:
        return fail("ports", f"port(s) {', '.join(map(str, busy))} already in use", node.name,
                    [line for line in res.text.splitlines() if any(f":{p} " in line + " " for p in busy)][:5],
                    "stop what listens there (`ss -ltnp` shows the process) or change serve_port", "port_in_use")
    return ok("ports", f"ports {', '.join(map(str, ports))} free", node.name)


async def node_clock_offset(node: Node) -> float:
    t0 = time.time()
    res = await node.run(["date", "+%s.%N"], timeout=10)
    t1 = time.time()
    return float(res.text.strip()) - (t0 + t1) / 2


async def check_clocks(nodes: list[Node]) -> CheckResult:
    offsets = {}
    for n in nodes:
        try:
            offsets[n.name] = await node_clock_offset(n)
        except (NodeError, ValueError):
            continue
    if len(offsets) < 2:
        return skip("clocks", "fewer than two clocks readable")
    spread = max(offsets.values()) - min(offsets.values())
    ev = [f"{k}: {v:+.3f} s vs this machine" for k, v in offsets.items()]
    if spread > 1.0:
        return warn("clocks", f"clocks differ by {spread:.1f} s", "", ev,
                    "enable NTP on every node (timedatectl set-ntp true): logs and timeouts compare times",
                    "clock_skew")
    return ok("clocks", f"clocks in sync (spread {spread * 1000:.0f} ms)", "", ev)


async def _first_line(node: Node, argv: list[str]) -> str | None:
    try:
        res = await node.run(argv, timeout=20)
    except NodeError:
        return None
    if not res.ok:
        return None
    lines = [l.strip() for l in res.text.splitlines() if l.strip()]
    return lines[0] if lines else None


async def check_versions(nodes: list[Node]) -> list[CheckResult]:
    drivers = {n.name: await _first_line(n, ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
               for n in nodes}
    nccl = {n.name: await _first_line(n, ["dpkg-query", "-W", "-f", "${Version}", "libnccl2"]) for n in nodes}
    out = []
    have = {k: v for k, v in drivers.items() if v}
    if not have:
        out.append(skip("driver", "no nvidia-smi on any node"))
    elif len(set(have.values())) > 1 or len(have) < len(nodes):
        out.append(fail("driver", "driver versions differ", "", [f"{k}: {v or 'no nvidia-smi'}" for k, v in drivers.items()],
                        "install the same driver on every node (580.x on GB10)", "driver_mismatch"))
    elif any(v.startswith("590.") for v in have.values()):
        out.append(warn("driver", "driver 590.x: known CUDA-graph capture deadlock on GB10", "",
                        [f"{k}: {v}" for k, v in have.items()], "stay on 580.x", "driver_mismatch"))
    else:
        out.append(ok("driver", f"driver {next(iter(have.values()))} on every node", "",
                      [f"{k}: {v}" for k, v in have.items()]))
    have_n = {k: v for k, v in nccl.items() if v}
    if not have_n:
        out.append(skip("nccl", "no system libnccl2 on any node (the image's NCCL is used)"))
    elif len(set(have_n.values())) > 1 or len(have_n) < len(nodes):
        out.append(fail("nccl", "system NCCL versions differ", "", [f"{k}: {v or 'none'}" for k, v in nccl.items()],
                        "install the same libnccl2 on every node", "nccl_version_mismatch"))
    else:
        out.append(ok("nccl", f"system NCCL {next(iter(have_n.values()))} on every node", "",
                      [f"{k}: {v}" for k, v in have_n.items()]))
    return out
