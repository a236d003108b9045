"""Liveness from what the cluster does (issue 29 item 1): each rule of the stall detector beside its
healthy counterpart, replayed from real vLLM (CPU build) recordings with their own timing.

The logs are tests/fixtures/vllm-cpu (README there): each line is fed at the time its vLLM or torch
timestamp says (a line without one at the time of the line before it) into the engine's own
processors (Diagnoser: milestones; StallDetector), ticking every 0.5 s on a fake clock.  /metrics
samples are the real scrapes (metrics_before.txt, metrics_after.txt) parsed by the probe.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from sparktui.config import demo_config
from sparktui.diagnosis import Diagnoser
from sparktui.diagnosis.stall import FINDING_ID, ProgressSample, StallDetector
from sparktui.engine import Engine
from sparktui.model import ContainerChanged, ContainerInfo, ContainerState, FindingRaised, LogLine
from sparktui.probes import metrics

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "vllm-cpu"
_VLLM_TS = re.compile(r"\b\d\d-\d\d (\d\d):(\d\d):(\d\d) \[")
_TORCH_TS = re.compile(r"^\[?[WIE]\d{4} (\d\d):(\d\d):(\d\d)\.")


def timed(name: str, t0: float, *, stop: str | None = None) -> list[tuple[float, str]]:
    """(time, line) of a recorded log, times from its own stamps, relative to its first stamp + t0."""
    out, first, last = [], None, None
    for line in (FIX / name).read_text(encoding="utf-8").splitlines():
        if stop is not None and stop in line:
            break
        m = _VLLM_TS.search(line) or _TORCH_TS.search(line)
        if m:
            secs = int(m.group(1)) * 3600 + int(m.group(2)) * 60 + int(m.group(3))
            first = secs if first is None else first
            last = secs
        out.append((t0 + ((last or 0) - (first or 0)), line))
    return out


def sample(name: str, **changes):
    return replace(metrics.serving_sample("spark1", metrics.parse((FIX / name).read_text()), None), **changes)


class Clock:
    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def started(node: str, name: str, t: float) -> ContainerChanged:
    return ContainerChanged(node, ContainerInfo(id=name * 4, name=name, image="vllm-cpu", state=ContainerState.RUNNING), ts=t)


def replay(timeline: list[tuple[float, object]], until: float, clock: Clock | None = None):
    """Feed (time, event) in order through an engine with the live processors; tick every 0.5 s.
    Returns (alarms as (time, finding), engine)."""
    clock = clock or Clock()
    det = StallDetector(clock=clock)
    eng = Engine(demo_config(), processors=[Diagnoser(), det])
    timeline = sorted(timeline, key=lambda x: x[0])
    seqs: dict[tuple[str, str], int] = {}
    i, alarms = 0, []
    while clock.t < until:
        clock.t += 0.5
        batch = []
        while i < len(timeline) and timeline[i][0] <= clock.t:
            ev = timeline[i][1]
            if isinstance(ev, LogLine):
                k = (ev.node, ev.source)
                seqs[k] = seqs.get(k, 0) + 1
                ev = replace(ev, seq=seqs[k])
            batch.append(ev)
            i += 1
        eng.process(batch)
        raised = list(det.tick(clock.t))
        for ev in eng.process(raised):
            if isinstance(ev, FindingRaised) and ev.finding.id == FINDING_ID:
                alarms.append((clock.t, ev.finding))
    return alarms, eng


def lines(node: str, source: str, rows) -> list[tuple[float, LogLine]]:
    return [(t, LogLine(node, source, text)) for t, text in rows]


# --------------------------------------------------------------------------- start-up phases


def test_a_fresh_rank_importing_torch_in_silence_is_no_hang():
    # the headless rank's start-up: 11 s silent after its first line (importing vLLM), 12 s while its
    # worker process imports torch; one 10 s timer raised "suspected hang" here on the bed
    rank1 = timed("mp_worker_killed_rank1.log", 1000.0, stop="WorkerProc hit an exception")
    tl = [(999.0, started("spark2", "tiny_vllm", 999.0))] + lines("spark2", "tiny_vllm", rank1)
    alarms, _ = replay(tl, rank1[-1][0])
    assert alarms == []


def test_start_up_stopped_inside_a_phase_past_its_budget_alarms():
    # the counterpart: the same rank stops after resolving its architecture and never goes on
    rank1 = timed("mp_worker_killed_rank1.log", 1000.0, stop="Using max model len")
    tl = [(999.0, started("spark2", "tiny_vllm", 999.0))] + lines("spark2", "tiny_vllm", rank1)
    alarms, _ = replay(tl, rank1[-1][0] + 400)
    assert alarms, "a start-up stuck past its phase budget must be suspected"
    at, f = alarms[0]
    assert 180 <= at - rank1[-1][0] <= 185
    assert "start-up phase arch_resolved" in f.evidence[0]


def test_a_container_that_never_prints_after_its_start_alarms_past_the_import_budget():
    alarms, _ = replay([(1000.0, started("spark2", "tiny_vllm", 1000.0))], 1300)
    assert alarms and 180 <= alarms[0][0] - 1000.0 <= 185


def test_a_single_server_start_up_with_its_warm_up_compile_is_no_hang():
    # serve.log: 12 s silent after "Found ulimit" (imports), 28 s in "Warming up model for the compilation"
    serve = timed("serve.log", 1000.0, stop="[shutdown]")
    tl = [(999.0, started("spark1", "vllm", 999.0))] + lines("spark1", "vllm", serve)
    alarms, _ = replay(tl, serve[-1][0] + 300)
    assert alarms == []


# --------------------------------------------------------------------------- serving


def _cluster(until: float):
    """Head and headless rank of the recorded mp cluster up to the kill, the head's /metrics every 3 s."""
    head = timed("mp_worker_killed_head.log", 1000.0, stop="WorkerProc hit an exception")
    rank1 = timed("mp_worker_killed_rank1.log", 1000.0, stop="WorkerProc hit an exception")
    tl = [(999.0, started("spark1", "tiny_vllm", 999.0)), (999.0, started("spark2", "tiny_vllm", 999.0))]
    tl += lines("spark1", "tiny_vllm", head) + lines("spark2", "tiny_vllm", rank1)
    return tl, max(t for t, _ in head)


def test_a_serving_cluster_with_a_silent_headless_worker_is_no_hang_for_ten_minutes():
    tl, ready = _cluster(0)
    before, after = sample("metrics_before.txt"), sample("metrics_after.txt")
    t, k = ready, 0
    while t < ready + 600:  # idle with a burst of 4 requests every minute, as the bed's load tests
        t += 3
        k += 1
        tl.append((t, after if (k // 20) % 2 else before))
    alarms, _ = replay(tl, ready + 600)
    assert alarms == []


def test_requests_running_and_none_finishing_alarms_within_the_budget():
    tl, ready = _cluster(0)
    stuck = sample("metrics_before.txt", running=1.0)
    tl += [(ready + 3 * k, stuck) for k in range(1, 40)]
    alarms, _ = replay(tl, ready + 120)
    assert alarms
    at, f = alarms[0]
    assert at - (ready + 3) <= 35
    assert "waiting/running" in f.title and "unchanged" in f.evidence[0]


def test_requests_running_while_the_counters_move_is_no_hang():
    tl, ready = _cluster(0)
    a, b = sample("metrics_before.txt", running=1.0), sample("metrics_after.txt", running=1.0)
    tl += [(ready + 3 * k, a if k % 2 else b) for k in range(1, 40)]
    alarms, _ = replay(tl, ready + 120)
    assert alarms == []


def test_the_serving_rule_ignores_log_silence_but_not_a_server_that_stops_answering():
    # with no answering server the logs decide again: the head's last word is idle, the worker is
    # excused once the cluster serves; so no alarm either way here, but the serving state is cleared
    clock = Clock()
    det = StallDetector(clock=clock)
    det.feed(sample("metrics_before.txt"))
    assert det.serve is not None
    det.feed(replace(sample("metrics_before.txt"), up=False))
    assert det.serve is None


# --------------------------------------------------------------------------- a collective in flight


def test_a_collective_in_flight_alarms_before_the_serving_budget():
    clock = Clock()
    det = StallDetector(clock=clock)
    idle = sample("metrics_before.txt", running=1.0)  # a request waits on the stuck collective
    det.feed(idle)
    det.feed(ProgressSample("spark1", "ras 0xabc rank 0", 120))
    det.feed(ProgressSample("spark2", "ras 0xabc rank 1", 119))  # rank 1 never joined #120
    for _ in range(30):
        clock.t += 0.5
        det.feed(idle)
        out = list(det.tick())
        if out:
            break
    assert out and "collective in flight" in out[0].finding.title and "rank 1=119" in out[0].finding.evidence[0]


def test_equal_frozen_ras_counts_of_an_idle_server_are_no_hang():
    clock = Clock()
    det = StallDetector(clock=clock)
    idle = sample("metrics_before.txt")
    for _ in range(120):
        clock.t += 0.5
        det.feed(idle)
        det.feed(ProgressSample("spark1", "ras 0xabc rank 0", 120))
        det.feed(ProgressSample("spark2", "ras 0xabc rank 1", 120))
        assert list(det.tick()) == []
