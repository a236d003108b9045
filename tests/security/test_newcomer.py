"""Issue 14 items 10-16 ("as a new user on the test bed") where no bed is needed: the doctor screen's
columns, doctor's probes kept out of the cluster's panes, milestones and report, doctor findings
reaching the cluster's findings, one meminfo source per node, Ctrl+C with SIGINT ignored, and the
smaller ones (text cut, dimming, dead container's milestone bar, push figures, doctor's CLI, footer,
root cause first).  The bed halves are in tests/e2e/test_newcomer.py."""

from __future__ import annotations

import asyncio
import io
import os
import signal
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

from sparktui.config import NodeConfig, demo_config
from sparktui.engine import Engine
from sparktui.model import (ActionEvent, ContainerChanged, ContainerInfo, ContainerState, Finding, FindingRaised,
                            MemoryInfo, MemorySample, Milestone, MilestoneReached, NodeReachability)
from sparktui.sim import DEMO_EPOCH, SimCluster

from pilot_helpers import screen_text, wait_for

ROOT = Path(__file__).resolve().parents[2]
GIB = 1 << 30


def sim_app(scenario: str = "healthy", t: float = 30.0, processors=()):
    from sparktui.tui.app import SparkApp

    config = demo_config()
    sim = SimCluster(config, scenario, 1.0)
    engine = Engine(config, [], processors=list(processors))
    engine.process(sim.events_until(t))
    return SparkApp(engine, nodes=lambda: {n.name: sim.node(n.name) for n in config.nodes}, live=False,
                    clock=lambda: DEMO_EPOCH + t)


async def until(pilot, cond, what: str, rounds: int = 3000) -> None:
    await wait_for(pilot, cond, what, rounds)


# ------------------------------------------------------------------ items 10 + 12: the doctor screen

async def test_doctor_screen_has_readable_message_and_node_columns_and_its_findings_join_the_cluster():
    from sparktui.tui.screens.action import ActionScreen

    app = sim_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("d")
        await until(pilot, lambda: isinstance(app.screen, ActionScreen), "the doctor screen")
        screen = app.screen
        await until(pilot, lambda: screen.result is not None, "doctor's result")
        await pilot.pause()
        table = screen.query_one("DataTable")
        cols = list(table.columns.values())
        assert [str(c.label) for c in cols] == ["STEP", "STATUS", "NODE", "MESSAGE"]
        assert cols[3].get_render_width(table) > 30  # not the 7 of "started"
        rows = [[str(table.get_cell_at((r, c))) for c in range(4)] for r in range(table.row_count)]
        by_node = {r[2] for r in rows if r[0] == "ssh"}
        assert {"spark1", "spark2"} <= by_node  # each node's check has its row
        ssh1 = next(r for r in rows if r[0] == "ssh" and r[2] == "spark1")
        assert ssh1[3].startswith("reachable"), ssh1
        text = screen_text(app)
        assert "Docker Engine not reachable" in text  # the sim has no Docker: the whole message shows
        # item 12: the failed checks are the cluster's findings now (strip, panel, session, report)
        failed = [f for f in screen.result.findings if f.severity == "error"]
        assert len(failed) >= 2
        app.engine.drain()
        ids = {(f.id, f.node) for f in app.engine.state.findings}
        assert {(f.id, f.node) for f in failed} <= ids


def test_doctor_findings_land_in_the_session_and_its_report(tmp_path):
    from sparktui.commands.report import build_report
    from sparktui.session import Session

    session = Session.create("vllm_qwen35", {"nodes": ["spark1", "spark2"]}, root=tmp_path)
    engine = Engine(demo_config(), [], session=session)
    f = Finding(id="docker_unreachable", severity="error", title="Docker Engine not reachable",
                source="spark2/doctor", node="spark2", advice="start docker")
    engine.process([FindingRaised(f)])  # what the action screen emits for doctor's result
    session.close()
    report = build_report(session.path)
    assert "- findings: 1 error" in report and "Docker Engine not reachable (`docker_unreachable`)" in report


# ------------------------------------------------------------------ item 11: doctor's probes

def probe_event(action: str = "start") -> dict:
    # a docker events entry as the Engine sends it: labels travel in Actor.Attributes
    return {"Type": "container", "Action": action, "id": "c" * 64, "from": "vllm-node",
            "Actor": {"ID": "c" * 64, "Attributes": {"name": "sparktui-probe-0123456789", "image": "vllm-node",
                                                    "sparktui.probe": "1"}},
            "timeNano": 1_700_000_000_000_000_000}


def test_a_probe_is_recognised_by_label_and_by_name():
    from sparktui.probes.containers import from_event, from_inspect, is_own_probe
    from sparktui.probes.image import PROBE_LABEL

    assert is_own_probe(from_event(probe_event(), "start"))
    attrs = {"Id": "d" * 64, "Name": "/whatever", "Config": {"Image": "x", "Labels": {PROBE_LABEL: "1"}},
             "State": {"Status": "running"}}
    assert is_own_probe(from_inspect(attrs))
    cluster = {**attrs, "Name": "/vllm_qwen35", "Config": {"Image": "x", "Labels": {"sparktui.cluster": "q"}}}
    assert not is_own_probe(from_inspect(cluster))


def test_a_probe_starting_is_no_startup_milestone():
    from sparktui.diagnosis.diagnoser import Diagnoser

    d = Diagnoser()
    probe = ContainerInfo(id="c" * 64, name="sparktui-probe-0123456789", image="vllm-node",
                          labels=(("sparktui.probe", "1"),))
    assert d.feed(ContainerChanged(node="spark1", container=probe)) == []
    real = ContainerInfo(id="e" * 64, name="vllm_qwen35", image="vllm-node")
    got = d.feed(ContainerChanged(node="spark1", container=real))
    assert [e.milestone.id for e in got] == ["container_started"]


async def test_docker_watch_keeps_probe_events_out_of_the_cluster():
    from sparktui.collectors.docker_watch import DockerWatch, LogState

    out: list = []
    w = DockerWatch(node=None, name="spark1", emit=out.append, logs=LogState())
    await w._on_event(probe_event("start"))  # returns before inspecting or following: no client needed
    await w._on_event(probe_event("die"))
    assert out == [] and w.followers == {} and w.known == {}


def test_report_of_an_old_session_skips_probe_milestones(tmp_path):
    from sparktui.commands.report import build_report
    from sparktui.session import Session

    session = Session.create("vllm_qwen35", {"nodes": ["spark1"]}, root=tmp_path)
    engine = Engine(demo_config(), [], session=session)
    engine.process([
        MilestoneReached(Milestone(id="weights_loading", text="loading weights 3/40", node="spark1",
                                   source="spark1/vllm_qwen35", progress=0.075, ts=DEMO_EPOCH)),
        MilestoneReached(Milestone(id="container_started", text="container started: vllm-node", node="spark1",
                                   source="spark1/sparktui-probe-0123456789", ts=DEMO_EPOCH + 5)),
    ])
    session.close()
    report = build_report(session.path)
    progress = report.split("## Startup progress", 1)[1].split("##", 1)[0]
    assert "weights_loading" in progress and "probe" not in progress


# ------------------------------------------------------------------ item 13: one meminfo per node

MEMINFO = "MemTotal:       124571068 kB\nMemFree:         1000000 kB\nMemAvailable:   120000000 kB\nCached: 0 kB\n"


async def test_memory_sampler_and_status_read_the_nodes_meminfo_path(tmp_path):
    from sparktui.collectors.samplers import memory_loop
    from sparktui.commands.status import _memory
    from sparktui.nodes.local import LocalNode

    path = tmp_path / "meminfo"
    path.write_text(MEMINFO)
    cfg = NodeConfig(name="spark1", backend="local", meminfo_path=str(path))
    node = LocalNode(cfg)
    got: list = []
    seen = asyncio.Event()

    def emit(ev) -> None:
        got.append(ev)
        seen.set()

    task = asyncio.create_task(memory_loop(node, "spark1", emit, 60.0, cfg.meminfo_path))
    try:
        await asyncio.wait_for(seen.wait(), 10)
    finally:
        task.cancel()
    assert got[0].memory.total == 124571068 * 1024  # the file's figure, not this host's /proc/meminfo
    snap = await _memory(node, cfg.meminfo_path)
    assert snap["total"] == 124571068 * 1024


async def test_the_tuis_node_collectors_read_the_nodes_meminfo_path(tmp_path):
    """What the TUI runs per node (NodeCollectors) on the local backend: its memory samples are the file's."""
    from sparktui.collectors import NodeCollectors
    from sparktui.nodes.local import LocalNode

    path = tmp_path / "meminfo"
    path.write_text(MEMINFO)
    cfg = NodeConfig(name="spark1", backend="local", meminfo_path=str(path),
                     docker_socket=str(tmp_path / "no-docker.sock"))
    coll = NodeCollectors(LocalNode(cfg), cfg)
    first: asyncio.Future = asyncio.get_running_loop().create_future()

    def emit(ev) -> None:
        if isinstance(ev, MemorySample) and not first.done():
            first.set_result(ev)

    task = asyncio.create_task(coll.run(emit))
    try:
        sample = await asyncio.wait_for(first, 10)
    finally:
        task.cancel()
        await coll.close()
    assert sample.memory.total == 124571068 * 1024


# ------------------------------------------------------------------ item 14: Ctrl+C with SIGINT ignored

WAITING_ACTION = textwrap.dedent("""
    import asyncio, sys
    from types import SimpleNamespace
    from sparktui.actions.base import Action
    from sparktui.actions import cli_runner

    class Wait(Action):
        name = "wait"
        async def execute(self, ctx):
            async def cleanup():
                print("CLEANED UP", file=sys.stderr, flush=True)
            ctx.on_cleanup(cleanup)
            async with ctx.step("wait"):
                print("WAITING", file=sys.stderr, flush=True)
                await asyncio.Event().wait()

    sys.exit(cli_runner.run_action(SimpleNamespace(config=sys.argv[1], yes=True), lambda c: Wait()))
""")


def test_ctrl_c_cancels_an_action_even_when_sigint_was_ignored_at_start(tmp_path):
    cfg = tmp_path / "cluster.toml"
    cfg.write_text('[cluster]\nname = "x"\n\n[[node]]\nname = "n1"\nbackend = "local"\nrole = "head"\n')
    proc = subprocess.Popen([sys.executable, "-c", WAITING_ACTION, str(cfg)], cwd=str(ROOT), stderr=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))  # `trap "" INT`
    try:
        seen = []
        for line in proc.stderr:
            seen.append(line)
            if "WAITING" in line:
                break
        assert any("WAITING" in s for s in seen), "".join(seen)
        proc.send_signal(signal.SIGINT)
        rest = proc.communicate(timeout=30)[1]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, rest
    assert "CLEANED UP" in rest and "cancelled" in rest


# ------------------------------------------------------------------ item 16: the smaller ones

def node_with(**kw):
    from sparktui.state import NodeState

    return replace(NodeState(name="spark1"), **kw)


def test_memory_line_fits_its_pane_without_cutting_vllm_wants():
    from sparktui.tui.widgets import node_stats

    ns = node_with(memory=MemoryInfo(total=int(118.8 * GIB), available=int(110.8 * GIB), cached=int(3.1 * GIB),
                                     psi_some_avg10=0.0))
    for width in (76, 60, 50):  # a 160-column screen's pane, and narrower ones
        line = node_stats.memory(ns, width, 0.9).plain
        assert len(line) <= width, (width, line)
        assert "vLLM wants 106.9 (0.90×)" in line, line
    wide = node_stats.memory(ns, 120, 0.9).plain
    assert "cache 3.1" in wide and "PSI 0.0%" in wide


def test_startup_bar_says_stopped_when_the_container_died():
    from types import MappingProxyType

    from sparktui.tui.widgets import node_stats

    ms = {"weights_loading": Milestone(id="weights_loading", text="loading weights: 36/40 shards", node="spark1",
                                       source="spark1/vllm_qwen35", progress=0.9)}
    running = ContainerInfo(id="a" * 64, name="vllm_qwen35", image="vllm-node")
    ns = node_with(milestones=MappingProxyType(ms), containers=MappingProxyType({"vllm_qwen35": running}))
    assert node_stats.startup(ns)[1].plain.startswith("▶ loading weights 90%")
    dead = replace(running, state=ContainerState.EXITED, exit_code=1)
    ns = replace(ns, containers=MappingProxyType({"vllm_qwen35": dead}))
    label = node_stats.startup(ns)[1].plain
    assert label.startswith("✖ stopped at loading weights 90%") and "exit 1" in label


def test_push_figures_never_show_more_sent_than_the_total():
    from sparktui.actions.push import push_progress

    mb = 1_000_000
    assert push_progress(100 * mb, 263 * mb, 1.0).startswith("100 / ~263 MB")
    over = push_progress(269 * mb, 263 * mb, 2.0)
    assert "269 / 263" not in over and over.startswith("269 MB") and "MB/s" in over


def test_doctor_progress_is_not_printed_when_its_table_follows():
    from sparktui.actions.cli_runner import _Printer

    piped = io.StringIO()
    p = _Printer(piped, transient=True)
    p(ActionEvent(action="doctor", step="ssh", status="ok", message="reachable", node="spark1"))
    p.finish()
    assert piped.getvalue() == ""
    plain = io.StringIO()
    _Printer(plain)(ActionEvent(action="validate", step="start", status="ok", message="started"))
    assert "start: started" in plain.getvalue()  # other actions keep their progress lines


async def test_unreachable_node_values_are_dimmed_and_footer_shows_action_keys():
    app = sim_app(t=90)
    async with app.run_test(size=(160, 48)) as pilot:
        app.refresh_now()
        # the footer paints after the first refresh: on a loaded machine a pause is not enough
        await until(pilot, lambda: "d Doctor" in screen_text(app).splitlines()[-1], "the footer's keys")
        footer = screen_text(app).splitlines()[-1]
        for key in ("d Doctor", "b Build", "p Push", "l Launch", "x Stop", "i Investigate"):
            assert key in footer, footer
        pane = app.screen.panes[1]
        mem = pane.query_one(".memory")
        assert mem.styles.text_opacity == 1.0
        app.engine.process([NodeReachability(node=pane.node, reachable=False, since=DEMO_EPOCH + 80,
                                             error="connection lost")])
        app.refresh_now()
        await pilot.pause()
        assert pane.has_class("-unreachable")
        assert mem.styles.text_opacity < 1.0 and pane.query_one(".gpu").styles.text_opacity < 1.0
        assert pane.query_one(".pane-header").styles.text_opacity == 1.0  # "unreachable since" stays bright


def test_findings_strip_names_the_root_cause_not_the_newest():
    from sparktui.tui.widgets.findings_strip import summary

    engine = Engine(demo_config(), [])
    oom = Finding(id="cuda_oom", severity="error", title="CUDA out of memory", source="spark1/vllm_qwen35",
                  line=120, node="spark1", ts=DEMO_EPOCH)
    dead = Finding(id="engine_dead", severity="error", title="vLLM engine died", source="spark1/vllm_qwen35",
                   line=140, node="spark1", ts=DEMO_EPOCH + 1)
    engine.process([FindingRaised(dead), FindingRaised(oom)])  # arrival order must not matter
    ranked = engine.ranked_findings()
    assert [f.id for f in ranked] == ["cuda_oom", "engine_dead"]
    text = summary(ranked).plain
    assert "root cause: CUDA out of memory (spark1)" in text and "vLLM engine died" not in text
