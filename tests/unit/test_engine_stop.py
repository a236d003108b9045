"""Engine.stop is bounded: a source that swallows its cancel, or whose close never returns, is left
behind with a warning naming it, and the rest of the shutdown (the session file) still happens."""

from __future__ import annotations

import asyncio
import logging
import time

from sparktui.config import demo_config
from sparktui.engine import Engine
from sparktui.model import LogBatch, LogLine
from sparktui.session import Session


class Stubborn:
    """A source that ignores its first cancel (as a reader blocked in a shielded wait can) and
    whose close waits on something that never comes."""

    node_name = "spark1"

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.started = asyncio.Event()

    async def run(self, emit) -> None:
        emit(LogBatch("spark1", "vllm", (LogLine("spark1", "vllm", "INFO before stop", seq=1),)))
        self.started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            pass  # the first cancel swallowed
        await self.release.wait()

    async def close(self) -> None:
        await asyncio.Event().wait()


async def test_stop_goes_on_without_a_source_that_will_not_end(tmp_path, caplog):
    session = Session.create("t", root=tmp_path)
    src = Stubborn()
    eng = Engine(demo_config(), [src], session=session)
    eng.STOP_S = 0.3
    await eng.start()
    await asyncio.wait_for(src.started.wait(), 5)
    t0 = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="sparktui.engine"):
        await eng.stop()
    took = time.monotonic() - t0
    assert took < 0.3 * 2 + 1.0, took  # two bounded waits, not forever
    said = caplog.text
    assert "source-spark1 did not end within 0 s of its cancel" in said and "Stubborn.run" in said
    assert "closing spark1 took over 0 s" in said
    assert session.log_path("spark1", "vllm").read_text() == "INFO before stop\n"  # the file still closed whole
    src.release.set()  # let the stubborn task end: the loop closes clean
