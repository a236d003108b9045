"""Containers of one node: the Docker events stream for changes, a slow reconcile poll for the full
picture, and a log follower per container (resumed from its cursor after any break).

The docker SDK is synchronous: every call runs in its own daemon thread (``in_thread``/``start_thread``),
so a call stuck on a dead socket never blocks the loop or its shutdown.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from ..logs.follow import LogCursor, LogFollower
from ..transport.threads import in_thread, start_thread
from ..waiting import Backoff, get_within
from ..model import ContainerChanged, ContainerInfo, ContainersSnapshot, ContainerState, DockerStatus, Emit, LogEnded
from ..probes.containers import STATE_ACTIONS, from_event, from_inspect, is_own_probe, removed

log = logging.getLogger(__name__)
BACKOFF_MIN, BACKOFF_MAX = 0.5, 10.0
_END = object()


class LogState:
    """Log cursors that outlive connections: keyed by container id; line numbers run per name."""

    def __init__(self) -> None:
        self.cursors: dict[str, LogCursor] = {}
        self.last_seq: dict[str, int] = {}
        self.complete: set[str] = set()  # stopped containers whose log was read to its end
        self.via: dict[str, str] = {}  # container name -> how its log was last read (relay, socket, docker-py)
        self.full: set[str] = set()  # container names whose session file takes no more lines

    def cursor(self, cid: str, name: str) -> LogCursor:
        c = self.cursors.get(cid)
        if c is None:
            c = self.cursors[cid] = LogCursor()
            c.seq = self.last_seq.get(name, 0)
        return c


class DockerWatch:
    def __init__(self, node, name: str, emit: Emit, logs: LogState, reconcile_interval: float = 30.0,
                 only: "set[str] | None" = None) -> None:
        """``only``: the container names whose logs are followed (None: every container's).  The CLI's
        small engine follows only what its action asked for (``want``), not a node's every old log."""
        self.node, self.name, self.emit, self.logs = node, name, emit, logs
        self.reconcile_interval = reconcile_interval
        self.only = only
        self.known: dict[str, ContainerInfo] = {}
        self.followers: dict[str, asyncio.Task] = {}
        self.unfollowable: set[str] = set()
        self._live: dict[str, LogFollower] = {}  # the newest follower of each container name
        self._client: Any = None
        self._events: Any = None
        self.error: str | None = None  # why the Engine is not reachable right now
        self._closed = False

    async def run(self) -> None:
        backoff = Backoff(BACKOFF_MIN, BACKOFF_MAX)
        while not self._closed:  # the flag backs up cancellation, which 3.11 can lose in races
            try:
                self._client = await self.node.docker()
                await in_thread(self._client.ping)
                if self.error is not None:
                    self.emit(DockerStatus(self.name, True))
                self.error = None
                backoff.reset()
                await self._session()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # dockerd down/restarting, socket gone: keep trying
                if self.error is None:
                    self.emit(DockerStatus(self.name, False, _short(exc)))
                self.error = _short(exc)
                log.info("%s: docker: %s", self.name, self.error)
            finally:
                self._stop_streams()
            await asyncio.sleep(backoff.next())

    async def _session(self) -> None:
        client = self._client
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue = asyncio.Queue()
        # subscribe first, then list: a change between the two shows up as an event
        self._events = await in_thread(
            client.api.events, since=int(time.time()) - 1, decode=True, filters={"type": "container"})

        def read_events() -> None:
            try:
                for ev in self._events:
                    loop.call_soon_threadsafe(queue.put_nowait, ev)
            finally:
                try:
                    loop.call_soon_threadsafe(queue.put_nowait, _END)
                except RuntimeError:  # loop closed: shutting down
                    pass

        reader = start_thread(read_events, f"events-{self.name}")
        await self._reconcile()
        try:
            while True:
                try:
                    ev = await get_within(queue, self.reconcile_interval)
                except asyncio.TimeoutError:
                    await self._reconcile()
                    continue
                if ev is _END:
                    break
                await self._on_event(ev)
            await reader  # re-raise why the stream ended
            raise ConnectionError("docker events stream ended")
        finally:
            reader.cancel()

    async def _reconcile(self) -> None:
        conts = await in_thread(self._client.containers.list, all=True)
        infos = [i for i in (from_inspect(c.attrs) for c in conts) if not is_own_probe(i)]
        current = {i.id: i for i in infos}
        for cid, old in self.known.items():
            if cid not in current and old.state is not ContainerState.REMOVED:
                self.emit(ContainerChanged(node=self.name, container=removed(old)))
        self.known = current
        self.emit(ContainersSnapshot(node=self.name, containers=tuple(infos)))
        for info in infos:
            # a follower per container: running ones stream, stopped ones catch up and end
            if info.state is ContainerState.RUNNING or info.id not in self.logs.complete:
                self._ensure_follower(info)

    async def _on_event(self, ev: dict) -> None:
        action = str(ev.get("Action") or ev.get("status") or "").split(":")[0]
        cid = ev.get("id") or (ev.get("Actor") or {}).get("ID")
        if action not in STATE_ACTIONS or not cid:
            return
        if action == "destroy":
            old = self.known.pop(cid, None)
            if old is not None:
                self.emit(ContainerChanged(node=self.name, container=removed(old)))
            return
        brief = from_event(ev, action)
        if is_own_probe(brief):  # the event's attributes carry the name and labels
            return
        if action in ("start", "restart") and brief.name:
            # follow at once, before inspecting: a short-lived --rm container may be gone by then
            self.logs.complete.discard(cid)
            self._ensure_follower(brief)
        try:
            info = from_inspect(await in_thread(self._client.api.inspect_container, cid))
        except Exception as exc:  # removed in between (--rm): what the event said will do
            log.debug("%s: inspect %s: %s", self.name, cid[:12], exc)
            if not brief.name:
                return
            info = self.known.get(cid) and _merge(self.known[cid], brief) or brief
        self.known[cid] = info
        self.emit(ContainerChanged(node=self.name, container=info))
        if action in ("start", "restart"):
            self._ensure_follower(info)

    def want(self, container: str) -> None:
        """Follow ``container``'s log from now on (with ``only``): at once when it is known, else when
        Docker says it started."""
        if self.only is None or container in self.only:
            return
        self.only.add(container)
        for info in list(self.known.values()):
            if info.name == container and self._client is not None:
                self._ensure_follower(info)

    def _ensure_follower(self, info: ContainerInfo) -> None:
        if self.only is not None and info.name not in self.only:
            return
        t = self.followers.get(info.id)
        if (t is not None and not t.done()) or info.id in self.unfollowable:
            return
        cursor = self.logs.cursor(info.id, info.name)
        f = LogFollower(self.name, info.name, info.id, cursor, self.emit)
        self._live[info.name] = f
        if info.name in self.logs.full:
            f.file_full()
        task = asyncio.create_task(self._follow(f, info), name=f"logs-{self.name}-{info.name}")
        self.followers[info.id] = task

    async def _follow(self, f: LogFollower, info: ContainerInfo, catching_up: bool = False) -> None:
        import docker

        opener = self.node.open_log_stream if self.node.relays_logs else None
        try:
            if catching_up:
                await f.catch_up(self._client, opener)
            else:
                await f.run(self._client, opener)
        except asyncio.CancelledError:
            raise
        except docker.errors.APIError as exc:
            if exc.status_code in (400, 501):  # e.g. a logging driver that cannot be read back
                self.unfollowable.add(info.id)
            log.info("%s: logs of %s: %s", self.name, info.name, _short(exc))
            return
        except Exception as exc:  # the stream broke; the session notices and reconnects
            log.info("%s: logs of %s: %s", self.name, info.name, _short(exc))
            return
        finally:
            self.logs.last_seq[info.name] = f.cursor.seq
            self.logs.via[info.name] = f.via
        # ended cleanly: the container stopped (log complete), or it restarted before we noticed
        try:
            latest = from_inspect(await in_thread(self._client.api.inspect_container, info.id))
        except Exception:
            return  # gone, or the Engine went away: the next session decides
        if latest.state is ContainerState.RUNNING:
            self.followers.pop(info.id, None)
            self._ensure_follower(latest)
        elif not catching_up:
            await self._follow(f, info, catching_up=True)  # the lines the daemon's follow ended before
        else:
            self.logs.complete.add(info.id)
            # the log is whole: whoever waits on this container (an action) may end its input now
            self.emit(LogEnded(self.name, info.name, latest.state.value, latest.exit_code, info.id))

    def file_full(self, source: str) -> None:
        """The session file of ``source`` takes no more lines (``LogState.full`` has it already)."""
        f = self._live.get(source)
        if f is not None:
            f.file_full()

    def _stop_streams(self) -> None:
        ev, self._events = self._events, None
        if ev is not None:
            try:
                ev.close()
            except Exception:
                pass
        for t in self.followers.values():
            t.cancel()
        self.followers.clear()

    async def close(self) -> None:
        self._closed = True
        self._stop_streams()


def _merge(old: ContainerInfo, new: ContainerInfo) -> ContainerInfo:
    from dataclasses import replace

    return replace(old, state=new.state, status=new.status, exit_code=new.exit_code,
                   finished_at=new.finished_at or old.finished_at)


def _short(exc: BaseException) -> str:
    s = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return s[:200]
