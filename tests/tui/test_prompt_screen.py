"""The prompt screen (key P) inside the real app on the demo cluster: the demo's head node answers
through the stand-in API (SimNode.local_port, real HTTP on 127.0.0.1), so the screen is exercised
end to end without a GPU: reasoning and content apart, thinking off, canned prompts, the history,
a stream that hangs cancelled with Esc, and a server that is not up yet.  No sleeps: the tests wait
for the screen's state."""

from __future__ import annotations

import pytest
from conftest import build_app, screen_text, wait_for

from sparktui.tui.prompt import PromptScreen

SERVING_T = 200.0  # the healthy script serves from 71 s


@pytest.fixture(autouse=True)
def _state(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARKTUI_STATE_DIR", str(tmp_path / "state"))
    yield tmp_path / "state"


def _listen_at(sim) -> float:
    name = sim.scene.specs[0].name
    return next(p.at for p in sim.scene.phases[name] if p.name == "serving")


async def _open(app, pilot) -> PromptScreen:
    app.sim.pin_clock(max(_listen_at(app.sim) + 1, SERVING_T) if getattr(app, "_serving", True) else 5.0)
    await pilot.press("P")
    await wait_for(pilot, lambda: isinstance(app.screen, PromptScreen), "the prompt screen")
    return app.screen  # type: ignore[return-value]


async def test_answer_streams_with_reasoning_and_content_apart(_state):
    app = build_app("healthy", t=SERVING_T)
    try:
        async with app.run_test(size=(140, 36)) as pilot:
            screen = await _open(app, pilot)
            await wait_for(pilot, lambda: screen.target is not None, "the API found", rounds=2000)
            assert screen.target.via == "forward" and screen.target.models
            await pilot.press(*"why is the sky blue", "enter")
            await wait_for(pilot, lambda: screen.answer is not None, "the answer", rounds=2000)
            await pilot.pause()
            a = screen.answer
            assert a.reasoning and a.content and a.finish_reason == "stop"
            assert str(screen.query_one("#prompt-reasoning").visual) == a.reasoning
            assert str(screen.query_one("#prompt-content").visual) == a.content
            shown = screen_text(app)
            assert "reasoning" in shown and "content" in shown and "ttft" in shown and "tok/s" in shown
            assert screen.has_class("-done")
            # thinking off: no reasoning comes back, and the reasoning box says so
            await pilot.press("ctrl+t")
            assert "thinking off" in screen_text(app)
            await pilot.press(*"why is the sky blue", "enter")
            await wait_for(pilot, lambda: not screen._worker.is_running, "the second answer", rounds=2000)
            await pilot.pause()
            assert screen.answer.reasoning is None and screen.answer.content
            assert "(none)" in str(screen.query_one("#prompt-reasoning").visual)
            # the history walks back with Up, and is kept for the cluster in a file of the user's own
            await pilot.press("up")
            assert screen.query_one("#prompt-input").value == "why is the sky blue"
            hist = _state / "prompts" / f"{app.engine.config.cluster.name}.jsonl"
            assert hist.exists() and oct(hist.stat().st_mode & 0o777) == "0o600"
    finally:  # the app closes its node handles on exit; this covers a failure before that
        for name in app.sim.node_names:
            await app.sim.node(name).close()


async def test_canned_prompts_and_the_length_explanation(_state):
    app = build_app("healthy", t=SERVING_T)
    async with app.run_test(size=(140, 36)) as pilot:
        screen = await _open(app, pilot)
        await pilot.press("ctrl+n")
        first = screen.canned[0]
        assert screen.query_one("#prompt-input").value == first.text
        assert f"canned {first.name}" in screen_text(app) and str(first.max_tokens) in screen_text(app)
        await pilot.press("ctrl+n")
        assert screen.query_one("#prompt-input").value == screen.canned[1].text
        # 3 tokens: the stand-in's thinking is longer, so content never starts
        screen.max_tokens = 3
        screen.query_one("#prompt-input").value = "hello there"
        await pilot.press("enter")
        await wait_for(pilot, lambda: screen.answer is not None, "the answer", rounds=2000)
        await pilot.pause()
        assert screen.answer.finish_reason == "length" and not screen.answer.content
        assert screen.has_class("-length")
        shown = screen_text(app)
        assert "thinking used up all 3 tokens" in shown and "(none: content is null)" in shown
        await pilot.press("ctrl+r")
        assert screen.max_tokens == 12
        await wait_for(pilot, lambda: not screen._worker.is_running, "the retry", rounds=2000)


async def test_esc_cancels_a_stream_that_hangs_and_the_screen_stays_live(_state):
    app = build_app("healthy", t=SERVING_T)
    async with app.run_test(size=(140, 36)) as pilot:
        screen = await _open(app, pilot)
        await wait_for(pilot, lambda: screen.target is not None, "the API found", rounds=2000)
        # the stand-in's desync fault: generation never finishes (what a hung collective does to serving)
        api = app.sim.node(app.sim.scene.specs[0].name)._api
        api.engine.fault, api.engine.fault_after = "desync", 0
        await pilot.press(*"hello", "enter")
        await wait_for(pilot, lambda: screen.has_class("-streaming"), "streaming")
        await pilot.press("escape")
        await wait_for(pilot, lambda: not screen._worker.is_running, "the cancel", rounds=2000)
        await pilot.pause()
        assert "cancelled mid-stream" in screen_text(app)
        assert isinstance(app.screen, PromptScreen)  # Esc cancelled; it did not leave
        await pilot.press("ctrl+t")  # still answering keys
        assert "thinking off" in screen_text(app)
        await pilot.press("escape")
        assert not isinstance(app.screen, PromptScreen)


async def test_before_the_server_is_up_the_screen_says_so(_state):
    app = build_app("healthy", t=5.0)
    async with app.run_test(size=(140, 36)) as pilot:
        app.sim.pin_clock(5.0)
        await pilot.press("P")
        await wait_for(pilot, lambda: isinstance(app.screen, PromptScreen), "the prompt screen")
        screen = app.screen
        await wait_for(pilot, lambda: screen.has_class("-fail"), "the failure shown", rounds=2000)
        shown = screen_text(app)
        assert "refused" in shown.lower() or "cannot" in shown.lower(), shown
        assert "is the server up?" in shown


async def test_the_demo_serves_metrics_and_a_prompt_moves_them(_state):
    """`sparktui demo`'s wiring: the sim sources plus the head's /metrics scrape of the stand-in API."""
    from sparktui.collectors.serving import ServingSource
    from sparktui.config import demo_config
    from sparktui.engine import Engine
    from sparktui.sim import SimCluster
    from sparktui.tui.app import SparkApp

    config = demo_config()
    sim = SimCluster(config, "healthy", 1.0)
    head = config.head.name
    sim.pin_clock(SERVING_T)  # past the serve point: the sources replay up to it at once
    serving = ServingSource(sim.node(head), config.cluster.serve_host, config.cluster.serve_port,
                            interval=0.2, idle_interval=0.2)
    engine = Engine(config, [*sim.sources(), serving])
    app = SparkApp(engine, nodes=lambda: {n.name: sim.node(n.name) for n in config.nodes}, live=True)

    def served():
        s = engine.state.nodes[head].serving
        return s.sample.requests_total if s is not None and s.up else None

    async with app.run_test(size=(140, 40)) as pilot:
        await wait_for(pilot, lambda: served() is not None, "the first scrape", rounds=5000)
        before = served()
        await pilot.press("P")
        await wait_for(pilot, lambda: isinstance(app.screen, PromptScreen), "the prompt screen")
        screen = app.screen
        await pilot.press(*"hello demo", "enter")
        await wait_for(pilot, lambda: screen.answer is not None, "the answer", rounds=3000)
        # at least by one: the scripted requests the log shows meanwhile count too (test_demo_honest.py)
        await wait_for(pilot, lambda: (served() or 0) >= before + 1, "the counter to move", rounds=5000)
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, PromptScreen), "back to the panes")
        await wait_for(pilot, lambda: "done" in screen_text(app) or "finished" in screen_text(app), "the pane",
                       rounds=2000)


# ------------------------------------------------------------------ max tokens, the tok/s rule
async def test_the_prompt_screen_sets_max_tokens_and_refuses_a_bad_one(make_app):  # the state dir: _state, autouse
    from textual.widgets import Input

    from sparktui.tui.prompt import MaxTokensModal, PromptScreen

    app = make_app(t=30)  # before the API listens: the options line needs no server
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("P")
        await wait_for(pilot, lambda: isinstance(app.screen, PromptScreen), "the prompt screen")
        screen = app.screen
        assert "max tokens server limit" in screen_text(app)
        await pilot.press("ctrl+l")
        await wait_for(pilot, lambda: isinstance(app.screen, MaxTokensModal), "the max tokens box")
        await pilot.press(*"12x", "enter")
        await pilot.pause()
        assert isinstance(app.screen, MaxTokensModal)  # still open, saying why
        assert "whole number from 1" in screen_text(app)
        app.screen.query_one(Input).value = "512"
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.screen is screen, "back on the prompt screen")
        assert screen.max_tokens == 512 and "max tokens 512" in screen_text(app)
        await pilot.press("ctrl+l")  # Esc keeps it
        await wait_for(pilot, lambda: isinstance(app.screen, MaxTokensModal), "the box again")
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is screen, "closed")
        assert screen.max_tokens == 512
        await pilot.press("ctrl+l")  # empty: the server's limit again
        await wait_for(pilot, lambda: isinstance(app.screen, MaxTokensModal), "the box a third time")
        app.screen.query_one(Input).value = ""
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.screen is screen, "closed again")
        assert screen.max_tokens is None


def test_tok_s_is_shown_only_from_16_generated_tokens():
    """One rule for the CLI printer and the TUI's stats line (ChatAnswer.shown_rate)."""
    from sparktui.commands.prompt import _stats as cli_stats
    from sparktui.probes.serving import ChatAnswer
    from sparktui.tui.prompt import _stats as tui_stats

    def answer(n: int) -> ChatAnswer:
        return ChatAnswer("m", "hi", None, "stop", ttft_s=0.2, total_s=0.3, tokens_per_s=41.5,
                          prompt_tokens=9, completion_tokens=n)

    for n, shown in ((5, False), (15, False), (16, True), (200, True)):
        assert ("tok/s" in cli_stats(answer(n))) is shown, n
        assert ("tok/s" in str(tui_stats(answer(n)))) is shown, n
    assert answer(5).to_json()["tokens_per_s"] == 41.5  # the JSON keeps the measurement
