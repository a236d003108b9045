"""`sparktui launch` / `stop` on the real-vLLM test bed (issue 10): real sshd + dockerd per node, the
REAL vLLM (CPU build) across the nodes with vLLM's own multi-node executor (TP over gloo between
127.x addresses), real Ray for the Ray path.

Every test launches through the CLI exactly as a user would (`--yes --json`) and checks the cluster
from outside: the bed's dockerd of every node, the serve port over plain HTTP, the openai client.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _json(r: subprocess.CompletedProcess) -> dict:
    try:
        return json.loads(r.stdout)
    except ValueError:
        pytest.fail(f"no JSON (rc {r.returncode}): {r.stdout[-1500:]}\n{r.stderr[-2500:]}")


def _until(pred, timeout: float, what: str, every: float = 0.5, story=None):
    """Poll an outside system (docker, HTTP) until ``pred()`` is truthy; fail with ``what`` (and
    ``story()``: what was seen last, when given)."""
    deadline = time.monotonic() + timeout
    while True:
        got = pred()
        if got:
            return got
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {timeout:.0f} s" + (f" -- {story()}" if story else ""))
        time.sleep(every)


def _alarm_story(engine, rec, t0: float) -> str:
    """When and why each alarm of a healthy window was raised: its time in the recording and its
    evidence (the stall detector names every silent source, its phase and its last line)."""
    from drill_lib.measure import is_alarm

    found = {f.key: f for f in engine.state.findings}
    story = []
    for s in [x for x in [*rec.samples, *rec.errors] if is_alarm(x.id, x.severity)][:3]:
        f = found.get(s.key)
        story.append(f"{s.t - t0:.0f} s in: {s.title} | " + " | ".join((f.evidence if f else ())[:6]))
    return "; ".join(story)


# the suite's healthy window, as the issue asks (the drill healthy-10min runs 10 minutes, and 3 with
# --minutes 3), and the worker-killed budget.  The real-vLLM worker is the suite's critical path: the
# window's 3 minutes are paid for by watching the one cluster of the mp lifecycle test instead of
# launching a second one (a bed of its own on a third worker was tried: two vLLM clusters starting at
# once on 2 cores took the suite to 1081 s)
HEALTHY_MINUTES = 3.0
WORKER_KILLED_S = 5.0


def _cluster_containers(bed, name: str, nodes) -> dict[str, list[str]]:
    return {n: [c for c in bed.containers(n) if c == name] for n in nodes}


def _port(cfg: Path) -> int:
    import tomllib

    return int(tomllib.loads(cfg.read_text())["cluster"]["serve_port"])


def _chat(port: int, **extra) -> str:
    from openai import OpenAI

    client = OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused", timeout=120, max_retries=0)
    r = client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "hi"}], max_tokens=40,
                                       **extra)
    return r.choices[0].message.content or ""


def _launch_ready(bed, cfg: Path, timeout: float = 900, extra: tuple[str, ...] = ()) -> dict:
    r = bed.cli("launch", "--yes", "--json", *extra, config=cfg, timeout=timeout)
    out = _json(r)
    assert r.returncode == 0 and out["ok"], out["summary"] + r.stderr[-3000:]
    return out


def _stop(bed, cfg: Path, name: str, nodes) -> dict:
    r = bed.cli("stop", "--yes", "--json", config=cfg, timeout=180)
    assert r.returncode == 0, r.stdout[-1500:] + r.stderr[-1500:]
    assert _cluster_containers(bed, name, nodes) == {n: [] for n in nodes}, "stop left a container behind"
    return _json(r)


def test_worker_node_down_before_launch_is_found_and_nothing_started(real_vllm_bed, tmp_path):
    """spark2 stopped (sshd and dockerd down) before launch: the missing-worker finding within 60 s,
    and no container of the cluster on any node afterwards."""
    bed = real_vllm_bed
    cfg = bed.write_config(tmp_path / "down.toml", nodes=2, name="tiny_down")
    tb = [str(ROOT / "scripts" / "testbed")]
    subprocess.run(tb + ["stop-node", "spark2"], env=bed.env, check=True, capture_output=True, timeout=120)
    try:
        t0 = time.monotonic()
        r = bed.cli("launch", "--yes", "--json", config=cfg, timeout=120)
        took = time.monotonic() - t0
        out = _json(r)
        assert r.returncode == 1 and took < 60, (took, out["summary"])
        ids = [f["id"] for f in out["findings"]]
        assert ids and ids[0] in ("rendezvous_timeout", "ray_worker_missing"), ids
        assert "spark2" in out["findings"][0]["title"] and "nothing was started" in out["findings"][0]["title"]
        assert bed.containers("spark1").count("tiny_down") == 0
    finally:
        subprocess.run(tb + ["start-node", "spark2"], env=bed.env, check=True, capture_output=True, timeout=300)
    assert bed.containers("spark2").count("tiny_down") == 0


def test_ray_executor_lists_both_nodes_before_serve(real_vllm_bed, tmp_path):
    """executor = "ray": a REAL Ray cluster (real `ray start` head + worker, real `ray status`) and the
    stand-in serving process, because vLLM on CPU refuses the Ray executor ("current platform cpu does
    not support ray"); the stand-in asks Ray for one GPU per node (a STRICT_SPREAD placement group).
    `ray status` in the head container lists both nodes before serve starts."""
    bed = real_vllm_bed
    cfg = bed.write_config(tmp_path / "ray.toml", nodes=2, name="tiny_ray", executor="ray",
                           env={"SPARKTUI_TESTBED_STANDIN": "1"})
    nodes = ["spark1", "spark2"]
    try:
        out = _launch_ready(bed, cfg, 600)
        steps = [s["name"] for s in out["steps"]]
        assert steps.index("ray") < steps.index("serve") < steps.index("ready"), steps
        ray_step = next(s for s in out["steps"] if s["name"] == "ray")
        status = "\n".join(ray_step["data"]["ray_status"])
        active = status.split("Active:", 1)[1].split("Pending:", 1)[0]
        assert active.count("node_") == 2, status
        assert "/2.0 GPU" in status
        assert out["data"]["nodes"]["spark2"]["milestones"][:2] == ["container_started", "ray_joined"]
        assert _chat(_port(cfg))  # the stand-in answers through the same API
    finally:
        _stop(bed, cfg, "tiny_ray", nodes)


def test_spark_vllm_docker_launcher_detached(real_vllm_bed, tmp_path):
    """launcher = "spark-vllm-docker": the test bed's copy of launch-cluster.sh (the 2026-01-28
    interface and behaviour, Ray-based) driven on the head node, detached so its exit trap cannot fire
    when this process ends; the same milestones to ready; stop removes both containers."""
    import socket

    bed = real_vllm_bed
    with socket.socket() as s:  # the script's Ray takes 6379 unless told: the lean bed's launches check that port
        s.bind(("127.0.0.1", 0))
        ray_port = s.getsockname()[1]
    cfg = bed.write_config(tmp_path / "script.toml", nodes=2, name="tiny_script", launcher="spark-vllm-docker",
                           ray_port=ray_port,
                           env={"SPARKTUI_TESTBED_STANDIN": "1", "SPARKTUI_TESTBED_RAY_PORT": str(ray_port)})
    nodes = ["spark1", "spark2"]
    try:
        out = _launch_ready(bed, cfg, 600)
        script = next(s for s in out["steps"] if s["name"] == "script")
        argv = script["data"]["argv"]
        assert argv.index("exec") > argv.index("--name") > argv.index("-n")  # options before exec
        assert _cluster_containers(bed, "tiny_script", nodes) == {n: ["tiny_script"] for n in nodes}
        assert _chat(_port(cfg))
    finally:
        _stop(bed, cfg, "tiny_script", nodes)


@pytest.mark.timeout(1500)  # each launch ends by its own limit first, so stop always finds the lock free
async def test_mp_cluster_whole_life_watched_by_the_tui_engine(real_vllm_life_bed, tmp_path, e2e):
    """One real cluster (mp executor, the REAL vLLM, TP=2 over two nodes), its whole life, watched from
    before anything starts by the headless TUI engine (live sources, the TUI's processors), so the suite
    pays for one real start:
    - a container with the cluster's name is refused with the reason;
    - `launch --yes --replace` removes it and launches; that sparktui is killed (SIGKILL) mid-launch
      and the cluster keeps starting;
    - `launch --yes` again is refused: the killed sparktui's lock is stale; with `--break-lock` it finds
      the cluster by its labels and follows its milestones to ready;
    - `status --json` shows the serve port answering with the real vLLM version, `GET /version` on it
      says 0.32.0, a chat completion gives the model's answer;
    - healthy (issue 29 item 4, the drill `healthy-10min` shortened): everything above (the ranks
      silent while importing torch, a launcher killed, an attach), then load tests, prompts and idle
      (the headless worker silent by design): no error finding raised, nothing ranked first as an
      alarm; `investigate` says healthy, exit 0;
    - worker-killed (the drill, on this cluster): the rank-1 container SIGKILLed while idle:
      worker_died or half_cluster ranked first within 5 s, suspected_hang never ranked first;
      `investigate` names worker_died;
    - a request then kills the head too: a failed prompt names the node whose container exited and its
      code; `status` shows the broken cluster (the cause before the consequence);
    - item 3: `launch --yes --replace` (another process, as an operator would run it) removes the
      containers: every error finding about them is resolved, none is ranked any more, and they are
      still listed; `stop --yes` leaves no container of the cluster on any node.
    The drill's own measuring (scripts/drill_lib/measure.py) judges healthy and worker-killed."""
    import asyncio

    from sparktui.collectors import make_sources
    from sparktui.config import load_config
    from sparktui.engine import Engine
    from sparktui.nodes import make_node
    from sparktui.tui.boot import default_processors

    sys.path.insert(0, str(ROOT / "scripts"))
    from drill_lib.measure import RankRecorder, evaluate, healthy_plan
    from drill_lib.run import run_plan
    from drill_lib.table import by_name

    bed = real_vllm_life_bed
    name, nodes = "tiny_vllm", ["spark1", "spark2"]
    cfg = bed.write_config(tmp_path / "mp2.toml", nodes=2, name=name)
    config = load_config(cfg)
    engine = Engine(config, make_sources(config, {n.name: make_node(n) for n in config.nodes}),
                    processors=default_processors())
    watch = e2e.Watcher(engine)
    rec = RankRecorder(engine)
    t0 = time.monotonic()
    cli = bed.cli

    async def acli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return await asyncio.to_thread(cli, *args, config=cfg, timeout=timeout)

    await engine.start()
    bed.docker("spark2", "run", "-d", "--name", name, bed.info["image"], "sleep", "infinity", check=True)
    try:
        r = await acli("launch", "--yes", "--json")
        out = _json(r)
        assert r.returncode == 1 and "stale" in out["summary"] and "--replace" in out["summary"], out["summary"]
        assert [f["id"] for f in out["findings"]] == ["stale_container"]
        assert "spark2" in out["findings"][0]["title"]
        assert _cluster_containers(bed, name, nodes) == {"spark1": [], "spark2": [name]}

        log = open(tmp_path / "killed.err", "w")
        proc = subprocess.Popen([sys.executable, "-m", "sparktui", "launch", "--config", str(cfg), "--yes",
                                 "--replace"], cwd=str(ROOT), stdout=subprocess.DEVNULL, stderr=log)

        def labelled():
            # started, not only created: a launch killed between create and start leaves a half-made
            # cluster that the next launch rightly refuses (--replace), which is not what this step tries
            for n in nodes:
                lab = bed.docker(n, "inspect", "--format",
                                 '{{index .Config.Labels "sparktui.launch"}} {{.State.Running}}', name).stdout.split()
                if len(lab) != 2 or lab[1] != "true":
                    return None
            return True

        await asyncio.to_thread(_until, labelled, 120, "both containers of the new launch running")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
        # the killed sparktui's cluster lock is left behind: the next launch names it stale and refuses
        # (--yes answers for the action, not for the other operator); --break-lock takes it over
        r = await acli("launch", "--yes", "--json")
        out = _json(r)
        assert r.returncode == 1 and out["data"].get("refused") == "lock", out["summary"]
        assert f"(its process {proc.pid} on" in out["summary"] and "--break-lock" in out["summary"], out["summary"]
        out = await asyncio.to_thread(_launch_ready, bed, cfg, 400, ("--break-lock",))
        d = out["data"]
        assert d["attached"] is True and d["executor"] == "mp" and d["tp"] == 2 and d["vllm_version"] == "0.32.0"
        # issue 32 item 6: the printed URL is this command's forward; the line to keep one is given
        assert "closes when this command exits" in d["serve_hint"] and " -N -L " in d["serve_hint"]
        assert {"arch_resolved", "weights_loaded", "api_ready"} <= set(d["nodes"]["spark1"]["milestones"])
        assert "weights_loaded" in d["nodes"]["spark2"]["milestones"]  # the headless rank loaded its shard

        port = _port(cfg)
        st = _json(await acli("status", "--json"))["cluster"]
        assert st["state"] == "running" and st["serve"]["answering"] and st["serve"]["models"] == ["tiny"]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/version", timeout=10) as resp:
            assert json.loads(resp.read())["version"] == "0.32.0"
        assert await asyncio.to_thread(_chat, port) == bed.info["tiny"]["answer"]

        # load tests, prompts, idle past the old 10 s silence timer, ending idle
        await run_plan(cfg, healthy_plan(HEALTHY_MINUTES))
        healthy = evaluate(rec.samples, 0.0, (), 0.0, rec.errors)
        assert healthy.ok, f"{healthy.why} -- {_alarm_story(engine, rec, t0)}"
        # investigate on the same healthy serving cluster: healthy, exit 0, the evidence saying why
        r = await acli("investigate", "--json", "--interval", "3", timeout=180)
        verdict = _json(r)["data"]["verdict"]
        assert r.returncode == 0 and verdict["state"] == "healthy", verdict

        drill = by_name("worker-killed")
        fault_t = time.monotonic()
        bed.docker("spark2", "kill", "-s", "KILL", name, check=True)
        await rec.until_first(drill.expected, fault_t, WORKER_KILLED_S + 5)
        killed = evaluate(rec.samples, fault_t, drill.expected, WORKER_KILLED_S, rec.errors)
        assert killed.ok, killed.why
        assert "suspected_hang" not in [s.id for s in rec.samples]
        # investigate now: the head still answers /metrics with nothing queued, but rank 1's container is gone
        r = await acli("investigate", "--json", "--interval", "3", timeout=180)
        verdict = _json(r)["data"]["verdict"]
        assert r.returncode == 1 and verdict["finding_ids"][0] == "worker_died", verdict

        with pytest.raises(Exception):  # the head finds out at its next collective, and dies
            await asyncio.to_thread(_chat, port)
        # issue 32 item 7: a failed prompt says which node's container exited, and with what code
        pr = await acli("prompt", "hi", "--no-stream", timeout=180)
        assert pr.returncode == 1, pr.stdout[-1500:]
        assert f"spark2: container {name} exited with code 137" in pr.stderr, pr.stderr[-3000:]

        seen: dict = {}

        def broken():
            r = cli("status", "--json", config=cfg, timeout=120)
            c = _json(r)["cluster"]
            seen.update(rc=r.returncode, state=c["state"], findings=[(f["id"], f["severity"]) for f in c["findings"]])
            if c["state"] in ("half", "exited") and any(f["id"] == "engine_dead" for f in c["findings"]):
                assert r.returncode == 1, "status exited 0 on a broken cluster"  # issue 32 item 2
                return c
            return None

        def story() -> str:
            head = bed.docker("spark1", "logs", "--tail", "25", name, check=False)
            return f"last status {seen}; the head's last lines:\n{(head.stdout + head.stderr)[-4000:]}"

        c = await asyncio.to_thread(_until, broken, 150, "status shows the broken cluster", 2, story)
        ids = [f["id"] for f in c["findings"]]
        assert "half_cluster" in ids and "engine_dead" in ids, ids
        assert ids.index("worker_died") < ids.index("engine_dead"), ids  # the cause before the consequence

        def about_cluster(s) -> list:
            return [f for f in s.active_findings() if f.severity == "error" and f.source in {f"{n}/{name}" for n in nodes}]

        await watch.until(lambda b, s: about_cluster(s), 90, "an error finding about the cluster's containers")
        before = about_cluster(engine.state)

        def all_resolved(b, s) -> bool:
            return all(s.finding_status(f) is not None and s.finding_status(f).state == "resolved" for f in before)

        # the relaunch, from another process as an operator would run it: --replace removes the dead run's
        # containers, which resolves its findings; then it is interrupted (Ctrl+C: it removes what it
        # started).  Waiting for it to serve again proves nothing more here and costs the suite's critical
        # path a minute and a half (lifecycle "relaunched, ready": tests/unit/test_finding_lifecycle.py)
        relaunch = subprocess.Popen([sys.executable, "-m", "sparktui", "launch", "--config", str(cfg), "--yes",
                                     "--replace"], cwd=str(ROOT), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            await watch.until(all_resolved, 120, "the previous run's findings resolved by the relaunch")
        finally:
            if relaunch.poll() is None:
                relaunch.send_signal(signal.SIGINT)
            err = (await asyncio.to_thread(relaunch.communicate, timeout=180))[1]
        assert "Traceback" not in err, err[-3000:]
        ranked = {f.key for f in engine.ranked_findings()}
        assert not ranked & {f.key for f in before}, [f.id for f in engine.ranked_findings()]
        assert {f.key for f in before} <= {f.key for f in engine.all_findings()}  # still listed
        reasons = {engine.state.finding_status(f).reason for f in before}
        assert reasons <= {"container removed", "container replaced", "relaunched, ready"}, reasons
    finally:
        await engine.stop()
        stopped = await asyncio.to_thread(_stop, bed, cfg, name, nodes)
    assert stopped["ok"]
