"""The live engine analyses in a worker process (issue 13, item 2): findings come back, the
session files are written there, the state and store stay here; a worker that dies is replaced
by analysis in this process, with nothing stopping."""

from __future__ import annotations

import asyncio
import json
import os
import signal

from sparktui.config import demo_config
from sparktui.engine import Engine
from sparktui.model import LogBatch, LogLine
from sparktui.session import Session

NODE, SRC = "spark1", "vllm"
OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
FACTORY = "sparktui.tui.boot:default_processors"


def _batch(first: int, texts: list[str]) -> LogBatch:
    return LogBatch(NODE, SRC, tuple(LogLine(NODE, SRC, t, seq=first + i) for i, t in enumerate(texts)))


async def _until(engine: Engine, cond, what: str, timeout: float = 60.0) -> None:
    """Wait for the engine's subscribers to see ``cond`` hold (no sleeping)."""
    hit = asyncio.Event()

    def check(_batch) -> None:
        if cond():
            hit.set()

    undo = engine.subscribe(check)
    try:
        if not cond():
            await asyncio.wait_for(hit.wait(), timeout)
    except asyncio.TimeoutError:
        raise AssertionError(f"timed out waiting for {what}") from None
    finally:
        undo()


def _oom_lines(engine: Engine) -> list[int]:
    return sorted(f.line for f in engine.state.findings if f.id == "cuda_oom")


async def test_findings_come_back_from_the_worker_and_it_writes_the_session(tmp_path):
    session = Session.create("t", root=tmp_path)
    eng = Engine(demo_config(), session=session, processor_factory=FACTORY, offload=True)
    await eng.start()
    try:
        assert eng.worker is not None and eng.worker.alive and eng.worker.proc.pid != os.getpid()
        eng.emit(_batch(1, [f"INFO step {i}" for i in range(1, 500)] + [OOM]))
        await _until(eng, lambda: _oom_lines(eng) == [500], "the OOM finding from the worker")
        assert eng.logs.find(NODE, SRC).total == 500  # the store is this process's
    finally:
        await eng.stop()
    text = session.log_path(NODE, SRC).read_text().splitlines()
    assert len(text) == 500 and text[-1] == OOM
    kinds = [json.loads(line)["type"] for line in (session.path / "events.jsonl").read_text().splitlines()]
    assert "FindingRaised" in kinds


async def test_a_worker_that_dies_is_replaced_by_analysis_here(tmp_path):
    session = Session.create("t", root=tmp_path)
    eng = Engine(demo_config(), session=session, processor_factory=FACTORY, offload=True)
    await eng.start()
    try:
        eng.emit(_batch(1, ["INFO a", OOM]))
        await _until(eng, lambda: _oom_lines(eng) == [2], "the first finding")
        os.kill(eng.worker.proc.pid, signal.SIGKILL)
        await _until(eng, lambda: eng.worker is None, "the engine noticing the worker is gone")
        eng.emit(_batch(3, ["INFO b", OOM]))
        await _until(eng, lambda: _oom_lines(eng) == [2, 4], "a finding analysed here")
    finally:
        await eng.stop()
    assert session.log_path(NODE, SRC).read_text().splitlines()[-2:] == ["INFO b", OOM]


async def test_every_kind_of_event_the_demo_makes_crosses_to_the_worker_and_is_recorded(tmp_path):
    """The frames refuse every class outside sparktui.model: the demo's whole event mix (samples,
    containers, logs, milestones, findings) must still cross, and the worker must stay up."""
    from sparktui.sim import SimCluster

    events = SimCluster(demo_config(), "nccl-hang", 1.0).events_until(400)
    session = Session.create("t", root=tmp_path)
    eng = Engine(demo_config(), session=session, processor_factory=FACTORY, offload=True)
    await eng.start()
    try:
        for ev in events:
            eng.emit(ev)
        await _until(eng, lambda: not eng._pending and eng.worker is not None and eng.worker.backlog == 0
                     and any(f.id == "nccl_init_hang" or "hang" in f.id for f in eng.state.findings),
                     "the demo's hang found by the worker")
        assert eng.worker is not None and eng.worker.alive
    finally:
        await eng.stop()
    kinds = {json.loads(line)["type"] for line in (session.path / "events.jsonl").read_text().splitlines()}
    sent = {type(e).__name__ for e in events if type(e).__name__ not in ("LogBatch", "LogLine")}
    assert sent <= kinds and "FindingRaised" in kinds
    assert not (session.path / "worker.log").read_text().strip()  # nothing refused, nothing crashed


def test_a_frame_builds_model_objects_and_plain_data_only():
    import pickle
    from pathlib import PurePosixPath

    import pytest

    from sparktui.engine_worker import loads

    batch = _batch(1, ["a", OOM])
    assert loads(pickle.dumps(("ev", [batch, {"x": (1, 2.0, None)}]))) == ("ev", [batch, {"x": (1, 2.0, None)}])
    for other in (PurePosixPath("/etc/passwd"), os.system):
        with pytest.raises(pickle.UnpicklingError, match="refused in an engine frame"):
            loads(pickle.dumps(other))


async def test_a_followers_block_crosses_to_the_worker_and_is_written_in_order(tmp_path):
    from sparktui.model import LogBlock

    session = Session.create("t", root=tmp_path)
    eng = Engine(demo_config(), session=session, processor_factory=FACTORY, offload=True)
    await eng.start()
    try:
        assert eng.worker is not None and eng.worker.alive
        eng.emit(_batch(1, ["INFO step 1"]))
        eng.emit(LogBlock(NODE, SRC, b"".join(f"INFO step {i}\n".encode() for i in range(2, 100)), 98, 99))
        eng.emit(_batch(100, [OOM]))
        await _until(eng, lambda: _oom_lines(eng) == [100], "the OOM after the block, from the worker")
        assert eng.logs.find(NODE, SRC).skipped == 98
    finally:
        await eng.stop()
    text = session.log_path(NODE, SRC).read_text().splitlines()
    assert text == [f"INFO step {i}" for i in range(1, 100)] + [OOM]


async def test_at_a_full_session_file_skipped_lines_count_lost_and_shown_ones_unsaved(tmp_path):
    """Each line is counted once: a skipped line the file did not take was kept nowhere (lost); a
    shown line it did not take is on the screen only (unsaved)."""
    from sparktui.model import LogBlock

    session = Session.create("t", root=tmp_path, max_log_bytes=300)
    eng = Engine(demo_config(), session=session, processor_factory=FACTORY, offload=True)
    await eng.start()
    try:
        eng.emit(LogBlock(NODE, SRC, b"".join(f"INFO step {i}\n".encode() for i in range(1, 101)), 100, 100))
        eng.emit(_batch(101, [f"INFO step {i}" for i in range(101, 111)]))
        s = eng.logs.series(NODE, SRC)
        await _until(eng, lambda: s.lost + s.skipped == 100 and s.lost > 0 and s.unsaved == 10, "the worker's counts")
    finally:
        await eng.stop()
    kept = [ln for ln in session.log_path(NODE, SRC).read_text().splitlines() if ln.startswith("INFO")]
    assert len(kept) == s.skipped and s.total == 10  # skipped = in the file; the 10 shown are not
