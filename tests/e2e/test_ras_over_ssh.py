"""NCCL RAS reached through the node's own SSH connection (direct-tcpip), no process spawned.

Real NCCL RAS needs GPUs; a server on the node's loopback answers the wire protocol with the
captured desync answer (tests/fixtures/nccl-2gpu/desync_ras.t50.ras.json).  sshd forwards the
channel, so this is the path a real Spark's RAS port takes.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from sparktui.config import load_config
from sparktui.diagnosis import ras as ras_parse
from sparktui.nodes.ssh import SshNode
from sparktui.probes import workers

pytestmark = pytest.mark.e2e
CAP = Path(__file__).resolve().parents[1] / "fixtures" / "nccl-2gpu"


async def _serve_ras(asked: list[str]):
    body = "".join((CAP / "desync_ras.t50.ras.json").read_text().splitlines(keepends=True)[3:]).encode()

    async def client(reader, writer):
        try:
            while line := (await reader.readline()).decode().strip():
                asked.append(line)
                if line.startswith("CLIENT PROTOCOL"):
                    writer.write(b"SERVER PROTOCOL 2\n")
                elif line.startswith(("TIMEOUT", "SET FORMAT")):
                    writer.write(b"OK\n")
                elif line == "VERBOSE STATUS":
                    writer.write(body)
                    break
                await writer.drain()
        finally:
            await writer.drain()
            writer.close()

    return await asyncio.start_server(client, "127.0.0.1", 0)


async def test_ras_status_over_the_ssh_connection(bed):
    cfg = load_config(bed.config).node("spark2")
    asked: list[str] = []
    server = await _serve_ras(asked)
    port = server.sockets[0].getsockname()[1]
    node = SshNode(cfg)
    try:
        await node.connect()
        raw = await workers.ras_status(node, port=port, timeout=5)
    finally:
        await node.close()
        server.close()
        await server.wait_closed()
    assert asked == ["CLIENT PROTOCOL 2", "TIMEOUT 5", "SET FORMAT json", "VERBOSE STATUS"]
    status = ras_parse.parse(raw)
    counts = sorted(r.total for c in status.comms for r in c.ranks)
    assert counts == [50, 51]


async def test_ras_port_closed_is_a_clear_answer_not_an_error(bed):
    cfg = load_config(bed.config).node("spark1")
    node = SshNode(cfg)
    try:
        await node.connect()
        raw = await workers.ras_status(node, port=1, timeout=2)
    finally:
        await node.close()
    assert raw.startswith("### connect failed")
    assert not ras_parse.parse(raw).comms
