"""timefmt (every RFC 3339 read and write) and waiting (bounded queue reads, retry pacing)."""

import asyncio
import time

import pytest

from sparktui import timefmt
from sparktui.waiting import Backoff, get_within


def test_parse_reads_every_form_the_app_meets():
    docker = "2026-11-29T20:00:25.011869369Z"
    assert timefmt.parse_ns(docker) == 1795982425_011869369  # exact: resume points compare these
    assert timefmt.parse(docker) == 1795982425.011869  # datetime's microseconds
    assert timefmt.parse("2026-11-29T21:00:25+01:00") == timefmt.parse("2026-11-29T20:00:25Z")
    assert timefmt.parse("2026-11-29T18:30:25-01:30") == 1795982425.0
    for no_time in ("0001-01-01T00:00:00Z", "garbage", "2026-13-01T00:00:00Z", "2026-11-29T20:00:25", None, 17):
        assert timefmt.parse(no_time) is None and timefmt.parse_ns(no_time) is None


def test_what_is_written_reads_back():
    t = 1795982425.5  # exact in a float at nanosecond scale
    assert timefmt.format_ns(t) == "2026-11-29T20:00:25.500000000Z"
    assert timefmt.format_ms(t) == "2026-11-29T20:00:25.500Z"
    assert timefmt.parse(timefmt.format_ms(t)) == t
    assert timefmt.parse_ns(timefmt.format_ns(t)) == 1795982425_500000000
    now = timefmt.now_local()
    assert abs(timefmt.parse(now) - time.time()) < 2
    assert timefmt.local_clock(timefmt.format_ms(t)) == time.strftime("%H:%M:%S", time.localtime(t))
    assert timefmt.local_clock("not a time") == "not a time" and timefmt.local_clock("") == "?"


def test_backoff_doubles_to_its_ceiling_and_resets():
    b = Backoff(0.5, 3.0)
    assert [b.next() for _ in range(5)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    b.reset()
    assert b.next() == 0.5


async def test_get_within_returns_an_item_or_times_out():
    q: asyncio.Queue = asyncio.Queue()
    q.put_nowait("x")
    assert await get_within(q, 0.5) == "x"
    with pytest.raises(TimeoutError):
        await get_within(q, 0.01)
    assert q.empty()  # the timed-out read took nothing


async def test_get_within_passes_a_cancel_on():
    q: asyncio.Queue = asyncio.Queue()
    task = asyncio.ensure_future(get_within(q, 60))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    q.put_nowait("kept")
    assert q.get_nowait() == "kept"  # the cancelled read left the item for the next reader
