"""The TUI with the real processors and actions of this build, the TTY guard, user keymaps and
the command-line entry points."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

from conftest import build_app, screen_text, wait_for

from sparktui.config import demo_config
from sparktui.engine import Engine
from sparktui.nodes.base import Node
from sparktui.sim import DEMO_EPOCH, SimCluster
from sparktui.tui import keymap
from sparktui.tui.app import SparkApp
from sparktui.tui.boot import default_processors
from sparktui.tui.screens.action import ActionScreen
from sparktui.tui.screens.findings import FindingsScreen

ROOT = Path(__file__).resolve().parents[2]


def _app_with_processors(scenario: str, t: float) -> SparkApp:
    config = demo_config()
    sim = SimCluster(config, scenario, 1.0)
    engine = Engine(config, [], processors=default_processors())
    engine.process(sim.events_until(t))
    return SparkApp(engine, nodes=lambda: {n.name: sim.node(n.name) for n in config.nodes}, live=False,
                    clock=lambda: DEMO_EPOCH + t)


async def test_oom_demo_finding_reaches_strip_panel_and_log_line():
    app = _app_with_processors("oom", 150)
    findings = app.engine.state.sorted_findings()
    assert findings and findings[0].severity == "error"  # the diagnoser of this build found the OOM
    top = findings[0]
    async with app.run_test(size=(160, 48)) as pilot:
        app.refresh_now()
        await pilot.pause()
        assert "1 error" in screen_text(app) or f"{sum(f.severity == 'error' for f in findings)} error" in screen_text(app)
        await pilot.press("f")
        await wait_for(pilot, lambda: isinstance(app.screen, FindingsScreen), "panel")
        await pilot.press("enter")
        await wait_for(pilot, lambda: not isinstance(app.screen, FindingsScreen), "jump")
        await pilot.pause()
        pane = app.screen.active_pane
        assert pane.node == top.node
        assert top.source.endswith("/" + pane.log_view.source)
        line = app.engine.logs.find(pane.node, pane.log_view.source).get(top.line - 1)
        assert line.strip()[:50] in screen_text(app)


async def test_startup_progress_shows_the_phase_from_milestones():
    app = _app_with_processors("healthy", 200)
    async with app.run_test(size=(160, 48)) as pilot:
        app.refresh_now()
        await pilot.pause()
        text = screen_text(app)
        assert "first prompt answered" in text or "API listening" in text


async def test_doctor_runs_on_the_sim_nodes_in_the_action_screen():
    app = build_app(t=30)
    if not any(e.id == "action-doctor" for e in keymap.entries()):
        raise AssertionError("the doctor action is in this build and must be registered")
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("d")
        await wait_for(pilot, lambda: isinstance(app.screen, ActionScreen), "action screen")
        screen = app.screen
        await app.workers.wait_for_complete()
        await wait_for(pilot, lambda: screen.result is not None, "doctor result")
        assert screen.result.steps  # every check became a step row
        assert len(screen.query_one("DataTable").rows) >= len(screen.result.steps) - 1
        assert ("PASSED" if screen.result.ok else "FAILED") in screen_text(app)


async def test_app_exits_when_stdin_is_no_longer_a_terminal(monkeypatch):
    app = build_app(t=5)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        monkeypatch.setattr(sys, "stdin", io.StringIO(""))
        app._check_terminal()
        await wait_for(pilot, lambda: app._exit or not app.is_running, "exit", rounds=50)
    assert app.return_code == 0


async def test_user_keymap_remaps_by_binding_id(tmp_path, monkeypatch):
    (tmp_path / "sparktui").mkdir()
    (tmp_path / "sparktui" / "keymap.toml").write_text('[keys]\nwrap = "W"\nfilter = "ctrl+b"\n')
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert keymap.user_keymap() == {"wrap": "W"}  # a tmux prefix is refused
    app = build_app(t=30)
    async with app.run_test(size=(120, 40)) as pilot:
        lines = app.screen.active_pane.log_view.lines
        await pilot.press("W")
        await pilot.pause()
        assert lines.wrap


def test_cli_bad_config_is_one_line_exit_2(tmp_path):
    r = subprocess.run([sys.executable, "-m", "sparktui", "--config", str(tmp_path / "missing.toml")],
                       cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1 and "missing.toml" in r.stderr


def test_demo_rejects_a_bad_speed():
    r = subprocess.run([sys.executable, "-m", "sparktui", "demo", "--speed", "0"],
                       cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "speed" in r.stderr and "Traceback" not in r.stderr


class _KeyedNode(Node):
    """Stands in for an SshNode whose handshake met an unknown key (the real one needs sshd)."""

    backend = "ssh"

    def __init__(self, name: str, key) -> None:
        self.name = name
        self.offered_key = key
        self.trusted: list[str] = []

    def trust_offered_key(self, fingerprint: str) -> None:
        self.trusted.append(fingerprint)

    async def close(self) -> None:
        pass


async def test_unknown_host_key_is_shown_and_needs_an_explicit_yes():
    from sparktui.model import HostKeyOffer, NodeReachability
    from sparktui.nodes.hostkeys import OfferedKey
    from sparktui.tui.screens.hostkey import HostKeyModal

    key = OfferedKey(host="127.0.0.3", addr="127.0.0.3", port=22, fingerprint="SHA256:abc123", key_type="ssh-ed25519",
                     public_line="ssh-ed25519 AAAA", changed=False, known_hosts="/tmp/kh")
    node = _KeyedNode("spark2", key)
    app = build_app(t=5)
    app._nodes_factory = lambda: {"spark2": node}
    async with app.run_test(size=(120, 40)) as pilot:
        # the collector's HostKeyError travels on the event; the app asks for the node only to trust
        offer = HostKeyOffer(key.host, key.fingerprint, key.changed)
        app.engine.process([NodeReachability("spark2", False, error="host key unknown", retry_in=10, backend="ssh",
                                             host_key=offer)])
        app.refresh_now()
        await wait_for(pilot, lambda: isinstance(app.screen, HostKeyModal), "host key prompt")
        await wait_for(pilot, lambda: "SHA256:abc123" in screen_text(app), "fingerprint shown")
        await pilot.press("enter")  # the focus is on Refuse
        await wait_for(pilot, lambda: not isinstance(app.screen, HostKeyModal), "refused")
        assert node.trusted == []
        app.refresh_now()  # the same key is not asked twice
        await pilot.pause()
        assert not isinstance(app.screen, HostKeyModal)
        app._host_keys_asked.clear()
        app.refresh_now()
        await wait_for(pilot, lambda: isinstance(app.screen, HostKeyModal), "asked again")
        await pilot.press("y")
        await app.workers.wait_for_complete()
        await wait_for(pilot, lambda: node.trusted == ["SHA256:abc123"], "trusted")
