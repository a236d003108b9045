"""Pair debugging on the test bed (issue 32 item 4): two real TUIs in tmux, at 80x24 and at 200x50,
on one cluster and one account, told apart by --operator.  Both show the cluster lock at the top right;
a lock held by a third operator refuses the driver's stop with "Wait for the lock" (no CLI flag), and
the queued stop runs once it is given back; the observer (--read-only) is told why T is refused; the
driver's note shows as a toast on the observer's screen.

tmux and the TUIs are external processes: the test polls `capture-pane` with deadlines.
"""

from __future__ import annotations

import json
import shutil
import sys
import tomllib
import uuid
from pathlib import Path

import pytest
from tmux_helpers import TMUX_MARKS, TmuxServer

ROOT = Path(__file__).resolve().parents[2]
pytestmark = TMUX_MARKS
_tmux = TmuxServer("sparktui-pair")
_capture, _poll = _tmux.capture, _tmux.poll


def _start(name: str, operator: str, state: Path, config: Path, size: tuple[int, int], *flags: str) -> None:
    env = [f"SPARKTUI_STATE_DIR={state}", f"PYTHONPATH={ROOT}", "TERM=xterm-256color"]
    cmd = (" ".join(env) + f" {sys.executable} -m sparktui --config {config} --operator {operator} {' '.join(flags)}"
           "; echo SPARKTUI-EXITED-$?; sleep 60")
    _tmux("new-session", "-d", "-s", name, "-x", str(size[0]), "-y", str(size[1]), cmd)


def _hold(shared: Path, operator: str, action: str) -> None:
    """A third operator's live lock, as its sparktui writes it on the head (lock.d is the mutex)."""
    from sparktui.timefmt import now_local

    (shared / "lock.d").mkdir(parents=True, exist_ok=True)
    rec = {"user": "root", "host": "elsewhere", "operator": operator, "pid": 1, "action": action,
           "since": now_local(), "session": "s-third", "cluster": shared.name, "token": uuid.uuid4().hex[:16]}
    (shared / "lock.d" / "lock.json").write_text(json.dumps(rec) + "\n")
    if not (shared / "lock.json").is_symlink():
        (shared / "lock.json").symlink_to("lock.d/lock.json")


@pytest.mark.parametrize("size", [(80, 24), (200, 50)], ids=["80x24", "200x50"])
def test_two_operators_on_one_account_see_the_lock_queue_behind_it_and_each_others_notes(bed, tmp_path, size):
    cluster = f"pd_{uuid.uuid4().hex[:6]}"  # a cluster of its own: no containers, an empty timeline
    config = tmp_path / "cluster.toml"
    text = bed.config.read_text()
    old = f'name = "{tomllib.loads(text)["cluster"]["name"]}"'
    config.write_text(text.replace(old, f'name = "{cluster}"', 1))
    head = next(iter(bed.nodes))
    shared = bed.dir / "nodes" / head / "home" / ".local/state/sparktui/clusters" / cluster
    _start("ana", "ana", tmp_path / "ana", config, size)
    _start("bo", "bo", tmp_path / "bo", config, size, "--read-only")
    try:
        for name in ("ana", "bo"):
            _poll(name, lambda s: "spark1" in s and "lock: free" in s.splitlines()[0], "the lock line", timeout=60)

        # the observer is told why the load test is refused, and nothing opens
        _tmux("send-keys", "-t", "bo", "T")
        _poll("bo", lambda s: "load-test refused" in s and "read-only" in s, "bo's refusal of T")

        # a third operator holds the lock: both screens say who and for what
        _hold(shared, "cy", "launch")
        for name in ("ana", "bo"):
            _poll(name, lambda s: "lock: cy — launch" in s.splitlines()[0], f"{name}'s lock line", timeout=15)

        # ana's stop is refused with the TUI's way to queue, then queued, then run once cy is done
        _tmux("send-keys", "-t", "ana", "x")
        refused = _poll("ana", lambda s: "Wait for the lock" in s, "ana's refusal", timeout=30)
        assert "launch held by cy" in refused and "--wait" not in refused
        _tmux("send-keys", "-t", "ana", "w")
        _poll("ana", lambda s: "waiting for the cluster lock" in s, "ana's stop queued")
        shutil.rmtree(shared / "lock.d")  # cy is done
        _poll("ana", lambda s: "nothing to stop" in s, "ana's queued stop to run", timeout=30)

        # ana's note reaches bo as a toast
        _tmux("send-keys", "-t", "ana", "Escape")
        _poll("ana", lambda s: "spark1" in s and "nothing to stop" not in s, "ana's main screen")
        note = f"hands off {uuid.uuid4().hex[:4]}"
        _tmux("send-keys", "-t", "ana", "N")
        _poll("ana", lambda s: "Add a note to the timeline" in s, "ana's note box")
        _tmux("send-keys", "-t", "ana", "-l", note)
        _tmux("send-keys", "-t", "ana", "Enter")
        seen = _poll("bo", lambda s: note in s, "ana's note as a toast on bo's screen", timeout=15)
        assert "note from ana" in seen
        recs = [json.loads(x) for x in (shared / "timeline.jsonl").read_text().splitlines()]
        assert {r["operator"] for r in recs} >= {"ana"} and all(r["operator"] != "bo" for r in recs)
    finally:
        _tmux.kill()
        shutil.rmtree(shared, ignore_errors=True)
