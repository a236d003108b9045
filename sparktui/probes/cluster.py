"""The cluster's containers as every node's Docker Engine reports them: by the launch labels, and by
the cluster's container name (a container launch-cluster.sh or a person started has no labels).

``find_cluster`` reads; ``assess`` (pure) says what that means: absent, running (every node, one
launch), or stale / half, each with its finding.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from ..model import Finding
from ..nodes.base import Node

LABEL = "sparktui.cluster"  # every container a launch makes carries these labels
LABEL_NODE = "sparktui.node"
LABEL_RANK = "sparktui.rank"
LABEL_ROLE = "sparktui.role"
LABEL_LAUNCH = "sparktui.launch"
LABEL_PLAN = "sparktui.plan"
LABEL_EXECUTOR = "sparktui.executor"
LABEL_SERVE = "sparktui.serve"
LABEL_NNODES = "sparktui.nnodes"

_EXIT_RE = re.compile(r"Exited \((-?\d+)\)")


@dataclass(frozen=True)
class ClusterContainer:
    node: str
    name: str
    id: str
    state: str  # running | exited | created | restarting | paused | dead
    status: str  # docker's "Up 3 minutes" / "Exited (137) 2 minutes ago"
    image: str
    image_id: str
    labels: dict[str, str]

    @property
    def running(self) -> bool:
        return self.state in ("running", "restarting")

    @property
    def exit_code(self) -> int | None:
        m = _EXIT_RE.search(self.status)
        return int(m.group(1)) if m else None

    @property
    def launch(self) -> str:
        return self.labels.get(LABEL_LAUNCH, "")

    @property
    def rank(self) -> int | None:
        try:
            return int(self.labels[LABEL_RANK])
        except (KeyError, ValueError):
            return None

    def to_json(self) -> dict:
        return {"node": self.node, "name": self.name, "id": self.id[:12], "state": self.state, "status": self.status,
                "image": self.image, "launch": self.launch, "rank": self.rank, "exit_code": self.exit_code}


@dataclass
class ClusterView:
    name: str
    containers: dict[str, list[ClusterContainer]] = field(default_factory=dict)  # node -> its containers
    unreachable: dict[str, str] = field(default_factory=dict)  # node -> why

    def all(self) -> list[ClusterContainer]:
        return [c for cs in self.containers.values() for c in cs]

    def to_json(self) -> dict:
        return {"name": self.name, "containers": [c.to_json() for c in self.all()],
                "unreachable": dict(self.unreachable)}


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


@dataclass(frozen=True)
class Assessment:
    state: str  # absent | running | half | exited | stale | unknown
    findings: tuple[Finding, ...]
    launch: str = ""  # the running launch id (state running / half)
    plan: str = ""

    def to_json(self) -> dict:
        return {"state": self.state, "launch": self.launch, "findings": [f.to_json() for f in self.findings]}


def catalogued_finding(fid: str, title: str, *, node: str = "", evidence: Iterable[str] = (), advice: str = "",
                       severity: str = "error") -> Finding:
    """A finding whose explanation and advice come from the catalogue when it has the id."""
    from ..diagnosis.catalogue import finding

    source = f"{node or 'cluster'}/launch"
    evidence = tuple(evidence)
    try:
        return finding(fid, source=source, node=node, evidence=evidence, title=title, advice=advice or None)
    except KeyError:  # an id only actions raise (image_not_found): no catalogue text to add
        return Finding(fid, severity, title, source, evidence=evidence, node=node, advice=advice)  # type: ignore[arg-type]


def assess(view: ClusterView, nodes: list[str], plan: str | None = None) -> Assessment:
    """What the containers named for the cluster mean for a launch onto ``nodes``.

    running: one launch's container runs on every node (and, when ``plan`` is given, from that plan);
    half / exited: one launch whose containers run on some nodes only / on none;
    stale: containers with the cluster's name that are not one running launch of this plan;
    unknown: a node could not be asked.
    """
    found = view.all()
    if not found and not view.unreachable:
        return Assessment("absent", ())
    running = [c for c in found if c.running]
    launches = {c.launch for c in found if c.launch}
    findings: list[Finding] = []
    plan_of = {c.labels.get(LABEL_PLAN, "") for c in found}
    ours = all(c.labels.get(LABEL) == view.name for c in found)
    if len(launches) == 1 and ours and (plan is None or plan_of == {plan}):
        launch = next(iter(launches))
        up = sorted({c.node for c in running})
        if set(up) == set(nodes) and not view.unreachable:
            return Assessment("running", (), launch=launch, plan=next(iter(plan_of)))
        gone = [f"{c.node} exited ({c.exit_code})" if c.exit_code is not None else f"{c.node} {c.state}"
                for c in found if not c.running]
        gone += [f"{n} has no container" for n in nodes if not view.containers.get(n) and n not in view.unreachable]
        gone += [f"{n} unreachable ({why})" for n, why in view.unreachable.items()]
        findings.append(catalogued_finding(
            "half_cluster", f"cluster {view.name} is broken: running on {', '.join(up) or 'no node'}; "
            f"{'; '.join(gone)}", evidence=tuple(f"{c.node}: {c.name} {c.status}" for c in found),
            advice="read the exited container's last lines (sparktui status, the session log), then `sparktui stop` "
                   "and `sparktui launch` (or `sparktui launch --replace`)"))
        state = "unknown" if view.unreachable else ("half" if up else "exited")
        return Assessment(state, tuple(findings), launch=launch)
    for c in found:
        why = ("exited " + (f"({c.exit_code})" if c.exit_code is not None else "") if not c.running else "running")
        origin = f"launch {c.launch}" if c.launch else "not started by sparktui (no launch label)"
        if plan is not None and c.labels.get(LABEL_PLAN) not in (None, plan):
            origin += ", from another plan (image, args or nodes changed)"
        findings.append(catalogued_finding(
            "stale_container", f"stale container {c.name!r} on {c.node}: {why}, {origin}", node=c.node,
            evidence=(f"{c.node}: {c.name} {c.id[:12]} image {c.image} ({c.status})",),
            advice="`sparktui launch --replace` removes it and launches; `sparktui stop` only removes it"))
    for n, why in view.unreachable.items():
        findings.append(catalogued_finding("half_cluster", f"{n} could not be asked for its containers: {why}", node=n,
                                    evidence=(why,)))
    return Assessment("stale" if found else "unknown", tuple(findings))



_RAY_NODE_RE = re.compile(r"^\s*(\d+)\s+node_[0-9a-f]+", re.M)
_RAY_GPU_RE = re.compile(r"^\s*[\d.]+/([\d.]+)\s+GPU\b", re.M)


def parse_ray_status(text: str) -> tuple[int, float]:
    """(active nodes, total GPUs) from `ray status`; Pending and failed nodes do not count."""
    active = text.split("Active:", 1)[1] if "Active:" in text else ""
    active = re.split(r"^\s*(Pending|Recent failures|Resources):", active, maxsplit=1, flags=re.M)[0]
    nodes = sum(int(m.group(1)) for m in _RAY_NODE_RE.finditer(active))
    m = _RAY_GPU_RE.search(text)
    return nodes, float(m.group(1)) if m else 0.0


async def log_findings(node: Node, container: str, *, tail: int = 400) -> list[Finding]:
    """Error findings in the last ``tail`` lines of a container's log (EngineDeadError, a lost worker, ...)."""
    from ..diagnosis import Diagnoser

    client = await node.docker()
    raw = await asyncio.to_thread(client.api.logs, container, tail=tail)
    diag = Diagnoser()
    diag.feed_lines(f"{node.name}/{container}", raw.decode("utf-8", "replace").splitlines(), node.name)
    diag.finish()
    out: list[Finding] = []
    for f in diag.findings:
        if f.severity == "error" and all(g.id != f.id for g in out):
            out.append(f)
    return out


async def check_cluster(nodes: Mapping[str, Node], name: str, node_names: list[str]) -> tuple[ClusterView, Assessment]:
    """The assessment plus what the head's log says: an engine that died while its containers still run
    makes a half cluster too."""
    from dataclasses import replace

    view = await find_cluster(nodes, name)
    a = assess(view, node_names)
    if a.state not in ("running", "half", "exited"):
        return view, a
    extra: list[Finding] = []
    for c in view.all():
        if c.rank == 0 or (c.rank is None and c.node == node_names[0]):
            try:
                extra = [f for f in await log_findings(nodes[c.node], c.id) if f.id != "shutdown_requested"]
            except Exception:  # the log is a bonus here; the container states stand on their own
                extra = []
    if not extra:
        return view, a
    findings = list(extra) + list(a.findings)
    state = a.state
    if a.state == "running" and any(f.id == "engine_dead" for f in extra):
        state = "half"
        findings.append(catalogued_finding("half_cluster", f"cluster {name}: the head's engine is dead while its "
                                    "containers still run", evidence=tuple(f.title for f in extra[:3])))
    return view, replace(a, state=state, findings=tuple(findings))


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
