"""`sparktui status` shows a node's CPU and IO wait (PSI) as the TUI does: read with its memory, in the
JSON always, in the text once a node's tasks wait at least PRESSURE_SHOWN % of the last 10 s."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparktui.commands.status import _memory, _text
from sparktui.config import NodeConfig
from sparktui.model import PRESSURE_SHOWN
from sparktui.nodes.local import LocalNode


def _node(cpu: float | None, io: float | None) -> dict:
    mem = {"total": 128 << 30, "used": 64 << 30, "used_fraction": 0.5, "cached": 1 << 30, "psi_some_avg10": 0.0,
           "pressure": {"cpu": cpu, "io": io, "memory": 0.0}}
    return {"name": "spark1", "backend": "ssh", "host": "127.0.0.2", "reachable": True, "error": None,
            "memory": mem, "gpu": {"available": False}, "docker_error": None, "containers": []}


def test_text_names_the_waits_that_slow_a_node():
    out = _text([_node(93.4, 12.0)])
    assert "pressure CPU wait 93%, IO wait 12%" in out


def test_text_is_quiet_below_the_threshold_or_without_psi():
    for cpu, io in ((PRESSURE_SHOWN - 0.1, 0.0), (None, None)):
        assert "pressure" not in _text([_node(cpu, io)]), (cpu, io)
    # one of the two over it: only that one
    out = _text([_node(None, 40.0)])
    assert "pressure IO wait 40%" in out and "CPU wait" not in out


@pytest.mark.skipif(not Path("/proc/pressure/cpu").exists(), reason="this kernel exposes no PSI")
async def test_memory_snapshot_reads_the_nodes_pressure_files():
    node = LocalNode(NodeConfig(name="spark1", backend="local"))
    snap = await _memory(node, "/proc/meminfo")
    p = snap["pressure"]
    assert set(p) == {"cpu", "io", "memory"}
    assert all(isinstance(v, float) and 0.0 <= v <= 100.0 for v in p.values()), p
    assert p["memory"] == snap["psi_some_avg10"]
