"""`sparktui status [--json]`: one snapshot of every node (reachability, containers, memory, GPU).

Exit 0 when every node answered and the cluster is absent or running, 1 when some node did not answer or
the cluster is half, exited or stale (``BROKEN``), 2 for usage/config errors (a key file that
cannot be used counts as config).  A host key nobody vouched for is refused: the output names its
fingerprint and how to add it after checking.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
from typing import Any

from ..config import Config, ConfigError, NodeConfig, load_config
from ..units import gib
from ..logs.sanitize import safe  # every name, message and label printed came from a node
from ..model import PRESSURE_SHOWN

# cluster states (probes.cluster.assess) that are a problem to report, like an unreachable node
BROKEN = ("half", "exited", "stale")


def _check_keys(config: Config) -> None:
    from ..config_error import line_of as _line_of
    from ..nodes.ssh import identity_problem

    try:
        text = open(config.path, encoding="utf-8").read()
    except OSError:
        text = ""
    for i, n in enumerate(config.nodes):
        if n.backend != "ssh":
            continue
        problem = identity_problem(n)
        if problem:
            raise ConfigError(config.path, problem, key=f"node[{i}].identity_file",
                              line=_line_of(text, "identity_file") if text else None,
                              hint="point it at a readable private key, or remove it to use the ssh agent")


async def _snapshot(cfg: NodeConfig, timeout: float) -> dict[str, Any]:
    from ..nodes import make_node
    from ..nodes.base import HostKeyError, NodeError

    out: dict[str, Any] = {"name": cfg.name, "backend": cfg.backend, "host": cfg.host, "reachable": False,
                           "error": None, "host_key": None, "containers": [], "memory": None, "gpu": None,
                           "docker_error": None}
    if cfg.backend == "sim":
        out["error"] = "sim backend: nothing to reach (try `sparktui demo`)"
        return out
    node = make_node(cfg)
    try:
        try:
            await asyncio.wait_for(node.connect(), timeout)
        except HostKeyError as exc:
            out["error"] = str(exc)
            out["host_key"] = {"host": exc.host, "fingerprint": exc.fingerprint, "changed": exc.changed,
                               "hint": exc.hint}
            return out
        except (NodeError, asyncio.TimeoutError) as exc:
            out["error"] = str(exc) or f"no answer within {timeout:.0f} s"
            return out
        out["reachable"] = True
        parts = await asyncio.gather(_memory(node, cfg.meminfo_path), _gpu(node, cfg.name), _containers(node),
                                     return_exceptions=True)
        for key, val in zip(("memory", "gpu", "containers"), parts):
            if isinstance(val, BaseException):
                if key == "containers":
                    out["docker_error"] = str(val).splitlines()[0] if str(val) else type(val).__name__
                else:
                    out[key] = {"error": str(val)}
            else:
                out[key] = val
    finally:
        await node.close()
    return out


async def _memory(node, meminfo_path: str) -> dict:
    from ..nodes.base import read_optional
    from ..probes.memory import PSI_CPU, PSI_IO, PSI_MEMORY, memory_info, some_avg10

    meminfo = (await node.read_file(meminfo_path)).decode("utf-8", "replace")
    # (None where the kernel has no PSI: CONFIG_PSI off, or psi=0 on its command line)
    psi, cpu, io = await asyncio.gather(*(read_optional(node, p) for p in (PSI_MEMORY, PSI_CPU, PSI_IO)))
    m = memory_info(meminfo, psi)
    # the share of the last 10 s that some task of the node waited (percent): for the CPU, for IO, for memory
    pressure = {"cpu": some_avg10(cpu), "io": some_avg10(io), "memory": m.psi_some_avg10}
    return {**dataclasses.asdict(m), "used": m.used, "used_fraction": round(m.used_fraction, 4), "pressure": pressure}


async def _gpu(node, name: str) -> dict:
    from ..probes.gpu import QUERY_APPS, QUERY_GPU, gpu_sample

    q = await node.run(QUERY_GPU, timeout=20)
    apps = await node.run(QUERY_APPS, timeout=20) if q.ok else None
    s = gpu_sample(name, q.returncode, q.text, apps.returncode if apps else None, apps.text if apps else "",
                   q.err_text)
    return {"available": s.available, "error": s.error, "gpus": [dataclasses.asdict(g) for g in s.gpus]}


async def _containers(node) -> list[dict]:
    from ..probes.containers import from_inspect, is_own_probe

    client = await node.docker()
    conts = await asyncio.to_thread(client.containers.list, all=True)
    out = []
    for c in conts:
        i = from_inspect(c.attrs)
        if is_own_probe(i):  # a doctor probe of this moment: sparktui's own, not the cluster's
            continue
        out.append({"name": i.name, "id": i.short_id, "image": i.image, "state": i.state.value,
                    "health": i.health, "status": i.status, "exit_code": i.exit_code})
    return sorted(out, key=lambda c: c["name"])


async def _cluster(config: Config, timeout: float) -> dict[str, Any]:
    """The cluster's containers on every node, what they add up to, and whether the serve port answers."""
    from ..actions.cli_runner import close_nodes
    from ..nodes import make_node
    from ..probes.cluster import check_cluster
    from ..probes.serving import endpoint, server_info

    c = config.cluster
    out: dict[str, Any] = {"name": c.name, "state": "unknown", "containers": [], "findings": [],
                           "serve": {"host": c.serve_host, "port": c.serve_port, "answering": False}}
    nodes = {n.name: make_node(n) for n in config.nodes if n.backend != "sim"}
    if not nodes:
        return out
    try:
        async with asyncio.timeout(timeout * 2):
            view, a = await check_cluster(nodes, c.name, [n.name for n in config.nodes])
            out.update(cluster_doc(view, a))
            head = nodes.get(config.head.name)
            if head is not None and a.state in ("running", "half"):
                try:
                    base = await endpoint(head, c.serve_host, c.serve_port)
                    info = await server_info(base, api_key=config.api_key(), timeout=timeout)
                    out["serve"].update(url=base, answering=True, healthy=info.healthy, version=info.version,
                                        models=list(info.models))
                except Exception as exc:  # not answering is the fact to show
                    out["serve"]["error"] = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    except Exception as exc:
        out["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        await close_nodes(nodes)
    return out


def cluster_doc(view, a) -> dict[str, Any]:
    """What ``status --json`` says of the cluster's containers and their assessment."""
    return {"state": a.state, "launch": a.launch, "containers": [x.to_json() for x in view.all()],
            "unreachable": view.unreachable, "findings": [f.to_json() for f in a.findings]}


def exit_code(nodes: list[dict], cluster: dict) -> int:
    """1 when a node did not answer or the cluster is broken (its ERROR lines are printed), else 0."""
    ok = all(n["reachable"] for n in nodes)
    return 0 if ok and cluster.get("state") not in BROKEN else 1


def _cluster_text(cl: dict) -> str:
    lines = [f"cluster {safe(cl['name'])}: {cl['state']}"]
    for x in cl.get("containers", []):
        lines.append(f"  {safe(x['node']):<10} {safe(x['name']):<20} rank {x['rank']}  {safe(x['status'])}")
    s = cl.get("serve", {})
    if s.get("answering"):
        lines.append(f"  serving  {safe(s.get('url'))}  models {safe(s.get('models'))}  vLLM {safe(s.get('version') or '?')}")
    elif cl["state"] in ("running", "half"):
        lines.append(f"  serving  {s.get('host')}:{s.get('port')} not answering: {safe(s.get('error', '?'))}")
    for f in cl.get("findings", []):
        lines.append(f"  {f['severity'].upper():8} {f['id']}: {safe(f['title'])}")
    return "\n".join(lines)


def _text(nodes: list[dict]) -> str:
    lines = []
    for n in nodes:
        head = f"{n['name']} ({n['backend']} {n['host']})"
        if not n["reachable"]:
            lines.append(f"{head}: UNREACHABLE: {safe(n['error'])}")
            continue
        lines.append(f"{head}: reachable")
        m = n["memory"]
        if m and "error" not in m:
            psi = f", PSI some {m['psi_some_avg10']:.1f}%" if m.get("psi_some_avg10") is not None else ""
            lines.append(f"  memory   {gib(m['used'])} used of {gib(m['total'])} "
                         f"({m['used_fraction'] * 100:.0f}%), cache {gib(m['cached'])}{psi}")
            p = m.get("pressure") or {}
            waits = [f"{what} wait {p[key]:.0f}%" for what, key in (("CPU", "cpu"), ("IO", "io"))
                     if p.get(key) is not None and p[key] >= PRESSURE_SHOWN]
            if waits:  # the node is slowed: a start-up there takes longer (the stall detector allows for it)
                lines.append(f"  pressure {', '.join(waits)} (share of the last 10 s)")
        g = n["gpu"] or {}
        if not g.get("available", True):
            lines.append("  gpu      none (no nvidia-smi)")
        elif g.get("error"):
            lines.append(f"  gpu      error: {safe(g['error'])}")
        for gpu in g.get("gpus", []):
            mem = ("unified (see memory)" if gpu["mem_total_bytes"] is None
                   else f"{gib(gpu['mem_used_bytes'])} / {gib(gpu['mem_total_bytes'])}")
            util = "?" if gpu["util_percent"] is None else f"{gpu['util_percent']:.0f}%"
            lines.append(f"  gpu {safe(gpu['index'])}    {safe(gpu['name'])}  util {util}  mem {mem}")
            for p in gpu["processes"]:
                lines.append(f"           pid {safe(p['pid'])} {safe(p['name'])}  {gib(p['used_memory_bytes'])}")
        if n["docker_error"]:
            lines.append(f"  docker   unreachable: {safe(n['docker_error'])}")
        elif not n["containers"]:
            lines.append("  containers: none")
        for c in n["containers"]:
            extra = f" health={safe(c['health'])}" if c["health"] else ""
            lines.append(f"  {safe(c['name']):<24} {safe(c['image']):<28} {safe(c['status'])}{extra}")
    return "\n".join(lines)


def run(args) -> int:
    config = load_config(getattr(args, "config", None))
    _check_keys(config)
    timeout = float(getattr(args, "timeout", 10.0) or 10.0)

    async def all_nodes() -> tuple[list[dict], dict]:
        *snaps, cluster = await asyncio.gather(*(_snapshot(n, timeout) for n in config.nodes), _cluster(config, timeout))
        return list(snaps), cluster

    nodes, cluster = asyncio.run(all_nodes())
    code = exit_code(nodes, cluster)
    if getattr(args, "json", False):
        # ensure_ascii (json's default): every control character leaves as a \u escape
        print(json.dumps({"config": config.path, "ok": code == 0, "nodes": nodes,
                          "cluster": cluster}, indent=2, default=str))
    else:
        print(_text(nodes))
        print(_cluster_text(cluster))
    for n in nodes:
        if n["host_key"]:
            print(f"sparktui: {safe(n['error'])}", file=sys.stderr)
    return code
