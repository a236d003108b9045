"""Keep API forward open (issue 32 item 6) over the bed's real sshd: the forward lives on the
face's node connection, answers on this machine, and ends only when the nodes are closed."""

from __future__ import annotations

import asyncio
import shlex

import pytest

pytestmark = pytest.mark.e2e


def test_the_forward_stays_open_until_the_nodes_close(bed):
    from sparktui.actions.api_forward import KeepForwardAction
    from sparktui.actions.base import ActionContext
    from sparktui.actions.cli_runner import close_nodes, make_nodes
    from sparktui.config import load_config

    config = load_config(str(bed.config))

    async def go():
        nodes = make_nodes(config)
        try:
            result = await KeepForwardAction().run(ActionContext(config, nodes))
            assert result.ok, result.summary
            d = result.data
            assert d["forwarded"] and d["node"] == config.head.name and d["base_url"].startswith("http://127.0.0.1:")
            argv = shlex.split(d["keep_command"])
            assert argv[:3] == ["ssh", "-N", "-L"] and argv[3].endswith(f":{config.cluster.serve_port}")
            port = int(d["base_url"].rsplit(":", 1)[1])
            # the action is over and the listener still takes connections: the nodes own it, not the action
            _r, w = await asyncio.open_connection("127.0.0.1", port)
            w.close()
        finally:
            await close_nodes(nodes)
        with pytest.raises(OSError):  # closed with the connection
            await asyncio.open_connection("127.0.0.1", port)

    asyncio.run(go())
