"""Sub-commands of scripts/testbed (see the docstring there)."""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from . import procs
from .bed import Bed, say

SCENARIOS = Path(__file__).resolve().parent.parent / "testbed_scenarios"

# Every environment variable the bed's scripts read: name -> (meaning, default).  `--help` prints this
# table; tests/unit/test_testbed_setup.py scans the sources, so a new variable without a line here fails.
ENVIRONMENT = {
    "SPARKTUI_TESTBED_DIR": ("the bed's directory; up writes cluster.toml there", "/tmp/sparktui-testbed"),
    "SPARKTUI_TESTBED_NET": ("first three octets of the nodes' loopback addresses", "127.0.0"),
    "SPARKTUI_TESTBED_FIRST": ("last octet of spark1's address (spark2 gets the next, ...)", "2"),
    "SPARKTUI_TESTBED_PORT": ("the nodes' sshd port", "22, or the first free of 2222.. when this host's sshd holds 22"),
    "SPARKTUI_TESTBED_CACHE": ("the cache of the base image and the real-vLLM environment",
                               "/var/cache/sparktui-testbed"),
    "SPARKTUI_STANDIN_SRC": ("scenario seed: the stand-in vLLM its images run", "sparktui/sim/standin_vllm.py"),
}


def scenarios() -> dict[str, str]:
    """The scenarios in testbed_scenarios/ (NAME.py or NAME.sh) -> one line each, from the script's
    docstring (or a .sh's first comment) without running it."""
    out = {}
    for script in sorted(SCENARIOS.glob("*")):
        if script.suffix not in (".py", ".sh") or script.stem.startswith("_"):
            continue
        text = script.read_text()
        if script.suffix == ".py":
            doc = ast.get_docstring(ast.parse(text)) or ""
        else:
            doc = "\n".join(ln.lstrip("# ") for ln in text.splitlines()[1:] if ln.startswith("#"))
        line = " ".join(doc.split("\n\n")[0].split())
        line = re.sub(rf"^Scenario `{re.escape(script.stem)}`:\s*", "", line)
        line = re.sub(r"\s*\(`scripts/testbed up[^)]*\)", "", line)  # the usage, said once for all
        out[script.stem] = line or "(no description)"
    return out


def help_epilog() -> str:
    width = max(map(len, [*ENVIRONMENT, *scenarios()]))
    lines = ["environment:"]
    lines += [f"  {k:{width}}  {meaning} (default {default})" for k, (meaning, default) in ENVIRONMENT.items()]
    lines += ["", "scenarios (up --scenario NAME runs scripts/testbed_scenarios/NAME.py on the bed once it is up):"]
    lines += [f"  {k:{width}}  {v}" for k, v in scenarios().items()]
    return "\n".join(lines)


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
    archive, image_id = bed.ensure_base_archive(nodes[0], tarball)
    for n in nodes:
        bed.ensure_image(n, archive, image_id)
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
            r = subprocess.run([*runner, str(script), str(bed.dir)])
            if r.returncode != 0:  # the scenario said why on its own stderr
                raise SystemExit(f"testbed: scenario {name} failed (exit {r.returncode})")
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
    epilog = help_epilog()
    fmt = argparse.RawDescriptionHelpFormatter
    ap = argparse.ArgumentParser(prog="scripts/testbed", description="real sshd + dockerd nodes on loopback",
                                 epilog=epilog, formatter_class=fmt)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("up", help="make (or complete) the bed; idempotent", epilog=epilog, formatter_class=fmt)
    p.add_argument("--nodes", type=int, default=2, help="how many nodes (1..16; default 2)")
    p.add_argument("--scenario", choices=sorted(scenarios()), help="run this scenario on the bed (below)")
    sub.add_parser("down", help="remove the bed: what it started, its mounts and its directory")
    for name, what in (("stop-node", "kill that node's sshd (and its sessions) and dockerd"),
                       ("start-node", "start them again (same keys, same data)"),
                       ("restart-docker", "restart only that node's dockerd"),
                       ("env", "print `export DOCKER_HOST=...` for that node")):
        sub.add_parser(name, help=what).add_argument("name", help="a node: spark1, spark2, ...")
    p = sub.add_parser("status", help="what runs where (exit 1 when a node is down)")
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
