"""Live stall detector: an engine Processor raising "suspected hang" when progress stops everywhere.

Progress signals, per node/source: log lines that are not stall symptoms, RAS collective counts
and token counters that move (``ProgressSample``), GPU power well above idle.  A source is armed
by its first progress; the alarm fires when every armed source has been silent longer than its
allowance: ``threshold_s`` normally, longer after a line that starts a known-quiet phase (weight
loading, CUDA graph capture, compilation), and never while the workload is idle (API up, no
requests) or finished.  One alarm per stall; progress anywhere clears it.
"""

from __future__ import annotations

import re
import time
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Iterable

from ..model import (
    ContainerChanged,
    ContainersSnapshot,
    ContainerState,
    Finding,
    FindingRaised,
    GpuSample,
    LogBatch,
    LogLine,
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
            # one search tells plain progress lines (nearly all) from those any rule cares about
            "special": re.compile("|".join(f"(?:{p})" for t in ("idle", "not_progress", "busy") for p in d[t].values())
                                  + "|" + "|".join(f"(?:{v['pattern']})" for v in d["quiet_phases"].values()))}

_GONE = (ContainerState.EXITED, ContainerState.DEAD, ContainerState.REMOVED)


@dataclass
class _Source:
    last_progress: float
    allow: float
    idle: bool = False
    last_line: str = ""


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
        elif isinstance(event, ProgressSample):
            key = (event.node, event.source)
            prev = self._counters.get(key)
            self._counters[key] = event.value
            if prev is not None and event.value != prev:
                self._progress(key, now)
            if event.busy is not None:
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
        elif isinstance(event, GpuSample):
            for g in event.gpus:
                if g.power_w is not None and g.power_limit_w and g.power_w > _data()["gpu_frac"] * g.power_limit_w:
                    self._progress((event.node, f"gpu {g.index}"), now)
        return ()

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
        active = [(k, s) for k, s in self.sources.items() if not s.idle]
        if not active or self.raised_at is not None:
            return ()
        if not all(now - s.last_progress > s.allow for _, s in active):
            return ()
        silence = now - max(s.last_progress for _, s in active)
        self.raised_at = now
        self.history.append((now, silence))
        nodes = sorted({k[0] for k, _ in active})
        evidence = tuple(f"{k[0]}/{k[1]}: silent {now - s.last_progress:.0f} s; last: {s.last_line[:160]}"
                         for k, s in active)
        finding = Finding(id=FINDING_ID, severity="error", title=f"Suspected hang: no progress on any rank for {silence:.0f} s",
                          source="stall-detector", evidence=evidence, node=nodes[0] if len(nodes) == 1 else "",
                          advice="Investigate now (key i / `sparktui investigate`): RAS, py-spy and GPU evidence "
                                 "from every node, then a verdict.")
        return (FindingRaised(finding=finding, ts=now),)
