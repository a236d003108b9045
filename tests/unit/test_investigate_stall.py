"""The live stall detector: "suspected hang" after silence everywhere, no alarm in known-quiet phases."""

from __future__ import annotations

from sparktui.diagnosis.stall import FINDING_ID, ProgressSample, StallDetector
from sparktui.engine import Engine
from sparktui.config import demo_config
from sparktui.model import Finding, FindingRaised, GpuInfo, GpuSample, LogLine


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def run(det: StallDetector, clock: Clock, until: float, feed=None) -> float | None:
    """Advance in 0.5 s ticks; return the time of the first alarm."""
    while clock.t < until:
        clock.t += 0.5
        if feed:
            for ev in feed(clock.t):
                det.feed(ev)
        out = list(det.tick(clock.t))
        if out:
            assert isinstance(out[0], FindingRaised) and out[0].finding.id == FINDING_ID
            return clock.t
    return None


def test_alarm_within_budget_after_progress_stops_everywhere():
    clock = Clock()
    det = StallDetector(clock=clock)
    stop = 1010.0

    def feed(t):
        if t < stop:
            return [LogLine("spark1", "rank0", f"step {t}"), LogLine("spark2", "rank1", f"step {t}")]
        return []

    at = run(det, clock, 1060, feed)
    assert at is not None and at - stop <= 15.0


def test_one_rank_still_working_is_no_alarm():
    clock = Clock()
    det = StallDetector(clock=clock)
    feed = lambda t: [LogLine("spark1", "rank0", f"step {t}")] + ([LogLine("spark2", "rank1", "x")] if t < 1005 else [])
    assert run(det, clock, 1100, feed) is None


def test_symptom_lines_are_not_progress():
    clock = Clock()
    det = StallDetector(clock=clock)
    det.feed(LogLine("spark1", "c", "INFO 04-08 23:14:02 [loader.py:10] step done"))
    shm = "(RayWorkerWrapper pid=581) WARNING 04-08 23:15:00 [shm_broadcast.py:466] No available shared memory broadcast block found in 60 seconds."
    feed = lambda t: [LogLine("spark1", "c", shm), LogLine("spark1", "c", "ACTIVE OPS")]
    assert run(det, clock, 1030, feed) is not None


def test_ras_counts_moving_are_progress_frozen_are_not():
    clock = Clock()
    det = StallDetector(clock=clock)
    n = {"v": 0}

    def moving(t):
        n["v"] += 10
        return [ProgressSample("spark1", "ras rank 0", n["v"])]

    assert run(det, clock, 1060, moving) is None
    assert run(det, clock, 1100, lambda t: [ProgressSample("spark1", "ras rank 0", n["v"])]) is not None


def test_quiet_phases_get_their_allowance():
    for line in ("INFO 04-08 23:20:01 [gpu_model_runner.py:2500] Capturing CUDA graphs (mixed prefill-decode, PIECEWISE)",
                 "INFO 04-08 23:19:00 [backends.py:548] Using cache directory: /root/.cache/vllm/torch_compile_cache for vLLM's torch.compile",
                 "INFO 04-08 23:15:00 [default_loader.py:262] Loading safetensors checkpoint shards:  45% Completed | 18/40"):
        clock = Clock()
        det = StallDetector(clock=clock)
        det.feed(LogLine("spark1", "c", line))
        assert run(det, clock, clock.t + 120) is None, line


def test_weight_loading_with_progress_lines_for_15_minutes_never_alarms():
    clock = Clock()
    det = StallDetector(clock=clock)
    start = clock.t

    def feed(t):
        k = int((t - start) / 20)  # one shard line every 20 s, 15 minutes
        return [LogLine("spark1", "c", f"Loading safetensors checkpoint shards: {k}% Completed")] if (t - start) % 20 == 0 else []

    assert run(det, clock, start + 900, feed) is None


def test_idle_server_is_not_a_hang_until_requests_wait():
    clock = Clock()
    det = StallDetector(clock=clock)
    det.feed(LogLine("spark1", "c", "INFO:     Application startup complete."))
    assert run(det, clock, clock.t + 60) is None
    det.feed(LogLine("spark1", "c", "INFO 04-08 23:40:01 [loggers.py:123] Engine 000: Avg prompt throughput: 12.0 tokens/s, Avg generation throughput: 3.1 tokens/s, Running: 1 reqs, Waiting: 0 reqs"))
    assert run(det, clock, clock.t + 30) is not None


def test_gpu_power_near_limit_is_progress():
    clock = Clock()
    det = StallDetector(clock=clock)
    busy = GpuSample("spark1", (GpuInfo(index=0, name="H200", util_percent=100, power_w=600, power_limit_w=700),))
    assert run(det, clock, 1060, lambda t: [busy]) is None


def test_one_alarm_per_stall_and_progress_clears_it():
    clock = Clock()
    det = StallDetector(clock=clock)
    det.feed(LogLine("n", "r", "step 1"))
    assert run(det, clock, 1020) is not None
    assert run(det, clock, 1040) is None  # no repeat
    det.feed(LogLine("n", "r", "step 2"))
    assert run(det, clock, 1060) is not None


def test_runs_as_an_engine_processor():
    clock = Clock()
    det = StallDetector(clock=clock)
    eng = Engine(demo_config(), processors=[det])
    eng.process([LogLine("spark1", "rank0", "step 1")])
    clock.t += 12
    raised = list(det.tick(clock.t))
    out = eng.process(raised)
    assert any(isinstance(e, FindingRaised) for e in out)
    assert [f.id for f in eng.state.findings] == [FINDING_ID]


def _replay(scenario: str, until: float):
    """Feed the sim's events in simulated time, ticking every 0.5 s; return (alarm time, last progress)."""
    from sparktui.sim import SimCluster

    sim = SimCluster(demo_config(), scenario, 1.0)
    events = sim.events_until(until)
    clock = Clock()
    clock.t = sim.start
    det = StallDetector(clock=clock)
    i = 0
    alarm = None
    while clock.t < sim.start + until:
        clock.t += 0.5
        while i < len(events) and getattr(events[i], "ts", 0) <= clock.t:
            det.feed(events[i])
            i += 1
        for ev in det.tick(clock.t):
            alarm = alarm or (ev.ts - sim.start, det.last_progress - sim.start)
    return alarm


def test_demo_nccl_hang_raises_suspected_hang_within_budget():
    alarm = _replay("nccl-hang", 90)
    assert alarm is not None
    at, last = alarm
    assert 0 < at - last <= 15


def test_demo_healthy_start_never_alarms():
    assert _replay("healthy", 400) is None


def test_crashed_workload_is_not_a_hang():
    # oom and unsupported-arch end with the container exiting: an ended run, reported by its own findings
    assert _replay("oom", 300) is None
    assert _replay("unsupported-arch", 200) is None


def test_terminal_finding_ends_its_source_but_a_survivor_still_alarms():
    clock = Clock()
    det = StallDetector(clock=clock)
    det.feed(LogLine("spark1", "vllm", "INFO working", seq=1))
    det.feed(LogLine("spark2", "vllm", "INFO working", seq=1))
    det.feed(FindingRaised(Finding("engine_dead", "error", "engine died", source="spark2/vllm", node="spark2")))
    clock.t += 12
    raised = list(det.tick(clock.t))
    assert raised and "spark1/vllm" in raised[0].finding.evidence[0]
    assert all("spark2" not in e for e in raised[0].finding.evidence)


def test_batch_walk_back_equals_line_by_line():
    """The reverse walk over a LogBatch ends in the same state as feeding its lines one by one."""
    from hypothesis import given, settings, strategies as st

    from sparktui.model import LogBatch

    samples = [
        "spark1:581:681 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via NET/IB/0",  # progress
        "Loading safetensors checkpoint shards:  45% Completed | 18/40",  # quiet phase
        "(APIServer pid=1) INFO:     Application startup complete.",  # idle
        "Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 0.0 tokens/s, Running: 0 reqs",
        "Engine 000: Running: 3 reqs, Waiting: 0 reqs",  # busy? depends on the data file
        "No available shared memory broadcast block found in 60 seconds.",  # symptom
        "",
    ]

    def state(det):
        return {k: (s.last_progress, s.allow, s.idle, s.last_line) for k, s in det.sources.items()}

    @settings(max_examples=300, deadline=None)
    @given(st.lists(st.lists(st.sampled_from(samples), max_size=8), max_size=5))
    def check(batches):
        clock = Clock()
        one, many = StallDetector(clock=clock), StallDetector(clock=clock)
        for i, texts in enumerate(batches):
            clock.t = 100.0 + i
            lines = tuple(LogLine("n", "s", t, seq=j + 1) for j, t in enumerate(texts))
            one.feed(LogBatch("n", "s", lines))
            for ln in lines:
                many.feed(ln)
            assert state(one) == state(many)

    check()
