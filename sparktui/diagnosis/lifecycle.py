"""A finding's lifecycle: the engine processor that says when a finding's condition has ended.

Fed every event like the other processors; derives ``FindingResolved`` and ``FindingAcknowledged``,
which the engine reduces, records and shows like any event (so a replay shows them too).

- a container a finding is about is removed, or replaced by another with its name (a new id):
  its findings resolve ("container removed" / "container replaced");
- a launch reaches ready (this session's action, or another operator's read from the shared
  timeline): the findings of the previous run resolve ("relaunched, ready"): those raised before
  the launch began that are not about a container still running as it was then;
- a stop removes a node's containers: that node's live findings resolve ("stopped"), the
  cluster-wide ones too (a half cluster, a suspected hang);
- doctor runs a check again and it passes: the finding that check raised resolves ("check passes");
- another operator acknowledged a finding on the shared timeline: ``FindingAcknowledged``.

An operator's own acknowledgement is emitted by the face.  Nothing here does IO or reads a clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from ..model import (
    FAIL,
    OK,
    WARN,
    ActionEvent,
    ContainerChanged,
    ContainersSnapshot,
    ContainerState,
    Event,
    Finding,
    FindingAcknowledged,
    FindingRaised,
    FindingResolved,
    TimelineEntry,
)

CHECK_ACTION = "doctor"  # its findings come from checks (source "doctor" / "<node>/doctor"), not a container


@dataclass
class _Tracked:
    finding: Finding
    container: tuple[str, str] | None  # (node, name) the finding is about
    run: str | None  # that container's id when the finding was raised
    check: tuple[str, str, str] | None  # doctor's (step, node, key) that raised it
    resolved: bool = False


def container_of(f: Finding) -> tuple[str, str] | None:
    """(node, container) a finding is about: its source is ``<node>/<container>``."""
    node, sep, name = (f.source or "").partition("/")
    if not sep or not name or (f.node and node != f.node) or name == CHECK_ACTION:
        return None
    return node, name


def _is_check(f: Finding) -> bool:
    return f.source == CHECK_ACTION or f.source.endswith("/" + CHECK_ACTION)


class Lifecycle:
    def __init__(self) -> None:
        self.ids: dict[tuple[str, str], str] = {}  # (node, container name) -> the id under that name
        self.running: set[tuple[str, str]] = set()
        self.tracked: dict[str, _Tracked] = {}
        self.launch_began: float | None = None
        self._check_titles: dict[tuple[str, str], tuple[str, str, str]] = {}  # (node, title) -> check

    # ------------------------------------------------------------------ engine protocol
    def feed(self, event: Event) -> Iterable[Event]:
        if isinstance(event, FindingRaised):
            self._raised(event.finding)
        elif isinstance(event, FindingResolved):
            t = self.tracked.get(event.key)
            if t is not None:
                t.resolved = True
        elif isinstance(event, ContainerChanged):
            return self._containers(event.node, (event.container,), event.ts, full=False)
        elif isinstance(event, ContainersSnapshot):
            return self._containers(event.node, event.containers, event.ts, full=True)
        elif isinstance(event, ActionEvent):
            return self._step(event.action, event.step, event.status, event.node, event.key, event.message, event.ts)
        elif isinstance(event, TimelineEntry):
            if event.kind == "ack":
                return [FindingAcknowledged(event.message, operator=event.operator, ts=event.ts)] if event.message else []
            if event.kind == "action":  # another operator's launch or stop ends these findings as well
                return self._step(event.action, event.step, event.status, event.node, "", event.message, event.ts)
        return []

    # ------------------------------------------------------------------ what is tracked
    def _raised(self, f: Finding) -> None:
        where = container_of(f)
        check = self._check_titles.get((f.node, f.title)) if _is_check(f) else None
        old = self.tracked.get(f.key)
        if old is not None and not old.resolved:
            return  # the same finding again: it keeps the run it was first raised in
        self.tracked[f.key] = _Tracked(f, where, self.ids.get(where) if where else None, check)

    def _active(self) -> list[tuple[str, _Tracked]]:
        return [(k, t) for k, t in self.tracked.items() if not t.resolved]

    def _resolve(self, keys: list[str], reason: str, ts: float) -> list[Event]:
        out: list[Event] = []
        for k in keys:
            self.tracked[k].resolved = True
            out.append(FindingResolved(k, reason, ts=ts))
        return out

    # ------------------------------------------------------------------ rules
    def _containers(self, node: str, containers, ts: float, *, full: bool) -> list[Event]:
        gone: dict[str, str] = {}  # name -> reason
        seen = set()
        for c in containers:
            seen.add(c.name)
            old = self.ids.get((node, c.name))
            self.running.discard((node, c.name))
            if c.state is ContainerState.REMOVED:
                gone[c.name] = "container removed"
                self.ids.pop((node, c.name), None)
                continue
            if c.state is ContainerState.RUNNING:
                self.running.add((node, c.name))
            if old is not None and old != c.id:
                gone[c.name] = "container replaced"
            self.ids[(node, c.name)] = c.id
        if full:  # a snapshot is the node's whole set: a name missing from it was removed
            for (n, name) in list(self.ids):
                if n == node and name not in seen:
                    gone[name] = "container removed"
                    del self.ids[(n, name)]
                    self.running.discard((n, name))
        if not gone:
            return []
        out: list[Event] = []
        for reason in sorted(set(gone.values())):
            keys = [k for k, t in self._active()
                    if t.container is not None and t.container[0] == node and gone.get(t.container[1]) == reason
                    # a replaced container: only what its earlier run raised
                    and (reason != "container replaced" or t.run != self.ids.get(t.container))]
            out += self._resolve(keys, reason, ts)
        return out

    def _step(self, action: str, step: str, status: str, node: str, key: str, message: str, ts: float) -> list[Event]:
        if action == "launch":
            if step == "preflight" and status == "started":
                self.launch_began = ts
            elif step == "ready" and status == OK:
                began, self.launch_began = self.launch_began, None
                return self._relaunched(ts if began is None else began, ts)
            return []
        if action == "stop" and step == "stop" and status == OK:
            keys = [k for k, t in self._active() if not _is_check(t.finding) and t.finding.node in (node, "")]
            return self._resolve(keys, "stopped", ts)
        if action == CHECK_ACTION:
            return self._check(step, status, node, key, message, ts)
        return []

    def _relaunched(self, began: float, ts: float) -> list[Event]:
        keys = []
        for k, t in self._active():
            if _is_check(t.finding) or t.finding.ts >= began:
                continue  # a check's finding ends when it passes; a new one belongs to this run
            if t.container in self.running and t.run is not None and self.ids.get(t.container) == t.run:
                continue  # its container still runs as it did (a launch that attached to it)
            keys.append(k)
        return self._resolve(keys, "relaunched, ready", ts)

    def _check(self, step: str, status: str, node: str, key: str, message: str, ts: float) -> list[Event]:
        """Doctor's rows: a failing or warning check's title names the finding it is about to raise
        (``CheckResult.to_finding``); a later passing row of the same check resolves it.  A step's
        own row (no key) passing means every check of that step passed."""
        check = (step, node, key)
        if status in (FAIL, WARN):
            self._check_titles[(node, message)] = check
            return []
        if status != OK:
            return []
        whole_step = not node and not key
        keys = [k for k, t in self._active() if t.check is not None
                and (t.check == check or (whole_step and t.check[0] == step))]
        return self._resolve(keys, "check passes", ts)
