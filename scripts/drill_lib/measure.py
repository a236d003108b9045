"""Measuring a drill: pure parts shared by scripts/drill, scripts/bench_drill.py and tests/e2e.

``RankRecorder`` writes down, on every engine batch, which finding the engine ranks first (the TUI's
strip shows that one): a list of ``Sample``.  ``evaluate`` reads such a list against the fault's
moment and the ids that name the fault: seconds to the first right one ranked first, and every wrong
alarm ranked first before it (a false alarm).  No clock, no IO: recorded sequences test it.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import Callable

# a wrong finding ranked first is a false alarm when it is an error, or a warning that says the
# cluster is stuck (the cry-wolf); other warnings (socket transport, arch notes) are only noted
HANG_IDS = ("suspected_hang", "shm_broadcast_stall")


def is_alarm(id: str | None, severity: str) -> bool:
    return severity == "error" or id in HANG_IDS


@dataclass(frozen=True)
class Sample:
    t: float  # monotonic seconds
    id: str | None  # the finding ranked first (None: nothing active)
    severity: str = ""
    title: str = ""
    key: str = ""


class RankRecorder:
    """Subscribe to an engine; keep a Sample each time the finding ranked first changes, and every
    error finding raised (a healthy drill allows none)."""

    def __init__(self, engine, clock: Callable[[], float] = time.monotonic) -> None:
        self.engine = engine
        self.clock = clock
        self.samples: list[Sample] = []
        self.errors: list[Sample] = []
        self._seen: set[str] = set()
        self._waiters: list = []
        engine.subscribe(self._on_batch)

    def _on_batch(self, batch) -> None:
        t = self.clock()
        ranked = self.engine.ranked_findings()
        first = ranked[0] if ranked else None
        s = Sample(t, first.id, first.severity, first.title, first.key) if first else Sample(t, None)
        if not self.samples or self.samples[-1].key != s.key:
            self.samples.append(s)
        for f in self.engine.state.findings:
            if f.severity == "error" and f.key not in self._seen:
                self._seen.add(f.key)
                self.errors.append(Sample(t, f.id, f.severity, f.title, f.key))
        for pred, ev in list(self._waiters):
            if pred(self.samples):
                ev.set()

    async def until_first(self, ids: tuple[str, ...], since: float, timeout: float) -> bool:
        """Wait (no polling) until one of ``ids`` is ranked first after ``since``; False on timeout."""
        import asyncio

        def hit(samples: list[Sample]) -> bool:
            return any(s.t >= since and s.id in ids for s in samples) or (
                bool(samples) and samples[-1].id in ids)

        if hit(self.samples):
            return True
        ev = asyncio.Event()
        entry = (hit, ev)
        self._waiters.append(entry)
        try:
            await asyncio.wait_for(ev.wait(), timeout)
            return True
        except asyncio.TimeoutError:
            return False
        finally:
            self._waiters.remove(entry)


@dataclass
class Outcome:
    """One channel's answer to one drill."""

    channel: str
    got: str | None = None  # the id it gave first (healthy: None unless it cried wolf)
    seconds: float | None = None  # fault to that answer
    false_alarms: list[str] = field(default_factory=list)  # wrong ids ranked first before it
    ok: bool = False
    why: str = ""  # one line when not ok
    detail: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return asdict(self)


def evaluate(samples: list[Sample], fault_t: float, expected: tuple[str, ...], budget_s: float,
             errors: list[Sample] = ()) -> Outcome:
    """The engine's answer from its ranked-first history.  A fault drill: the first sample after the
    fault whose id is expected, within the budget, with no wrong alarm ranked first before it (from
    the recording's start: a cluster still starting counts).  A healthy drill: no alarm ranked first
    and no error raised at all."""
    out = Outcome("engine")
    if not expected:
        wrong = [s for s in samples if is_alarm(s.id, s.severity)]
        wrong += [e for e in errors if e.key not in {s.key for s in wrong}]
        out.false_alarms = _ids(wrong)
        out.got = wrong[0].id if wrong else None
        out.ok = not wrong
        if wrong:
            out.why = f"cried wolf: {wrong[0].id} ({wrong[0].title[:80]})"
        return out
    right = next((s for s in samples if s.id in expected and s.t >= fault_t), None)
    if right is None and samples and samples[-1].id in expected and samples[-1].t < fault_t:
        right = samples[-1]  # ranked first already before the fault was written down: 0 s
    upto = right.t if right else float("inf")
    wrong = [s for s in samples if s.t <= upto and is_alarm(s.id, s.severity) and s.id not in expected]
    out.false_alarms = _ids(wrong)
    if right is None:
        last = samples[-1] if samples else None
        out.got = last.id if last else None
        out.why = (f"never ranked {'/'.join(expected)} first; last first: {last.id if last and last.id else 'nothing'}"
                   + (f"; false alarms: {', '.join(out.false_alarms)}" if out.false_alarms else ""))
        return out
    out.got, out.seconds = right.id, max(0.0, right.t - fault_t)
    out.ok = out.seconds <= budget_s and not wrong
    if out.seconds > budget_s:
        out.why = f"{right.id} after {out.seconds:.1f} s (budget {budget_s:.0f} s)"
    elif wrong:
        out.why = f"ranked {', '.join(out.false_alarms)} first before {right.id}"
    return out


def _ids(samples: list[Sample]) -> list[str]:
    out: list[str] = []
    for s in samples:
        if s.id and s.id not in out:
            out.append(s.id)
    return out


def first_id(findings: list[dict]) -> str | None:
    """The first finding of a --json answer (already ordered by its command) that is an alarm."""
    return next((f["id"] for f in findings if is_alarm(f.get("id"), f.get("severity", ""))), None)


def judge_answer(channel: str, findings: list[dict], expected: tuple[str, ...], seconds: float | None,
                 budget_s: float, detail: dict | None = None) -> Outcome:
    """A CLI's answer (status, launch, push: their --json findings, ranked by the command)."""
    got = first_id(findings)
    out = Outcome(channel, got=got, seconds=seconds, detail=detail or {})
    wrong = [f["id"] for f in findings if is_alarm(f.get("id"), f.get("severity", "")) and f["id"] not in expected]
    if not expected:
        out.ok, out.false_alarms = not wrong, wrong
        out.why = f"cried wolf: {wrong[0]}" if wrong else ""
        return out
    if got not in expected:
        out.false_alarms = [got] if got else []
        out.why = f"first finding {got or 'none'}, expected {'/'.join(expected)}"
        return out
    out.ok = seconds is not None and seconds <= budget_s
    if not out.ok:
        out.why = f"{got} after {seconds:.1f} s (budget {budget_s:.0f} s)" if seconds is not None else "no time"
    return out


def judge_investigate(rc: int | None, verdict: dict | None, want: str, expected: tuple[str, ...],
                      seconds: float | None) -> Outcome:
    """``investigate``'s exit code and verdict: "healthy" wants exit 0 and a healthy/idle state;
    "problem" wants exit 1 and a problem (an expected id among its findings is reported as got)."""
    v = verdict or {}
    ids = v.get("finding_ids") or []
    got = next((i for i in ids if i in expected), None) or v.get("rule") or None
    out = Outcome("investigate", got=got, seconds=seconds,
                  detail={"rc": rc, "state": v.get("state"), "rule": v.get("rule"), "title": v.get("title", "")})
    if want == "healthy":
        out.ok = rc == 0 and v.get("state") in ("healthy", "idle")
    else:
        out.ok = rc == 1 and bool(v.get("problem"))
    if not out.ok:
        out.why = f"investigate exit {rc}, verdict {v.get('state')!r} ({v.get('title', '')[:60]}), wanted {want}"
    return out


@dataclass
class DrillResult:
    drill: str
    expected: tuple[str, ...]
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    must: tuple[str, ...] = ()
    error: str = ""  # the drill itself could not run (bed, launch): one line

    @property
    def ok(self) -> bool:
        return not self.error and all(c in self.outcomes and self.outcomes[c].ok for c in self.must)

    @property
    def verdict(self) -> Outcome | None:
        """The channel that counts for the table: the first of ``must`` (the engine where it is)."""
        for c in self.must:
            if c in self.outcomes:
                return self.outcomes[c]
        return None

    @property
    def why(self) -> str:
        if self.error:
            return self.error
        for c in self.must:
            o = self.outcomes.get(c)
            if o is None:
                return f"{c}: no answer"
            if not o.ok:
                return f"{c}: {o.why}"
        return ""

    def to_json(self) -> dict:
        return {"drill": self.drill, "expected": list(self.expected), "ok": self.ok, "why": self.why,
                "must": list(self.must), "outcomes": {k: v.to_json() for k, v in self.outcomes.items()}}


def budgets(results: list[DrillResult], median_budget: float, max_budget: float) -> dict:
    """The issue's budgets over a run: every drill right, median and max fault-to-verdict."""
    secs = [r.verdict.seconds for r in results if r.verdict and r.verdict.seconds is not None and r.expected]
    healthy_alarms = sum(len(r.outcomes["engine"].false_alarms) for r in results
                         if not r.expected and "engine" in r.outcomes)
    med = statistics.median(secs) if secs else None
    worst = max(secs) if secs else None
    return {"right": sum(r.ok for r in results), "drills": len(results),
            "median_s": med, "max_s": worst, "healthy_false_alarms": healthy_alarms,
            "ok": (all(r.ok for r in results) and (med is None or med <= median_budget)
                   and (worst is None or worst <= max_budget) and healthy_alarms == 0)}


def table(results: list[DrillResult]) -> str:
    """One row a drill: the answer of the channel that counts (``verdict``); the false alarms are the
    engine's (what the TUI ranked first before the right finding), else that channel's."""
    rows = [("drill", "expected id", "got", "s to verdict", "false alarms", "ok")]
    for r in results:
        v = r.verdict
        alarms = (r.outcomes.get("engine") or v or Outcome("")).false_alarms
        rows.append((r.drill, "/".join(r.expected) or "(healthy)", (v.got if v else None) or "-",
                     f"{v.seconds:.1f}" if v and v.seconds is not None else "-",
                     ",".join(alarms) if alarms else "0",
                     "ok" if r.ok else "FAIL: " + r.why))
    w = [max(len(row[i]) for row in rows) for i in range(5)]
    return "\n".join("  ".join(c.ljust(w[i]) for i, c in enumerate(row[:5])) + "  " + row[5] for row in rows)


def bench_rows(results: list[DrillResult], median_budget: float, max_budget: float) -> list[dict]:
    """scripts/bench's rows {what, value, unit, budget, ok}."""
    rows = []
    for r in results:
        v = r.verdict
        rows.append({"what": f"{r.drill}: {(v.got if v else None) or '-'}" + ("" if r.ok else f" ({r.why[:60]})"),
                     "value": v.seconds if v and v.seconds is not None else None, "unit": "s",
                     "budget": f"right, <= {max_budget:.0f} s" if r.expected else "0 false alarms", "ok": r.ok})
    b = budgets(results, median_budget, max_budget)
    rows.append({"what": "drills right", "value": b["right"], "unit": f"/{b['drills']}", "budget": "all",
                 "ok": b["right"] == b["drills"]})
    rows.append({"what": "median fault-to-verdict", "value": b["median_s"], "unit": "s",
                 "budget": f"<= {median_budget:.0f}", "ok": b["median_s"] is not None and b["median_s"] <= median_budget})
    rows.append({"what": "false error findings, healthy drills", "value": b["healthy_false_alarms"], "unit": "",
                 "budget": "0", "ok": b["healthy_false_alarms"] == 0})
    return rows


def healthy_plan(minutes: float) -> list[tuple[str, float]]:
    """Mixed load and idle for ``minutes``: cycles of about two minutes (a load test, prompts, a long
    idle, a prompt, a short idle), each phase several times the old 10 s silence timer, ending idle:
    the headless worker silent by design, the state that cried wolf.  A last cycle is never shorter
    than one minute (it takes the rest)."""
    out: list[tuple[str, float]] = []
    left = max(0.0, minutes * 60)
    while left > 0:
        chunk = left if left <= 180 else 120.0
        out += [("load", round(chunk * 0.35, 1)), ("prompt", 3), ("idle", round(chunk * 0.5, 1)), ("prompt", 1),
                ("idle", round(chunk * 0.15, 1))]
        left -= chunk
    return out
