"""`a` on the findings panel acknowledges the selected finding (issue 29 item 3): the strip's root
cause moves on to the next active finding, the panel keeps the acknowledged one (dimmed, who and
when), and the acknowledgement reaches another operator's engine through the shared timeline on a
real node (LocalNode: real sh/dd/tail in a throwaway HOME)."""

from __future__ import annotations

from conftest import screen_text, wait_for

from sparktui.actions.shared_timeline import TimelineSource, TimelineWriter
from sparktui.config import NodeConfig, demo_config
from sparktui.engine import Engine
from sparktui.model import Finding, FindingRaised
from sparktui.nodes.local import LocalNode
from sparktui.tui.boot import default_processors
from sparktui.tui.palette import SparkCommands
from sparktui.tui.screens.findings import FindingsScreen
from sparktui.tui.widgets.findings_strip import FindingsStrip

CLUSTER = "demo"


def _findings(ts: float) -> tuple[Finding, Finding]:
    oom = Finding(id="cuda_oom", severity="error", title="CUDA out of memory", source="spark1/vllm_qwen35", line=5,
                  node="spark1", ts=ts)
    dead = Finding(id="engine_dead", severity="error", title="Engine core died", source="spark1/vllm_qwen35", line=9,
                   node="spark1", ts=ts + 1)
    return oom, dead


async def test_a_on_the_panel_acknowledges_and_the_strip_moves_on(make_app, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    head = LocalNode(NodeConfig("spark1", backend="local"))
    writer = TimelineWriter(head, CLUSTER, session="s-me", operator="ann@h1")
    app = make_app(t=60, timeline=writer)
    oom, dead = _findings(app.clock())
    async with app.run_test(size=(160, 48)) as pilot:
        app.engine.process([FindingRaised(oom), FindingRaised(dead)])
        app.refresh_now()
        await pilot.pause()
        strip = app.screen.query_one(FindingsStrip)
        assert not any(t.startswith("finding: ") for t, _, _ in SparkCommands(app.screen)._commands())
        assert "root cause: CUDA out of memory" in str(strip.render())

        await pilot.press("f")
        await wait_for(pilot, lambda: isinstance(app.screen, FindingsScreen), "findings panel")
        await pilot.pause()
        assert "Ack" in screen_text(app)  # the registry's key, in the panel's footer
        ack = "finding: Acknowledge the selected finding (shared with the other operators)"
        assert ack in [t for t, _, _ in SparkCommands(app.screen)._commands()]  # and in its palette
        await pilot.press("a")  # the cursor is on the first row: the root cause
        await wait_for(pilot, lambda: "acknowledged" in screen_text(app), "row marked acknowledged")
        assert app.screen.query_one("#finding-detail").has_class("-acknowledged")
        assert app.engine.state.finding_status(oom).operator == "ann@h1"
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, FindingsScreen), "panel closed")
        app.refresh_now()
        await pilot.pause()
        shown = str(app.screen.query_one(FindingsStrip).render())
        assert "Engine core died" in shown and "CUDA out of memory" not in shown

        # opened again: the acknowledged finding is still listed, after the active one
        await pilot.press("f")
        await wait_for(pilot, lambda: isinstance(app.screen, FindingsScreen), "findings panel again")
        assert [f.id for f in app.screen.findings] == ["engine_dead", "cuda_oom"]
        await pilot.press("escape")
        assert await writer.flush(timeout=20), writer.last_error

    # another operator's face reads the head's timeline and applies it to its own engine
    other = Engine(demo_config(), processors=default_processors())
    other.process([FindingRaised(oom), FindingRaised(dead)])
    reader = TimelineSource(head, CLUSTER, own=("bob@h2", "s-bob"))
    entries = await reader.poll()
    assert [e.kind for e in entries] == ["ack"]
    other.process(entries)
    st = other.state.finding_status(oom)
    assert st is not None and st.state == "acknowledged" and st.operator == "ann@h1"
    assert [f.id for f in other.ranked_findings()] == ["engine_dead"]
