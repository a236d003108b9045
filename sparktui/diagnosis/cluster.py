"""The cluster's containers and what they add up to: pure, shared by `sparktui status` (probes/cluster.py
reads the nodes' Docker Engines) and the live engine (diagnosis/cluster_watch.py reads the containers
the engine already receives), so both say the same state with the same finding.

``assess`` says what a view means: absent, running (every node, one launch), or stale / half, each
with its finding; ``head_engine_dead`` adds what the head's log says.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Iterable, Mapping

from ..model import ContainerInfo, ContainerState, Finding

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


@dataclass(frozen=True)
class Assessment:
    state: str  # absent | running | half | exited | stale | unknown
    findings: tuple[Finding, ...]
    launch: str = ""  # the running launch id (state running / half)
    plan: str = ""

    def to_json(self) -> dict:
        return {"state": self.state, "launch": self.launch, "findings": [f.to_json() for f in self.findings]}


def catalogued_finding(fid: str, title: str, *, node: str = "", evidence: Iterable[str] = (), advice: str = "") -> Finding:
    """A launch's or the cluster's finding (source "<node>/launch") from the catalogue's factory."""
    from .catalogue import finding

    return finding(fid, source=f"{node or 'cluster'}/launch", node=node, evidence=evidence, title=title,
                   advice=advice or None)


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



def head_engine_dead(a: Assessment, name: str, log_findings: list[Finding]) -> Assessment:
    """The assessment plus the head's log findings: an engine that died while its containers still
    run makes a half cluster too."""
    if not log_findings:
        return a
    findings = list(log_findings) + list(a.findings)
    state = a.state
    if a.state == "running" and any(f.id == "engine_dead" for f in log_findings):
        state = "half"
        findings.append(catalogued_finding("half_cluster", f"cluster {name}: the head's engine is dead while its "
                                    "containers still run", evidence=tuple(f.title for f in log_findings[:3])))
    return replace(a, state=state, findings=tuple(findings))


# --------------------------------------------------------------------------- the live engine's view


@dataclass(frozen=True)
class LiveCluster:
    """One labelled cluster's newest launch, assessed from the containers the engine holds."""

    name: str
    launch: str
    assessment: Assessment
    started: float  # its newest container's start (epoch s; 0 when unknown)
    members: tuple[ClusterContainer, ...]  # the launch's containers
    exited: tuple[ClusterContainer, ...]  # those that exited, died or were removed
    complete: bool  # every node it spans has its container (a launch still making them is not half)

    @property
    def starting(self) -> bool:
        return under_way(self.members)


def under_way(members: Iterable[ClusterContainer]) -> bool:
    """A container made and not yet started, none gone: a launch under way, never half (Docker never
    takes a started container back to "created", so this holds for a late listing of it too)."""
    members = list(members)
    return not any(c.state in _GONE for c in members) and any(c.state == "created" for c in members)


def launch_under_way(a: Assessment, view: ClusterView) -> Assessment:
    """``status``'s reading of a half cluster whose missing part is only being started: "starting",
    no finding (a launch's own preflight keeps calling such leftovers stale: it replaces them)."""
    if a.state in ("half", "exited") and not view.unreachable and under_way(view.all()):
        return Assessment("starting", (), launch=a.launch, plan=a.plan)
    return a


def from_info(node: str, c: ContainerInfo) -> ClusterContainer:
    status = c.status or (f"Exited ({c.exit_code})" if c.exit_code is not None else c.state.value)
    if c.state is ContainerState.EXITED and c.exit_code is not None and "Exited (" not in status:
        status = f"Exited ({c.exit_code})"
    return ClusterContainer(node=node, name=c.name, id=c.id, state=c.state.value, status=status, image=c.image,
                            image_id=c.image_id, labels=dict(c.labels))


# a launch's container in these states went away; "created" is one being started (docker create, then start)
_GONE = frozenset({"exited", "dead", "removed", "removing"})


def live_clusters(containers: Mapping[str, Iterable[ContainerInfo]]) -> list[LiveCluster]:
    """What `status` would say of every cluster sparktui launched (by its labels), from the containers
    the nodes' Docker events reported: ``assess`` over the newest launch's containers."""
    found: dict[str, list[tuple[ClusterContainer, float]]] = {}
    for node, cs in containers.items():
        for c in cs:
            name = dict(c.labels).get(LABEL)
            if name:
                found.setdefault(name, []).append((from_info(node, c), c.started_at or 0.0))
    out = []
    for name, cs in sorted(found.items()):
        newest: dict[str, float] = {}
        for c, t in cs:
            newest[c.launch] = max(newest.get(c.launch, 0.0), t)
        launch = max(newest, key=lambda k: (newest[k], k))
        mine = [c for c, _ in cs if c.launch == launch]
        view = ClusterView(name)
        for c in mine:
            view.containers.setdefault(c.node, []).append(c)
        nodes = sorted(view.containers)
        try:
            nnodes = int(mine[0].labels.get(LABEL_NNODES, "") or len(nodes))
        except ValueError:
            nnodes = len(nodes)
        out.append(LiveCluster(name=name, launch=launch, assessment=assess(view, nodes), started=newest[launch],
                               members=tuple(mine), exited=tuple(c for c in mine if c.state in _GONE),
                               complete=len(nodes) >= nnodes))
    return out


# findings that say the serving cluster cannot serve (red), or may be stuck (amber)
_BROKEN = ("half_cluster", "worker_died", "engine_dead")
_DOUBTFUL = ("suspected_hang",)


def cluster_alarm(containers: Mapping[str, Iterable[ContainerInfo]], findings: Iterable[Finding],
                  cluster: str | None = None) -> tuple[str, str] | None:
    """("error" | "warning", why) for the head's serving line, or None while the cluster is whole.
    From the containers now (a relaunch that runs everywhere is whole again) and the findings raised
    since the newest launch started (older ones belong to a cluster that is gone).  ``cluster``: only
    the config's cluster is judged (another labelled one on the same nodes is not this line's)."""
    since = 0.0
    for lc in live_clusters(containers):
        if cluster and lc.name != cluster:
            continue
        since = max(since, lc.started)
        a = lc.assessment
        if a.state in ("half", "exited") and (lc.complete or lc.exited) and not lc.starting:
            return "error", a.findings[0].title if a.findings else f"cluster {lc.name}: {a.state}"
    recent = [f for f in findings if f.ts >= since and f.severity == "error"]
    for ids, level in ((_BROKEN, "error"), (_DOUBTFUL, "warning")):
        for f in recent:
            if f.id in ids:
                return level, f.title
    return None
