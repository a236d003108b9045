"""The live engine's cluster state: ``half_cluster`` / ``worker_died`` the moment a container of the
running cluster exits, from the Docker events the engine already receives, with the same assessment
`sparktui status` computes (diagnosis/cluster.py: ``live_clusters`` over ``assess``).

A launch is watched once every node it spans has its container: a launch still creating them is not
half, unless one of them already exited.  One set of findings per launch (a relaunch is a new one).

A container that ended on its own (an exit code below 128: the process raised or called exit) wrote why
in its last lines, and Docker's "die" event can beat those lines here: its half_cluster waits for an
error finding from that container's log, at most ``HOLD_S``, so the cause is on screen before (and ranked
above) its consequence.  A rank killed by a signal (137, 143) left no words: it is raised at once.

The head's engine dying while every container still runs is half too (as `status` says), held
``HOLD_S`` as well: the drill wrong-gloo-interface saw the head's engine_dead before the rank's own
words named the interface, and half_cluster ranked first.  At the end of the hold the cluster is
assessed again: a launch that has removed its containers meanwhile is not half.

A launch whose containers are all gone (removed: a failed launch cleaning up, `stop`, `docker rm`)
is no cluster any more, half or whole: the findings raised here about it resolve ("cluster removed"),
so a failed launch's consequence does not outrank its cause once both are over.

Only the config's cluster is judged (``scope``), as `status` judges only it: another labelled cluster's
container on the same nodes (an old launch under another name; one Docker brought back on a daemon
restart in the drill dockerd-restart) exiting says nothing about the cluster being watched.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Iterable

from ..model import ContainerChanged, ContainersSnapshot, ContainerState, FindingRaised, FindingResolved
from .cluster import LABEL, LABEL_LAUNCH, LiveCluster, catalogued_finding, head_engine_dead, live_clusters


HOLD_S = 5.0


class ClusterWatch:
    def __init__(self) -> None:
        self.containers: dict[str, dict[str, object]] = {}  # node -> name -> ContainerInfo
        self.running: set[tuple[str, str]] = set()  # (cluster, launch) seen whole
        self.raised: set[tuple[str, str]] = set()
        self.said: dict[tuple[str, str], list[str]] = {}  # (cluster, launch) -> keys of the findings raised
        self.held: dict[tuple[str, str], float] = {}  # (cluster, launch) -> raise by this time at the latest
        self.erred: set[str] = set()  # "node/container" sources whose log raised an error finding
        self.dead_heads: dict[tuple[str, str], tuple[float, object]] = {}  # key -> (raise at, engine_dead)
        self.cluster: str | None = None  # the config's cluster (scope); None: every labelled one

    def scope(self, cluster: str) -> None:
        self.cluster = cluster or None

    def _live(self) -> list[LiveCluster]:
        found = live_clusters({n: cs.values() for n, cs in self.containers.items()})
        return [lc for lc in found if self.cluster is None or lc.name == self.cluster]

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
            if event.finding.severity == "error":
                self.erred.add(event.finding.source)
            self._engine_dead(event)
            return [*self._release_dead_heads(event.ts), *(self._check(event.ts) if self.held else ())]
        else:
            return ()
        return [*self._release_dead_heads(event.ts), *self._check(event.ts), *self._gone(event.ts)]

    def _raise(self, key: tuple[str, str], findings, ts: float) -> list:
        self.raised.add(key)
        self.said.setdefault(key, []).extend(f.key for f in findings)
        return [FindingRaised(f, ts=ts) for f in findings]

    def _gone(self, ts: float) -> list:
        """Resolve what was raised about a launch none of whose containers is left."""
        out: list = []
        for key, keys in list(self.said.items()):
            # removed, or its name taken by another launch's container (the entry is keyed by name)
            if all(c.state is ContainerState.REMOVED for cs in self.containers.values() for c in cs.values()
                   if (dict(c.labels).get(LABEL), dict(c.labels).get(LABEL_LAUNCH, "")) == key):
                del self.said[key]
                out += [FindingResolved(k, "cluster removed", ts=ts) for k in keys]
        return out

    def tick(self, now: float) -> list:
        return [*self._release_dead_heads(now), *(self._check(now) if self.held else ())]

    def _waiting_for_words(self, lc: LiveCluster, key: tuple[str, str], ts: float) -> bool:
        """Hold the raise while a container that ended on its own has not yet said why (see the top)."""
        own = [c for c in lc.exited if c.exit_code is not None and 0 < c.exit_code < 128]
        if not own or all(f"{c.node}/{c.name}" in self.erred for c in own):
            self.held.pop(key, None)
            return False
        until = self.held.setdefault(key, ts + HOLD_S)
        if ts >= until:
            del self.held[key]
            return False
        return True

    def _check(self, ts: float) -> list:
        out: list = []
        for lc in self._live():
            key = (lc.name, lc.launch)
            state = lc.assessment.state
            if state == "running":
                self.running.add(key)
                continue
            if state not in ("half", "exited") or key in self.raised:
                continue
            if lc.starting or (key not in self.running and not (lc.complete or lc.exited)):
                continue  # still being launched
            if self._waiting_for_words(lc, key, ts):
                continue
            out += self._raise(key, [*lc.assessment.findings, *_died(lc)], ts)
        return out

    def _engine_dead(self, event: FindingRaised) -> None:
        """The head's engine died while every container still runs: half, once the hold is over."""
        f = event.finding
        if f.id != "engine_dead" or "/" not in f.source:
            return
        node, _, name = f.source.partition("/")
        for lc in self._live():
            key = (lc.name, lc.launch)
            if key in self.raised or lc.assessment.state != "running":
                continue
            if any(c.node == node and c.name == name for c in lc.members):
                self.dead_heads.setdefault(key, (event.ts + HOLD_S, f))

    def _release_dead_heads(self, ts: float) -> list:
        out: list = []
        for key, (until, f) in list(self.dead_heads.items()):
            if ts < until:
                continue
            del self.dead_heads[key]
            if key in self.raised:
                continue  # a container's exit said it meanwhile
            for lc in self._live():
                if (lc.name, lc.launch) != key or lc.assessment.state != "running":
                    continue  # gone or removed meanwhile: the exit path speaks for it, or nothing is left
                a = head_engine_dead(lc.assessment, lc.name, [f])
                if a.state == "half":
                    out += self._raise(key, [x for x in a.findings if x.id == "half_cluster"], ts)
        return out


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
