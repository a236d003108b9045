"""``--read-only`` is enforced by the engine, not only hidden by the faces: every mutating action of the
registry, run through ``Action.run`` on the embedded demo cluster, is refused with the reason before it
does any IO on a node (and without taking the cluster lock); confirmation, the gate of every destructive
step inside an action, refuses too, even under ``--yes``."""

from __future__ import annotations

import pytest

from sparktui.actions import registry
from sparktui.actions.base import ActionContext, ActionRefused
from sparktui.config import demo_config
from sparktui.sim.cluster import SimCluster

MUTATING = [e for e in registry.ENTRIES if e.mutating]


class Watched:
    """A real sim node that notes every call made on it (to prove a refusal did no IO at all)."""

    def __init__(self, node) -> None:
        self._node = node
        self.name, self.backend = node.name, node.backend
        self.calls: list[str] = []

    def __getattr__(self, attr):
        value = getattr(self._node, attr)
        if callable(value):
            def call(*a, **kw):
                self.calls.append(attr)
                return value(*a, **kw)
            return call
        return value


@pytest.fixture
def cluster():
    cfg = demo_config()
    sim = SimCluster(cfg)
    return cfg, {n.name: Watched(sim.node(n.name)) for n in cfg.nodes}


def test_the_registry_and_the_engine_agree_on_what_mutates():
    # the TUI hides by the registry's flag, the engine refuses by the class's: they must not disagree
    assert {e.name for e in MUTATING} >= {"validate", "build-image", "push-image", "launch", "stop"}
    for e in registry.ENTRIES:
        cls = registry.load(e)
        assert cls is not None, e.name
        assert cls.mutating is e.mutating, e.name


@pytest.mark.parametrize("entry", MUTATING, ids=[e.name for e in MUTATING])
async def test_each_mutating_action_is_refused_in_read_only_mode(entry, cluster, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    cfg, nodes = cluster
    events = []
    asked = []

    async def yes(title, detail):
        asked.append(title)
        return True

    ctx = ActionContext(cfg, nodes, emit=events.append, confirm=yes, read_only=True, assume_yes=True)
    result = await registry.load(entry)().run(ctx)
    assert not result.ok and result.exit_code == 1
    assert result.summary == f"{entry.name} refused: read-only mode (--read-only) forbids changing the cluster"
    assert result.data == {"refused": "read_only"}
    assert [(e.step, e.status) for e in events] == [("start", "fail")] and "read-only" in events[0].message
    assert all(not n.calls for n in nodes.values()), {k: n.calls for k, n in nodes.items()}
    assert not asked and ctx.lock is None and not any(tmp_path.iterdir())


async def test_confirmation_refuses_in_read_only_mode_even_with_yes(cluster):
    cfg, nodes = cluster
    ctx = ActionContext(cfg, nodes, read_only=True, assume_yes=True)
    with pytest.raises(ActionRefused, match="refused in read-only mode"):
        await ctx.confirm("Remove vllm_qwen35 on spark1?", "docker rm -f vllm_qwen35")


async def test_launch_replace_path_is_refused_in_read_only_mode_before_removing(cluster):
    # the one helper that removes other containers (--replace): its confirmation is the gate
    from sparktui.actions.launch import LaunchAction
    from sparktui.probes.cluster import ClusterContainer

    cfg, nodes = cluster
    action = LaunchAction(replace=True)
    # had the confirmation passed, the removal would reach for a Docker client and fail differently
    stale = [ClusterContainer(node="spark1", name="vllm_qwen35", id="x", state="exited", status="Exited (1)",
                              image="i", image_id="sha256:x", labels={})]
    ctx = ActionContext(cfg, nodes, read_only=True, assume_yes=True)
    with pytest.raises(ActionRefused):
        await action._confirm_and_replace(ctx, "Launch?", "docker run ...", stale)
    assert not ctx._cleanups  # the launch's cleanup was never armed


@pytest.mark.parametrize("name", [e.name for e in registry.ENTRIES if not e.mutating])
def test_read_only_actions_stay_offered(name):
    # observers keep doctor, prompt, investigate, load-test: read-only hides only what mutates
    assert registry.load(registry.entry(name)).mutating is False
