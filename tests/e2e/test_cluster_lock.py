"""The cluster lock on the test bed (issue 16): real sparktui processes, real sshd + dockerd per node,
the lock in a real shell on the head node.  Two operators are two processes here (same user@host,
different pids); the lock root is a per-test directory (SPARKTUI_LOCK_ROOT), the same machine's
filesystem the bed's head node writes to.  The e2e twin of tests/unit/test_lock.py."""

from __future__ import annotations

import json
import os
import re
import select
import signal
import socket
import subprocess
import sys
import time
import tomllib
import uuid
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
IMAGE = "vllm-qwen35-community"  # in the seed scenario; knows Qwen3.5 (validate passes)
HELD = re.compile(r"^spark1: (?P<action>[\w-]+) held by \S+@\S+ \(pid (?P<pid>\d+)\) since \d\d:\d\d:\d\d — "
                  r"(?P<refused>[\w-]+) refused; --wait to queue$")


@pytest.fixture
def lockbed(seed_bed, tmp_path):
    """A config of its own (unique cluster name and free serve port) and a lock root of its own."""
    sys.path.insert(0, str(ROOT / "scripts" / "testbed_scenarios"))
    import seed as seed_mod  # the scenario's TOML writer

    data = tomllib.loads((seed_bed.dir / "cluster.toml").read_text())
    with socket.socket() as sk:
        sk.bind(("127.0.0.1", 0))
        port = sk.getsockname()[1]
    name = f"lk{uuid.uuid4().hex[:6]}"
    data["cluster"].update(name=name, serve_port=port)
    cfg = tmp_path / "cluster.toml"
    seed_mod.write_config(cfg, data)
    env = {**os.environ, "SPARKTUI_LOCK_ROOT": str(tmp_path / "locks")}
    yield seed_bed, cfg, name, env, tmp_path / "locks" / name
    for node in seed_bed.nodes:
        for cname in (name, f"{name}-validate"):
            seed_bed.docker(node, "rm", "-f", cname, check=False)


def start(env, cfg, *args: str, top: tuple[str, ...] = ()) -> subprocess.Popen:
    cmd, rest = args[0], args[1:]
    return subprocess.Popen([sys.executable, "-m", "sparktui", *top, cmd, "--config", str(cfg), *rest],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=str(ROOT), env=env)


def finish(p: subprocess.Popen, timeout: float = 300) -> tuple[int, dict, str]:
    out, err = p.communicate(timeout=timeout)
    assert "Traceback" not in err, err
    try:
        res = json.loads(out)
    except ValueError:
        pytest.fail(f"no JSON (rc {p.returncode}): {out[-1500:]}\n{err[-2500:]}")
    return p.returncode, res, err


def wait_line(p: subprocess.Popen, marker: str, timeout: float = 120) -> list[str]:
    seen, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([p.stderr], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            break
        line = p.stderr.readline()
        if not line:
            break
        seen.append(line)
        if marker in line:
            return seen
    pytest.fail(f"{marker!r} never appeared:\n" + "".join(seen))


def validate_containers(bed, name: str) -> list[str]:
    names = bed.docker("spark1", "ps", "-a", "--format", "{{.Names}}").stdout.split()
    return [n for n in names if n == f"{name}-validate"]


def test_two_concurrent_validates_one_runs_the_other_is_refused_naming_the_holder(lockbed):
    bed, cfg, name, env, lockdir = lockbed
    a = start(env, cfg, "validate", "--yes", "--json", "--image", IMAGE)
    b = start(env, cfg, "validate", "--yes", "--json", "--image", IMAGE)
    results = {p.pid: finish(p) for p in (a, b)}
    ran = [pid for pid, (rc, res, _) in results.items() if res["data"].get("refused") != "lock"]
    refused = [pid for pid in results if pid not in ran]
    assert len(ran) == 1 and len(refused) == 1, {pid: r[1]["summary"] for pid, r in results.items()}
    rc, res, err = results[ran[0]]
    assert rc == 0 and res["ok"] and res["data"]["architecture_resolved"], res["summary"] + err[-2000:]
    rc, res, err = results[refused[0]]
    m = HELD.match(res["summary"])
    assert rc == 1 and m, res["summary"]
    assert m["action"] == "validate" and int(m["pid"]) == ran[0] and m["refused"] == "validate"
    assert res["data"]["lock_holder"]["pid"] == ran[0] and res["steps"] == []  # it touched nothing
    assert "XX lock: spark1: validate held by" in err
    assert validate_containers(bed, name) == [] and not (lockdir / "lock.d").exists()


def test_wait_queues_the_second_validate_after_the_first(lockbed):
    bed, cfg, name, env, lockdir = lockbed
    a = start(env, cfg, "validate", "--yes", "--json", "--wait", "--image", IMAGE)
    b = start(env, cfg, "validate", "--yes", "--json", "--wait", "--image", IMAGE)
    results = [finish(p) for p in (a, b)]
    # both ran to the end: neither removed the other's container (the old engine_dead + 409)
    assert [(rc, res["ok"]) for rc, res, _ in results] == [(0, True), (0, True)], \
        [res["summary"] for _, res, _ in results]
    waited = [err for _, _, err in results if "waiting: validate held by" in err]
    assert len(waited) == 1, [err[-1500:] for _, _, err in results]
    assert not (lockdir / "lock.d").exists()
    # both operators' steps went to the cluster's shared timeline on the head, each under its own session
    recs = [json.loads(line) for line in (lockdir / "timeline.jsonl").read_text().splitlines()]
    sessions = {r["session"] for r in recs}
    assert len(sessions) == 2 and all(s.startswith("cli-") for s in sessions), sessions
    for s in sessions:
        mine = [r for r in recs if r["session"] == s]
        assert all(r["kind"] == "action" and r["action"] == "validate" and "@" in r["operator"] for r in mine)
        assert any(r["step"] == "lock" and r["status"] == "ok" for r in mine), mine


def test_a_killed_sparktuis_lock_is_stale_and_broken_only_with_break_lock(lockbed):
    bed, cfg, name, env, lockdir = lockbed
    victim = start(env, cfg, "validate", "--yes", "--image", IMAGE)
    try:
        wait_line(victim, "start:")  # it holds the lock and has started its container
    finally:
        victim.send_signal(signal.SIGKILL)  # no cleanup, no release: what a lost laptop leaves
        victim.wait(30)
    rec = json.loads((lockdir / "lock.json").read_text())
    assert rec["pid"] == victim.pid and rec["action"] == "validate"

    rc, res, err = finish(start(env, cfg, "validate", "--yes", "--json", "--image", IMAGE))
    assert rc == 1 and res["data"]["refused"] == "lock", res["summary"]
    assert re.match(rf"spark1: stale lock: validate held by \S+ \(pid {victim.pid}\) since \d\d:\d\d:\d\d "
                    rf"\(its process {victim.pid} on \S+ is gone\) — validate refused; --break-lock to break it$",
                    res["summary"]), res["summary"]
    assert json.loads((lockdir / "lock.json").read_text())["pid"] == victim.pid  # --yes alone broke nothing

    rc, res, err = finish(start(env, cfg, "validate", "--yes", "--json", "--break-lock", "--image", IMAGE))
    assert rc == 0 and res["ok"], res["summary"] + err[-2000:]
    assert "broke the stale lock: validate held by" in err and f"(pid {victim.pid})" in err
    assert json.loads((lockdir / "last-broken.json").read_text())["pid"] == victim.pid
    assert not (lockdir / "lock.d").exists() and validate_containers(bed, name) == []


def test_validate_never_removes_another_operators_container(lockbed):
    bed, cfg, name, env, lockdir = lockbed
    theirs = f"{name}-validate"
    bed.docker("spark1", "run", "-d", "--name", theirs, "--label", "sparktui.operator=alice@laptop",
               "--label", "sparktui.action=validate", "--label", "sparktui.session=s-alice",
               "--entrypoint", "sleep", IMAGE, "600")
    rc, res, err = finish(start(env, cfg, "validate", "--yes", "--json", "--image", IMAGE))
    assert rc == 1 and f"{theirs} on spark1 belongs to alice@laptop (validate, session s-alice): not removed" \
        in res["summary"], res["summary"]
    state = bed.docker("spark1", "inspect", "--format", "{{.State.Running}}", theirs).stdout.strip()
    assert state == "true"  # neither the start nor the cleanup touched it


def test_two_concurrent_launches_make_one_attempt_never_two_half_clusters(lockbed):
    bed, cfg, name, env, lockdir = lockbed
    a = start(env, cfg, "launch", "--yes", "--json", "--timeout", "60")
    b = start(env, cfg, "launch", "--yes", "--json", "--timeout", "60")
    results = {p.pid: finish(p, 400) for p in (a, b)}
    refused = [pid for pid, (_, res, _) in results.items() if res["data"].get("refused") == "lock"]
    assert len(refused) == 1, {pid: r[1]["summary"] for pid, r in results.items()}
    winner = next(pid for pid in results if pid not in refused)
    rc, res, err = results[refused[0]]
    m = HELD.match(res["summary"])
    assert rc == 1 and m and m["action"] == "launch" and int(m["pid"]) == winner, res["summary"]
    assert res["steps"] == []  # no preflight, no start, no removal: the winner's containers were never touched
    _, won, _ = results[winner]
    assert any(s["name"] == "preflight" for s in won["steps"])
    # the seed images have no Ray: the winner's launch fails at its first container, and takes every
    # container it made with it (created-but-not-started included): no half cluster is left
    assert not won["ok"] and any(s["name"] == "start" and s["status"] == "fail" for s in won["steps"]), won
    for node in bed.nodes:
        names = bed.docker(node, "ps", "-a", "--format", "{{.Names}}").stdout.split()
        assert name not in names, (node, names)
    stop = finish(start(env, cfg, "stop", "--yes", "--json"))
    assert stop[0] == 0, stop[1]["summary"]
    assert not (lockdir / "lock.d").exists()


def test_read_only_cli_refuses_each_mutating_action_before_the_lock(lockbed):
    bed, cfg, name, env, lockdir = lockbed
    for action in ("validate", "build-image", "push-image", "launch", "stop"):
        rc, res, err = finish(start(env, cfg, action, "--yes", "--json", top=("--read-only",)))
        assert rc == 1 and res["summary"] == f"{action} refused: read-only mode (--read-only) forbids changing " \
                                              "the cluster", res
    assert not lockdir.exists() and validate_containers(bed, name) == []


def test_operators_by_name_in_the_lock_and_timeline_and_read_only_refuses_doctor(lockbed):
    """Issue 32 item 4 on the bed: --operator names the holder (two people on one account), and an
    observer's doctor (probe containers) is refused before it touches a node."""
    bed, cfg, name, env, lockdir = lockbed
    rc, res, err = finish(start(env, cfg, "doctor", "--json", top=("--read-only",)))
    assert rc == 1 and res["data"] == {"refused": "read_only"}, res
    assert res["summary"] == "doctor refused: read-only mode (--read-only): it starts probe containers on the nodes"
    holder = start(env, cfg, "validate", "--yes", "--json", "--image", IMAGE, top=("--operator", "ana on vm"))
    try:
        wait_line(holder, "start:")  # it holds the lock and has started its container
        assert json.loads((lockdir / "lock.json").read_text())["operator"] == "ana on vm"
        rc, res, err = finish(start(env, cfg, "validate", "--yes", "--json", "--image", IMAGE, top=("--operator", "bo")))
        assert rc == 1 and res["data"]["refused"] == "lock", res["summary"]
        assert "validate held by ana on vm (pid" in res["summary"] and res["data"]["lock_holder"]["operator"] == "ana on vm"
    finally:
        rc, res, err = finish(holder)
    assert rc == 0 and res["ok"], res["summary"] + err[-2000:]
    recs = [json.loads(line) for line in (lockdir / "timeline.jsonl").read_text().splitlines()]
    assert {r["operator"] for r in recs} == {"ana on vm", "bo"}, recs
    assert [(r["step"], r["status"]) for r in recs if r["operator"] == "bo"] == [("lock", "fail")]  # nothing else ran
