"""The live engine's cluster state: ``half_cluster`` / ``worker_died`` the moment a container of the
running cluster exits, from the Docker events the engine already receives, with the same assessment
`sparktui status` computes (diagnosis/cluster.py: ``live_clusters`` over ``assess``).

A launch is watched once every node it spans has its container: a launch still creating them is not
half, unless one of them already exited.  One set of findings per launch (a relaunch is a new one).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Iterable

from ..model import ContainerChanged, ContainersSnapshot, ContainerState, FindingRaised
from .cluster import LiveCluster, catalogued_finding, head_engine_dead, live_clusters


class ClusterWatch:
    def __init__(self) -> None:
        self.containers: dict[str, dict[str, object]] = {}  # node -> name -> ContainerInfo
        self.running: set[tuple[str, str]] = set()  # (cluster, launch) seen whole
        self.raised: set[tuple[str, str]] = set()

    def feed(self, event) -> Iterable:
        if isinstance(event, ContainersSnapshot):
            old = self.containers.get(event.node, {})
            new = {c.name: c for c in event.containers}
            for name, c in old.items():  # gone from the daemon (docker rm): removed, still the cluster's
                if name not in new:
                    new[name] = _removed(c)
            self.containers[event.node] = new
        elif isinstance(event, ContainerChanged):
            self.containers.setdefault(event.node, {})[event.container.name] = event.container
        elif isinstance(event, FindingRaised):
            return self._engine_dead(event)
        else:
            return ()
        return self._check(event.ts)

    def _check(self, ts: float) -> list:
        out: list = []
        for lc in live_clusters({n: cs.values() for n, cs in self.containers.items()}):
            key = (lc.name, lc.launch)
            state = lc.assessment.state
            if state == "running":
                self.running.add(key)
                continue
            if state not in ("half", "exited") or key in self.raised:
                continue
            if lc.starting or (key not in self.running and not (lc.complete or lc.exited)):
                continue  # still being launched
            self.raised.add(key)
            out += [FindingRaised(f, ts=ts) for f in lc.assessment.findings]
            out += [FindingRaised(f, ts=ts) for f in _died(lc)]
        return out

    def _engine_dead(self, event: FindingRaised) -> list:
        """The head's engine died while every container still runs: half too (as `status` says)."""
        f = event.finding
        if f.id != "engine_dead" or "/" not in f.source:
            return []
        node, _, name = f.source.partition("/")
        for lc in live_clusters({n: cs.values() for n, cs in self.containers.items()}):
            key = (lc.name, lc.launch)
            if key in self.raised or lc.assessment.state != "running":
                continue
            if not any(c.node == node and c.name == name for c in lc.members):
                continue
            a = head_engine_dead(lc.assessment, lc.name, [f])
            if a.state == "half":
                self.raised.add(key)
                return [FindingRaised(x, ts=event.ts) for x in a.findings if x.id == "half_cluster"]
        return []


def _died(lc: LiveCluster) -> list:
    """A worker rank's container that went away: the peer the survivors will lose (worker_died)."""
    out = []
    for c in lc.exited:
        if c.rank == 0:
            continue  # the head: half_cluster says it, and its own log says why
        code = c.exit_code
        how = f"exited ({code})" if code is not None else c.state
        out.append(catalogued_finding(
            "worker_died", f"rank {c.rank if c.rank is not None else '?'} of {lc.name} went away: {c.node}/{c.name} {how}",
            node=c.node, evidence=(f"{c.node}: {c.name} {c.status}",)))
    return out


def _removed(c):
    return c if c.state is ContainerState.REMOVED else replace(c, state=ContainerState.REMOVED)
