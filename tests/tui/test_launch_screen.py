"""The Launch screen (sparktui/tui/launch.py) driven by Pilot inside the real app, on a scripted
launch action that emits the event sequence of the real one (the screen never imports it).

No sleeps: tests wait for the screen's state (messages processed) and the action worker.
"""

from __future__ import annotations

import asyncio

import pytest
from dataclasses import replace

from conftest import build_app, screen_text, wait_for

from sparktui.actions import registry
from sparktui.actions.base import Action, ActionContext, ActionRefused, ActionResult
from sparktui.model import Finding
from sparktui.tui.launch import LaunchNodeRow, LaunchScreen, NodeTrack
from sparktui.tui.screens.confirm import ConfirmModal

URL = "http://127.0.0.1:8000"
ENTRY = registry.ActionEntry("launch", "Launch the cluster", "sparktui.actions.launch", "LaunchAction", True, "l")


class ScriptedLaunch(Action):
    """Two nodes, head spark1 and worker spark2, Ray executor: the events of a launch that comes up.

    ``gate``: when set (an asyncio.Event), the action waits on it halfway through the weights.
    """

    name = "launch"
    title = "Launch the cluster"
    mutating = True
    gate: asyncio.Event | None = None
    fail = False

    async def execute(self, ctx: ActionContext) -> ActionResult:
        e = ctx.emit
        e("preflight", "started", "checking 2 nodes")
        for n in ("spark1", "spark2"):
            e("preflight", "ok", "docker up, image vllm-node present, model found", node=n)
        e("plan", "ok", "spark1 head (rank 0) + spark2 worker (rank 1), Ray executor, TP 2")
        if not await ctx.confirm("Start vllm_node on 2 nodes?",
                                 "spark1: docker run -d --name vllm_node … ray start --head\n"
                                 "spark2: docker run -d --name vllm_node … ray start --address 192.168.200.12:6379"):
            raise ActionRefused("operator said no")
        for rank, n in enumerate(("spark1", "spark2")):
            e("start", "started", "docker run", node=n)
            e("start", "ok", f"container abc12{rank} started (rank {rank})", node=n)
            e("milestone", "progress", "container started", node=n, key="container_started")
        e("ray", "progress", "1/2 nodes, 1/2 GPU")
        e("milestone", "progress", "Ray head up", node="spark1", key="ray_joined")
        if self.fail:
            e("finding", "warn", "Ray worker spark2 never joined the cluster", node="spark2", key="ray_worker_missing")
            e("ready", "started", "waiting for the API")
            e("ready", "fail", "the API did not answer: the Ray cluster has 1/2 nodes")
            f = Finding("ray_worker_missing", "error", "Ray worker spark2 never joined the cluster", node="spark2",
                        advice="Check the fabric link and ray start on spark2")
            return ActionResult(self.name, False, "spark2 never joined the Ray cluster", findings=[f],
                                data={"nodes": {"spark1": {"milestones": ["container_started", "ray_joined"]},
                                                "spark2": {"milestones": ["container_started"]}}})
        e("milestone", "progress", "Ray node joined", node="spark2", key="ray_joined")
        e("ray", "ok", "2/2 nodes, 2 GPU")
        e("milestone", "progress", "architecture Qwen3ForCausalLM", node="spark1", key="arch_resolved")
        e("milestone", "progress", "NCCL ready (NET/IB)", node="spark1", key="nccl_ready")
        e("milestone", "progress", "NCCL ready (NET/IB)", node="spark2", key="nccl_ready")
        for shard in range(1, 5):
            e("milestone", "progress", f"weights loading {shard}/8 shards", node="spark1", key="weights_loading",
              progress=shard / 8)
        if self.gate is not None:
            await self.gate.wait()
        for shard in range(5, 9):
            e("milestone", "progress", f"weights loading {shard}/8 shards", node="spark1", key="weights_loading",
              progress=shard / 8)
        e("milestone", "progress", "weights loaded (1.2 GiB)", node="spark1", key="weights_loaded")
        e("milestone", "progress", "KV cache 81,920 tokens", node="spark1", key="kv_cache")
        e("milestone", "progress", f"API listening on {URL}", node="spark1", key="api_ready")
        e("ready", "started", "waiting for the API")
        e("ready", "ok", f"{URL} serves 'tiny' (vLLM 0.32.0)")
        return ActionResult(self.name, True, f"spark1 serves 'tiny' at {URL}",
                            data={"base_url": URL, "vllm_version": "0.32.0",
                                  "nodes": {"spark1": {"milestones": ["container_started", "api_ready"]},
                                            "spark2": {"milestones": ["container_started", "ray_joined"]}}})


class FailingLaunch(ScriptedLaunch):
    fail = True


def _row(screen: LaunchScreen, name: str) -> LaunchNodeRow:
    return screen.rows[name]


def _text(widget) -> str:
    return str(widget.visual) if hasattr(widget, "visual") else str(widget.render())


async def _push(pilot, action_cls) -> LaunchScreen:
    app = pilot.app
    await wait_for(pilot, lambda: app.screen.id != "_default", "the main screen")
    screen = LaunchScreen(ENTRY, action_cls)
    app.push_screen(screen)
    await wait_for(pilot, lambda: screen._worker is not None, "the action worker")
    return screen


async def _launch(pilot, action_cls) -> LaunchScreen:
    app = pilot.app
    screen = await _push(pilot, action_cls)
    await wait_for(pilot, lambda: isinstance(app.screen, ConfirmModal), "the one confirm")
    # the exact commands are shown before anything starts
    await wait_for(pilot, lambda: "ray start --head" in screen_text(app), "the docker commands in the confirm")
    await pilot.press("y")
    await wait_for(pilot, lambda: app.screen is screen, "back on the launch screen")
    return screen


async def _finish(pilot, screen: LaunchScreen) -> None:
    await pilot.app.workers.wait_for_complete([screen._worker])
    await wait_for(pilot, lambda: screen.result is not None, "the result")
    await pilot.pause()


async def test_launch_comes_up_rows_climb_and_title_reads_ready(monkeypatch):
    shows: dict[str, int] = {}
    real_show = LaunchNodeRow.show

    def counting_show(self) -> None:
        shows[self.track.name] = shows.get(self.track.name, 0) + 1
        real_show(self)

    monkeypatch.setattr(LaunchNodeRow, "show", counting_show)
    app = build_app(t=10)
    gate = asyncio.Event()
    ScriptedGated = type("ScriptedGated", (ScriptedLaunch,), {"gate": gate})
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _launch(pilot, ScriptedGated)
        # rows exist from the config before any event, head first
        assert list(screen.rows) == ["spark1", "spark2"]
        s1, s2 = _row(screen, "spark1"), _row(screen, "spark2")
        await wait_for(pilot, lambda: s1.track.reached.get("weights_loading") == 0.5, "weights half loaded")
        await pilot.pause()
        assert s1.has_class("-running") and s2.has_class("-running")
        bar = s1.query_one("ProgressBar")
        assert bar.total == 9 and bar.progress == 4.5  # container ray arch nccl + half of weights, of 9 to api
        ladder = _text(s1.query_one(".launch-node-ladder"))
        assert "✓container ✓ray ✓arch ✓nccl ▸weights 50% ·loaded ·kv" in ladder
        assert "weights loading 4/8 shards" in _text(s1.query_one(".launch-node-message"))
        assert screen.query_one("#launch-title").has_class("-running")
        await wait_for(pilot, lambda: "starting vLLM…" in screen_text(app), "the title while it starts")
        spark2_shows = shows["spark2"]

        gate.set()
        await _finish(pilot, screen)
        # spark1's high-rate events re-rendered spark1's row only; spark2 once more (the head got ready)
        assert shows["spark2"] == spark2_shows + 1
        # the log keeps the transition, not every shard
        assert sum("weights loading" in line for line in screen.query_one("Log").lines) == 1

        assert screen.result.ok
        assert s1.has_class("-ready") and not s1.has_class("-running")
        bar = s1.query_one("ProgressBar")
        assert bar.progress == bar.total == 9 and bar.percentage == 1
        ladder1 = _text(s1.query_one(".launch-node-ladder"))
        assert "✓weights ✓loaded ✓kv –graphs ✓api ·prompt" in ladder1
        assert s2.has_class("-ready")  # a worker is ready when the head serves
        ladder2 = _text(s2.query_one(".launch-node-ladder"))
        assert ladder2.startswith("✓container ✓ray –arch ✓nccl –weights")
        title = screen.query_one("#launch-title")
        assert title.has_class("-ready")
        assert _text(title).rstrip().endswith(f"READY — {URL}")
        # what a person sees (painted, not just set): the title, and the step table / log for the rest
        await wait_for(pilot, lambda: f"READY — {URL}" in screen_text(app), "READY on screen")
        assert "container abc121 started (rank 1)" in screen_text(app)


async def test_launch_fails_finding_on_the_worker_row_title_reads_failed():
    app = build_app(t=10)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _launch(pilot, FailingLaunch)
        await _finish(pilot, screen)
        s1, s2 = _row(screen, "spark1"), _row(screen, "spark2")
        assert not screen.result.ok
        assert s2.has_class("-fail") and s2.has_class("-findings")
        assert "ray_worker_missing" in _text(s2.query_one(".launch-node-findings"))
        assert "✗ray" in _text(s2.query_one(".launch-node-ladder"))  # stuck where it stopped
        assert s1.has_class("-fail")  # the head never served
        assert not s1.has_class("-findings")
        title = screen.query_one("#launch-title")
        assert title.has_class("-fail")
        assert _text(title).rstrip().endswith("FAILED — spark2 never joined the Ray cluster")
        await wait_for(pilot, lambda: "FAILED — spark2 never joined the Ray cluster" in screen_text(app), "FAILED")
        assert any("ray_worker_missing" in ln or "never joined" in ln for ln in screen.query_one("Log").lines)


async def test_mp_executor_has_no_ray_rung_and_unknown_nodes_get_rows():
    app = build_app(t=10)
    app.engine.config = replace(app.engine.config, cluster=replace(app.engine.config.cluster, executor="mp"))

    class MpLaunch(Action):
        name = "launch"
        mutating = True

        async def execute(self, ctx: ActionContext) -> ActionResult:
            for n in ("spark1", "spark2", "spark3"):
                ctx.emit("start", "ok", "container started", node=n)
                ctx.emit("milestone", "progress", "container started", node=n, key="container_started")
            ctx.emit("milestone", "progress", "KV cache sized", node="spark2", key="kv_cache")
            ctx.emit("milestone", "progress", "API listening", node="spark1", key="api_ready")
            return ActionResult(self.name, True, "up", data={"base_url": URL})

    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _push(pilot, MpLaunch)
        await _finish(pilot, screen)
        assert list(screen.rows) == ["spark1", "spark2", "spark3"]  # spark3: named by events only
        for name in ("spark1", "spark2", "spark3"):
            row = _row(screen, name)
            assert row.has_class("-ready"), name  # mp workers never serve: ready with the head
            assert "ray" not in _text(row.query_one(".launch-node-ladder"))
        assert "mp executor" in _text(screen.query_one("#launch-title"))


async def test_escape_stops_watching_and_says_the_containers_keep_running():
    app = build_app(t=10)
    gate = asyncio.Event()  # never set: the launch is still loading weights when Esc comes
    ScriptedGated = type("ScriptedGated", (ScriptedLaunch,), {"gate": gate})
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _launch(pilot, ScriptedGated)
        s1 = _row(screen, "spark1")
        await wait_for(pilot, lambda: s1.track.reached.get("weights_loading") == 0.5, "weights half loaded")
        await pilot.press("escape")
        title = screen.query_one("#launch-title")
        await wait_for(pilot, lambda: title.has_class("-detached"), "detached")
        await wait_for(pilot, lambda: "containers keep running" in screen_text(app), "the containers keep running")
        assert app.screen is screen  # the first Esc stops watching, the screen stays
        assert s1.has_class("-running")  # what it was when we stopped looking
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is not screen, "back")


def test_node_track_ladder_and_progress():
    t = NodeTrack("spark1", "head")
    assert t.state == "pending" and t.progress() == (0.0, 9)
    t.started = True
    assert t.state == "running" and t.ladder().plain.startswith("▸container ·ray")
    t.reach("container_started", None)
    t.reach("weights_loading", 0.25)
    assert t.progress() == (4.25, 9)
    assert t.ladder().plain.startswith("✓container –ray –arch –nccl ▸weights 25% ·loaded")
    t.failed = "cuda_oom"
    assert t.state == "fail" and "✗weights 25%" in t.ladder().plain
    t.reach("api_ready", None)  # a node that serves is ready, whatever was raised before
    assert t.state == "ready" and t.progress() == (9.0, 9)


def test_launch_screen_100x30(snap_compare):
    async def run(pilot) -> None:
        pilot.app.refresh_now()
        screen = await _launch(pilot, ScriptedLaunch)
        await _finish(pilot, screen)

    assert snap_compare(build_app(t=10), terminal_size=(100, 30), run_before=run)


PLAN_TOML = """
[cluster]
name = "vllm_qwen35"
image = "vllm-node-qwen35"
executor = "mp"
model_path = "/home/aurora/models/Qwen3.5 FP8"
model_mount = "/models/q"
[[node]]
name = "spark1"
host = "127.0.0.2"
fabric_ip = "192.168.200.12"
fabric_if = "enp1s0f1np1"
ib_hcas = ["rocep1s0f1", "roceP2p1s0f1"]
role = "head"
[[node]]
name = "spark2"
host = "127.0.0.3"
fabric_ip = "192.168.200.13"
fabric_if = "enp1s0f1np1"
ib_hcas = ["rocep1s0f1", "roceP2p1s0f1"]
"""


class PlanOnly(Action):
    """The real launch's plan-and-confirm step on a real 2-node plan (two ~1,700-character commands)."""

    name = "launch"
    mutating = False  # no cluster lock: this test is about the question only

    async def execute(self, ctx: ActionContext) -> ActionResult:
        from sparktui.actions.cluster_plan import plan_cluster
        from sparktui.actions.launch import LaunchAction
        from sparktui.config import parse_config

        ok = await LaunchAction()._plan_and_confirm(ctx, plan_cluster(parse_config(PLAN_TOML, "t.toml")), [])
        return ActionResult(self.name, ok, "confirmed" if ok else "not confirmed")


def _inside(region, size) -> bool:
    return region.width > 0 and region.x >= 0 and region.y >= 0 and region.right <= size[0] \
        and region.bottom <= size[1]


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
async def test_launch_confirm_summary_lines_buttons_on_screen_full_commands_behind_v(size):
    app = build_app(t=10)
    async with app.run_test(size=size) as pilot:
        screen = await _push(pilot, PlanOnly)
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmModal), "the one confirm")
        modal = app.screen
        await pilot.pause()
        for button in ("#yes", "#no"):  # whole, labels with their keys, inside the screen
            region = modal.query_one(button).region
            assert _inside(region, size), (button, region)
            assert modal.query_one(button).label.plain in ("Yes [y]", "No [n]")
        yes, keys, body = (modal.query_one(q).region for q in ("#yes", ".dialog-keys", ".dialog-body"))
        assert body.bottom <= yes.y and yes.bottom <= keys.y  # nothing drawn over the buttons or the keys
        text = screen_text(app)
        assert "Yes [y]" in text and "No [n]" in text
        assert "spark1" in text and "head" in text and "worker" in text and "vllm/mp" in text
        assert "docker run" not in text and "v show the full commands" in text
        await pilot.press("v")
        await wait_for(pilot, lambda: "docker run -d" in screen_text(app), "the full commands")
        await wait_for(pilot, lambda: "--ulimit stack=67108864" in screen_text(app), "its argument groups")
        for button in ("#yes", "#no"):
            assert _inside(modal.query_one(button).region, size)
        body = modal.query_one(".dialog-body")
        assert body.max_scroll_y > 0  # the commands scroll inside the body, under the docked buttons
        await pilot.press("pagedown")
        await wait_for(pilot, lambda: body.scroll_y > 0, "the body scrolled")
        await pilot.press("y")
        await _finish(pilot, screen)
        assert screen.result.ok
