"""The cluster's containers as every node's Docker Engine reports them: by the launch labels, and by
the cluster's container name (a container launch-cluster.sh or a person started has no labels).

``find_cluster`` reads; ``assess`` (pure, in diagnosis/cluster.py, where the live engine uses it
too) says what that means: absent, running (every node, one launch), or stale / half, each with its
finding.
"""

from __future__ import annotations

import asyncio
import re
from typing import Mapping

from ..diagnosis.cluster import (LABEL, LABEL_EXECUTOR, LABEL_LAUNCH, LABEL_NNODES, LABEL_NODE, LABEL_PLAN,  # noqa: F401
                                 LABEL_RANK, LABEL_ROLE, LABEL_SERVE, Assessment, ClusterContainer, ClusterView, assess,
                                 catalogued_finding, head_engine_dead, launch_under_way)
from ..model import Finding
from ..nodes.base import Node


async def list_cluster_containers(node: Node, name: str) -> list[ClusterContainer]:
    client = await node.docker()

    def query() -> list[dict]:
        seen: dict[str, dict] = {}
        for flt in ({"label": f"{LABEL}={name}"}, {"name": name}):
            for row in client.api.containers(all=True, filters=flt):
                names = [n.lstrip("/") for n in row.get("Names") or ()]
                labels = row.get("Labels") or {}
                # the name filter matches substrings: keep exact names and our own labels only
                if name in names or labels.get(LABEL) == name:
                    seen[row["Id"]] = row
        return list(seen.values())

    rows = await asyncio.to_thread(query)
    out = []
    for row in rows:
        out.append(ClusterContainer(
            node=node.name, name=(row.get("Names") or ["/?"])[0].lstrip("/"), id=row["Id"],
            state=str(row.get("State", "")), status=str(row.get("Status", "")), image=str(row.get("Image", "")),
            image_id=str(row.get("ImageID", "")), labels=dict(row.get("Labels") or {})))
    return sorted(out, key=lambda c: (c.rank if c.rank is not None else 99, c.name))


async def find_cluster(nodes: Mapping[str, Node], name: str, *, timeout: float = 20.0) -> ClusterView:
    view = ClusterView(name)

    async def one(node: Node) -> None:
        try:
            async with asyncio.timeout(timeout):
                view.containers[node.name] = await list_cluster_containers(node, name)
        except Exception as exc:  # a dead node is a fact for the assessment, not a crash
            view.unreachable[node.name] = f"{type(exc).__name__}: {exc}".strip()[:300]

    await asyncio.gather(*(one(n) for n in nodes.values()))
    return view




_RAY_NODE_RE = re.compile(r"^\s*(\d+)\s+node_[0-9a-f]+", re.M)
_RAY_GPU_RE = re.compile(r"^\s*[\d.]+/([\d.]+)\s+GPU\b", re.M)


def parse_ray_status(text: str) -> tuple[int, float]:
    """(active nodes, total GPUs) from `ray status`; Pending and failed nodes do not count."""
    active = text.split("Active:", 1)[1] if "Active:" in text else ""
    active = re.split(r"^\s*(Pending|Recent failures|Resources):", active, maxsplit=1, flags=re.M)[0]
    nodes = sum(int(m.group(1)) for m in _RAY_NODE_RE.finditer(active))
    m = _RAY_GPU_RE.search(text)
    return nodes, float(m.group(1)) if m else 0.0


def whole_log_findings(node: str, source: str, lines: list[str]) -> list[Finding]:
    """Every finding of one whole log, ranked: the engine's processors over its lines numbered as the
    engine numbers them (from 1), then the end of input, as an action's watch asks for it.  So
    ``status`` names the line the launch, the findings strip and the session name."""
    from ..diagnosis.processors import default_processors
    from ..engine_worker import feed_all
    from ..model import InputEnded, LogBatch, LogLine

    procs = default_processors()
    batch = LogBatch(node, source, tuple(LogLine(node, source, t, seq=i) for i, t in enumerate(lines, 1)))
    queue: list = [batch, InputEnded((f"{node}/{source}",), token="status")]
    while queue:
        ev = queue.pop(0)
        if isinstance(ev, InputEnded) and ev.done:
            return list(ev.findings)
        queue.extend(feed_all(procs, ev))
    return []


async def log_findings(node: Node, container: str, name: str = "") -> list[Finding]:
    """Error findings in a container's log (EngineDeadError, a lost worker, ...), one per id, root
    cause first.  ``name``: the container's name, the source its lines go under everywhere else."""
    client = await node.docker()
    raw = await asyncio.to_thread(client.api.logs, container)
    lines = raw.decode("utf-8", "replace").split("\n")  # as the log follower splits them
    if lines and not lines[-1]:
        lines.pop()
    return log_errors(node.name, name or container, lines)


def log_errors(node: str, source: str, lines: list[str]) -> list[Finding]:
    """The error findings of a whole log, one per id, root cause first (what ``status`` adds)."""
    out: list[Finding] = []
    for f in whole_log_findings(node, source, lines):
        if f.severity == "error" and all(g.id != f.id for g in out):
            out.append(f)
    return out


async def check_cluster(nodes: Mapping[str, Node], name: str, node_names: list[str]) -> tuple[ClusterView, Assessment]:
    """The assessment plus what the head's log says: an engine that died while its containers still run
    makes a half cluster too."""
    view = await find_cluster(nodes, name)
    a = launch_under_way(assess(view, node_names), view)
    if a.state not in ("running", "half", "exited"):
        return view, a
    extra: list[Finding] = []
    for c in view.all():
        if c.rank == 0 or (c.rank is None and c.node == node_names[0]):
            try:
                extra = [f for f in await log_findings(nodes[c.node], c.id, c.name)
                         if f.id != "shutdown_requested"]
            except Exception:  # the log is a bonus here; the container states stand on their own
                extra = []
    return view, head_engine_dead(a, name, extra)


def state_lines(view: ClusterView, a: Assessment) -> list[str]:
    """The cluster's state in a few lines for an error that says nothing of it (a failed prompt):
    its state, each container not running (node, name, exit code, when, as Docker says it), each
    node that could not be asked."""
    lines = [f"cluster {view.name}: {a.state}"]
    for c in view.all():
        if not c.running:
            code = f" with code {c.exit_code}" if c.exit_code is not None else ""
            lines.append(f"  {c.node}: container {c.name} {c.state}{code} ({c.status})")
    lines += [f"  {n}: could not be asked ({why})" for n, why in view.unreachable.items()]
    lines += [f"  {f.severity.upper()} {f.id}: {f.title}" for f in a.findings if f.severity == "error"][:4]
    return lines
