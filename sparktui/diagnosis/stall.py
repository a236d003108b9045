"""Live stall detector: an engine Processor raising "suspected hang" when work that is expected to
progress does not.

Three rules, each with its healthy counterpart (stall_phases.toml holds the numbers):

- serving: while the head's ``/metrics`` answers (``ServingSample`` up), it alone decides.  Requests
  waiting or running whose finished-request and generated-token counters stay frozen past
  ``[serving] budget_s`` are a hang; no queued work, or counters that move, is a serving cluster,
  however silent its logs (a headless mp or Ray worker is idle by design).
- collective in flight: the RAS counts of one communicator differ between its ranks and none moves
  for ``threshold_s`` (a rank waits in a collective the others never reach), served or not.
- logs (no answering server): every armed source silent past its allowance.  The allowance is
  ``threshold_s``, longer after a line that starts a known-quiet phase, and during start-up the
  budget of the phase the source is in (the milestone it reached last, from the container's start:
  a fresh rank imports torch in silence).  On a node under pressure (PSI: tasks waiting for a CPU, IO
  or memory) a start-up's silence may last ``threshold_s / (1 - share)``, capped: its ranks run only
  part of the time, and a real hang blocks them, which lets the pressure fall.  Sources whose last word was "idle" (API up, no
  requests) or that finished do not count; once a source serves (api_ready), only serving sources count.

One alarm per stall; progress anywhere clears it.
"""

from __future__ import annotations

import re
import time
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Iterable

from . import catalogue
from ..model import (
    ContainerChanged,
    ContainersSnapshot,
    ContainerState,
    FindingRaised,
    GpuSample,
    LogBatch,
    LogLine,
    MilestoneReached,
    NodePressure,
    ServingSample,
)

FINDING_ID = "suspected_hang"


@dataclass(frozen=True)
class ProgressSample:
    """A counter read from a node (RAS collective count of one rank, generated tokens, ...)."""

    node: str
    source: str  # "ras rank 0", "metrics tokens", ...
    value: float
    ts: float = field(default_factory=time.time)
    busy: bool | None = None  # False: the node has no work queued (vLLM: no request running or waiting)


@lru_cache(maxsize=1)
def _data() -> dict:
    text = resources.files("sparktui.diagnosis").joinpath("stall_phases.toml").read_text()
    d = tomllib.loads(text)
    comp = lambda table: [re.compile(v) for v in table.values()]  # noqa: E731
    return {"threshold": float(d["detector"]["threshold_s"]), "gpu_frac": float(d["detector"]["gpu_busy_fraction"]),
            "not_progress": comp(d["not_progress"]), "idle": comp(d["idle"]), "busy": comp(d["busy"]),
            "quiet": [(re.compile(v["pattern"]), float(v["allow_s"])) for v in d["quiet_phases"].values()],
            "terminal": frozenset(d["terminal"]["finding_ids"]),
            "phases": {k: float(v) for k, v in d["phase_budgets"].items()},
            "watched": comp(d["watched"]),
            "serve_budget": float(d["serving"]["budget_s"]), "serve_fresh": float(d["serving"]["fresh_s"]),
            "serve_log": float(d["serving"]["log_budget_s"]),
            "pressure": {k: float(v) for k, v in d["pressure"].items()},
            # one search tells plain progress lines (nearly all) from those any rule cares about
            "special": re.compile("|".join(f"(?:{p})" for t in ("idle", "not_progress", "busy") for p in d[t].values())
                                  + "|" + "|".join(f"(?:{v['pattern']})" for v in d["quiet_phases"].values()))}

_RAS_SOURCE = re.compile(r"^ras (\S+) rank (\d+)$")
_GONE = (ContainerState.EXITED, ContainerState.DEAD, ContainerState.REMOVED)


@dataclass
class _Source:
    last_progress: float
    allow: float
    idle: bool = False
    last_line: str = ""
    phase: str = ""  # the start-up milestone reached last ("" : none, or a source that is not a start-up)
    serving: bool = False  # it reached api_ready: the API server's own log


@dataclass
class _Serve:
    """What the head's /metrics said last: the liveness of a serving cluster."""

    up_at: float
    queued: float  # requests running + waiting
    counts: tuple  # (finished requests, generated tokens): either moving is progress
    moved_at: float  # the last time a count moved or queued work arrived
    node: str = ""


class StallDetector:
    def __init__(self, threshold_s: float | None = None, *, clock=time.time) -> None:
        d = _data()
        self.threshold = threshold_s if threshold_s is not None else d["threshold"]
        self.clock = clock
        self.sources: dict[tuple[str, str], _Source] = {}
        self._counters: dict[tuple[str, str], float] = {}
        self.raised_at: float | None = None
        self.last_progress: float | None = None
        self.history: list[tuple[float, float]] = []  # (raised at, silence that triggered it)
        self.serve: _Serve | None = None
        self._ras: dict[tuple[str, str], tuple[float, float]] = {}  # (comm, rank) -> (count, changed at)
        self._idle_nodes: set[str] = set()  # nodes whose counters said no work is queued
        self._pressure: dict[str, tuple[NodePressure, float]] = {}  # node -> (its last reading, read at)

    # ------------------------------------------------------------------ input
    def _progress(self, key: tuple[str, str], ts: float, line: str = "") -> None:
        src = self.sources.get(key)
        if src is None:
            src = self.sources[key] = _Source(last_progress=ts, allow=self.threshold)
        src.last_progress = max(src.last_progress, ts)
        src.idle = False
        if line:
            src.last_line = line
            src.allow = self.threshold
            for pat, allow in _data()["quiet"]:
                if pat.search(line):
                    src.allow = max(self.threshold, allow)
            if src.phase in _data()["phases"] and any(p.search(line) for p in _data()["watched"]):
                src.phase = "rendezvous"  # waits on peers only: the start-up budget ends here
        self.last_progress = max(self.last_progress or ts, ts)
        self.raised_at = None

    def _kind(self, text: str) -> str:
        """progress / idle / busy / ignore for one stripped, non-empty line."""
        d = _data()
        if not d["special"].search(text):
            return "progress"  # nearly every line: one search decides
        if any(p.search(text) for p in d["idle"]):
            return "idle"
        if any(p.search(text) for p in d["not_progress"]):
            return "busy" if any(p.search(text) for p in d["busy"]) else "ignore"
        return "progress"

    def _line(self, node: str, source: str, text: str, ts: float) -> None:
        self._batch(node, source, (text,), ts)

    def _batch(self, node: str, source: str, texts, now: float) -> None:
        """Apply lines in order.  Walking back gives the same end state in far fewer regex calls:
        the last progress line sets the progress time, phase allowance and last line; an idle or
        busy line after it decides whether silence counts; symptom lines change nothing."""
        key = (node, source)
        after: str | None = None  # the latest idle/busy verdict after the last progress line
        for raw in reversed(texts):
            text = raw.strip()
            if not text:
                continue
            kind = self._kind(text)
            if kind == "progress":
                self._progress(key, now, text)
                break
            if kind != "ignore" and after is None:
                after = kind
        src = self.sources.get(key)
        if after is not None and src is not None:
            src.idle = after == "idle"

    def feed(self, event) -> Iterable:
        now = self.clock()
        if isinstance(event, LogLine):
            self._line(event.node, event.source, event.text, now)
        elif isinstance(event, LogBatch):
            self._batch(event.node, event.source, [ln.text for ln in event.lines], now)
        elif isinstance(event, ServingSample):
            self._serving(event, now)
        elif isinstance(event, MilestoneReached):
            self._milestone(event.milestone, now)
        elif isinstance(event, ProgressSample):
            key = (event.node, event.source)
            prev = self._counters.get(key)
            self._counters[key] = event.value
            m = _RAS_SOURCE.match(event.source)
            if m is not None:
                old = self._ras.get((m.group(1), m.group(2)))
                self._ras[(m.group(1), m.group(2))] = (event.value, now if old is None or old[0] != event.value else old[1])
            if prev is not None and event.value != prev:
                self._progress(key, now)
            if event.busy is not None:
                (self._idle_nodes.discard if event.busy else self._idle_nodes.add)(event.node)
                # an idle server's frozen counters are not a hang; queued work makes silence count again
                for k, src in self.sources.items():
                    if k[0] == event.node:
                        src.idle = not event.busy
        elif isinstance(event, (ContainerChanged, ContainersSnapshot)):
            # a process that exited is finished, not hung: its silence must not raise the alarm
            containers = (event.container,) if isinstance(event, ContainerChanged) else event.containers
            for c in containers:
                if c.state in _GONE:
                    self._finished(event.node, c.name)
        elif isinstance(event, FindingRaised):
            f = event.finding
            if f.id in _data()["terminal"] and "/" in f.source:
                node, _, source = f.source.partition("/")
                self._finished(node, source)
        elif isinstance(event, NodePressure):
            self._pressure[event.node] = (event, now)
        elif isinstance(event, GpuSample):
            for g in event.gpus:
                if g.power_w is not None and g.power_limit_w and g.power_w > _data()["gpu_frac"] * g.power_limit_w:
                    self._progress((event.node, f"gpu {g.index}"), now)
        return ()

    def _serving(self, ev: ServingSample, now: float) -> None:
        if not ev.up or (ev.running is None and ev.waiting is None):
            self.serve = None  # no answer (or no numbers): the logs decide again
            return
        queued = (ev.running or 0) + (ev.waiting or 0)
        counts = (ev.requests_total, ev.generation_tokens_total)
        old = self.serve
        moved = old is None or counts != old.counts or (queued and not old.queued) or ev.reset
        self.serve = _Serve(up_at=now, queued=queued, counts=counts, moved_at=now if moved else old.moved_at,
                            node=ev.node)
        if moved or not queued:
            self.raised_at = None
            self.last_progress = now if moved else self.last_progress

    def _milestone(self, m, now: float) -> None:
        node, _, source = m.source.partition("/")
        if not source:
            return
        key = (node, source)
        src = self.sources.get(key)
        if src is None:  # a container that started: its import phase runs before its first line
            if m.id != "container_started":
                return
            src = self.sources[key] = _Source(last_progress=now, allow=self.threshold)
        if m.id == "container_started":  # a restarted container starts over
            src.last_progress, src.idle, src.serving = now, False, False
        if m.id in ("api_ready", "first_prompt"):
            src.serving = True
        if m.id in _data()["phases"] or m.id in ("api_ready", "first_prompt"):
            src.phase = m.id

    def _allowance(self, src: _Source, node: str, now: float) -> float:
        if src.serving:
            return max(src.allow, _data()["serve_log"])
        if not src.phase:  # not a start-up (a plain log, a workload past its milestones): the threshold
            return src.allow
        return max(src.allow, _data()["phases"].get(src.phase, 0.0), self._starved(node, now)[1])

    def _starved(self, node: str, now: float) -> tuple[NodePressure | None, float]:
        """(the node's fresh pressure reading, the silence a start-up may keep there: 0 when the node
        is not under pressure).  A rank that runs only (1 - share) of the time needs threshold /
        (1 - share) for threshold seconds of work."""
        c = _data()["pressure"]
        got = self._pressure.get(node)
        if got is None or now - got[1] > c["fresh_s"]:
            return None, 0.0
        share = min(1.0, got[0].worst / 100.0)
        if share < c["min_share"]:
            return got[0], 0.0
        return got[0], min(c["cap_s"], self.threshold / max(1.0 - share, 1e-3))

    def _finished(self, node: str, source: str) -> None:
        src = self.sources.get((node, source))
        if src is not None:
            src.idle = True  # new lines from a restarted container re-arm it (_progress)

    # ------------------------------------------------------------------ the alarm
    def silent_for(self, now: float) -> float | None:
        """Seconds since the most recent progress of any armed, non-idle source (None: nothing armed)."""
        active = [s for s in self.sources.values() if not s.idle]
        if not active:
            return None
        return now - max(s.last_progress for s in active)

    def tick(self, now: float | None = None) -> Iterable:
        now = self.clock() if now is None else now
        if self.raised_at is not None:
            return ()
        why = self._in_flight(now) or self._served(now) or self._silent(now)
        if why is None:
            return ()
        silence, title, evidence, nodes = why
        self.raised_at = now
        self.history.append((now, silence))
        finding = catalogue.finding(FINDING_ID, severity="error", title=title, source="stall-detector", evidence=evidence,
                          node=nodes[0] if len(nodes) == 1 else "",
                          advice="Investigate now (key i / `sparktui investigate`): RAS, py-spy and GPU evidence "
                                 "from every node, then a verdict.")
        return (FindingRaised(finding=finding, ts=now),)

    def _in_flight(self, now: float):
        """A communicator whose ranks' RAS counts differ and none moved for the threshold: a rank
        waits in a collective the others never reached."""
        if (self.serve is not None and not self.serve.queued) or self._idle_nodes:
            return None  # no work queued: a skew the RAS polls caught is nothing waiting on it
        comms: dict[str, dict[str, tuple[float, float]]] = {}
        for (comm, rank), v in self._ras.items():
            comms.setdefault(comm, {})[rank] = v
        for comm, ranks in comms.items():
            if len(ranks) < 2 or len({v for v, _ in ranks.values()}) < 2:
                continue
            frozen = now - max(t for _, t in ranks.values())
            if frozen > self.threshold:
                counts = ", ".join(f"rank {r}={v:.0f}" for r, (v, _) in sorted(ranks.items()))
                return (frozen, f"Suspected hang: a collective in flight for {frozen:.0f} s (RAS counts differ, frozen)",
                        (f"RAS communicator {comm}: {counts}, unchanged for {frozen:.0f} s",), [])
        return None

    def _served(self, now: float):
        """The head answers: queued requests with frozen counters are the only hang (else: none)."""
        sv = self.serve
        if sv is None or now - sv.up_at > _data()["serve_fresh"]:
            return None
        stalled = now - sv.moved_at
        if not sv.queued or stalled <= _data()["serve_budget"]:
            return ()  # serving or idle: no source is a suspect
        done, tokens = sv.counts
        return (stalled, f"Suspected hang: {sv.queued:.0f} request(s) waiting/running, none finished for {stalled:.0f} s",
                (f"{sv.node}: /metrics answers; running+waiting {sv.queued:.0f}; finished requests "
                 f"{'?' if done is None else f'{done:.0f}'} and generated tokens {'?' if tokens is None else f'{tokens:.0f}'} "
                 f"unchanged for {stalled:.0f} s",), [sv.node] if sv.node else [])

    def _silent(self, now: float):
        active = [(k, s) for k, s in self.sources.items() if not s.idle]
        if any(s.serving for s in self.sources.values()):
            # a serving cluster: only the API server's own log can say it is stuck (busy and silent)
            active = [(k, s) for k, s in active if s.serving]
        if not active or not all(now - s.last_progress > self._allowance(s, k[0], now) for k, s in active):
            return None
        silence = now - max(s.last_progress for _, s in active)
        nodes = sorted({k[0] for k, _ in active})
        evidence = tuple(self._why_silent(k[0], k[1], s, now) for k, s in active)
        return (silence, f"Suspected hang: no progress on any rank for {silence:.0f} s", evidence, nodes)

    def _why_silent(self, node: str, source: str, s: _Source, now: float) -> str:
        allowed = self._allowance(s, node, now)
        reading, stretched = self._starved(node, now)
        said = ""
        if reading is not None and s.phase and not s.serving:
            parts = [f"{k} {v:.0f} %" for k, v in (("CPU", reading.cpu), ("IO", reading.io), ("memory", reading.memory))
                     if v is not None]
            said = f"; {node} pressure (share of the last 10 s a task waited): {', '.join(parts)}"
            said += f", so {allowed:.0f} s allowed" if stretched and stretched >= allowed else ""
        return (f"{node}/{source}: silent {now - s.last_progress:.0f} s"
                + (f" in start-up phase {s.phase} (budget {allowed:.0f} s)" if s.phase in _data()["phases"] else "")
                + said + f"; last: {s.last_line[:160]}")
