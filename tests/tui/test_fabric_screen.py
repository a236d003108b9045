"""The Fabric screen (key F): opened from the registry's key, a quick run on the demo cluster through
the real action and worker (the sim nodes answer `ip -j addr` and ping; iperf3 is not installed
there), and snapshots of a finished report at 80x24 and 160x48 (a real Spark pair's all_reduce_perf
table from tests/fixtures/fabric, the check's own verdict on it)."""

from __future__ import annotations

from pathlib import Path

from conftest import build_app
from pilot_helpers import screen_text, wait_for
from textual.widgets import ProgressBar

from sparktui.actions.base import ActionResult, StepRecord
from sparktui.config import ClusterConfig, Config, NodeConfig
from sparktui.fabric.check import STEPS, FabricCheck, FabricReport, NodePath, PairPath
from sparktui.fabric.parse import parse_perf
from sparktui.tui.fabric import FabricScreen
from sparktui.tui.messages import ActionDone

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "fabric"


async def test_key_f_quick_run_on_the_demo():
    app = build_app(t=30)
    async with app.run_test(size=(160, 48)) as pilot:
        app.refresh_now()
        await pilot.press("F")
        await wait_for(pilot, lambda: isinstance(app.screen, FabricScreen), "the fabric screen")
        screen = app.screen
        await pilot.click("#fb-quick")
        await wait_for(pilot, lambda: screen.result is not None, "the check's result", rounds=600)
        await pilot.pause()
        assert all(screen.query_one(f"#fb-bar-{s}", ProgressBar).progress == 100 for s in STEPS)
        text = screen_text(app)
        assert "2 paths carry MTU 9000 on enp1s0f1np1" in text  # the sim's ping passed at MTU 9000
        assert "iperf3 is not installed on spark1" in text
        assert "skipped (--quick)" in text
        assert screen.result.data["nodes"][0]["nccl_socket_ifname"] == "enp1s0f1np1"  # the launch's pinned env
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, FabricScreen), "back to the main screen")


def _report() -> dict:
    nodes = (NodeConfig("spark1", backend="sim", fabric_ip="192.168.200.12", fabric_if="enp1s0f1np1", role="head"),
             NodeConfig("spark2", backend="sim", fabric_ip="192.168.200.13", fabric_if="enp1s0f1np1"))
    cfg = Config(path="", cluster=ClusterConfig(), nodes=nodes)
    check = FabricCheck(cfg, {}, {"spark1": {"NCCL_SOCKET_IFNAME": "enp1s0f1np1"}, "spark2": {}})
    r = check.report = FabricReport(200.0, 9000)
    r.nodes = [NodePath("spark1", "192.168.200.12", "enp1s0f1np1", 9000, "enp1s0f1np1", rdma_note="no RDMA devices"),
               NodePath("spark2", "192.168.200.13", "enp1s0f1np1", 9000, "", rdma_note="no RDMA devices")]
    r.pairs = [PairPath("spark1", "spark2", "192.168.200.13", 9000, error="ping is not installed on spark1"),
               PairPath("spark2", "spark1", "192.168.200.12", 9000, error="ping is not installed on spark2")]
    r.perf = parse_perf((FIX / "all_reduce_perf_gb10_pair_dsp103.txt").read_text())
    r.verdict = check.judge()
    return r.to_json(), [StepRecord(name, *check.summary(name)) for name in STEPS[:-1]] + \
        [StepRecord("verdict", r.verdict.status, r.verdict.title)]


def _snap():
    async def run(pilot) -> None:
        app = pilot.app
        app.refresh_now()
        await pilot.press("F")
        await wait_for(pilot, lambda: isinstance(app.screen, FabricScreen), "the fabric screen")
        data, steps = _report()
        app.screen.post_message(ActionDone(ActionResult("fabric", False, data["verdict"]["title"], steps, data=data)))
        await wait_for(pilot, lambda: app.screen.result is not None, "the report shown")
        await pilot.pause()
    return run


def test_fabric_screen_80x24(snap_compare):
    assert snap_compare(build_app(t=30), terminal_size=(80, 24), run_before=_snap())


def test_fabric_screen_160x48(snap_compare):
    assert snap_compare(build_app(t=30), terminal_size=(160, 48), run_before=_snap())
