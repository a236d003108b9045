"""The head pane's serving stats: ServingSample events in, numbers and sparklines on screen."""

from __future__ import annotations

from conftest import build_app, screen_text, wait_for

from sparktui.model import ServingSample
from sparktui.sim import DEMO_EPOCH
from sparktui.tui.widgets.serving_stats import ServingStats


def _up(ts: float, **kw) -> ServingSample:
    base = dict(node="spark1", up=True, running=3.0, waiting=1.0, kv_cache_usage=0.42, requests_total=32.0,
                prompt_tokens_total=640.0, generation_tokens_total=2048.0, interval_s=3.0, prompt_tps=213.3,
                generation_tps=57.4, requests_ps=2.0, ttft_mean=0.0123, ttft_p90=0.02, e2e_mean=1.5,
                e2e_p90=2.2, itl_mean=0.0031, ttft_mean_all=0.015, e2e_mean_all=1.4, ts=ts)
    return ServingSample(**{**base, **kw})


async def test_serving_stats_show_numbers_then_collapse_when_down():
    app = build_app(t=60)
    async with app.run_test(size=(160, 48)) as pilot:
        app.refresh_now()
        await pilot.pause()
        head, worker = (p.query_one(ServingStats) for p in app.screen.panes)
        assert not head.display and not worker.display  # nothing served yet: no room taken

        app.engine.process([_up(DEMO_EPOCH + 57), _up(DEMO_EPOCH + 60, running=5.0, generation_tps=80.0)])
        await wait_for(pilot, lambda: head.has_class("-up"), "serving stats shown")
        await pilot.pause()
        text = screen_text(app)
        for want in ("run 5", "wait 1", "KV 42%", "done 32", "prompt 213", "gen 80.0 tok/s",
                     "TTFT 12 ms", "p90 20 ms", "e2e 1.5 s", "ITL 3.1 ms"):
            assert want in text, want
        assert head.display and head.region.height == 3 and not worker.display
        spark_row = str(head.render()).splitlines()[2]
        assert "gen" in spark_row and "█" in spark_row  # the peak of the window is a full block

        # idle interval: no request finished, so the interval mean is unknown: the lifetime one, marked
        app.engine.process([_up(DEMO_EPOCH + 63, ttft_mean=None, ttft_p90=None, generation_tps=0.0)])
        await wait_for(pilot, lambda: "TTFT 15 ms avg" in screen_text(app), "lifetime TTFT while idle")

        app.engine.process([ServingSample(node="spark1", up=False, error="connection refused", ts=DEMO_EPOCH + 66)])
        await wait_for(pilot, lambda: head.has_class("-down"), "collapsed")
        await pilot.pause()
        text = screen_text(app)
        assert "not serving since" in text and "32 done before" in text and "connection refused" in text
        assert head.region.height == 1


async def test_a_server_without_vllm_metrics_degrades_to_one_line():
    app = build_app(t=60)
    async with app.run_test(size=(160, 48)) as pilot:
        app.engine.process([ServingSample(node="spark1", up=True, error="http://127.0.0.1:8000/metrics: HTTP 404 Not Found")])
        head = app.screen.panes[0].query_one(ServingStats)
        await wait_for(pilot, lambda: head.has_class("-up"), "shown")
        await pilot.pause()
        assert "no metrics: http://127.0.0.1:8000/metrics: HTTP 404" in screen_text(app)
        assert head.region.height == 1


async def test_narrow_terminal_keeps_the_numbers():
    app = build_app(t=60)
    async with app.run_test(size=(80, 24)) as pilot:
        app.engine.process([_up(DEMO_EPOCH + 60)])
        head = app.screen.panes[0].query_one(ServingStats)
        await wait_for(pilot, lambda: head.has_class("-up"), "shown")
        await pilot.pause()
        text = screen_text(app)
        assert "run 3" in text and "done 32" in text and "TTFT 12 ms" in text
