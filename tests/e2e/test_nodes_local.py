"""The local backend (sparktui on the Spark itself): subprocess argv lists, plain file reads, the
Docker Engine on a local socket (here a test-bed node's dockerd), and the same collectors."""

from __future__ import annotations

import asyncio
import shutil
import time

import pytest

from sparktui.collectors import Intervals, NodeCollectors
from sparktui.config import NodeConfig
from sparktui.model import ContainerChanged, GpuSample, LinkSample, LogBatch, MemorySample, NodeReachability
from sparktui.nodes.base import NodeError
from sparktui.nodes.local import LocalNode

pytestmark = pytest.mark.e2e


async def test_local_node_io(tmp_path):
    node = LocalNode(NodeConfig(name="here", backend="local"))
    marker = tmp_path / "pwned"
    res = await node.run(["echo", f"a b'$(touch {marker})"])
    assert res.ok and res.text == f"a b'$(touch {marker})\n" and not marker.exists()
    missing = await node.run(["no-such-tool-here"])
    assert missing.returncode == 127
    with pytest.raises(NodeError):
        await node.run(["sleep", "5"], timeout=0.2)
    lines = [ln async for ln in node.stream(["sh", "-c", "echo one; echo two >&2"])]
    assert lines == [b"one", b"two"]
    assert (await node.read_file("/proc/meminfo")).startswith(b"MemTotal:")
    with pytest.raises(NodeError):
        await node.read_file(str(tmp_path / "absent"))
    await node.close()


async def test_local_collectors_with_docker(bed, container_name, cleanup):
    sock = bed.nodes["spark1"]["docker_socket"]
    cfg = NodeConfig(name="here", backend="local", docker_socket=sock)
    node = LocalNode(cfg)
    col = NodeCollectors(node, cfg, None, Intervals(memory=0.5))
    seen: list = []
    cond = asyncio.Event()

    def emit(e):
        seen.append(e)
        if any(isinstance(x, LogBatch) and x.source == container_name for x in seen) and \
                any(isinstance(x, MemorySample) for x in seen) and any(isinstance(x, LinkSample) for x in seen):
            cond.set()

    task = asyncio.create_task(col.run(emit))
    try:
        cleanup.append(("spark1", container_name))
        bed.docker("spark1", "run", "-d", "--name", container_name, "--network", "host", "sparktui-base:bookworm",
                   "sh", "-c", "echo hello from local; sleep 600")
        await asyncio.wait_for(cond.wait(), 10)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await col.close()
    assert isinstance(seen[0], NodeReachability) and seen[0].reachable and seen[0].backend == "local"
    assert any(isinstance(e, ContainerChanged) and e.container.name == container_name for e in seen) or \
        any(getattr(e, "containers", None) and any(c.name == container_name for c in e.containers) for e in seen)
    batch = next(e for e in seen if isinstance(e, LogBatch) and e.source == container_name)
    assert batch.lines[0].text == "hello from local" and batch.lines[0].raw_ts.endswith("Z")
    assert abs(batch.lines[0].ts - time.time()) < 60
    gpu = [e for e in seen if isinstance(e, GpuSample)]
    assert gpu and gpu[0].available is (shutil.which("nvidia-smi") is not None)
    links = next(e for e in seen if isinstance(e, LinkSample))
    assert any(ln.name == "lo" and "127.0.0.1/8" in ln.addresses for ln in links.links)
