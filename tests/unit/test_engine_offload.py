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
