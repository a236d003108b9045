"""Pilot tests: help lists every registry key, palette, read-only, confirm modal, action screen,
findings panel -> log line, narrow layout, themes."""

from __future__ import annotations

from conftest import screen_text, wait_for

from sparktui.model import Finding, FindingRaised, NodeReachability
from sparktui.tui import keymap
from sparktui.tui.palette import SparkCommands
from sparktui.tui.screens.action import ActionScreen
from sparktui.tui.screens.confirm import ConfirmModal
from sparktui.tui.screens.findings import FindingsScreen
from sparktui.tui.screens.help import HelpScreen
from sparktui.tui.themes import load_themes


async def test_help_lists_every_registry_key(make_app, sample_actions):
    app = make_app(t=30)
    async with app.run_test(size=(120, 70)) as pilot:
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), "help screen")
        await pilot.pause()
        text = screen_text(app)
        for e in keymap.for_cluster(len(app.engine.config.nodes)):
            for k in e.key_list:
                assert keymap.display_key(k) in text, f"{e.id}: key {k} missing from help"
            assert e.description in text
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, HelpScreen), "help closed")


def test_registry_avoids_tmux_prefixes_and_ids_are_unique(sample_actions):
    ids = [e.id for e in keymap.entries()]
    assert len(ids) == len(set(ids))
    keys = [k for e in keymap.entries() for k in e.key_list]
    assert "ctrl+a" not in keys and "ctrl+b" not in keys
    assert {"q", "question_mark", "slash", "w", "t", "end", "c", "f"} <= set(keys)


async def test_palette_lists_registry_actions_with_prefixes(make_app, sample_actions):
    app = make_app(t=30)
    async with app.run_test(size=(120, 40)):
        titles = [t for t, _, _ in SparkCommands(app.screen)._commands()]
        assert any(t.startswith("view: ") for t in titles)
        assert "node: spark1" in titles and "node: spark2" in titles
        assert "action: Echo (read-only safe)" in titles
        assert "action: Wipe (destructive)" in titles


async def test_read_only_hides_mutating_actions(make_app, sample_actions):
    app = make_app(t=30, read_only=True)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        assert screen.check_action("guided", ("wipe-test",)) is False
        assert screen.check_action("guided", ("echo-test",)) is True
        titles = [t for t, _, _ in SparkCommands(screen)._commands()]
        assert "action: Wipe (destructive)" not in titles
        assert "action: Echo (read-only safe)" in titles
        assert "READ-ONLY" in screen_text(app)
        await pilot.press("x")  # the wipe key does nothing
        await pilot.pause()
        assert not isinstance(app.screen, ActionScreen)
        app.open_action("wipe-test")  # and refuses even when asked directly
        await pilot.pause()
        assert not isinstance(app.screen, ActionScreen)


async def test_confirm_modal_keys_and_default_no(make_app):
    app = make_app(t=10)
    answers: list[bool] = []
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: app.screen.id != "_default", "main screen")
        for key, expected in (("y", True), ("n", False), ("escape", False), ("enter", False)):
            app.push_screen(ConfirmModal("Remove [b]it[/b]?", "docker rm -f x"), answers.append)
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmModal), "modal")
            # default focus: No
            await wait_for(pilot, lambda: app.focused is not None and app.focused.id == "no", "focus on No")
            assert "Remove [b]it[/b]?" in screen_text(app)
            await pilot.press(key)
            await wait_for(pilot, lambda: not isinstance(app.screen, ConfirmModal), "modal closed")
            assert answers[-1] is expected


async def test_action_screen_runs_steps_and_asks_before_destroying(make_app, sample_actions):
    import tui_sample_actions as sa

    sa.WipeAction.wiped.clear()
    app = make_app(t=10)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("e")
        await wait_for(pilot, lambda: isinstance(app.screen, ActionScreen), "action screen")
        screen = app.screen
        await wait_for(pilot, lambda: screen.result is not None, "echo result")
        assert screen.result.ok and "2 nodes" in screen.result.summary
        assert "spark1, spark2" in screen_text(app)
        app.engine.drain()  # not live in tests: run the pump by hand
        assert any(a.action == "echo-test" for a in app.engine.state.actions)  # recorded via the engine
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, ActionScreen), "back")

        for answer, wiped in (("n", 0), ("y", 1)):
            await pilot.press("x")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmModal), "confirm")
            await pilot.press(answer)
            await wait_for(pilot, lambda: isinstance(app.screen, ActionScreen) and app.screen.result is not None, "wipe result")
            assert app.screen.result.ok is (answer == "y")
            assert len(sa.WipeAction.wiped) == wiped
            await pilot.press("escape")
            await wait_for(pilot, lambda: not isinstance(app.screen, ActionScreen), "back")


async def test_findings_strip_panel_and_jump_to_line(make_app):
    app = make_app(t=60)
    f = Finding(id="cuda_oom", severity="error", title="CUDA out of memory", source="spark1/vllm_qwen35", line=5,
                evidence=("torch.OutOfMemoryError: CUDA out of memory",), advice="Lower --gpu-memory-utilization",
                node="spark1", ts=app.clock())
    async with app.run_test(size=(160, 48)) as pilot:
        app.engine.process([FindingRaised(f)])
        app.refresh_now()
        await pilot.pause()
        assert "1 error" in screen_text(app) and "CUDA out of memory" in screen_text(app)
        await pilot.press("f")
        await wait_for(pilot, lambda: isinstance(app.screen, FindingsScreen), "findings panel")
        await pilot.pause()
        text = screen_text(app)
        assert "Lower --gpu-memory-utilization" in text and "torch.OutOfMemoryError" in text
        await pilot.press("enter")
        await wait_for(pilot, lambda: not isinstance(app.screen, FindingsScreen), "panel closed")
        lines = app.screen.panes[0].log_view.lines
        assert lines.source == "vllm_qwen35" and not lines.follow and lines._mark == 4
        await pilot.pause()
        fifth = app.engine.logs.find("spark1", "vllm_qwen35").get(4)
        assert fifth.strip()[:40] in screen_text(app)


async def test_narrow_terminal_shows_one_node_with_a_switcher(make_app):
    app = make_app(t=60)
    async with app.run_test(size=(80, 24)) as pilot:
        app.refresh_now()
        await pilot.pause()
        assert app.screen.has_class("-narrow")
        text = screen_text(app)
        assert "spark1" in text and "spark2" in text  # the switcher names both
        assert "running" in text
        panes = app.screen.panes
        assert panes[0].display and not panes[1].display
        await pilot.press("2")
        await pilot.pause()
        assert panes[1].display and not panes[0].display
        assert "worker" in screen_text(app)


async def test_unreachable_node_header(make_app):
    app = make_app(t=30)
    async with app.run_test(size=(160, 48)) as pilot:
        since = app.clock() - 20
        app.engine.process([NodeReachability("spark2", False, ts=app.clock(), since=since, error="connection refused",
                                             retry_in=4.0, backend="sim")])
        app.refresh_now()
        await pilot.pause()
        text = screen_text(app)
        assert "unreachable since 23:13:30, retry in 4s" in text  # DEMO_EPOCH + 10 s, UTC
        assert app.screen.panes[1].has_class("-unreachable")


def test_themes_are_data_and_all_four_load():
    themes = load_themes()
    assert {"sparktui-dark", "sparktui-light", "sparktui-256", "sparktui-contrast"} <= set(themes)
    assert themes["sparktui-light"].dark is False


async def test_every_theme_renders(make_app):
    for name in ("sparktui-dark", "sparktui-light", "sparktui-256", "sparktui-contrast"):
        app = make_app(t=20, theme=name)
        async with app.run_test(size=(100, 30)) as pilot:
            app.refresh_now()
            await pilot.pause()
            assert app.theme == name
            assert "spark1" in screen_text(app)


async def test_three_nodes_side_by_side_at_200_columns():
    from dataclasses import replace

    from sparktui.config import demo_config
    from sparktui.engine import Engine
    from sparktui.sim import DEMO_EPOCH, SimCluster
    from sparktui.tui.app import SparkApp

    base = demo_config()
    third = replace(base.nodes[1], name="spark3", fabric_ip="192.168.200.14")  # sim node: example address, never contacted
    config = replace(base, nodes=base.nodes + (third,))
    engine = Engine(config, [])
    engine.process(SimCluster(config).events_until(60))
    app = SparkApp(engine, live=False, clock=lambda: DEMO_EPOCH + 60)
    async with app.run_test(size=(200, 50)) as pilot:
        app.refresh_now()
        await pilot.pause()
        assert not app.screen.has_class("-narrow")
        assert all(p.display for p in app.screen.panes)
        text = screen_text(app)
        for name in ("spark1", "spark2", "spark3"):
            assert name in text
        await pilot.press("3")
        assert app.screen.active_pane.node == "spark3"


async def test_palette_runs_a_registry_action_by_keyboard(make_app):
    app = make_app(t=30)
    async with app.run_test(size=(120, 40)) as pilot:
        lines = app.screen.active_pane.log_view.lines
        assert not lines.wrap
        from textual.command import CommandList, CommandPalette

        await pilot.press("ctrl+p", *"view: Toggle line wrap")
        await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette)
                       and app.screen.query_one(CommandList).option_count > 0, "palette hits")
        await pilot.press("enter")
        await wait_for(pilot, lambda: lines.wrap, "wrap toggled from the palette")


async def test_retry_countdown_moves_with_the_clock(make_app):
    app = make_app(t=30)
    now = [app.clock()]
    app.clock = lambda: now[0]
    async with app.run_test(size=(160, 48)) as pilot:
        app.engine.process([NodeReachability("spark2", False, ts=now[0], since=now[0] - 5, error="timeout",
                                             retry_in=8.0, backend="sim")])
        app.refresh_now()
        await pilot.pause()
        assert "retry in 8s" in screen_text(app)
        now[0] += 3
        app.refresh_now()
        await pilot.pause()
        assert "retry in 5s" in screen_text(app)


async def test_engine_batches_coalesce_into_one_refresh(make_app):
    from sparktui.model import LogBatch, LogLine

    app = make_app(t=5)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        before = app.refreshes
        for i in range(50):  # fifty batches before the app gets a turn
            app.engine.process([LogBatch("spark1", "vllm_qwen35", (LogLine("spark1", "vllm_qwen35", f"burst {i}"),))])
        await wait_for(pilot, lambda: app.refreshes > before, "a refresh")
        await pilot.pause()
        assert app.refreshes - before == 1
        assert "burst 49" in screen_text(app)


async def test_a_subclass_screen_renders_events_once(make_app, sample_actions):
    shown = []

    class OneRowPerEvent(ActionScreen):
        # subclasses render through the show_event hook; the message handler runs once
        def show_event(self, ev) -> None:
            shown.append(ev)

    from sparktui.actions import registry
    import tui_sample_actions as sa

    app = make_app(t=5)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = OneRowPerEvent(registry.entry("echo-test"), sa.EchoAction)
        app.push_screen(screen)
        await wait_for(pilot, lambda: screen.result is not None, "result")
        assert [e.status for e in screen.events] == ["started", "ok"]  # once each, not twice
        assert [e.status for e in shown] == ["started", "ok"]
        assert not screen.query_one("DataTable").rows  # the base rendering stood back


async def test_an_action_whose_module_fails_to_import_is_hidden(make_app, monkeypatch):
    from sparktui.actions import registry

    broken = registry.ActionEntry("broken-test", "Broken", "tui_broken_action", "BrokenAction", False, "x")
    monkeypatch.setattr(registry, "ENTRIES", (broken,))
    keymap.entries.cache_clear()
    try:
        app = make_app(t=5)
        async with app.run_test(size=(120, 40)) as pilot:
            await app.workers.wait_for_complete()
            await wait_for(pilot, lambda: "broken-test" in app.broken_actions, "import check")
            assert app.screen.check_action("guided", ("broken-test",)) is False
            assert not any("Broken" in t for t, _, _ in SparkCommands(app.screen)._commands())
            await pilot.press("x")
            await pilot.pause()
            assert not isinstance(app.screen, ActionScreen)
    finally:
        monkeypatch.undo()
        keymap.entries.cache_clear()
