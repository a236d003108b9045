"""Blocking calls in daemon threads (transport/threads.py): the awaiting side gets the result or the
error; an error nobody awaits any more (its watcher ended on another error first) is not logged as
"Future exception was never retrieved" (seen when a drill stopped a node's sshd)."""

from __future__ import annotations

import asyncio
import gc
import logging
import threading

import pytest

from sparktui.transport.threads import in_thread, start_thread


async def test_the_result_and_the_error_reach_the_awaiting_side():
    assert await in_thread(lambda a, b: a + b, 2, 3) == 5

    def boom() -> None:
        raise ConnectionError("node gone")

    with pytest.raises(ConnectionError, match="node gone"):
        await start_thread(boom, "boom")


def test_an_error_nobody_awaits_is_not_logged_as_never_retrieved(caplog):
    done = threading.Event()

    def boom() -> None:
        try:
            raise ConnectionError("events stream ended")
        finally:
            done.set()

    async def main() -> None:
        fut = start_thread(boom, "events-x")
        while not fut.done():  # the thread ends at once; its result crosses on the next loop turns
            await asyncio.sleep(0)
        del fut  # the watcher went away on another error without awaiting it

    with caplog.at_level(logging.ERROR, logger="asyncio"):
        asyncio.run(main())
        gc.collect()
    assert done.is_set()
    assert not [r for r in caplog.records if "never retrieved" in r.getMessage()], caplog.text
