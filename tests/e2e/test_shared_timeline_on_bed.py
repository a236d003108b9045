"""Two operators, one cluster: two real TUIs (`sparktui --config` in two tmux sessions, different
state dirs and different users) on the test bed.  What the first does (a note, then doctor) shows
in the second's timeline screen within 5 s, read from the head node's shared timeline; the first's
`sparktui report` holds its note and its actions, the second's the first operator's too.

tmux and the TUIs are external processes: the test polls `capture-pane` with deadlines.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import tomllib
import uuid
from pathlib import Path

from tmux_helpers import TMUX_MARKS, TmuxServer

ROOT = Path(__file__).resolve().parents[2]
pytestmark = TMUX_MARKS
_tmux = TmuxServer("sparktui-tl")
_capture, _poll = _tmux.capture, _tmux.poll
SEEN_WITHIN = 5.0  # the bar: the watcher sees the driver's step within 5 s


def _start(name: str, user: str, state: Path, config: Path) -> None:
    # LOGNAME and USER: the operator id is getpass.getuser()@host, and getuser reads LOGNAME first
    env = [f"SPARKTUI_STATE_DIR={state}", f"PYTHONPATH={ROOT}", "TERM=xterm-256color", f"USER={user}",
           f"LOGNAME={user}"]
    cmd = " ".join(env) + f" {sys.executable} -m sparktui --config {config}; echo SPARKTUI-EXITED-$?; sleep 60"
    _tmux("new-session", "-d", "-s", name, "-x", "200", "-y", "50", cmd)


def _report(state: Path) -> str:
    r = subprocess.run([sys.executable, "-m", "sparktui", "report"], capture_output=True, text=True, cwd=ROOT,
                       env={**os.environ, "SPARKTUI_STATE_DIR": str(state)}, timeout=60)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout


def _quit(name: str) -> None:
    # Esc until the main screen (its footer): on a running action the first Esc only cancels it
    for _ in range(10):
        _tmux("send-keys", "-t", name, "Escape")
        try:
            _poll(name, lambda s: "Log src" in s, "the main screen", timeout=3)
            break
        except AssertionError:
            continue
    else:
        raise AssertionError(f"{name}: Esc did not lead back to the main screen:\n{_capture(name)}")
    _tmux("send-keys", "-t", name, "q")
    done = _poll(name, lambda s: "SPARKTUI-EXITED-" in s, "the app to exit", timeout=30)
    assert "SPARKTUI-EXITED-0" in done, done


def test_a_note_and_an_action_of_one_operator_reach_the_others_timeline_and_the_report(bed, tmp_path):
    cluster = f"tl_{uuid.uuid4().hex[:6]}"  # a cluster of its own: the head's timeline starts empty
    config = tmp_path / "cluster.toml"
    text = bed.config.read_text()
    # the bed's cluster name depends on the scenario the bed was last set up with (default, seed)
    old = f'name = "{tomllib.loads(text)["cluster"]["name"]}"'
    assert old in text
    config.write_text(text.replace(old, f'name = "{cluster}"', 1))
    head = next(iter(bed.nodes))  # the first bed node is the head (role = "head")
    shared = bed.dir / "nodes" / head / "home" / ".local/state/sparktui/clusters" / cluster
    host = os.uname().nodename
    note = f"ana-note-{uuid.uuid4().hex[:6]}"
    a_state, b_state = tmp_path / "ana", tmp_path / "bo"
    _start("ana", "ana", a_state, config)
    _start("bo", "bo", b_state, config)
    try:
        for name in ("ana", "bo"):
            _poll(name, lambda s: "spark1" in s and "spark2" in s and "reachable" in s, "both nodes reachable",
                  timeout=60)
        # bo watches the timeline
        _tmux("send-keys", "-t", "bo", "L")
        _poll("bo", lambda s: "Timeline" in s and "FOLLOW" in s, "bo's timeline screen")

        # ana adds a note from the main screen
        _tmux("send-keys", "-t", "ana", "N")
        _poll("ana", lambda s: "Add a note to the timeline" in s, "ana's note box")
        _tmux("send-keys", "-t", "ana", "-l", note)
        _tmux("send-keys", "-t", "ana", "Enter")
        sent = time.monotonic()
        _poll("ana", lambda s: "Add a note to the timeline" not in s, "ana's note box to close", timeout=10)
        seen = _poll("bo", lambda s: note in s, "ana's note in bo's timeline", timeout=SEEN_WITHIN + 5)
        took = time.monotonic() - sent
        assert took <= SEEN_WITHIN, f"ana's note reached bo's timeline after {took:.1f} s"
        row = next(r for r in seen.splitlines() if note in r)
        assert "ana@" in row and "note" in row, row  # WHO is cut to its column; the title names her whole
        assert "other operators: " in seen and f"ana@{host}" in seen

        # ana runs doctor (an action): its steps reach bo's timeline too, within 5 s of starting
        _tmux("send-keys", "-t", "ana", "d")
        _poll("ana", lambda s: "Doctor: preflight checks" in s, "ana's doctor screen", timeout=30)
        started = time.monotonic()
        seen = _poll("bo", lambda s: "doctor/" in s, "ana's doctor steps in bo's timeline", timeout=SEEN_WITHIN + 5)
        took = time.monotonic() - started
        assert took <= SEEN_WITHIN, f"ana's doctor reached bo's timeline after {took:.1f} s"
        assert any("doctor/" in r and "ana@" in r for r in seen.splitlines()), seen

        # the head holds one shared file: whole JSON lines, both kinds, ana's operator id
        lines = (shared / "timeline.jsonl").read_text().splitlines()
        assert any(note in ln and '"kind":"note"' in ln for ln in lines)
        assert any('"action":"doctor"' in ln for ln in lines)

        # ana quits (Esc leaves doctor, cancelling it if still running); her report has her note and actions
        _quit("ana")
        md = _report(a_state)
        notes = md.split("## Notes", 1)[1].split("\n## ", 1)[0]
        assert f"ana@{host}: {note}" in notes, notes
        acts = md.split("## Actions by operator", 1)[1].split("\n## ", 1)[0]
        assert f"### ana@{host} (this session)" in acts and "doctor/" in acts, acts

        # bo's session recorded what ana did: his report says who did it
        _quit("bo")
        md = _report(b_state)
        assert f"ana@{host}: {note}" in md.split("## Notes", 1)[1].split("\n## ", 1)[0]
        acts = md.split("## Actions by operator", 1)[1].split("\n## ", 1)[0]
        assert f"### ana@{host}" in acts and "doctor/" in acts.split(f"### ana@{host}", 1)[1], acts
    finally:
        _tmux.kill()
        shutil.rmtree(shared, ignore_errors=True)
