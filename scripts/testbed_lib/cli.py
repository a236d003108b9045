"""Sub-commands of scripts/testbed (see the docstring there)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from . import procs
from .bed import Bed, say

SCENARIOS = Path(__file__).resolve().parent.parent / "testbed_scenarios"


def up(bed: Bed, count: int, scenario: str | None) -> int:
    t0 = time.monotonic()
    bed.ensure_packages()
    if len(str(bed.dir)) > 60:  # unix socket paths (containerd's, deep in exec-root) max out at 107
        raise SystemExit(f"testbed: {bed.dir} is too long a path for unix sockets; pick a shorter SPARKTUI_TESTBED_DIR")
    old = bed.nodes()
    if old and len(old) > count:
        count = len(old)  # never shrink a running bed silently
    bed.dir.mkdir(parents=True, exist_ok=True)
    bed.choose_port(count)
    bed.save_state(count)
    nodes = bed.nodes(count)
    bed.ensure_client_keys()
    tarball = bed.ensure_base_tarball()
    for n in nodes:
        bed.write_node_files(n)
    bed.write_known_hosts(nodes)
    for n in nodes:
        bed.start_dockerd(n)
        bed.start_sshd(n)
    for n in nodes:
        bed.ensure_image(n, tarball)
        bed.ssh_check(n)
    cfg = bed.write_config(nodes)
    if scenario:
        run_scenario(bed, scenario)
    say(f"up: {len(nodes)} nodes in {time.monotonic() - t0:.1f} s; config {cfg}")
    print(cfg)
    return 0


def run_scenario(bed: Bed, name: str) -> None:
    for ext, runner in ((".sh", ["bash"]), (".py", [sys.executable])):
        script = SCENARIOS / f"{name}{ext}"
        if script.exists():
            say(f"scenario {name}")
            subprocess.run([*runner, str(script), str(bed.dir)], check=True)
            return
    raise SystemExit(f"testbed: no scenario {name!r} in {SCENARIOS}")


def down(bed: Bed) -> int:
    if not bed.dir.exists():
        say(f"down: nothing at {bed.dir}")
        return 0
    def stop(n) -> None:
        if bed.dockerd_running(n):
            ids = bed.docker(n, "ps", "-aq", check=False, timeout=30).stdout.decode().split()
            if ids:
                bed.docker(n, "rm", "-f", *ids, check=False, timeout=120)
        bed.stop_sshd(n)
        bed.stop_dockerd(n)

    with ThreadPoolExecutor(max_workers=8) as pool:  # dockerd takes seconds to stop: do all at once
        list(pool.map(stop, bed.nodes()))
    killed = procs.kill_bed_processes(bed.dir)
    strays = procs.naming(bed.prefix)
    if strays:  # a user's editor, tmux or sparktui on the bed's files: not ours to end
        say(f"down: left alone {len(strays)} process(es) the bed did not start: "
            + "; ".join(f"{pid} ({cmd})" for pid, cmd in strays))
    procs.unmount_all(bed.prefix)
    if not procs.mounts_under(bed.prefix):
        # nodes' image stores hold gigabytes of small files (~15 s to delete for a real-vLLM bed): the
        # bed's name is free at once and the files go in the background
        gone = bed.dir.with_name(f".{bed.dir.name}.removing-{os.getpid()}")
        bed.dir.rename(gone)
        subprocess.Popen(["rm", "-rf", "--one-file-system", str(gone)], start_new_session=True,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    shutil.rmtree(bed.dir, ignore_errors=True)
    if bed.dir.exists():  # a busy mount: one more round
        procs.unmount_all(bed.prefix)
        shutil.rmtree(bed.dir)
    say(f"down: removed {bed.dir}" + (f" ({killed} leftover processes killed)" if killed else ""))
    return 0


def status(bed: Bed, as_json: bool) -> int:
    rows = []
    for n in bed.nodes():
        rows.append({"name": n.name, "address": n.addr, "port": n.port, "sshd": bed.sshd_running(n),
                     "dockerd": bed.dockerd_running(n), "docker_socket": str(n.sock), "bin": str(n.bin)})
    if as_json:
        print(json.dumps({"dir": str(bed.dir), "config": str(bed.dir / "cluster.toml"), "nodes": rows}, indent=2))
    else:
        if not rows:
            print(f"no test bed at {bed.dir}")
        for r in rows:
            print(f"{r['name']:8} {r['address']}:{r['port']}  sshd {'up' if r['sshd'] else 'DOWN'}  "
                  f"dockerd {'up' if r['dockerd'] else 'DOWN'}  {r['docker_socket']}")
    return 0 if rows and all(r["sshd"] and r["dockerd"] for r in rows) else 1


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="scripts/testbed", description="real sshd + dockerd nodes on loopback")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("up")
    p.add_argument("--nodes", type=int, default=2)
    p.add_argument("--scenario")
    sub.add_parser("down")
    for name in ("stop-node", "start-node", "restart-docker", "env"):
        sub.add_parser(name).add_argument("name")
    p = sub.add_parser("status")
    p.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("testbed: needs root (it runs sshd and dockerd)", file=sys.stderr)
        return 2
    bed = Bed()
    try:
        if args.cmd == "up":
            if not 1 <= args.nodes <= 16:
                raise SystemExit("testbed: --nodes must be 1..16")
            return up(bed, args.nodes, args.scenario)
        if args.cmd == "down":
            return down(bed)
        if args.cmd == "status":
            return status(bed, args.json)
        n = bed.node(args.name)
        if args.cmd == "stop-node":
            bed.stop_sshd(n)
            bed.stop_dockerd(n)
        elif args.cmd == "start-node":
            bed.start_dockerd(n)
            bed.start_sshd(n)
        elif args.cmd == "restart-docker":
            bed.stop_dockerd(n)
            bed.start_dockerd(n)
        elif args.cmd == "env":
            print(f"export DOCKER_HOST=unix://{n.sock}")
        return 0
    except (RuntimeError, subprocess.CalledProcessError, OSError) as exc:
        print(f"testbed: {args.cmd} failed: {exc}", file=sys.stderr)
        return 1
