"""The cluster's shared timeline: every operator's actions and notes, in one file on the head node.

    <head>:~/.local/state/sparktui/clusters/<cluster>/timeline.jsonl

(the directory the cluster lock lives in).  One JSON object per line::

    {"ts": RFC 3339, "operator": "user@host", "session": id, "kind": "action"|"note"|"ack",
     "action", "step", "status", "node", "message"}

(an "ack" is a finding acknowledged: ``step`` its id, ``message`` its key, ``model.finding_key``)

- ``TimelineWriter`` appends this session's records.  Faces hand it records without waiting
  (``action(event)``, ``note(note)``); one writer task drains the queue, re-armed when records
  arrive, so a slow or lost head never blocks a screen.  Each batch is ONE ``write`` with
  O_APPEND of less than PIPE_BUF bytes (``dd`` with ``iflag=fullblock``: it collects the whole
  input before its single write), so lines of operators writing at the same time never interleave.
- ``TimelineSource`` is an event source for the head node: every ``interval`` it reads the bytes
  appended since its last read (``tail -c +N``) and emits a ``TimelineEntry`` for each record of
  another operator or session.  Its first read takes the last ``BACKLOG`` bytes: a watcher who
  joins late sees what happened just before.

Everything written is redacted and free of control characters; everything read is treated as
data from elsewhere (shape-checked, control characters neutralised, redacted again).
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
import os
from typing import TYPE_CHECKING, Callable

from ..identity import operator_id
from ..logs.redact import redact
from ..logs.sanitize import safe
from ..model import TIMELINE_STATUSES, ActionEvent, FindingAcknowledged, Note, TimelineEntry, current_status
from ..nodes.base import NodeError
from ..timefmt import format_ms, parse as parse_time
from ..waiting import Backoff
from .lock import cluster_dir

if TYPE_CHECKING:
    from ..model import Emit
    from ..nodes.base import Node

log = logging.getLogger(__name__)

TIMELINE_FILE = "timeline.jsonl"
ATOMIC_BYTES = 4000  # one write of fewer than PIPE_BUF (4096) bytes: never interleaved with another
MESSAGE_CHARS = 1000
FIELD_CHARS = 120
POLL_INTERVAL = 2.0
BACKLOG = 64 * 1024  # the first read: the tail of the file
READ_CAP = 1 << 20  # bytes per poll; the rest comes at the next one
PENDING_MAX = 2000  # records held while the head is unreachable; the oldest go first
RETRY_MAX = 10.0

# $1 = the cluster's directory, relative to the head's $HOME unless absolute (a `~` in a quoted
# argument would not expand)
_DIR = 'd=$1; case $d in /*) ;; *) d=$HOME/$d ;; esac'
_APPEND = (f'umask 077; {_DIR}; mkdir -p "$d" && '
           f'exec dd of="$d/{TIMELINE_FILE}" oflag=append conv=notrunc bs={ATOMIC_BYTES + 96} count=1 '
           'iflag=fullblock status=none')
# $2 = offset to read from (-1: the last $3 bytes), $4 = at most that many bytes.  Prints the offset
# actually used, then the bytes: the file may have shrunk (recreated) since the last read
_READ = (f'{_DIR}; f="$d/{TIMELINE_FILE}"; [ -f "$f" ] || {{ echo 0; exit 0; }}; '
         's=$(wc -c < "$f"); o=$2; '
         'if [ "$o" -lt 0 ]; then if [ "$s" -gt "$3" ]; then o=$((s - $3)); else o=0; fi; fi; '
         'if [ "$o" -gt "$s" ]; then o=0; fi; '
         'echo "$o"; tail -c +"$((o + 1))" "$f" | head -c "$4"')


def _clean(value: object, limit: int) -> str:
    return redact(safe(value))[:limit]


def record_line(*, ts: float, operator: str, session: str, kind: str, action: str = "", step: str = "",
                status: str = "", node: str = "", message: str = "") -> bytes:
    """One timeline line (newline included), redacted, control-free, under ``ATOMIC_BYTES``."""
    rec = {"ts": format_ms(ts), "operator": _clean(operator, FIELD_CHARS), "session": _clean(session, FIELD_CHARS),
           "kind": kind, "action": _clean(action, FIELD_CHARS), "step": _clean(step, FIELD_CHARS),
           "status": _clean(status, 16), "node": _clean(node, FIELD_CHARS), "message": _clean(message, MESSAGE_CHARS)}
    # ensure_ascii: every byte printable ASCII, so the length in bytes is known before writing
    line = json.dumps(rec, ensure_ascii=True, separators=(",", ":"))
    while len(line) >= ATOMIC_BYTES and rec["message"]:
        rec["message"] = rec["message"][: len(rec["message"]) // 2] + "…"
        line = json.dumps(rec, ensure_ascii=True, separators=(",", ":"))
    return (line + "\n").encode("ascii")


class TimelineWriter:
    """Appends this session's action steps and notes to the head's timeline, never blocking."""

    def __init__(self, node: "Node", cluster: str, *, session: str, operator: str | None = None,
                 root: str | None = None) -> None:
        self.node = node
        self.dir = cluster_dir(cluster, root)
        self.session = session
        self.operator = operator or operator_id()
        self._pending: collections.deque[bytes] = collections.deque(maxlen=PENDING_MAX)
        self._task: asyncio.Task | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.written = 0  # records appended (tests, status)
        self.last_error: str | None = None

    # ------------------------------------------------------------------ feeding (any face)
    def action(self, ev: ActionEvent) -> None:
        if ev.status in TIMELINE_STATUSES:
            self._put(record_line(ts=ev.ts, operator=self.operator, session=self.session, kind="action",
                                  action=ev.action, step=ev.step, status=ev.status, node=ev.node, message=ev.message))

    def note(self, note: Note) -> None:
        self._put(record_line(ts=note.ts, operator=note.author or self.operator, session=self.session,
                              kind="note", message=note.text))

    def ack(self, ack: FindingAcknowledged, finding_id: str = "", node: str = "") -> None:
        self._put(record_line(ts=ack.ts, operator=ack.operator or self.operator, session=self.session,
                              kind="ack", step=finding_id, node=node, message=ack.key))

    def _put(self, line: bytes) -> None:
        self._pending.append(line)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # from a thread: hand the kick to the loop that runs the writer
            if self._loop is not None and not self._loop.is_closed():
                self._loop.call_soon_threadsafe(self._kick)
            return
        self._loop = loop
        self._kick()

    def _kick(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._drain(), name="timeline-writer")

    # ------------------------------------------------------------------ the one writer task
    async def _drain(self) -> None:
        pause = Backoff(0.5, RETRY_MAX)
        while self._pending:
            batch = self._batch()
            try:
                res = await self.node.run(["sh", "-c", _APPEND, "sh", self.dir], input=batch, timeout=15)
                if not res.ok:
                    raise NodeError(res.err_text.strip()[:200] or f"exit {res.returncode}")
            except NodeError as exc:
                self.last_error = str(exc)
                log.warning("shared timeline: append on %s failed: %s", self.node.name, exc)
                for line in reversed(batch.splitlines(keepends=True)):  # back in front, order kept
                    self._pending.appendleft(line)
                await asyncio.sleep(pause.next())
                continue
            pause.reset()
            self.last_error = None
            self.written += batch.count(b"\n")

    def _batch(self) -> bytes:
        """Whole lines from the front of the queue, together under ``ATOMIC_BYTES``."""
        out = bytearray(self._pending.popleft())
        while self._pending and len(out) + len(self._pending[0]) < ATOMIC_BYTES:
            out += self._pending.popleft()
        return bytes(out)

    async def flush(self, timeout: float = 3.0) -> bool:
        """Wait (bounded) until everything queued is on the head: before the app exits."""
        task = self._task
        if task is None or task.done():
            return not self._pending
        try:
            await asyncio.wait_for(asyncio.shield(task), timeout)
        except (asyncio.TimeoutError, Exception):
            return False
        return not self._pending

    async def close(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()


class TimelineSource:
    """Event source on the head node: other operators' records of the shared timeline, as they come."""

    def __init__(self, node: "Node", cluster: str, *, own: Callable[[], tuple[str, str]] | tuple[str, str],
                 interval: float = POLL_INTERVAL, backlog: int = BACKLOG, root: str | None = None) -> None:
        self.node = node
        self.node_name = node.name
        self.dir = cluster_dir(cluster, root)
        self._own = own  # (operator, session) of this face: its own records are not "others'"
        self.interval = interval
        self.backlog = backlog
        self.offset: int | None = None  # None: not read yet (the first read takes the backlog)

    def own(self) -> tuple[str, str]:
        return self._own() if callable(self._own) else self._own

    async def poll(self) -> list[TimelineEntry]:
        """The records appended since the last poll, of other operators/sessions only."""
        start = -1 if self.offset is None else self.offset
        res = await self.node.run(["sh", "-c", _READ, "sh", self.dir, str(start), str(self.backlog), str(READ_CAP)],
                                  timeout=15)
        if not res.ok:
            raise NodeError(res.err_text.strip()[:200] or f"exit {res.returncode}")
        head, _, data = res.stdout.partition(b"\n")
        try:
            used = int(head.strip() or b"0")
        except ValueError:
            raise NodeError(f"{self.node_name}: unexpected timeline read: {safe(head[:80])}") from None
        skip = 0
        if start < 0 and used > 0:  # the backlog starts inside a line: drop its head
            skip = data.find(b"\n") + 1
            if skip == 0:
                self.offset = used + len(data) if len(data) >= READ_CAP else used
                return []
        end = data.rfind(b"\n") + 1  # a line being written stays for the next poll
        if end <= skip and len(data) >= READ_CAP:
            end = len(data)  # a "line" longer than the cap is not ours: step over it
        self.offset = used + max(end, skip)
        me = self.own()
        out = []
        for raw in data[skip:end].splitlines():
            entry = parse_record(raw)
            if entry is not None and (entry.operator, entry.session) != me:
                out.append(entry)
        return out

    async def run(self, emit: "Emit") -> None:
        while True:  # self-rearming: the next poll starts after this one ended
            try:
                for entry in await self.poll():
                    emit(entry)
            except NodeError as exc:  # reachability is the collectors' business: try again next round
                log.debug("shared timeline: read on %s failed: %s", self.node_name, exc)
            except Exception:  # a bug must not end the watcher's view of the others for good
                log.exception("shared timeline: read on %s failed", self.node_name)
            await asyncio.sleep(self.interval)


def parse_record(raw: bytes) -> TimelineEntry | None:
    """A timeline line as a ``TimelineEntry``; None for anything not of that shape."""
    try:
        rec = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(rec, dict) or rec.get("kind") not in ("action", "note", "ack"):
        return None
    ts = parse_time(rec.get("ts")) if isinstance(rec.get("ts"), str) else None
    if ts is None:
        return None

    def field(name: str, limit: int = FIELD_CHARS) -> str:
        v = rec.get(name)
        return _clean(v, limit) if isinstance(v, str) else ""

    return TimelineEntry(kind=rec["kind"], operator=field("operator"), session=field("session"),
                         message=field("message", MESSAGE_CHARS), action=field("action"), step=field("step"),
                         status=current_status(field("status", 16)), node=field("node"), ts=ts)


def attach(engine, head: "Node", *, operator: str | None = None) -> TimelineWriter:
    """Wire the shared timeline into a live engine: a reader source on the head (started with the
    engine) and the writer the face feeds.  The session id is the session directory's name."""
    session = engine.session.path.name if engine.session is not None else f"pid-{os.getpid()}"
    writer = TimelineWriter(head, engine.config.cluster.name, session=session, operator=operator)
    engine.sources.append(TimelineSource(head, engine.config.cluster.name, own=(writer.operator, session)))
    return writer
