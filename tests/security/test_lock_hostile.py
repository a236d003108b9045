"""The cluster lock against the other operator (issue 30 item 9 and the lock's low items): real shells,
real files in throwaway homes, a real second process for the stalled holder.

Each node here is this machine with a home of its own (``HomeNode``: the lock script runs in a real
``sh`` with that $HOME), so two nodes are two places, as two machines would be.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparktui.actions.base import Action, ActionContext, ActionResult
from sparktui.actions.lock import ClusterLock, LockHeld, LockRecordError, _parse, parse_record
from sparktui.config import parse_config
from sparktui.nodes.local import LocalNode

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = "vllm_qwen35"
REL = f".local/state/sparktui/clusters/{CLUSTER}"
# one operator's config: spark1 is head, spark2 a worker
CFG_A = (f'[cluster]\nname = "{CLUSTER}"\n'
         '[[node]]\nname = "spark1"\nbackend = "local"\nrole = "head"\n'
         '[[node]]\nname = "spark2"\nbackend = "local"\n')
# the other operator's config of the same two machines: other names, other order, the other head
CFG_B = (f'[cluster]\nname = "{CLUSTER}"\n'
         '[[node]]\nname = "b-node"\nbackend = "local"\nrole = "head"\n'
         '[[node]]\nname = "a-node"\nbackend = "local"\n')
HOSTILE = "\x1b]52;c;ZXZpbA==\x07\x1b[2J\x9b31m\r\nFAKE: "


class HomeNode(LocalNode):
    """This machine with its own $HOME: what a second machine is to the lock (its own home dir)."""

    def __init__(self, cfg, home: Path) -> None:
        super().__init__(cfg)
        self.home = home

    async def run(self, argv, **kw):
        return await super().run(["env", f"HOME={self.home}", *argv], **kw)


@pytest.fixture
def homes(tmp_path, monkeypatch) -> tuple[Path, Path]:
    monkeypatch.delenv("SPARKTUI_LOCK_ROOT", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "laptop"))
    one, two = tmp_path / "machine1", tmp_path / "machine2"
    one.mkdir()
    two.mkdir()
    return one, two


def ctx_a(homes, **kw) -> ActionContext:
    cfg = parse_config(CFG_A)
    return ActionContext(cfg, {"spark1": HomeNode(cfg.nodes[0], homes[0]),
                               "spark2": HomeNode(cfg.nodes[1], homes[1])}, **kw)


def ctx_b(homes, **kw) -> ActionContext:
    cfg = parse_config(CFG_B)
    return ActionContext(cfg, {"b-node": HomeNode(cfg.nodes[0], homes[1]),
                               "a-node": HomeNode(cfg.nodes[1], homes[0])}, **kw)


class Hold(Action):
    """A real mutating action that stays inside until the test lets it go."""

    name = "hold"
    mutating = True

    def __init__(self) -> None:
        self.inside = asyncio.Event()
        self.go = asyncio.Event()

    async def execute(self, ctx: ActionContext) -> ActionResult:
        async with ctx.step("hold", "holding"):
            self.inside.set()
            await self.go.wait()
        return ActionResult(self.name, True, "held")


def one_line_without_escapes(text: str) -> None:
    assert "\n" not in text and "\r" not in text, text
    for bad in ("\x1b", "\x07", "\x9b"):
        assert bad not in text, repr(text)


# ---------------------------------------------------------------- the lock is the cluster's, not a head's
async def test_another_head_another_order_or_another_root_meets_the_same_lock(homes, tmp_path):
    first = Hold()
    task = asyncio.create_task(first.run(ctx_a(homes)))
    await asyncio.wait_for(first.inside.wait(), 10)
    try:
        # the same machines, listed the other way round with the other one as head
        # (bounded: an attempt that got the lock would sit inside Hold for ever)
        r = await asyncio.wait_for(Hold().run(ctx_b(homes)), 10)
        assert not r.ok and r.data.get("refused") == "lock" and "hold held by" in r.summary
        # the same config with a lock root of one's own (ActionContext's, and the environment's)
        r = await asyncio.wait_for(Hold().run(ctx_a(homes, lock_root=str(tmp_path / "mine"))), 10)
        assert not r.ok and r.data.get("refused") == "lock", r.summary
        os.environ["SPARKTUI_LOCK_ROOT"] = str(tmp_path / "env-root")
        try:
            r = await asyncio.wait_for(Hold().run(ctx_b(homes)), 10)
        finally:
            del os.environ["SPARKTUI_LOCK_ROOT"]
        assert not r.ok and r.data.get("refused") == "lock", r.summary
        # every machine holds the same holder
        tokens = {json.loads((h / REL / "lock.d" / "lock.json").read_text())["token"] for h in homes}
        assert len(tokens) == 1
    finally:
        first.go.set()
        assert (await asyncio.wait_for(task, 10)).ok
    assert not any((h / REL / "lock.d").exists() for h in homes)
    # the refused attempts took nothing anywhere, so the other operator now gets it at once
    second = Hold()
    t2 = asyncio.create_task(second.run(ctx_b(homes)))
    await asyncio.wait_for(second.inside.wait(), 10)
    second.go.set()
    assert (await asyncio.wait_for(t2, 10)).ok


# ---------------------------------------------------------------- a stalled holder that lost its lock stops
CHILD = r'''
import asyncio, json, sys
from pathlib import Path
from sparktui.actions.base import Action, ActionContext, ActionResult
from sparktui.config import parse_config
from sparktui.nodes.local import LocalNode

cfg = parse_config(sys.argv[1])
out = Path(sys.argv[2])

class TwoSteps(Action):
    name = "launch-like"
    mutating = True

    async def execute(self, ctx):
        async with ctx.step("start", "first containers"):
            ctx.on_cleanup(self.cleanup)
            print("inside", flush=True)
            await asyncio.to_thread(sys.stdin.readline)  # the test says when (after SIGSTOP/SIGCONT)
        async with ctx.step("serve", "the step after the stall"):
            (out / "mutated").write_text("yes")
        return ActionResult(self.name, True, "done")

    async def cleanup(self):
        (out / "cleaned").write_text("yes")

async def main():
    r = await TwoSteps().run(ActionContext(cfg, {n.name: LocalNode(n) for n in cfg.nodes}))
    print(json.dumps({"ok": r.ok, "summary": r.summary}), flush=True)

asyncio.run(main())
'''


async def test_a_holder_that_stalled_and_lost_its_lock_stops_before_its_next_step(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("SPARKTUI_LOCK_ROOT", raising=False)
    cfg_text = f'[cluster]\nname = "{CLUSTER}"\n[[node]]\nname = "spark1"\nbackend = "local"\n'
    child = subprocess.Popen([sys.executable, "-c", CHILD, cfg_text, str(tmp_path)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=str(ROOT),
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert child.stdout.readline().strip() == "inside"
        child.send_signal(signal.SIGSTOP)  # a laptop lid closed mid-launch
        record = tmp_path / REL / "lock.d" / "lock.json"
        os.utime(record, (time.time() - 300, time.time() - 300))  # ... for five minutes: no heartbeat
        cfg = parse_config(cfg_text)
        other = ClusterLock(LocalNode(cfg.nodes[0]), CLUSTER)
        events: list = []
        await other.acquire(ActionContext(cfg, {}, emit=events.append, break_lock=True), "stop")
        assert any("broke the stale lock" in e.message for e in events)
        child.send_signal(signal.SIGCONT)  # the lid opens
        out, err = child.communicate("go\n", timeout=30)
        assert child.returncode == 0 and "Traceback" not in err, err
        res = json.loads(out.strip().splitlines()[-1])
        assert not res["ok"] and res["summary"].startswith("cluster lock lost: ")
        assert "stopped before serve" in res["summary"]
        one_line_without_escapes(res["summary"])
        assert not (tmp_path / "mutated").exists()  # the step after the stall never ran
        assert not (tmp_path / "cleaned").exists()  # nor did its cleanups, which change the cluster too
        assert (await other.show()).token == other.token  # and the new holder's lock is untouched
        assert await other.release()
    finally:
        if child.poll() is None:
            child.send_signal(signal.SIGCONT)
            child.kill()
            child.wait(10)


# ---------------------------------------------------------------- a hostile or broken record
def plant(home: Path, record: bytes, age_s: float = 300.0) -> Path:
    d = home / REL / "lock.d"
    d.mkdir(parents=True)
    f = d / "lock.json"
    f.write_bytes(record)
    os.utime(f, (time.time() - age_s, time.time() - age_s))
    return f


async def test_a_hostile_holder_record_is_shown_inert_in_the_prompt_and_the_refusal(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("SPARKTUI_LOCK_ROOT", raising=False)
    rec = {"user": HOSTILE + "mallory", "host": "evil\x1b[2J\nhost", "pid": 4242, "action": "launch\x1b]0;pwned\x07",
           "since": "2026-01-01T00:00:00\x1b[2J\nFAKE", "token": "0123456789abcdef"}
    plant(tmp_path, json.dumps(rec, ensure_ascii=False).encode())
    cfg = parse_config(f'[cluster]\nname = "{CLUSTER}"\n[[node]]\nname = "spark1"\nbackend = "local"\n')
    asked: list[tuple[str, str]] = []

    async def no(title, detail):
        asked.append((title, detail))
        return False

    lock = ClusterLock(LocalNode(cfg.nodes[0]), CLUSTER)
    with pytest.raises(LockHeld) as err:
        await lock.acquire(ActionContext(cfg, {}, confirm=no), "stop")
    one_line_without_escapes(str(err.value))
    assert "mallory" in str(err.value)  # shown, as inert text
    (title, detail), = asked
    one_line_without_escapes(title)
    one_line_without_escapes(detail)

    # the CLI end to end (no TTY: refused with the holder named): no escape reaches the terminal
    conf = tmp_path / "cluster.toml"
    conf.write_text(f'[cluster]\nname = "{CLUSTER}"\n[[node]]\nname = "spark1"\nbackend = "local"\n')
    p = subprocess.run([sys.executable, "-m", "sparktui", "stop", "--config", str(conf)], cwd=str(ROOT),
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=60,
                       env={**os.environ, "HOME": str(tmp_path), "PYTHONPATH": str(ROOT)})
    both = p.stdout + p.stderr
    assert p.returncode != 0 and b"Traceback" not in both and b"mallory" in both, both
    for bad in (b"\x1b", b"\x07", b"\xc2\x9b"):
        assert bad not in both, both


@pytest.mark.parametrize("record", [
    b"{torn record, half written",                                      # not JSON
    b'["a", "list"]',                                                   # JSON, not an object
    b'{"user": 5, "host": ["x"], "pid": "12", "token": 7}',             # wrong types
    b'{"user": "u", "host": "h", "pid": 1e400, "token": "t"}',          # a pid of infinity
    b"[" * 100_000 + b"]" * 100_000,                                    # nested past the stack
    b'{"user": "' + b"A" * 2_000_000 + b'", "token": "t"}',             # huge
    b"",                                                                # empty
], ids=["torn", "list", "types", "inf-pid", "deep", "huge", "empty"])
async def test_a_malformed_stale_record_is_one_line_and_break_lock_breaks_it(tmp_path, monkeypatch, record):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("SPARKTUI_LOCK_ROOT", raising=False)
    f = plant(tmp_path, record)
    cfg = parse_config(f'[cluster]\nname = "{CLUSTER}"\n[[node]]\nname = "spark1"\nbackend = "local"\n')
    lock = ClusterLock(LocalNode(cfg.nodes[0]), CLUSTER)
    with pytest.raises(LockHeld) as err:
        await lock.acquire(ActionContext(cfg, {}), "stop")
    msg = str(err.value)
    one_line_without_escapes(msg)
    assert len(msg) < 400 and "stale lock" in msg and "--break-lock" in msg
    # --break-lock breaks it (it used to match by a token parsed from the record: never, for these)
    await lock.acquire(ActionContext(cfg, {}, break_lock=True), "stop")
    assert json.loads(f.read_text())["token"] == lock.token
    assert await lock.release()


async def test_break_lock_leaves_a_holder_that_beat_since_it_was_seen(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("SPARKTUI_LOCK_ROOT", raising=False)
    cfg = parse_config(f'[cluster]\nname = "{CLUSTER}"\n[[node]]\nname = "spark1"\nbackend = "local"\n')
    holder = ClusterLock(LocalNode(cfg.nodes[0]), CLUSTER)
    await holder.acquire(ActionContext(cfg, {}), "launch")
    f = tmp_path / REL / "lock.d" / "lock.json"
    os.utime(f, (time.time() - 300, time.time() - 300))
    other = ClusterLock(LocalNode(cfg.nodes[0]), CLUSTER)
    seen = await other.show()
    assert seen.stale_reason(60)
    await holder.verify("next")  # the holder wakes and beats before the break lands: not stale any more
    assert not await other.break_(seen)
    assert (await other.show()).token == holder.token
    assert await holder.release()


# ---------------------------------------------------------------- the record parser: any bytes
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.binary(max_size=2048),
                 st.text(max_size=512).map(lambda t: t.encode("utf-8", "surrogatepass")),
                 st.dictionaries(st.sampled_from(["user", "host", "pid", "action", "since", "token", "x"]),
                                 st.one_of(st.none(), st.booleans(), st.integers(), st.floats(),
                                           st.text(max_size=40), st.lists(st.integers(), max_size=3)),
                                 max_size=7).map(lambda d: json.dumps(d).encode())))
def test_the_record_parser_takes_any_bytes(data):
    try:
        assert isinstance(parse_record(data), dict)
    except LockRecordError as exc:
        one_line_without_escapes(str(exc))
    # what the node script's answer around those bytes becomes: a holder whose every line is inert
    _, holder = _parse("HELD\nnow 100\nmtime 40\nsum 1 2\n---\n" + data.decode("utf-8", "replace"))
    one_line_without_escapes(holder.describe())
    holder.stale_reason(60)
    holder.to_json()


def test_the_record_parser_memory_is_bounded():
    tracemalloc.start()
    try:
        for data in (b'{"user": "' + b"x" * (8 << 20) + b'"}', b"[" * (4 << 20)):
            before = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            with pytest.raises(LockRecordError):
                parse_record(data)
            assert tracemalloc.get_traced_memory()[1] - before < 1 << 20  # refused before it is read
    finally:
        tracemalloc.stop()
