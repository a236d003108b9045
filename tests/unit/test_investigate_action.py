"""The live investigation on the local node: real processes, real /proc, real py-spy, a RAS port.

The workers are real Python processes that print real NCCL lines (from the captures) and then
stall; NCCL's RAS needs GPUs, so a socket on 127.0.0.1 answers the wire protocol with the answers
captured on two H200s (first the t20 poll, then t50).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sparktui.actions.base import ActionContext
from sparktui.actions.investigate import InvestigateAction
from sparktui.config import parse_config
from sparktui.diagnosis.evidence import read_bundle
from sparktui.diagnosis.verdict import decide
from sparktui.nodes.local import LocalNode

CAP = Path(__file__).parents[1] / "fixtures" / "nccl-2gpu"
STALL = "import sys, time\nprint(open(sys.argv[1]).read(), end='', flush=True)\ntime.sleep(120)\n"


def _answer(name: str) -> tuple[bytes, bytes]:
    """(preamble, body) of a captured answer: the body is what follows the header lines."""
    lines = (CAP / name).read_text().splitlines(keepends=True)
    skip = 3 if name.endswith(".json") else 2
    return "".join(lines[:skip]).encode(), "".join(lines[skip:]).encode()


class FakeRas:
    """Speaks CLIENT PROTOCOL 2 / TIMEOUT / SET FORMAT json / VERBOSE STATUS like NCCL's RAS thread."""

    def __init__(self, polls: list[str]) -> None:
        self.polls = polls
        self.asked: list[str] = []
        self.server: asyncio.AbstractServer | None = None
        self.port = 0

    async def __aenter__(self):
        self.server = await asyncio.start_server(self._client, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc):
        self.server.close()
        await self.server.wait_closed()

    async def _client(self, reader, writer):
        fmt = "text"
        try:
            while line := (await reader.readline()).decode().strip():
                self.asked.append(line)
                if line.startswith("CLIENT PROTOCOL"):
                    writer.write(b"SERVER PROTOCOL 2\n")
                elif line.startswith(("TIMEOUT", "SET FORMAT")):
                    fmt = "json" if line == "SET FORMAT json" else fmt
                    writer.write(b"OK\n")
                elif line == "VERBOSE STATUS":
                    n = sum(1 for a in self.asked if a == "VERBOSE STATUS") - 1
                    tag = self.polls[min(n // 2, len(self.polls) - 1)]
                    writer.write(_answer(f"{tag}.ras.{'json' if fmt == 'json' else 'txt'}")[1])
                    break
                await writer.drain()
        finally:
            await writer.drain()
            writer.close()


@pytest.fixture
def workers(tmp_path):
    procs = []
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    for rank, ifname in ((0, "eth0"), (1, "eth1")):
        log = open(run_dir / f"worker_rank{rank}.log", "w")
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT="1",
                   NCCL_SOCKET_IFNAME=ifname, NCCL_DEBUG="INFO")
        procs.append(subprocess.Popen([sys.executable, "-c", STALL, str(CAP / f"desync_ras.rank{rank}.log")],
                                      stdout=log, stderr=subprocess.STDOUT, env=env))
    yield procs, run_dir
    for p in procs:
        p.kill()
        p.wait()


async def test_local_investigation_desync(workers, tmp_path):
    procs, run_dir = workers
    cfg = parse_config('[cluster]\nname = "t"\n[[node]]\nname = "here"\nbackend = "local"\n')
    node = LocalNode(cfg.nodes[0])
    events = []
    async with FakeRas(["desync_ras.t20", "desync_ras.t50"]) as ras:
        # wait until both workers printed their lines (no sleeps: poll the files with a deadline)
        async def printed():
            while not all((run_dir / f"worker_rank{r}.log").stat().st_size > 5000 for r in (0, 1)):
                await asyncio.sleep(0.05)
        await asyncio.wait_for(printed(), 20)
        action = InvestigateAction(interval=1.0, bundle=str(tmp_path / "bundle"), run_dir=str(run_dir), ras_port=ras.port,
                                   gpu_samples=1, pids={"here": [p.pid for p in procs]})
        result = await action.run(ActionContext(cfg, {"here": node}, emit=events.append))
    assert not result.ok
    v = action.verdict
    assert v.rule == "R4" and v.details["lagging"] == [1]
    # both ranks found with their env, and the IFNAME difference is the R7 item
    pids = sorted(w.pid for w in action.evidence.nodes[0].workers)
    assert pids == sorted(p.pid for p in procs)
    (env_item,) = [i for i in v.latent if i["id"] == "nccl_env_mismatch"]
    assert "NCCL_SOCKET_IFNAME" in env_item["evidence"][0]
    # RAS asked the way NCCL's client does; both rounds kept
    assert ras.asked[:4] == ["CLIENT PROTOCOL 2", "TIMEOUT 5", "SET FORMAT json", "VERBOSE STATUS"]
    times = [s.t for s in action.evidence.nodes[0].ras if s.key == "json"]
    assert len(times) == 2 and times[1] > times[0]
    # progress was reported item by item, per node, as it arrived
    assert any(e.step == "round 1" and e.message.startswith("workers: rank 0") for e in events)
    assert any(e.message.startswith("RAS: 1 communicator") for e in events)
    assert shutil.which("py-spy"), "py-spy comes with the test extras"
    assert any(e.message.startswith("py-spy rank 1:") for e in events)
    # the bundle replays offline to the same verdict
    ((_, ev),) = read_bundle(tmp_path / "bundle")
    again = decide(ev)
    assert (again.rule, again.details["lagging"]) == ("R4", [1])
    saved = json.loads((tmp_path / "bundle" / "verdict.json").read_text())
    assert saved["rule"] == "R4" and saved["timings"]["total_s"] > 0
