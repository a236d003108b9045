"""The cluster lock against a real LocalNode: the node-side script runs in a real shell on this machine,
in a throwaway $HOME (the lock lives in the head's home)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sparktui.actions.base import Action, ActionContext, ActionResult
from sparktui.actions.lock import ClusterLock, LockHeld, owner_labels
from sparktui.config import parse_config
from sparktui.nodes.local import LocalNode

CFG = '[cluster]\nname = "vllm_qwen35"\n[[node]]\nname = "spark1"\nbackend = "local"\n'


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("SPARKTUI_LOCK_ROOT", raising=False)
    return tmp_path


@pytest.fixture
def cfg():
    return parse_config(CFG)


def lock_dir(home: Path) -> Path:
    return home / ".local/state/sparktui/clusters/vllm_qwen35"


def ctx_for(cfg, events=None, **kw) -> ActionContext:
    return ActionContext(cfg, {"spark1": LocalNode(cfg.nodes[0])}, emit=(events.append if events is not None else None),
                         **kw)


async def until(pred, timeout: float = 10.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not await pred():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


async def test_acquire_refuse_release(home, cfg):
    a = ClusterLock(LocalNode(cfg.nodes[0]), "vllm_qwen35")
    await a.acquire(ctx_for(cfg), "launch")
    rec = json.loads((lock_dir(home) / "lock.json").read_text())  # the named path (a link into lock.d)
    assert rec["action"] == "launch" and rec["pid"] == os.getpid() and rec["token"] == a.token
    assert {"user", "host", "since", "since_heartbeat", "session"} <= rec.keys()

    b = ClusterLock(LocalNode(cfg.nodes[0]), "vllm_qwen35")
    with pytest.raises(LockHeld) as err:
        await b.acquire(ctx_for(cfg), "validate")
    msg = str(err.value)
    assert msg.startswith("spark1: launch held by ") and f"(pid {os.getpid()})" in msg
    assert msg.endswith("— validate refused; --wait to queue") and f"{rec['user']}@{rec['host']}" in msg
    assert "\n" not in msg
    assert err.value.holder.token == a.token

    assert await a.release()
    assert not (lock_dir(home) / "lock.d").exists() and not (lock_dir(home) / "lock.json").exists()
    await b.acquire(ctx_for(cfg), "validate")  # free again: the next one gets it
    assert (await b.show()).action == "validate"
    await b.release()


async def test_release_with_another_token_leaves_the_holder_alone(home, cfg):
    a = ClusterLock(LocalNode(cfg.nodes[0]), "vllm_qwen35")
    await a.acquire(ctx_for(cfg), "stop")
    held = await a.show()
    b = ClusterLock(LocalNode(cfg.nodes[0]), "vllm_qwen35")
    b.token = "0123456789abcdef"  # a token that is not the holder's (e.g. a lock broken and retaken since)
    assert not await b.release()
    assert (await a.show()).token == held.token == a.token
    assert await a.release()


async def test_stale_by_heartbeat_is_broken_only_after_confirmation(home, cfg):
    old = ClusterLock(LocalNode(cfg.nodes[0]), "vllm_qwen35")
    await old.acquire(ctx_for(cfg), "launch")
    f = lock_dir(home) / "lock.d" / "lock.json"
    os.utime(f, (time.time() - 300, time.time() - 300))  # its holder stopped beating 5 minutes ago
    new = ClusterLock(LocalNode(cfg.nodes[0]), "vllm_qwen35")

    # no way to ask (a pipe, no --break-lock), and --yes does not count: refused, lock kept
    with pytest.raises(LockHeld, match=r"stale lock: launch held by .* \(no heartbeat for \d+ s\) — validate "
                                       r"refused; --break-lock to break it"):
        await new.acquire(ctx_for(cfg, assume_yes=True), "validate")
    assert f.exists()

    asked: list[tuple[str, str]] = []

    async def say(answer):
        async def confirm(title, detail):
            asked.append((title, detail))
            return answer
        return confirm

    with pytest.raises(LockHeld):
        await new.acquire(ctx_for(cfg, confirm=await say(False)), "validate")
    assert f.exists() and json.loads(f.read_text())["token"] == old.token
    assert "launch held by" in asked[0][1] and f"pid {os.getpid()}" in asked[0][1]

    events = []
    await new.acquire(ctx_for(cfg, events, confirm=await say(True)), "validate")
    assert json.loads(f.read_text())["token"] == new.token
    assert json.loads((lock_dir(home) / "last-broken.json").read_text())["token"] == old.token
    assert any(e.status == "warn" and "broke the stale lock" in e.message for e in events)
    assert not await old.release()  # the old holder, if it ever comes back, cannot drop the new lock
    assert await new.release()


async def test_break_lock_flag_breaks_a_lock_whose_process_died(home, cfg):
    # a real sparktui-like process takes the lock and is SIGKILLed: no release, no heartbeat
    child = subprocess.Popen(
        [sys.executable, "-c",
         "import asyncio, sys\n"
         "from sparktui.config import parse_config\nfrom sparktui.nodes.local import LocalNode\n"
         "from sparktui.actions.lock import ClusterLock\nfrom sparktui.actions.base import ActionContext\n"
         f"cfg = parse_config({CFG!r})\n"
         "async def main():\n"
         "    lock = ClusterLock(LocalNode(cfg.nodes[0]), 'vllm_qwen35')\n"
         "    await lock.acquire(ActionContext(cfg, {}), 'launch')\n"
         "    print('held', flush=True)\n"
         "    await asyncio.sleep(600)\n"
         "asyncio.run(main())\n"],
        stdout=subprocess.PIPE, text=True, env=os.environ.copy())
    try:
        assert child.stdout.readline().strip() == "held"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    lock = ClusterLock(LocalNode(cfg.nodes[0]), "vllm_qwen35")
    holder = await lock.show()
    assert holder.pid == child.pid and holder.stale_reason(60) == f"its process {child.pid} on {holder.record['host']} is gone"
    with pytest.raises(LockHeld, match="stale lock.*--break-lock"):
        await lock.acquire(ctx_for(cfg), "stop")
    await lock.acquire(ctx_for(cfg, break_lock=True), "stop")
    assert (await lock.show()).token == lock.token
    await lock.release()


async def test_a_live_holder_is_not_stale_and_its_heartbeat_keeps_it_fresh(home, cfg):
    a = ClusterLock(LocalNode(cfg.nodes[0]), "vllm_qwen35", heartbeat_s=0.1)
    await a.acquire(ctx_for(cfg), "build-image")
    f = lock_dir(home) / "lock.d" / "lock.json"
    os.utime(f, (time.time() - 300, time.time() - 300))
    assert (await a.show()).stale_reason(60)  # without a heartbeat it would look dead ...
    a.start_heartbeat()

    async def fresh():
        h = await a.show()
        return h.age_s is not None and h.age_s < 5 and h.stale_reason(60) == ""
    await until(fresh, what="the heartbeat to rewrite the record")  # ... the beat makes it live again
    assert json.loads(f.read_text())["token"] == a.token
    await a.release()
    assert a._beat is None


async def test_heartbeat_notices_the_lock_was_broken(home, cfg):
    a = ClusterLock(LocalNode(cfg.nodes[0]), "vllm_qwen35", heartbeat_s=0.1)
    await a.acquire(ctx_for(cfg), "launch")
    lost: list[str] = []
    a.start_heartbeat(lost.append)
    other = ClusterLock(LocalNode(cfg.nodes[0]), "vllm_qwen35")
    assert await other.break_(await other.show())
    await other.acquire(ctx_for(cfg), "stop")

    async def noticed():
        return bool(lost)
    await until(noticed, what="the heartbeat to see the lock gone")
    assert "stop held by" in lost[0] and a.token == ""
    assert (await other.show()).token == other.token  # the lost holder's beat did not overwrite it
    await a.release()
    await other.release()


async def test_wait_queues_until_the_holder_releases(home, cfg):
    a = ClusterLock(LocalNode(cfg.nodes[0]), "vllm_qwen35")
    await a.acquire(ctx_for(cfg), "validate")
    events = []
    b = ClusterLock(LocalNode(cfg.nodes[0]), "vllm_qwen35")
    task = asyncio.create_task(b.acquire(ctx_for(cfg, events, lock_wait=True), "launch"))

    async def waiting():
        return any(e.status == "progress" and "waiting: validate held by" in e.message for e in events)
    await until(waiting, what="the waiter to say whom it waits for")
    assert not task.done()
    await a.release()
    await asyncio.wait_for(task, 15)
    assert (await b.show()).action == "launch"
    await b.release()


class Hold(Action):
    """A real mutating action that waits for the test to let it go (and can fail or be cancelled)."""

    name = "hold"
    mutating = True

    def __init__(self) -> None:
        self.inside = asyncio.Event()
        self.go = asyncio.Event()
        self.labels: dict = {}

    async def execute(self, ctx: ActionContext) -> ActionResult:
        self.labels = owner_labels(ctx)
        self.inside.set()
        await self.go.wait()
        return ActionResult(self.name, True, "held")


async def test_action_run_takes_the_lock_and_releases_it_on_every_exit(home, cfg):
    first = Hold()
    t1 = asyncio.create_task(first.run(ctx_for(cfg, session_id="s-1")))
    await asyncio.wait_for(first.inside.wait(), 10)
    assert json.loads((lock_dir(home) / "lock.json").read_text())["action"] == "hold"
    assert first.labels["sparktui.action"] == "hold" and first.labels["sparktui.session"] == "s-1"
    assert "@" in first.labels["sparktui.operator"]

    second = Hold()
    r2 = await second.run(ctx_for(cfg))
    assert not r2.ok and not second.inside.is_set()  # refused before anything ran
    assert "hold held by" in r2.summary and "--wait to queue" in r2.summary
    assert r2.data["refused"] == "lock" and r2.data["lock_holder"]["action"] == "hold"
    assert "token" not in r2.data["lock_holder"]

    first.go.set()
    assert (await asyncio.wait_for(t1, 10)).ok
    assert not (lock_dir(home) / "lock.d").exists()

    # cancelled (Ctrl+C) mid-action: the lock is still given back
    third = Hold()
    t3 = asyncio.create_task(third.run(ctx_for(cfg)))
    await asyncio.wait_for(third.inside.wait(), 10)
    t3.cancel()
    with pytest.raises(asyncio.CancelledError):
        await t3

    async def freed():
        return not (lock_dir(home) / "lock.d").exists()
    await until(freed, what="the cancelled action's lock to be released")


async def test_read_only_never_touches_the_lock(home, cfg):
    r = await Hold().run(ctx_for(cfg, read_only=True))
    assert not r.ok and "read-only" in r.summary
    assert not lock_dir(home).exists()


async def test_lock_root_points_the_lock_elsewhere(home, cfg, tmp_path):
    root = tmp_path / "elsewhere"
    h = Hold()
    t = asyncio.create_task(h.run(ctx_for(cfg, lock_root=str(root))))
    await asyncio.wait_for(h.inside.wait(), 10)
    rec = json.loads((root / "vllm_qwen35" / "lock.d" / "lock.json").read_text())
    # the root adds a place, it never replaces the default one: an operator without it still meets the holder
    assert json.loads((lock_dir(home) / "lock.d" / "lock.json").read_text())["token"] == rec["token"]
    r = await Hold().run(ctx_for(cfg))
    assert not r.ok and "hold held by" in r.summary
    h.go.set()
    await asyncio.wait_for(t, 10)
    assert not (root / "vllm_qwen35" / "lock.d").exists() and not (lock_dir(home) / "lock.d").exists()
