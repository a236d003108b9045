"""The TUI's launch screen driving the REAL launch on the real-vLLM test bed: the one confirm shows
the docker commands, each node's row climbs through its milestones from the real vLLM logs, and the
screen ends on READY with the serve URL.  The cluster is stopped through the CLI afterwards."""

from __future__ import annotations

import pytest


async def test_launch_screen_real_cluster_per_node_progress_to_ready(real_vllm_bed, tmp_path):
    from sparktui.actions import registry
    from sparktui.actions.cli_runner import make_nodes
    from sparktui.actions.launch import LaunchAction
    from sparktui.config import load_config
    from sparktui.engine import Engine
    from sparktui.tui.app import SparkApp
    from sparktui.tui.launch import LaunchScreen
    from sparktui.tui.screens.confirm import ConfirmModal

    bed = real_vllm_bed
    cfg_path = bed.write_config(tmp_path / "tui.toml", nodes=2, name="tiny_tui")
    config = load_config(cfg_path)
    nodes = make_nodes(config)
    app = SparkApp(Engine(config, []), nodes=lambda: nodes, live=False)
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            for _ in range(200):  # the main screen first
                if app.screen.id != "_default":
                    break
                await pilot.pause()
            screen = LaunchScreen(registry.entry("launch"), LaunchAction)
            app.push_screen(screen)
            for _ in range(2000):
                if isinstance(app.screen, ConfirmModal):
                    break
                await pilot.pause()
            assert isinstance(app.screen, ConfirmModal), "the launch asks once before starting anything"
            await pilot.press("y")
            await app.workers.wait_for_complete([screen._worker])
            for _ in range(200):
                if screen.result is not None:
                    break
                await pilot.pause()
            assert screen.result is not None and screen.result.ok, screen.result and screen.result.summary
            head, worker = screen.rows["spark1"], screen.rows["spark2"]
            assert head.has_class("-ready") and worker.has_class("-ready")
            # per-node progress came from the real logs of each node, in order
            seen = {n: [e.key for e in screen.events if e.step == "milestone" and e.node == n] for n in ("spark1", "spark2")}
            assert seen["spark1"].index("container_started") < seen["spark1"].index("weights_loaded") \
                < seen["spark1"].index("api_ready"), seen
            assert "weights_loaded" in seen["spark2"], seen  # the headless rank's own log
            assert "READY" in str(screen.query_one("#launch-title").visual)
    finally:
        r = bed.cli("stop", "--yes", "--json", config=cfg_path, timeout=180)
        assert r.returncode == 0, r.stdout[-800:] + r.stderr[-800:]
        for n in nodes.values():
            try:
                await n.close()
            except Exception:
                pass
    if any("tiny_tui" in bed.containers(n) for n in ("spark1", "spark2")):
        pytest.fail("stop left a container of the TUI launch")
