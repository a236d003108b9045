"""The TUI's launch screen driving the REAL launch on the real-vLLM test bed, on all THREE bed nodes:
TP=3 on the real vLLM (the tiny model's 6 heads and 2304-token vocabulary divide by 3).  The one
confirm comes before anything starts, each node's row climbs through its milestones from its own
real log, the screen ends on READY, and the deterministic answer comes back.  The cluster is stopped
through the CLI afterwards."""

from __future__ import annotations

import time

import pytest


async def test_launch_screen_three_nodes_tp3_real_vllm_per_node_progress_to_ready(real_vllm_bed, tmp_path):
    from sparktui.actions import registry
    from sparktui.actions.cli_runner import make_nodes
    from sparktui.actions.launch import LaunchAction
    from sparktui.config import load_config
    from sparktui.engine import Engine
    from sparktui.tui.app import SparkApp
    from sparktui.tui.launch import LaunchScreen
    from sparktui.tui.screens.confirm import ConfirmModal

    bed = real_vllm_bed
    cfg_path = bed.write_config(tmp_path / "tui.toml", nodes=3, name="tiny_tui")
    names = ["spark1", "spark2", "spark3"]
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
            deadline = time.monotonic() + 180  # the plan probes three nodes over ssh first: slow on a loaded bed
            while time.monotonic() < deadline and screen.result is None:
                if isinstance(app.screen, ConfirmModal):
                    break
                await pilot.pause(0.05)
            assert isinstance(app.screen, ConfirmModal), ("the launch asks once before starting anything",
                                                          screen.result and screen.result.summary)
            await pilot.press("y")
            await app.workers.wait_for_complete([screen._worker])
            for _ in range(200):
                if screen.result is not None:
                    break
                await pilot.pause()
            assert screen.result is not None and screen.result.ok, screen.result and screen.result.summary
            assert list(screen.rows) == names and all(screen.rows[n].has_class("-ready") for n in names)
            assert screen.result.data["tp"] == 3
            # per-node progress came from the real logs of each node, in order
            seen = {n: [e.key for e in screen.events if e.step == "milestone" and e.node == n] for n in names}
            assert seen["spark1"].index("container_started") < seen["spark1"].index("weights_loaded") \
                < seen["spark1"].index("api_ready"), seen
            assert all("weights_loaded" in seen[n] for n in names[1:]), seen  # the headless ranks' own logs
            assert "READY" in str(screen.query_one("#launch-title").visual)
        from openai import OpenAI

        port = config.cluster.serve_port
        client = OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused", timeout=120, max_retries=0)
        r = client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "hi"}], max_tokens=40)
        assert r.choices[0].message.content == bed.info["tiny"]["answer"]
    finally:
        r = bed.cli("stop", "--yes", "--json", config=cfg_path, timeout=180)
        assert r.returncode == 0, r.stdout[-800:] + r.stderr[-800:]
        for n in nodes.values():
            try:
                await n.close()
            except Exception:
                pass
    if any("tiny_tui" in bed.containers(n) for n in names):
        pytest.fail("stop left a container of the TUI launch")
