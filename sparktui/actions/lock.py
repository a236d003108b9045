"""The cluster-wide action lock: one mutating action at a time per cluster, across operators.

It lives on the HEAD node (so two operators on two laptops see the same lock), in the head's home:

    ~/.local/state/sparktui/clusters/<cluster>/lock.d/            the mutex: ``mkdir`` is the atomic step
    ~/.local/state/sparktui/clusters/<cluster>/lock.d/lock.json   the holder, written by whoever made lock.d
    ~/.local/state/sparktui/clusters/<cluster>/lock.json          symlink to it (dangling = free)

The record sits INSIDE lock.d so that releasing or breaking is one atomic ``mv`` of the directory: no
window where a new holder's record could be deleted with the old one.  Every step runs on the node in
one small ``sh`` script (never a read-then-write race from the client).  The holder rewrites the record
every ``heartbeat_s``; its age is measured on the node's own clock (file mtime vs the node's ``date``),
so a skewed laptop clock cannot make a live lock look stale.  Stale: no heartbeat for ``stale_s``, or
the holder ran on this very host and its pid is gone.  A stale lock is broken only after a
confirmation that names the holder (``--break-lock`` or the y/N prompt / the TUI's modal).

The root can be moved (tests, a shared path): ``ActionContext(lock_root=...)`` or ``$SPARKTUI_LOCK_ROOT``;
relative to the head's $HOME unless absolute.  The embedded demo (sim nodes) has no lock: nothing to share.
"""

from __future__ import annotations

import asyncio
import getpass
import json
import os
import re
import secrets
import socket
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..nodes.base import NodeError
from ..timefmt import local_clock, now_local
from ..waiting import Backoff
from .errors import ActionRefused

if TYPE_CHECKING:
    from ..nodes.base import Node
    from .base import ActionContext

DEFAULT_ROOT = ".local/state/sparktui/clusters"  # relative: under the head's $HOME
HEARTBEAT_S = 10.0
STALE_S = 60.0
LABEL_OPERATOR = "sparktui.operator"
LABEL_ACTION = "sparktui.action"
LABEL_SESSION = "sparktui.session"
# one id per sparktui process when the face has no session of its own
PROCESS_SESSION = uuid.uuid4().hex[:12]

# $1 op, $2 cluster dir (relative to $HOME unless absolute), $3 token, $4 record.  Output: a status
# word, then (when someone holds it) "now", "mtime", "---" and the record.
_SCRIPT = r'''
umask 077; op=$1; d=$2; tok=$3; rec=$4
case $d in /*) ;; *) d=$HOME/$d ;; esac
L=$d/lock.d; F=$L/lock.json
show() {
  echo "now $(date +%s)"
  if [ -e "$F" ]; then echo "mtime $(stat -c %Y "$F")"; else echo "mtime $(stat -c %Y "$L" 2>/dev/null || echo -)"; fi
  echo ---; cat "$F" 2>/dev/null; return 0
}
mine() { grep -qF "\"token\": \"$tok\"" "$F" 2>/dev/null; }
case $op in
acquire)
  mkdir -p "$d" || exit 3
  [ -L "$d/lock.json" ] || ln -sfn lock.d/lock.json "$d/lock.json" 2>/dev/null
  if mkdir "$L" 2>/dev/null; then
    printf '%s\n' "$rec" >"$L/.new-$tok" && mv -f "$L/.new-$tok" "$F" && { echo ACQUIRED; exit 0; }
    rm -rf "$L"; exit 3
  fi
  echo HELD; show; exit 1 ;;
heartbeat)
  mine || { echo LOST; show; exit 1; }
  printf '%s\n' "$rec" >"$L/.hb-$tok" && mv -f "$L/.hb-$tok" "$F" && echo OK ;;
release)
  mine || { echo NOTOURS; show; exit 1; }
  mv "$L" "$d/.released-$tok-$$" && rm -rf "$d/.released-$tok-$$" && echo RELEASED ;;
break)
  # tok: the holder the operator confirmed ('' = a lock.d without a record); anyone else: refused
  if [ -n "$tok" ]; then mine || { echo CHANGED; show; exit 1; }; elif [ -e "$F" ]; then echo CHANGED; show; exit 1; fi
  mv "$L" "$d/.broken-$$" || { echo CHANGED; exit 1; }
  mv -f "$d/.broken-$$/lock.json" "$d/last-broken.json" 2>/dev/null; rm -rf "$d/.broken-$$"; echo BROKEN ;;
show)
  if [ -d "$L" ]; then echo HELD; show; else echo FREE; fi ;;
*) exit 2 ;;
esac
'''


class LockError(ActionRefused):
    """The lock could not be taken for a reason other than a holder (head unreachable, no shell)."""


class LockHeld(ActionRefused):
    """Someone else holds the cluster lock; ``str()`` is the one line the operator reads."""

    def __init__(self, message: str, holder: "Holder") -> None:
        super().__init__(message)
        self.holder = holder


def operator() -> tuple[str, str]:
    try:
        user = getpass.getuser()
    except Exception:  # no passwd entry (some containers): the uid still names someone
        user = f"uid{os.getuid()}"
    return user, socket.gethostname()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


@dataclass(frozen=True)
class Holder:
    """Who holds the lock, as read from the head; ``age_s`` is the heartbeat's age on the node's clock."""

    record: dict[str, Any]
    age_s: float | None

    @property
    def who(self) -> str:
        r = self.record
        return f"{r.get('user', '?')}@{r.get('host', '?')}" if r else "(unknown: being taken)"

    @property
    def action(self) -> str:
        return str(self.record.get("action", "?")) if self.record else "?"

    @property
    def pid(self) -> int | None:
        try:
            return int(self.record.get("pid"))
        except (TypeError, ValueError):
            return None

    @property
    def token(self) -> str:
        return str(self.record.get("token", "")) if self.record else ""

    def stale_reason(self, stale_s: float) -> str:
        """Why the holder is gone ('' while it lives)."""
        if self.age_s is not None and self.age_s > stale_s:
            return f"no heartbeat for {self.age_s:.0f} s"
        if self.record and self.record.get("host") == socket.gethostname() and self.pid is not None \
                and not _pid_alive(self.pid):
            return f"its process {self.pid} on {self.record.get('host')} is gone"
        return ""

    def describe(self) -> str:
        if not self.record:
            return "a lock being taken (no holder record yet)"
        return (f"{self.action} held by {self.who} (pid {self.pid}) since {local_clock(self.record.get('since', ''))}")

    def to_json(self) -> dict:
        return {**{k: v for k, v in self.record.items() if k != "token"}, "heartbeat_age_s": self.age_s}


def _parse(text: str) -> tuple[str, Holder | None]:
    lines = text.splitlines()
    word = lines[0].strip() if lines else ""
    vals: dict[str, str] = {}
    rest: list[str] = []
    for i, line in enumerate(lines[1:], 1):
        if line == "---":
            rest = lines[i + 1:]
            break
        k, _, v = line.partition(" ")
        vals[k] = v.strip()
    if "now" not in vals:
        return word, None
    try:
        record = json.loads("\n".join(rest)) if "".join(rest).strip() else {}
        if not isinstance(record, dict):
            record = {}
    except ValueError:
        record = {}
    try:
        age = float(vals["now"]) - float(vals.get("mtime", ""))
    except ValueError:
        age = None
    return word, Holder(record, age)


def owner_labels(ctx: "ActionContext", action: str | None = None) -> dict[str, str]:
    """Labels every action-owned container carries: whose it is, so cleanup only takes one's own."""
    user, host = operator()
    return {LABEL_OPERATOR: f"{user}@{host}", LABEL_ACTION: action or ctx.action_name,
            LABEL_SESSION: getattr(ctx, "session_id", "") or PROCESS_SESSION}


def cluster_dir(cluster: str, root: str | None = None) -> str:
    """The cluster's shared directory on the head (lock, timeline), relative to the head's $HOME
    unless ``root`` (or $SPARKTUI_LOCK_ROOT) says otherwise."""
    name = re.sub(r"[^A-Za-z0-9._-]", "_", cluster)
    name = "cluster" if name in ("", ".", "..") else name  # never the parent of clusters/
    root = root or os.environ.get("SPARKTUI_LOCK_ROOT") or DEFAULT_ROOT
    return f"{root.rstrip('/')}/{name}"


class ClusterLock:
    """One cluster's lock on its head node.  ``acquire`` → run → ``release``; a heartbeat meanwhile."""

    def __init__(self, node: "Node", cluster: str, *, root: str | None = None, session: str = "",
                 heartbeat_s: float = HEARTBEAT_S, stale_s: float = STALE_S) -> None:
        self.node = node
        self.cluster = cluster
        self.dir = cluster_dir(cluster, root)
        self.session = session or PROCESS_SESSION
        self.heartbeat_s = heartbeat_s
        self.stale_s = stale_s
        self.token = ""
        self.record: dict[str, Any] = {}
        self._beat: asyncio.Task | None = None
        self.lost = ""  # why the heartbeat found the lock no longer ours

    @classmethod
    def for_context(cls, ctx: "ActionContext") -> "ClusterLock | None":
        """The lock of ctx's cluster, or None where there is none to share: the embedded demo (sim
        nodes live in this process only) or a context without the head node."""
        head = ctx.config.head.name if ctx.config.nodes else ""
        node = ctx.nodes.get(head)
        if node is None or getattr(node, "backend", "") == "sim":
            return None
        root = getattr(ctx, "lock_root", None) or os.environ.get("SPARKTUI_LOCK_ROOT") or None
        return cls(node, ctx.config.cluster.name, root=root, session=getattr(ctx, "session_id", "") or "")

    # ------------------------------------------------------------------ node side
    async def _op(self, op: str, token: str = "", record: str = "") -> tuple[str, Holder | None]:
        try:
            res = await self.node.run(["sh", "-c", _SCRIPT, "sparktui-lock", op, self.dir, token, record],
                                      timeout=20)
        except NodeError as exc:
            raise LockError(f"{self.node.name}: cannot reach the cluster lock: {exc}") from None
        word, holder = _parse(res.text)
        if not word:
            raise LockError(f"{self.node.name}: the cluster lock script failed (exit {res.returncode}): "
                            f"{res.err_text.strip()[:200]}")
        return word, holder

    def _record(self, action: str) -> str:
        return json.dumps({**self.record, "action": action, "since_heartbeat": now_local()})

    async def try_acquire(self, action: str) -> Holder | None:
        """Take the lock (None) or report who holds it."""
        user, host = operator()
        token = secrets.token_hex(8)
        since = now_local()
        self.record = {"user": user, "host": host, "pid": os.getpid(), "action": action, "since": since,
                       "session": self.session, "cluster": self.cluster, "token": token}
        try:
            word, holder = await self._op("acquire", token, self._record(action))
        except asyncio.CancelledError:
            # the mkdir may have happened on the node before the cancel reached us: give it back
            await asyncio.shield(self._op("release", token))
            raise
        if word == "ACQUIRED":
            self.token = token
            return None
        if word == "HELD" and holder is not None:
            return holder
        raise LockError(f"{self.node.name}: unexpected answer from the cluster lock: {word!r}")

    async def show(self) -> Holder | None:
        word, holder = await self._op("show")
        return holder if word == "HELD" else None

    async def break_(self, holder: Holder) -> bool:
        """Remove ``holder``'s lock; False when it changed meanwhile (someone else broke or took it)."""
        word, _ = await self._op("break", holder.token)
        return word == "BROKEN"

    async def release(self) -> bool:
        await self._stop_heartbeat()
        if not self.token:
            return False
        token, self.token = self.token, ""
        word, _ = await self._op("release", token)
        return word == "RELEASED"

    # ------------------------------------------------------------------ heartbeat
    def start_heartbeat(self, on_lost=None) -> None:
        async def beat() -> None:
            while self.token:
                await asyncio.sleep(self.heartbeat_s)
                try:
                    word, holder = await self._op("heartbeat", self.token, self._record(self.record["action"]))
                except LockError:
                    continue  # a blip on the SSH link: the next beat tries again, well within stale_s
                if word == "LOST":
                    self.lost = f"the lock was broken; now {holder.describe()}" if holder and holder.record \
                        else "the lock was broken"
                    self.token = ""
                    if on_lost:
                        on_lost(self.lost)
                    return

        self._beat = asyncio.get_running_loop().create_task(beat())

    async def _stop_heartbeat(self) -> None:
        if self._beat is not None:
            self._beat.cancel()
            try:
                await self._beat
            except (asyncio.CancelledError, Exception):
                pass
            self._beat = None

    # ------------------------------------------------------------------ the policy
    def held_message(self, holder: Holder, action: str, stale: str = "") -> str:
        if stale:
            return (f"{self.node.name}: stale lock: {holder.describe()} ({stale}) — {action} refused; "
                    "--break-lock to break it")
        return f"{self.node.name}: {holder.describe()} — {action} refused; --wait to queue"

    async def acquire(self, ctx: "ActionContext", action: str) -> None:
        """Take the lock for ``action`` or raise LockHeld: waits when ``ctx.lock_wait``; a stale holder is
        broken only when ``ctx.break_lock`` or the operator confirms (``--yes`` alone never breaks
        someone else's lock: it answers for the action, not for the other operator)."""
        wait = bool(getattr(ctx, "lock_wait", False))
        pause, told = Backoff(0.5, 5.0), ""
        asked: set[str] = set()
        while True:
            holder = await self.try_acquire(action)
            if holder is None:
                ctx.emit("lock", "ok", f"cluster lock on {self.node.name} taken")
                return
            stale = holder.stale_reason(self.stale_s)
            if stale and holder.token not in asked:
                asked.add(holder.token)
                title = f"Break the stale cluster lock on {self.node.name}?"
                detail = f"{holder.describe()}: {stale}.  Break it only if that sparktui is really gone."
                ask = getattr(ctx, "_confirm", None)
                if getattr(ctx, "break_lock", False) or (ask is not None and await ask(title, detail)):
                    if await self.break_(holder):
                        ctx.emit("lock", "warn", f"broke the stale lock: {holder.describe()} ({stale})")
                    continue  # take it (or meet whoever was quicker)
                raise LockHeld(self.held_message(holder, action, stale), holder)
            if not wait:
                raise LockHeld(self.held_message(holder, action, stale), holder)
            line = f"waiting: {holder.describe()}" + (f" ({stale})" if stale else "")
            if line != told:
                ctx.emit("lock", "progress", line)
                told = line
            await asyncio.sleep(pause.next())

