"""Host-key facts travel up on the reachability event (issue 15): the collector that meets a
HostKeyError says which key, and the state keeps it until the node is reachable again."""

from __future__ import annotations

import asyncio

from sparktui.collectors import NodeCollectors
from sparktui.config import NodeConfig
from sparktui.model import HostKeyOffer, NodeReachability
from sparktui.nodes.base import HostKeyError, Node
from sparktui.state import ClusterState, reduce
from sparktui.waiting import get_within


class _UnknownKeyNode(Node):
    """An ssh node whose handshake met a key known_hosts does not hold (a real one needs sshd)."""

    name = "spark2"
    backend = "ssh"

    async def connect(self) -> None:
        raise HostKeyError("spark2", "127.0.0.3:2222", "SHA256:abc123", True, "compare it on the console")

    async def close(self) -> None:
        pass


async def test_the_collector_puts_the_offered_key_on_the_event():
    cfg = NodeConfig(name="spark2", backend="local", host="127.0.0.3")  # local: the retry wait is a sleep
    seen: asyncio.Queue = asyncio.Queue()
    task = asyncio.create_task(NodeCollectors(_UnknownKeyNode(), cfg).run(seen.put_nowait))
    try:
        ev = await get_within(seen, 10)
    finally:
        task.cancel()
    assert isinstance(ev, NodeReachability) and ev.reachable is False
    assert ev.host_key == HostKeyOffer("127.0.0.3:2222", "SHA256:abc123", True, "compare it on the console")


def reduce_events(state: ClusterState, events: list) -> ClusterState:
    for ev in events:
        state = reduce(state, ev)
    return state


def test_the_state_keeps_the_offer_until_the_node_is_reachable():
    offer = HostKeyOffer("127.0.0.3", "SHA256:abc123", False)
    st = reduce_events(ClusterState(), [NodeReachability("spark2", False, host_key=offer)])
    assert st.nodes["spark2"].host_key == offer
    st = reduce_events(st, [NodeReachability("spark2", False, error="timed out")])
    assert st.nodes["spark2"].host_key is None  # another reason now: nothing to ask about
    st = reduce_events(st, [NodeReachability("spark2", False, host_key=offer), NodeReachability("spark2", True)])
    assert st.nodes["spark2"].host_key is None
