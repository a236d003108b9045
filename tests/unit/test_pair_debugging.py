"""Pair debugging (issue 32 item 4), engine side, on a real LocalNode in a throwaway $HOME: the lock is
given back while a question is open and taken after Yes; a No goes on the shared timeline; the
operator's name (--operator / $SPARKTUI_OPERATOR) is the one in the lock and the timeline; read-only
refuses the actions that load the API or start probe containers, from the one registry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sparktui import cli
from sparktui.actions import registry
from sparktui.actions.base import Action, ActionContext, ActionResult
from sparktui.actions.lock import LABEL_OPERATOR, ClusterLock, LockHeld, owner_labels
from sparktui.actions.shared_timeline import TimelineWriter
from sparktui.config import demo_config, parse_config
from sparktui.identity import ENV
from sparktui.nodes.local import LocalNode
from sparktui.sim.cluster import SimCluster

CLUSTER = "vllm_pair"
CFG = f'[cluster]\nname = "{CLUSTER}"\n[[node]]\nname = "spark1"\nbackend = "local"\n'


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("SPARKTUI_LOCK_ROOT", raising=False)
    monkeypatch.setenv(ENV, "alice")
    return tmp_path


@pytest.fixture
def cfg():
    return parse_config(CFG)


def local(cfg) -> LocalNode:
    return LocalNode(cfg.nodes[0])


class Ask(Action):
    """A real mutating action that asks once, then notes whether the lock is its own."""

    name = "ask"
    mutating = True

    def __init__(self) -> None:
        self.after_yes: str | None = None

    async def execute(self, ctx: ActionContext) -> ActionResult:
        if not await ctx.confirm("Remove vllm_pair on spark1?", "docker rm -f vllm_pair"):
            return ActionResult(self.name, False, "not confirmed")
        self.after_yes = ctx.lock.token
        return ActionResult(self.name, True, "done")


async def test_the_lock_is_free_while_the_question_is_open_and_taken_after_yes(home, cfg):
    seen: list[object] = []

    async def answer(title, detail):
        seen.append(await ClusterLock(local(cfg), CLUSTER).show())  # what another operator meets now
        return True

    action = Ask()
    result = await action.run(ActionContext(cfg, {"spark1": local(cfg)}, confirm=answer))
    assert result.ok, result.summary
    assert seen == [None]  # nobody is blocked by a dialog someone walked away from
    assert action.after_yes  # ... and the changes after Yes run under the lock
    assert not (home / ".local/state/sparktui/clusters" / CLUSTER / "lock.d").exists()  # given back at the end


async def test_a_lock_taken_while_the_question_was_open_refuses_after_yes_naming_the_holder(home, cfg, monkeypatch):
    other = ClusterLock(local(cfg), CLUSTER)

    async def answer(title, detail):
        monkeypatch.setenv(ENV, "bob")  # another operator takes it while alice reads the plan
        await other.acquire(ActionContext(cfg, {}), "stop")
        monkeypatch.setenv(ENV, "alice")
        return True

    action = Ask()
    result = await action.run(ActionContext(cfg, {"spark1": local(cfg)}, confirm=answer))
    assert not result.ok and action.after_yes is None  # nothing ran after the Yes
    assert result.data["refused"] == "lock" and result.data["lock_holder"]["operator"] == "bob"
    assert "taken while the question was open" in result.summary and "stop held by bob" in result.summary
    assert "\n" not in result.summary
    assert (await other.show()).token == other.token  # bob's lock untouched
    await other.release()


async def test_a_declined_question_goes_on_the_shared_timeline(home, cfg):
    writer = TimelineWriter(local(cfg), CLUSTER, session="s-alice")
    ctx = ActionContext(cfg, {"spark1": local(cfg)}, confirm=lambda t, d: _no())
    ctx.timeline = writer
    result = await Ask().run(ctx)
    assert not result.ok
    assert await writer.flush(timeout=20), writer.last_error
    recs = [json.loads(x) for x in (home / ".local/state/sparktui/clusters" / CLUSTER / "timeline.jsonl")
            .read_text().splitlines()]
    declined = [r for r in recs if r["step"] == "confirm"]
    assert len(declined) == 1 and declined[0]["status"] == "cancelled" and declined[0]["operator"] == "alice"
    assert declined[0]["message"].startswith("alice declined ask: Remove vllm_pair on spark1?")


async def _no() -> bool:
    return False


async def test_the_operator_name_is_the_one_in_the_lock_labels_and_timeline(home, cfg, monkeypatch):
    monkeypatch.setenv(ENV, "alice on laptop")  # two engineers on one root@vm account: a name each
    mine = ClusterLock(local(cfg), CLUSTER)
    await mine.acquire(ActionContext(cfg, {}), "launch")
    monkeypatch.setenv(ENV, "bob")
    with pytest.raises(LockHeld, match=r"launch held by alice on laptop \(pid"):
        await ClusterLock(local(cfg), CLUSTER).acquire(ActionContext(cfg, {}), "stop")
    assert owner_labels(ActionContext(cfg, {}), "stop")[LABEL_OPERATOR] == "bob"
    assert TimelineWriter(local(cfg), CLUSTER, session="s").operator == "bob"
    await mine.release()


@pytest.mark.parametrize("bad, why", [("a\tb", "control characters"), ("x" * 65, "at most 64"), ("  ", "empty")])
def test_a_bad_operator_name_is_one_line_and_exit_2(bad, why, capsys, monkeypatch):
    monkeypatch.setenv(ENV, "placeholder")
    with pytest.raises(SystemExit) as exc:
        cli.main(["--operator", bad, "completion", "bash"])
    assert exc.value.code == 2 and "argument --operator: " in capsys.readouterr().err
    monkeypatch.setenv(ENV, bad)
    assert cli.main(["completion", "bash"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"sparktui: ${ENV}: ") and why in err


def test_the_operator_option_names_this_process(capsys, monkeypatch):
    monkeypatch.setenv(ENV, "placeholder")  # restored after the test: main sets it for the process
    assert cli.main(["--operator", " carol ", "completion", "bash"]) == 0
    import os

    assert os.environ[ENV] == "carol"


@pytest.mark.parametrize("name, reason", [("doctor", "probe containers"), ("load-test", "load on the cluster's API")])
async def test_read_only_refuses_the_actions_that_load_or_probe(name, reason, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    entry = registry.entry(name)
    assert entry.loads and not entry.mutating  # said in the one registry, not in a face
    cfg = demo_config()
    sim = SimCluster(cfg)
    events = []
    ctx = ActionContext(cfg, {n.name: sim.node(n.name) for n in cfg.nodes}, emit=events.append, read_only=True)
    result = await registry.load(entry)().run(ctx)
    assert not result.ok and result.data == {"refused": "read_only"}
    assert result.summary == entry.read_only_refusal() and reason in result.summary
    assert [(e.step, e.status) for e in events] == [("start", "fail")]


def test_the_cli_load_test_is_refused_in_read_only_mode_too(capsys, monkeypatch):
    monkeypatch.setenv("SPARKTUI_API_BASE", "http://127.0.0.1:9")  # nothing is sent: refused before
    assert cli.main(["--read-only", "load-test", "--requests", "1"]) == 1
    err = capsys.readouterr().err
    assert err == f"sparktui: {registry.entry('load-test').read_only_refusal()}\n"
