"""A node backend declares what it can do (nodes/base.py's ``Node``): each optional ability has a
default that says "not supported", each backend declares its own, and callers call it directly: no
``getattr``/``hasattr`` probe for an ability is left in the package."""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path

import pytest

from sparktui.config import NodeConfig, demo_config
from sparktui.nodes.base import Node, NotSupported
from sparktui.nodes.local import LocalNode
from sparktui.nodes.ssh import SshNode
from sparktui.probes import serving
from sparktui.probes.serving import ServingError
from sparktui.sim import SimCluster
from sparktui.sim.node import SimNode

PKG = Path(__file__).resolve().parents[2] / "sparktui"
ABILITIES = {"open_tcp", "local_port", "open_log_stream", "trust_offered_key", "wait_lost", "last_error",
             "connected", "opens_tcp", "relays_logs", "forwards_ports", "backend"}


@pytest.mark.parametrize(("cls", "tcp", "relay", "keys", "connection"), [
    (SshNode, True, True, True, True),
    (LocalNode, True, False, False, False),
    (SimNode, False, False, False, False),
])
def test_every_backend_declares_its_abilities(cls, tcp, relay, keys, connection):
    assert issubclass(cls, Node)
    assert (cls.opens_tcp, cls.relays_logs) == (tcp, relay)
    # only an ssh node's serve URL is a forward of this process (launch and validate say so with it)
    assert cls.forwards_ports == (cls is SshNode)
    # a flag set means the method is the backend's own; a flag clear means Node's "not supported"
    assert (cls.open_tcp is not Node.open_tcp) == tcp
    assert (cls.open_log_stream is not Node.open_log_stream) == relay
    assert (cls.trust_offered_key is not Node.trust_offered_key) == keys
    assert (cls.wait_lost is not Node.wait_lost) == connection
    assert (cls.connected is not Node.connected) == connection
    assert cls.local_port is not Node.local_port  # every backend reaches its serve port


async def test_a_backend_without_an_ability_answers_not_supported():
    node = SimCluster(demo_config()).node("spark1")
    with pytest.raises(NotSupported, match="spark1: the sim backend opens no TCP connections"):
        await node.open_tcp("127.0.0.1", 28028)
    with pytest.raises(NotSupported, match="keeps no host keys"):
        node.trust_offered_key("SHA256:abc")
    assert await node.open_log_stream("/v1.41/containers/x/logs", False) is None
    assert node.connected and node.last_error is None
    lost = asyncio.create_task(node.wait_lost())
    for _ in range(5):  # a node without a connection never loses it: the wait stays pending
        await asyncio.sleep(0)
    assert not lost.done()
    lost.cancel()


async def test_a_node_without_its_own_local_port_is_unreachable_with_one_line():
    class Bare(Node):
        name, backend = "bare", "test"

    with pytest.raises(ServingError, match="^bare: this node backend cannot reach its serve port$") as ei:
        await serving.endpoint(Bare(), "0.0.0.0", 8000)
    assert ei.value.kind == "unreachable"


async def test_a_local_node_opens_tcp_itself():
    server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        _, writer = await LocalNode(NodeConfig(name="here", backend="local")).open_tcp("127.0.0.1", port)
        writer.close()
    finally:
        server.close()
        await server.wait_closed()


def _probes(tree: ast.AST) -> list[tuple[int, str]]:
    out = []
    for n in ast.walk(tree):
        if (isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("getattr", "hasattr")
                and len(n.args) >= 2 and isinstance(n.args[1], ast.Constant) and n.args[1].value in ABILITIES):
            out.append((n.lineno, n.args[1].value))
    return out


def test_no_ability_is_probed_with_getattr():
    found = [f"{p.relative_to(PKG.parent)}:{line}: {name}" for p in sorted(PKG.rglob("*.py"))
             for line, name in _probes(ast.parse(p.read_text(encoding="utf-8")))]
    assert not found, "call the declared ability instead (nodes/base.py Node):\n" + "\n".join(found)
