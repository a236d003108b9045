"""Blocking calls (docker SDK, sockets) in daemon threads of their own, awaited from the event loop."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Callable


def start_thread(fn: Callable[[], Any], name: str) -> "asyncio.Future[Any]":
    """Run a blocking function in a daemon thread; the returned future gets its result."""
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[Any] = loop.create_future()

    def body() -> None:
        try:
            res: Any = fn()
        except BaseException as exc:  # handed to the awaiting side
            res, err = None, exc
        else:
            err = None
        try:
            loop.call_soon_threadsafe(_set, fut, res, err)
        except RuntimeError:  # the loop is closed: nobody is waiting any more
            pass

    # the awaiting side may have gone (a watch whose node died ends on another error first, a cancelled
    # follow): an error nobody awaits any more is dropped, not logged as "never retrieved" at exit
    fut.add_done_callback(_retrieved)
    threading.Thread(target=body, name=name, daemon=True).start()
    return fut


def _retrieved(fut: asyncio.Future) -> None:
    if not fut.cancelled():
        fut.exception()


def in_thread(fn: Callable[..., Any], *args: Any, **kw: Any) -> "asyncio.Future[Any]":
    """A blocking SDK call in its own daemon thread.  Unlike ``asyncio.to_thread`` (the default
    executor), a call stuck on a dead socket never holds up the loop's shutdown."""
    return start_thread(lambda: fn(*args, **kw), getattr(fn, "__name__", "blocking"))


def _set(fut: asyncio.Future, res: Any, exc: BaseException | None) -> None:
    if fut.done():
        return
    if exc is not None:
        fut.set_exception(exc)
    else:
        fut.set_result(res)
