"""ClusterState: a pure reducer of events.  ``reduce(state, event) -> state``; no IO, no clocks.

Log *text* is not held here (it lives in logs/store.py, bounded and virtualised, and in the session
file); the state only knows which sources of a node have logs, so a batch of lines from a known
source leaves the state object itself unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Mapping

from .model import (
    ActionEvent,
    ContainerChanged,
    ContainerInfo,
    ContainersSnapshot,
    ContainerState,
    DockerStatus,
    Event,
    Finding,
    FindingAcknowledged,
    FindingRaised,
    FindingResolved,
    HostKeyOffer,
    GpuInfo,
    GpuSample,
    LinkInfo,
    LinkSample,
    LogBatch,
    LogBlock,
    LogLine,
    MemoryInfo,
    MemorySample,
    Milestone,
    MilestoneReached,
    NodePressure,
    NodeReachability,
    Note,
    SEVERITY_RANK,
    ServingSample,
    TimelineEntry,
)

MEMORY_HISTORY = 240  # samples kept for the sparkline (4 min at 1 Hz)
SERVING_HISTORY = 120  # serving samples kept per series (6 min at one scrape per 3 s)
# ServingSample fields with a sparkline; a None (not measurable) stays a gap, never a 0
TIMELINE_KEEP = 500  # other operators' timeline entries kept for the timeline screen
CHANGES_KEEP = 500  # reachability / container state changes kept for the timeline screen
SERVING_SERIES = ("running", "waiting", "kv_cache_usage", "prompt_tps", "generation_tps", "requests_ps",
                  "ttft_mean", "e2e_mean")


def _frozen(d: dict) -> Mapping:
    return MappingProxyType(d)


@dataclass(frozen=True)
class ServingState:
    """What the node's API server says about its load (head node only)."""

    up: bool
    sample: ServingSample  # the latest
    last_up: ServingSample | None = None  # the latest that answered: its totals stay readable when down
    down_since: float | None = None
    history: Mapping[str, tuple[float | None, ...]] = field(default_factory=lambda: _frozen({}))  # oldest first

    def series(self, name: str) -> tuple[float | None, ...]:
        return self.history.get(name, ())


@dataclass(frozen=True)
class NodeState:
    name: str
    reachable: bool | None = None  # None: not contacted yet
    unreachable_since: float | None = None
    error: str | None = None
    retry_in: float | None = None
    backend: str = ""
    host_key: HostKeyOffer | None = None  # the unvouched key that keeps it unreachable
    docker_error: str | None = None  # the Engine is not answering (while the node may be)
    containers: Mapping[str, ContainerInfo] = field(default_factory=lambda: _frozen({}))  # by name
    memory: MemoryInfo | None = None
    memory_history: tuple[float, ...] = ()  # used fraction, oldest first
    pressure: NodePressure | None = None  # CPU / IO / memory PSI, read with the memory
    gpus: tuple[GpuInfo, ...] = ()
    gpu_available: bool | None = None
    gpu_error: str | None = None
    links: tuple[LinkInfo, ...] = ()
    serving: ServingState | None = None  # None: never scraped (not the serving node)
    logs: frozenset[str] = frozenset()  # the sources that sent lines
    milestones: Mapping[str, Milestone] = field(default_factory=lambda: _frozen({}))
    last_update: float | None = None

    def container_list(self) -> list[ContainerInfo]:
        """Running first, then by name."""
        return sorted(self.containers.values(),
                      key=lambda c: (c.state is not ContainerState.RUNNING, c.name))


@dataclass(frozen=True)
class StateChange:
    """A node or container changed state (reachability, container state): for the timeline."""

    ts: float
    node: str
    text: str


@dataclass(frozen=True)
class FindingStatus:
    """A finding that is no longer active: resolved (its condition ended) or acknowledged."""

    state: str  # "resolved" | "acknowledged"
    ts: float
    reason: str = ""  # why it resolved
    operator: str = ""  # who acknowledged it (kept when it resolves later)


@dataclass(frozen=True)
class ClusterState:
    nodes: Mapping[str, NodeState] = field(default_factory=lambda: _frozen({}))
    order: tuple[str, ...] = ()
    findings: tuple[Finding, ...] = ()
    actions: tuple[ActionEvent, ...] = ()
    notes: tuple[Note, ...] = ()
    timeline: tuple[TimelineEntry, ...] = ()  # other operators' actions and notes (shared timeline)
    changes: tuple[StateChange, ...] = ()  # newest last
    # Finding.key -> status, for findings no longer active (an acknowledgement read from the shared
    # timeline may come before this session raises the finding: it is kept and applies then)
    finding_states: Mapping[str, FindingStatus] = field(default_factory=lambda: _frozen({}))

    @classmethod
    def initial(cls, node_names: list[str] | tuple[str, ...]) -> "ClusterState":
        return cls(nodes=_frozen({n: NodeState(name=n) for n in node_names}), order=tuple(node_names))

    def node(self, name: str) -> NodeState:
        return self.nodes[name]

    def finding_status(self, f: Finding) -> FindingStatus | None:
        """None: active."""
        return self.finding_states.get(f.key)

    def active_findings(self) -> tuple[Finding, ...]:
        if not self.finding_states:
            return self.findings
        return tuple(f for f in self.findings if f.key not in self.finding_states)

    def sorted_findings(self) -> list[Finding]:
        return sorted(self.findings, key=lambda f: (SEVERITY_RANK.get(f.severity, 9), f.ts))


def _with_node(state: ClusterState, name: str, fn) -> ClusterState:
    nodes = dict(state.nodes)
    order = state.order
    node = nodes.get(name)
    if node is None:
        node = NodeState(name=name)
        order = order + (name,)
    nodes[name] = fn(node)
    return replace(state, nodes=_frozen(nodes), order=order)


def _log_source(state: ClusterState, node: str, source: str) -> ClusterState:
    ns = state.nodes.get(node)
    if ns is not None and source in ns.logs:
        return state  # the common case under a flood: nothing to copy
    return _with_node(state, node, lambda n: replace(n, logs=n.logs | {source}))


def _serving(cur: ServingState | None, ev: ServingSample) -> ServingState:
    if not ev.up:
        was_up = cur is not None and cur.up
        since = ev.ts if was_up or cur is None or cur.down_since is None else cur.down_since
        return ServingState(up=False, sample=ev, last_up=cur.last_up if cur else None, down_since=since,
                            history=cur.history if cur else _frozen({}))
    old = cur.history if cur else {}
    hist = {k: (old.get(k, ()) + (getattr(ev, k),))[-SERVING_HISTORY:] for k in SERVING_SERIES}
    return ServingState(up=True, sample=ev, last_up=ev, down_since=None, history=_frozen(hist))


def _changed(state: ClusterState, *changes: StateChange) -> ClusterState:
    return replace(state, changes=(state.changes + changes)[-CHANGES_KEEP:]) if changes else state


def _container_changes(node: NodeState, containers, ts: float) -> list[StateChange]:
    """One change per container that is new or whose state differs from what the node held."""
    out = []
    for c in containers:
        old = node.containers.get(c.name)
        if old is None or old.state is not c.state:
            out.append(StateChange(ts, node.name, f"container {c.name}: {c.state.value}"))
    return out


def reduce(state: ClusterState, event: Event) -> ClusterState:
    """Return the state after ``event``.  Unknown events leave the state unchanged."""
    state = _record_change(state, event)
    return _reduce(state, event)


def _record_change(state: ClusterState, event: Event) -> ClusterState:
    """The transitions worth a timeline row; repeats (a retry still unreachable) add nothing."""
    if isinstance(event, NodeReachability):
        old = state.nodes.get(event.node)
        was = old.reachable if old is not None else None
        if event.reachable and was is not True:
            return _changed(state, StateChange(event.ts, event.node, "reachable"))
        if not event.reachable and was is not False:
            return _changed(state, StateChange(event.ts, event.node, f"unreachable: {event.error or 'no answer'}"))
        return state
    if isinstance(event, ContainersSnapshot):
        old = state.nodes.get(event.node) or NodeState(name=event.node)
        names = {c.name for c in event.containers}
        gone = [StateChange(event.ts, event.node, f"container {name}: gone")
                for name, c in old.containers.items() if name not in names and c.state is not ContainerState.REMOVED]
        return _changed(state, *_container_changes(old, event.containers, event.ts), *gone)
    if isinstance(event, ContainerChanged):
        old = state.nodes.get(event.node) or NodeState(name=event.node)
        return _changed(state, *_container_changes(old, (event.container,), event.ts))
    return state


def _reduce(state: ClusterState, event: Event) -> ClusterState:
    if isinstance(event, NodeReachability):
        def f(n: NodeState) -> NodeState:
            if event.reachable:
                return replace(n, reachable=True, unreachable_since=None, error=None, retry_in=None,
                               backend=event.backend or n.backend, last_update=event.ts, host_key=None)
            since = n.unreachable_since if n.reachable is False and n.unreachable_since else (event.since or event.ts)
            return replace(n, reachable=False, unreachable_since=since, error=event.error,
                           retry_in=event.retry_in, backend=event.backend or n.backend, host_key=event.host_key)
        return _with_node(state, event.node, f)
    if isinstance(event, DockerStatus):
        return _with_node(state, event.node, lambda n: replace(
            n, docker_error=None if event.available else (event.error or "not answering")))
    if isinstance(event, ContainersSnapshot):
        def f(n: NodeState) -> NodeState:
            new = {c.name: c for c in event.containers}
            # containers that vanished (e.g. --rm) stay visible as REMOVED so their logs remain reachable
            for name, old in n.containers.items():
                if name not in new and name in n.logs:
                    new[name] = replace(old, state=ContainerState.REMOVED) if old.state is not ContainerState.REMOVED else old
            return replace(n, containers=_frozen(new), last_update=event.ts)
        return _with_node(state, event.node, f)
    if isinstance(event, ContainerChanged):
        def f(n: NodeState) -> NodeState:
            cs = dict(n.containers)
            cs[event.container.name] = event.container
            return replace(n, containers=_frozen(cs), last_update=event.ts)
        return _with_node(state, event.node, f)
    if isinstance(event, MemorySample):
        def f(n: NodeState) -> NodeState:
            hist = (n.memory_history + (event.memory.used_fraction,))[-MEMORY_HISTORY:]
            return replace(n, memory=event.memory, memory_history=hist, last_update=event.ts)
        return _with_node(state, event.node, f)
    if isinstance(event, NodePressure):
        return _with_node(state, event.node, lambda n: replace(n, pressure=event, last_update=event.ts))
    if isinstance(event, GpuSample):
        return _with_node(state, event.node, lambda n: replace(
            n, gpus=event.gpus, gpu_available=event.available, gpu_error=event.error, last_update=event.ts))
    if isinstance(event, LinkSample):
        return _with_node(state, event.node, lambda n: replace(n, links=event.links, last_update=event.ts))
    if isinstance(event, ServingSample):
        return _with_node(state, event.node, lambda n: replace(n, serving=_serving(n.serving, event)))
    if isinstance(event, (LogLine, LogBatch, LogBlock)):
        return _log_source(state, event.node, event.source)
    if isinstance(event, MilestoneReached):
        m = event.milestone

        def f(n: NodeState) -> NodeState:
            ms = dict(n.milestones)
            ms[m.id] = m
            return replace(n, milestones=_frozen(ms))
        if m.node:
            return _with_node(state, m.node, f)
        return state
    if isinstance(event, FindingRaised):
        return _raised(state, event.finding)
    if isinstance(event, FindingResolved):
        old = state.finding_states.get(event.key)
        if old is not None and old.state == "resolved":
            return state
        st = FindingStatus("resolved", event.ts, reason=event.reason, operator=old.operator if old else "")
        return replace(state, finding_states=_frozen({**state.finding_states, event.key: st}))
    if isinstance(event, FindingAcknowledged):
        if event.key in state.finding_states:  # acknowledged already, or resolved: that stands
            return state
        st = FindingStatus("acknowledged", event.ts, operator=event.operator)
        return replace(state, finding_states=_frozen({**state.finding_states, event.key: st}))
    if isinstance(event, ActionEvent):
        return replace(state, actions=(state.actions + (event,))[-500:])
    if isinstance(event, Note):
        return replace(state, notes=state.notes + (event,))
    if isinstance(event, TimelineEntry):
        return replace(state, timeline=(state.timeline + (event,))[-TIMELINE_KEEP:])
    return state


def _raised(state: ClusterState, f0: Finding) -> ClusterState:
    key = f0.key
    st = state.finding_states.get(key)
    # the same finding (id, source, line) raised twice is one finding; raised again after it was
    # resolved, its condition is back (a relaunch that fails the same way): active again
    if st is not None and st.state == "resolved":
        states = dict(state.finding_states)
        del states[key]
        kept = tuple(x for x in state.findings if x.key != key)
        return replace(state, findings=kept + (f0,), finding_states=_frozen(states))
    for i, x in enumerate(state.findings):
        if x.key == key:
            if (x.severity, x.title, x.evidence) == (f0.severity, f0.title, f0.evidence):
                return state
            # revised (the end of input's analysis made a death after a shutdown request info, a
            # suspicion an error): the strip shows what the action and the session say now
            return replace(state, findings=state.findings[:i] + (f0,) + state.findings[i + 1:])
    return replace(state, findings=state.findings + (f0,))


def reduce_all(state: ClusterState, events) -> ClusterState:
    for e in events:
        state = reduce(state, e)
    return state
