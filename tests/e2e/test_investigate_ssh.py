"""investigate over SSH on the test bed: a stalled rank in a container on each node.

Each container plays a rank that started NCCL init and went silent: the real NCCL lines of a
captured rank (fixtures/nccl-2gpu), then sleep.  The ranks differ in NCCL_SOCKET_IFNAME.  The
investigation must find both workers over SSH (process, threads, env), report the init stall and
the env difference (R7), and save a bundle that --offline turns into the same verdict.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.e2e

CAP = ROOT / "tests" / "fixtures" / "nccl-2gpu"
PLAY = ("import sys, time\n"
        "lines = open('/fx/rank.log').read().splitlines()\n"
        "end = next(i for i, l in enumerate(lines) if 'Init START' in l) + 2\n"
        "print('\\n'.join(lines[:end]), flush=True)\n"
        "time.sleep(600)\n")


def _start(bed, node: str, name: str, rank: int, ifname: str) -> None:
    bed.docker(node, "run", "-d", "--name", name, "--network", "host", "--cap-add", "SYS_PTRACE",
               "-v", f"{CAP / f'desync_ras.rank{rank}.log'}:/fx/rank.log:ro",
               "-e", f"RANK={rank}", "-e", "WORLD_SIZE=2", "-e", "MASTER_ADDR=127.0.0.2", "-e", "MASTER_PORT=29533",
               "-e", "NCCL_DEBUG=INFO", "-e", f"NCCL_SOCKET_IFNAME={ifname}", "-e", f"GLOO_SOCKET_IFNAME={ifname}",
               "sparktui-base:bookworm", "python3", "-c", PLAY)


def _cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sparktui", "investigate", *args], capture_output=True, text=True,
                          cwd=str(ROOT), timeout=timeout)


def test_investigate_two_ssh_nodes_stalled_ranks(bed, container_name, cleanup, tmp_path):
    names = {"spark1": container_name + "-r0", "spark2": container_name + "-r1"}
    for (node, name), (rank, ifname) in zip(names.items(), ((0, "lo"), (1, "eth9"))):
        cleanup.append((node, name))
        _start(bed, node, name, rank, ifname)
    # the containers are up and have printed (docker logs answers from the daemon: no sleeping)
    for node, name in names.items():
        for _ in range(200):
            if "Init START" in bed.docker(node, "logs", name).stdout:
                break
        else:
            pytest.fail(f"{name} never printed its NCCL lines")
    bundle = tmp_path / "bundle"
    live = _cli("--config", str(bed.config), "--json", "--bundle", str(bundle), "--interval", "3")
    assert live.returncode == 1, live.stderr[-2000:]
    out = json.loads(live.stdout)
    v = out["verdict"]
    assert v["rule"] == "R2" and "nccl_init_hang" in v["finding_ids"]
    # both workers, one per node, with their rank and env, read over SSH
    ids = {n: bed.docker(n, "inspect", "-f", "{{.Id}}", name).stdout.strip() for n, name in names.items()}
    ours = {n: [w for w in d["workers"] if w["container"] == ids[n]] for n, d in out["data"]["nodes"].items()}
    assert [w["rank"] for w in ours["spark1"]] == [0] and [w["rank"] for w in ours["spark2"]] == [1]
    # each node reports only its own containers, though the test bed's nodes share one kernel
    assert all(w["container"] in ("", ids[n]) or w["container"] not in ids.values()
               for n, d in out["data"]["nodes"].items() for w in d["workers"])
    (item,) = [i for i in v["latent"] if i["id"] == "nccl_env_mismatch"]
    assert any(line.startswith("NCCL_SOCKET_IFNAME: spark1/rank 0=lo | spark2/rank 1=eth9") for line in item["evidence"])
    assert "Init START without COMPLETE" in "\n".join(v["evidence"]["spark1"] + v["evidence"]["spark2"])
    # threads came from /proc on each node
    for node in ("spark1", "spark2"):
        threads = sorted((bundle / node).glob("ev.t*.threads.txt"))
        assert threads and "\tpython3\t" in threads[0].read_text()
    # the bundle gives the same verdict offline
    off = _cli("--offline", str(bundle), "--json")
    assert off.returncode == 1
    again = json.loads(off.stdout)["verdict"]
    assert (again["rule"], again["finding_ids"]) == (v["rule"], v["finding_ids"])
    assert [i["id"] for i in again["latent"]] == [i["id"] for i in v["latent"]]
