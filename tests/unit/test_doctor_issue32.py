"""doctor (issue 32 item 11): a skipped check says skip, not ok; mp checks its master port, not Ray's."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

from sparktui.actions.base import ActionContext
from sparktui.actions.checks import ok, skip
from sparktui.actions.checks.basics import head_ports
from sparktui.actions.doctor import DoctorAction
from sparktui.config import load_config

EXAMPLE = Path(__file__).resolve().parents[2] / "cluster.example.toml"


def _group(results) -> list:
    events: list = []
    ctx = ActionContext(load_config(str(EXAMPLE)), {}, emit=events.append)

    async def checks():
        return results

    asyncio.run(DoctorAction()._group(ctx, "memory", checks()))
    return events


def test_a_skipped_check_reads_skip_with_its_reason():
    done = [e for e in _group([skip("memory_fit", "model size unknown")]) if e.status != "started"]
    assert [(e.status, e.message) for e in done] == [("skip", "model size unknown")]


def test_per_node_rows_keep_skip_apart_from_ok():
    evs = _group([ok("memory_fit", "fits", "spark1"), skip("memory_fit", "cannot read meminfo", "spark2")])
    rows = {e.node: e.status for e in evs if e.node}
    assert rows == {"spark1": "ok", "spark2": "skip"}


def test_the_head_ports_follow_the_executor():
    c = load_config(str(EXAMPLE)).cluster
    ray = replace(c, executor="ray", serve_port=8000, ray_port=6380, master_port=29501)
    assert head_ports(ray) == [8000, 6380, 8265]
    mp = replace(ray, executor="mp")
    assert head_ports(mp) == [8000, 29501]
