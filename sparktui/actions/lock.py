"""The cluster-wide action lock: one mutating action at a time per cluster, across operators.

It lives on the nodes (so two operators on two laptops see the same lock), in each node's home:

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

The lock's identity is the CLUSTER, not one config's head: the directory is named after the cluster's
container name (the label ``launch`` puts on its containers and the name ``stop`` looks for), and it
is taken on EVERY node the config lists, head first, all with one token.  Two configs listing the same
machines in another order, or calling another node head, meet on each machine they share.  As soon as
one node answers HELD, the nodes already taken are given back (no one waits holding a part).  A node
that cannot be reached is skipped with a warning: no one changes anything there through it either.

``ActionContext(lock_root=...)`` / ``$SPARKTUI_LOCK_ROOT`` (tests, a shared path) only ADD a place: the
lock is taken there first (the record a test inspects) AND at the default place, so an operator with
another root, or none, still meets the holder at the default place on every node: it cannot bypass.

Before each step of a mutating action the holder checks its record on every node (``verify``, which
also refreshes it): after a stall (suspend, SIGSTOP) long enough for someone to break the lock, it
stops there with one line instead of carrying on.  A stale lock is broken by the checksum of the record
the operator confirmed, so a record we cannot parse (torn, hostile, another version) can still be
broken, and a holder that beat meanwhile is not.  Every field read from a record is shown through
``safe`` (a record is a stranger's bytes).  The embedded demo (sim nodes) has no lock: nothing to share.
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

from ..identity import operator_id
from ..logs.sanitize import safe
from ..nodes.base import NodeError
from ..timefmt import local_clock, now_local
from ..waiting import Backoff
from .errors import ActionRefused

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ..nodes.base import Node
    from .base import ActionContext

DEFAULT_ROOT = ".local/state/sparktui/clusters"  # relative: under each node's $HOME
HEARTBEAT_S = 10.0
STALE_S = 60.0
MAX_RECORD = 64 * 1024  # a record is ~300 bytes; more is not ours, and is never read whole
WAIT_HINT = "--wait to queue"  # the CLI's way to queue behind a holder (the TUI says its own)
FIELD_CAP = 80  # a holder field as shown: enough for user@host, never a screenful
LABEL_OPERATOR = "sparktui.operator"
LABEL_ACTION = "sparktui.action"
LABEL_SESSION = "sparktui.session"
# one id per sparktui process when the face has no session of its own
PROCESS_SESSION = uuid.uuid4().hex[:12]

# $1 op, $2 cluster dir (relative to $HOME unless absolute), $3 token (break: the checksum of the record
# the operator confirmed, '' for none), $4 record.  Output: a status word, then (when someone holds
# it) "now", "mtime", "sum" (the record's cksum), "---" and the record's first MAX_RECORD+1 bytes.
_SCRIPT = r"""
umask 077; op=$1; d=$2; tok=$3; rec=$4
case $d in /*) ;; *) d=$HOME/$d ;; esac
L=$d/lock.d; F=$L/lock.json
show() {
  echo "now $(date +%s)"
  if [ -e "$F" ]; then echo "mtime $(stat -c %Y "$F")"; else echo "mtime $(stat -c %Y "$L" 2>/dev/null || echo -)"; fi
  echo "sum $(cksum <"$F" 2>/dev/null)"
  echo ---; head -c MAXREC "$F" 2>/dev/null; return 0
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
  # already ours: this place reached again through another node name (one home shared by two nodes)
  if mine; then echo ACQUIRED; exit 0; fi
  echo HELD; show; exit 1 ;;
heartbeat)
  mine || { echo LOST; show; exit 1; }
  printf '%s\n' "$rec" >"$L/.hb-$tok" && mv -f "$L/.hb-$tok" "$F" && echo OK ;;
release)
  [ -d "$L" ] || { echo GONE; exit 0; }
  mine || { echo NOTOURS; show; exit 1; }
  mv "$L" "$d/.released-$tok-$$" && rm -rf "$d/.released-$tok-$$" && echo RELEASED ;;
break)
  # only the record the operator confirmed (same bytes: no beat since), or a lock.d with no record
  if [ -e "$F" ]; then [ -n "$tok" ] && [ "$(cksum <"$F")" = "$tok" ] || { echo CHANGED; show; exit 1; }
  elif [ -n "$tok" ]; then echo CHANGED; show; exit 1; fi
  mv "$L" "$d/.broken-$$" || { echo CHANGED; exit 1; }
  mv -f "$d/.broken-$$/lock.json" "$d/last-broken.json" 2>/dev/null; rm -rf "$d/.broken-$$"; echo BROKEN ;;
show)
  if [ -d "$L" ]; then echo HELD; show; else echo FREE; fi ;;
*) exit 2 ;;
esac
""".replace("MAXREC", str(MAX_RECORD + 1))

_STR_FIELDS = ("user", "host", "operator", "action", "since", "since_heartbeat", "session", "cluster", "token")


class LockError(ActionRefused):
    """The lock could not be taken for a reason other than a holder (head unreachable, no shell)."""


class LockHeld(ActionRefused):
    """Someone else holds the cluster lock; ``str()`` is the one line the operator reads."""

    def __init__(self, message: str, holder: "Holder") -> None:
        super().__init__(message)
        self.holder = holder


class LockLost(ActionRefused):
    """The lock this action held was broken and (maybe) taken by someone else: stop changing things."""


class LockRecordError(ValueError):
    """A lock record that is not one we can read; ``str()`` is one line."""


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


def parse_record(data: bytes | str) -> dict[str, Any]:
    """A holder record from a node's file: a JSON object whose known fields have their types, or
    LockRecordError (one line).  Never reads more than MAX_RECORD (a record is a stranger's bytes)."""
    if len(data) > MAX_RECORD:
        raise LockRecordError(f"holder record over {MAX_RECORD // 1024} KiB")
    if isinstance(data, bytes):
        data = data.decode("utf-8", "replace")
    try:
        record = json.loads(data)
    except RecursionError:  # [[[[... nested past the interpreter's stack
        raise LockRecordError("holder record nested too deep") from None
    except ValueError:
        raise LockRecordError("holder record is not JSON") from None
    if not isinstance(record, dict):
        raise LockRecordError(f"holder record is a JSON {type(record).__name__}, not an object")
    for key in _STR_FIELDS:
        if key in record and not isinstance(record[key], str):
            raise LockRecordError(f"holder record field {key!r} is not a string")
    pid = record.get("pid")
    if pid is not None and (type(pid) is not int or not 0 < pid < 2**31):
        raise LockRecordError("holder record field 'pid' is not a process id")
    return record


@dataclass(frozen=True)
class Holder:
    """Who holds the lock, as read from a node; ``age_s`` is the heartbeat's age on the node's clock.
    ``problem``: why the record could not be read ('' when it could); ``sum``: the record's checksum
    on the node (what a break must match)."""

    record: dict[str, Any]
    age_s: float | None
    problem: str = ""
    sum: str = ""

    def _field(self, key: str) -> str:
        value = self.record.get(key)
        return safe(value)[:FIELD_CAP] if value not in (None, "") else "?"

    @property
    def who(self) -> str:
        """The operator (``--operator``), or user@host for a record written before operators had names."""
        if not self.record:
            return "(unknown: being taken)"
        if self.record.get("operator"):
            return self._field("operator")
        return f"{self._field('user')}@{self._field('host')}"

    @property
    def action(self) -> str:
        return self._field("action") if self.record else "?"

    @property
    def pid(self) -> int | None:
        pid = self.record.get("pid")
        return pid if type(pid) is int and 0 < pid < 2**31 else None

    @property
    def token(self) -> str:
        token = self.record.get("token")
        return token if isinstance(token, str) else ""

    @property
    def key(self) -> str:
        """What names this holder across nodes (its token), or this one record (its checksum)."""
        return self.token or f"sum:{self.sum}"

    def stale_reason(self, stale_s: float) -> str:
        """Why the holder is gone ('' while it lives)."""
        if self.age_s is not None and self.age_s > stale_s:
            return f"no heartbeat for {self.age_s:.0f} s"
        if self.record and self.record.get("host") == socket.gethostname() and self.pid is not None \
                and not _pid_alive(self.pid):
            return f"its process {self.pid} on {self._field('host')} is gone"
        return ""

    def describe(self) -> str:
        if self.problem:
            return f"a lock with an unreadable holder record ({self.problem})"
        if not self.record:
            return "a lock being taken (no holder record yet)"
        since = safe(local_clock(self.record.get("since", "")))[:FIELD_CAP]
        return f"{self.action} held by {self.who} (pid {self.pid}) since {since}"

    def to_json(self) -> dict:
        out = {k: v for k, v in self.record.items() if k != "token"}
        if self.problem:
            out["problem"] = self.problem
        return {**out, "heartbeat_age_s": self.age_s}


def _parse(text: str) -> tuple[str, Holder | None]:
    head, sep, body = text.partition("\n---\n")
    if not sep and head.endswith("\n---"):  # an empty record: nothing after the marker
        head, sep = head[:-4], "\n---"
    lines = head.splitlines()
    word = lines[0].strip() if lines else ""
    vals: dict[str, str] = {}
    for line in lines[1:]:
        k, _, v = line.partition(" ")
        vals[k] = v.strip()
    if "now" not in vals:
        return word, None
    record: dict[str, Any] = {}
    problem = ""
    if body.strip():
        try:
            record = parse_record(body)
        except LockRecordError as exc:
            problem = str(exc)
    try:
        age: float | None = float(vals["now"]) - float(vals.get("mtime", ""))
    except ValueError:
        age = None
    return word, Holder(record, age, problem, vals.get("sum", ""))


def owner_labels(ctx: "ActionContext", action: str | None = None) -> dict[str, str]:
    """Labels every action-owned container carries: whose it is, so cleanup only takes one's own."""
    return {LABEL_OPERATOR: operator_id(), LABEL_ACTION: action or ctx.action_name,
            LABEL_SESSION: getattr(ctx, "session_id", "") or PROCESS_SESSION}


def cluster_dir(cluster: str, root: str | None = None) -> str:
    """The cluster's shared directory on a node (lock, timeline), relative to the node's $HOME
    unless ``root`` (or $SPARKTUI_LOCK_ROOT) says otherwise."""
    name = re.sub(r"[^A-Za-z0-9._-]", "_", cluster)
    name = "cluster" if name in ("", ".", "..") else name  # never the parent of clusters/
    root = root or os.environ.get("SPARKTUI_LOCK_ROOT") or DEFAULT_ROOT
    return f"{root.rstrip('/')}/{name}"


@dataclass(frozen=True)
class _Site:
    """One place the lock is taken: a directory on one node."""

    node: "Node"
    dir: str


class ClusterLock:
    """One cluster's lock on its nodes.  ``acquire`` → run → ``release``; a heartbeat meanwhile.
    ``nodes``: one node or several (head first); the lock is taken on each."""

    def __init__(self, nodes: "Node | list[Node]", cluster: str, *, root: str | None = None, session: str = "",
                 heartbeat_s: float = HEARTBEAT_S, stale_s: float = STALE_S) -> None:
        nodes = list(nodes) if isinstance(nodes, (list, tuple)) else [nodes]
        self.node = nodes[0]
        self.cluster = cluster
        self.dir = cluster_dir(cluster, root)
        dirs = [self.dir] + ([cluster_dir(cluster, DEFAULT_ROOT)] if cluster_dir(cluster, DEFAULT_ROOT) != self.dir
                             else [])
        self.sites = [_Site(n, d) for n in nodes for d in dirs]
        self.taken: list[_Site] = []
        self.session = session or PROCESS_SESSION
        self.heartbeat_s = heartbeat_s
        self.stale_s = stale_s
        self.token = ""
        self.record: dict[str, Any] = {}
        self._beat: asyncio.Task | None = None
        self._beats = 0
        self.lost = ""  # why the lock is no longer ours (heartbeat or verify found it broken)

    @classmethod
    def for_context(cls, ctx: "ActionContext") -> "ClusterLock | None":
        """The lock of ctx's cluster on every node of it (head first), or None where there is none to
        share: the embedded demo (sim nodes live in this process only) or a context without its nodes."""
        return cls.for_nodes(ctx.config, ctx.nodes, root=getattr(ctx, "lock_root", None),
                             session=getattr(ctx, "session_id", "") or "")

    @classmethod
    def for_nodes(cls, config, nodes: "Mapping[str, Node]", *, root: str | None = None,
                  session: str = "") -> "ClusterLock | None":
        """The lock of ``config``'s cluster on those of ``nodes`` it lists (head first); None for sim nodes."""
        names = [n.name for n in config.nodes]
        if config.nodes:
            head = config.head.name
            names = [head] + [n for n in names if n != head]
        handles = [nodes[n] for n in names if n in nodes and nodes[n].backend != "sim"]
        if not handles:
            return None
        root = root or os.environ.get("SPARKTUI_LOCK_ROOT") or None
        return cls(handles, config.cluster.name, root=root, session=session)

    # ------------------------------------------------------------------ node side
    async def _op(self, op: str, token: str = "", record: str = "", site: _Site | None = None
                  ) -> tuple[str, Holder | None]:
        site = site or self.sites[0]
        try:
            res = await site.node.run(["sh", "-c", _SCRIPT, "sparktui-lock", op, site.dir, token, record],
                                      timeout=20)
        except NodeError as exc:
            raise LockError(f"{site.node.name}: cannot reach the cluster lock: {safe(exc)}") from None
        word, holder = _parse(res.text)
        if not word:
            raise LockError(f"{site.node.name}: the cluster lock script failed (exit {res.returncode}): "
                            f"{safe(res.err_text.strip()[:200])}")
        return word, holder

    def _record(self, action: str) -> str:
        # "beat" counts: every rewrite differs in its bytes, so a break matched on the checksum of an
        # older record is refused even within the same second
        self._beats += 1
        return json.dumps({**self.record, "action": action, "since_heartbeat": now_local(), "beat": self._beats})

    async def try_acquire(self, action: str, ctx: "ActionContext | None" = None) -> tuple[_Site, Holder] | None:
        """Take the lock on every node (None) or give back what was taken and report who holds it where."""
        user, host = operator()
        token = secrets.token_hex(8)
        since = now_local()
        # user and host stay the machine's: a stale lock's dead pid is recognised on this very host
        self.record = {"user": user, "host": host, "operator": operator_id(), "pid": os.getpid(), "action": action, "since": since,
                       "session": self.session, "cluster": self.cluster, "token": token}
        taken: list[_Site] = []
        skipped: list[str] = []
        try:
            for site in self.sites:
                try:
                    word, holder = await self._op("acquire", token, self._record(action), site)
                except LockError as exc:
                    skipped.append(str(exc))
                    continue
                if word == "ACQUIRED":
                    taken.append(site)
                    continue
                await self._give_back(taken, token)
                if word == "HELD" and holder is not None:
                    return site, holder
                raise LockError(f"{site.node.name}: unexpected answer from the cluster lock: {safe(word)[:40]!r}")
        except asyncio.CancelledError:
            # the mkdir may have happened on a node before the cancel reached us: give it back
            await asyncio.shield(self._give_back(self.sites, token))
            raise
        if not taken:
            raise LockError(skipped[0] if skipped else "no node to take the cluster lock on")
        self.token, self.taken = token, taken
        if ctx is not None:
            for why in skipped:
                ctx.emit("lock", "warn", f"{why} (lock not taken there)")
        return None

    async def _give_back(self, sites: list[_Site], token: str) -> None:
        for site in sites:
            try:
                await self._op("release", token, site=site)
            except LockError:
                pass

    async def show(self) -> Holder | None:
        word, holder = await self._op("show")
        return holder if word == "HELD" else None

    async def break_(self, holder: Holder, site: _Site | None = None) -> bool:
        """Remove ``holder``'s lock at ``site`` (default: the first); False when its record changed
        meanwhile (it beat, or someone else broke or took it)."""
        word, _ = await self._op("break", holder.sum, site=site)  # '' (no record file) matches only none
        return word == "BROKEN"

    async def release(self) -> bool:
        await self._stop_heartbeat()
        if not self.token:
            return False
        token, self.token = self.token, ""
        sites, self.taken = self.taken or self.sites[:1], []
        words = []
        for site in sites:
            try:
                words.append((await self._op("release", token, site=site))[0])
            except LockError:
                words.append("")
        # GONE: the same place, reached through another node name, was released a moment ago
        return "RELEASED" in words and all(w in ("RELEASED", "GONE") for w in words)

    async def _beat_all(self) -> str:
        """Refresh the record everywhere it was taken; why it is lost ('' while it is ours).  An
        unreachable node is no answer: the next beat tries again, well within stale_s."""
        async def one(site: _Site) -> str:
            try:
                word, holder = await self._op("heartbeat", self.token, self._record(self.record["action"]), site)
            except LockError:
                return ""
            if word != "LOST":
                return ""
            if holder is not None and (holder.record or holder.problem):
                return f"the lock on {site.node.name} was broken; now {holder.describe()}"
            return f"the lock on {site.node.name} was broken"

        if not self.token:
            return self.lost or "the lock was given back"
        whys = [w for w in await asyncio.gather(*(one(s) for s in self.taken or self.sites[:1])) if w]
        if whys and not self.lost:
            self.lost, self.token = whys[0], ""
        return self.lost

    async def verify(self, before: str = "") -> None:
        """Raise LockLost unless the lock is still ours on every node it was taken on (and refresh it:
        after this, no one can call it stale for ``stale_s``).  Called before each step of a mutating
        action, so a holder that stalled and lost its lock stops before changing anything more."""
        if not self.lost and not self.token:
            return  # released, or never taken
        why = self.lost or await self._beat_all()
        if why:
            raise LockLost(f"cluster lock lost: {why}" + (f" — stopped before {safe(before)}" if before else ""))

    # ------------------------------------------------------------------ heartbeat
    def start_heartbeat(self, on_lost=None) -> None:
        async def beat() -> None:
            while self.token:
                await asyncio.sleep(self.heartbeat_s)
                if not self.token:
                    return
                why = await self._beat_all()
                if why:
                    if on_lost:
                        on_lost(why)
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
    def held_message(self, holder: Holder, action: str, stale: str = "", node: str = "",
                     hint: str = WAIT_HINT) -> str:
        """``hint``: how this face queues behind the holder (the CLI's flag; the TUI's key)."""
        node = node or self.node.name
        if stale:
            return (f"{node}: stale lock: {holder.describe()} ({stale}) — {action} refused; "
                    "--break-lock to break it")
        return f"{node}: {holder.describe()} — {action} refused; {hint}"

    async def acquire(self, ctx: "ActionContext", action: str, *, wait: bool | None = None) -> None:
        """Take the lock for ``action`` or raise LockHeld: waits when ``ctx.lock_wait``; a stale holder is
        broken only when ``ctx.break_lock`` or the operator confirms (``--yes`` alone never breaks
        someone else's lock: it answers for the action, not for the other operator).  A holder once
        confirmed is broken on every node it still holds, without asking again."""
        wait = bool(getattr(ctx, "lock_wait", False)) if wait is None else wait
        hint = getattr(ctx, "wait_hint", "") or WAIT_HINT
        pause, told = Backoff(0.5, 5.0), ""
        asked: set[str] = set()
        confirmed: set[str] = set()
        failed: set[tuple[str, str]] = set()  # (holder, place) whose break was refused: never loop on it
        while True:
            got = await self.try_acquire(action, ctx)
            if got is None:
                where = ", ".join(dict.fromkeys(s.node.name for s in self.taken))
                ctx.emit("lock", "ok", f"cluster lock on {where} taken")
                return
            site, holder = got
            name = site.node.name
            stale = holder.stale_reason(self.stale_s)
            place = (holder.key, f"{name}:{site.dir}")
            if (stale or holder.key in confirmed) and place not in failed:
                if holder.key not in confirmed and holder.key not in asked:
                    asked.add(holder.key)
                    title = f"Break the stale cluster lock on {name}?"
                    detail = f"{holder.describe()}: {stale}.  Break it only if that sparktui is really gone."
                    ask = getattr(ctx, "_confirm", None)
                    if getattr(ctx, "break_lock", False) or (ask is not None and await ask(title, detail)):
                        confirmed.add(holder.key)
                if holder.key in confirmed:
                    if await self.break_(holder, site):
                        ctx.emit("lock", "warn", f"broke the stale lock: {holder.describe()} "
                                                 f"({stale or 'broken on another node'}) on {name}")
                    else:
                        failed.add(place)
                    continue  # take it (or meet whoever was quicker)
                raise LockHeld(self.held_message(holder, action, stale, name, hint), holder)
            if not wait:
                raise LockHeld(self.held_message(holder, action, stale, name, hint), holder)
            line = f"waiting: {holder.describe()}" + (f" ({stale})" if stale else "")
            if line != told:
                ctx.emit("lock", "progress", line)
                told = line
            await asyncio.sleep(pause.next())
