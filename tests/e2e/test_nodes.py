"""Live collectors over real SSH + real Docker Engines (scripts/testbed): containers appear, logs
stream into the engine and the session file, nodes drop and come back without losing a line."""

from __future__ import annotations

import asyncio
import json
import shutil
import time
from pathlib import Path

import pytest

from sparktui.config import load_config
from sparktui.engine import Engine
from sparktui.model import ContainerChanged, ContainerState, DockerStatus, GpuSample, MemorySample, NodeReachability
from sparktui.collectors import make_sources
from sparktui.nodes import make_node
from sparktui.session import Session

from ssh_helpers import key_fingerprint

pytestmark = pytest.mark.e2e

COUNTER = "i=0; while true; do i=$((i+1)); echo \"line $i of {name}\"; sleep {pause}; done"


@pytest.fixture
async def live(bed, e2e):
    config = load_config(bed.config)
    nodes = {n.name: make_node(n) for n in config.nodes}
    session = Session.create("e2e")
    engine = Engine(config, make_sources(config, nodes), session=session)
    watch = e2e.Watcher(engine)
    watch.run_async = e2e.run_async
    await engine.start()
    await watch.until(lambda b, s: all(s.nodes[n].reachable for n in nodes), 15, "both nodes reachable")
    yield engine, watch, bed
    await engine.stop()
    session.close()


def persisted(engine, node: str, source: str) -> str:
    p = engine.session.log_path(node, source)
    return p.read_text() if p.exists() else ""


def docker_logs(bed, node: str, name: str) -> str:
    return bed.docker(node, "logs", "--timestamps", name).stdout


def start_counter(bed, cleanup, node: str, name: str, pause: float = 0.05) -> None:
    cleanup.append((node, name))
    bed.docker(node, "run", "-d", "--name", name, "--network", "host", "sparktui-base:bookworm",
               "sh", "-c", COUNTER.format(name=name, pause=pause))


async def stop_and_compare(engine, watch, bed, node: str, name: str) -> None:
    """Stop the container (its log is then final) and require the persisted copy to equal it."""
    bed.docker(node, "stop", "-t", "1", name)
    expected = docker_logs(bed, node, name)
    assert expected.count("\n") > 10
    await watch.until(lambda b, s: persisted(engine, node, name) == expected or
                      persisted(engine, node, name).count("\n") > expected.count("\n"),
                      15, f"persisted log of {name} catching up")
    got = persisted(engine, node, name).splitlines()
    want = expected.splitlines()
    assert len(got) == len(set(got)), "duplicate lines in the persisted log"
    assert got == want


async def test_container_on_spark2_appears_within_2s_and_streams(live, container_name, cleanup):
    engine, watch, bed = live
    t0 = time.monotonic()
    start_counter(bed, cleanup, "spark2", container_name)
    took = time.monotonic() - t0
    took += await watch.until(
        lambda b, s: container_name in s.nodes["spark2"].containers and
        s.nodes["spark2"].containers[container_name].state is ContainerState.RUNNING, 2, "container in spark2's pane")
    assert took <= 2.0
    await watch.until(lambda b, s: (ser := engine.logs.find("spark2", container_name)) is not None
                      and ser.total >= 20, 10, "20 lines streamed into the engine")
    series = engine.logs.find("spark2", container_name)
    assert series.get(0) == f"line 1 of {container_name}"
    assert persisted(engine, "spark2", container_name).splitlines()[0].endswith(f" line 1 of {container_name}")
    await stop_and_compare(engine, watch, bed, "spark2", container_name)


async def test_stop_node_unreachable_then_resumes_without_gap(live, container_name, cleanup):
    engine, watch, bed = live
    start_counter(bed, cleanup, "spark2", container_name)
    await watch.until(lambda b, s: persisted(engine, "spark2", container_name).count("\n") >= 10, 10, "lines flowing")
    t0 = time.monotonic()
    stopper = asyncio.create_task(watch.run_async(*bed.testbed("stop-node", "spark2")))
    try:
        took = await watch.until(lambda b, s: s.nodes["spark2"].reachable is False, 5, "spark2 unreachable")
        assert took <= 5.0
        # spark1 keeps updating while spark2 is down
        mark = time.time()
        await watch.until(lambda b, s: any(isinstance(e, MemorySample) and e.node == "spark1" and e.ts > mark
                                           for e in b), 5, "spark1 memory sample while spark2 is down")
        rc, out = await stopper
        assert rc == 0, out
        down = engine.state.nodes["spark2"]
        assert down.unreachable_since is not None and down.unreachable_since <= time.time()
        t1 = time.monotonic()
        rc, out = await watch.run_async(*bed.testbed("start-node", "spark2"))
        assert rc == 0, out
        await watch.until(lambda b, s: s.nodes["spark2"].reachable is True, 5, "spark2 reconnected")
        assert time.monotonic() - t1 <= 5.0 + 5.0  # start-node itself waits for dockerd (a few s)
    finally:
        if not stopper.done():
            await stopper
        await watch.run_async(*bed.testbed("start-node", "spark2"))
    # the container ran on (live-restore) while we were away: every line must arrive, once
    await stop_and_compare(engine, watch, bed, "spark2", container_name)


async def test_dockerd_restart_resumes_without_gap(live, container_name, cleanup):
    engine, watch, bed = live
    start_counter(bed, cleanup, "spark1", container_name)
    await watch.until(lambda b, s: persisted(engine, "spark1", container_name).count("\n") >= 10, 10, "lines flowing")
    rc, out = await watch.run_async(*bed.testbed("restart-docker", "spark1"))
    assert rc == 0, out
    assert engine.state.nodes["spark1"].reachable  # SSH never dropped
    n = persisted(engine, "spark1", container_name).count("\n")
    await watch.until(lambda b, s: persisted(engine, "spark1", container_name).count("\n") > n + 5, 15,
                      "lines flowing again after the restart")
    # the outage was shown (docker down while SSH stayed up) and cleared once dockerd answered again
    assert any(isinstance(e, DockerStatus) and e.node == "spark1" and not e.available for e in watch.events)
    await watch.until(lambda b, s: s.nodes["spark1"].docker_error is None, 10, "docker outage cleared")
    await stop_and_compare(engine, watch, bed, "spark1", container_name)


async def test_killed_container_shows_137_and_keeps_last_lines(live, container_name, cleanup):
    engine, watch, bed = live
    cleanup.append(("spark1", container_name))
    bed.docker("spark1", "run", "-d", "--name", container_name, "--network", "host", "sparktui-base:bookworm",
               "sh", "-c", "for i in 1 2 3 4 5; do echo last-words $i; done; exec sleep 600")
    await watch.until(lambda b, s: "last-words 5" in persisted(engine, "spark1", container_name), 10, "lines in")
    bed.docker("spark1", "kill", container_name)
    await watch.until(lambda b, s: (c := s.nodes["spark1"].containers.get(container_name)) is not None
                      and c.state is ContainerState.EXITED, 5, "container shown as exited")
    c = engine.state.nodes["spark1"].containers[container_name]
    assert c.exit_code == 137 and c.finished_at is not None
    assert any(isinstance(e, ContainerChanged) and e.container.name == container_name and e.container.exit_code == 137
               for e in watch.events)
    text = persisted(engine, "spark1", container_name)
    assert [ln.split(" ", 1)[1] for ln in text.splitlines()] == [f"last-words {i}" for i in range(1, 6)]
    assert text == docker_logs(bed, "spark1", container_name)


async def test_gb10_nvidia_smi_is_handled(bed, tmp_path, e2e):
    """A GB10-style nvidia-smi on spark1's PATH: memory from the node's meminfo, per-process GPU memory."""
    bindir = Path(bed.nodes["spark1"]["bin"])
    fake = bindir / "nvidia-smi"
    shutil.copy(e2e.ROOT / "tests" / "fixtures" / "nvidia-smi" / "gb10-nvidia-smi", fake)
    (bindir / "nvidia-smi.json").write_text(json.dumps({"apps": [[4242, "/usr/bin/python3", 98304]]}))
    try:
        config = load_config(bed.config)
        nodes = {n.name: make_node(n) for n in config.nodes}
        engine = Engine(config, make_sources(config, nodes))
        watch = e2e.Watcher(engine)
        await engine.start()
        try:
            # two samples: the one-shot probe and one from the long-lived `-l` loop
            await watch.until(lambda b, s: sum(bool(isinstance(e, GpuSample) and e.node == "spark1" and e.gpus)
                                               for e in watch.events) >= 2, 10, "GB10 GPU samples")
            await watch.until(lambda b, s: s.nodes["spark1"].memory is not None, 5, "memory sample")
            st = engine.state.nodes["spark1"]
            g = st.gpus[0]
            assert g.name == "NVIDIA GB10" and g.unified_memory and g.mem_used_bytes is None
            assert g.processes[0].pid == 4242 and g.processes[0].used_memory_bytes == 98304 * 1024 * 1024
            meminfo = Path(config.node("spark1").meminfo_path).read_text()  # the node's one source (a seeded bed: GB10's)
            assert st.memory.total == int(meminfo.split()[1]) * 1024
            assert engine.state.nodes["spark2"].gpu_available is False  # no nvidia-smi there
        finally:
            await engine.stop()
        r = e2e.run_cli("status", "--json", "--config", str(bed.config))
        doc = json.loads(r.stdout)
        spark1 = next(n for n in doc["nodes"] if n["name"] == "spark1")
        gpu = spark1["gpu"]["gpus"][0]
        assert gpu["mem_total_bytes"] is None and gpu["processes"][0]["used_memory_bytes"] == 98304 * 1024 * 1024
        assert spark1["memory"]["total"] > 0
    finally:
        fake.unlink(missing_ok=True)
        (bindir / "nvidia-smi.json").unlink(missing_ok=True)


async def test_unknown_host_key_in_collectors_reports_fingerprint(bed, tmp_path):
    import dataclasses

    from sparktui.collectors import NodeCollectors

    config = load_config(bed.config)
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    cfg = dataclasses.replace(config.node("spark1"), known_hosts=str(empty))
    events: list = []
    got = asyncio.Event()

    def emit(e):
        events.append(e)
        if isinstance(e, NodeReachability) and not e.reachable:
            got.set()

    col = NodeCollectors(make_node(cfg), cfg, config)
    task = asyncio.create_task(col.run(emit))
    try:
        await asyncio.wait_for(got.wait(), 10)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await col.close()
    e = next(x for x in events if isinstance(x, NodeReachability))
    fp = key_fingerprint(bed.host_key_pub("spark1"))
    assert fp in (e.error or "") and "unknown" in e.error
    assert e.retry_in == 10.0  # a host-key problem needs a person: no fast retries
    assert not any(isinstance(x, MemorySample) for x in events)


async def test_host_key_prompt_yes_records_key_and_connects(bed, tmp_path):
    """The TUI path: the collector asks (HostKeyModal would), a yes writes that key and connects."""
    import dataclasses

    from sparktui.collectors import NodeCollectors

    config = load_config(bed.config)
    kh = tmp_path / "known_hosts"
    kh.write_text("")
    cfg = dataclasses.replace(config.node("spark2"), known_hosts=str(kh))
    asked = []

    async def prompt(err):
        asked.append(err)
        return True

    up = asyncio.Event()
    col = NodeCollectors(make_node(cfg), cfg, config)
    col.host_key_prompt = prompt
    task = asyncio.create_task(col.run(lambda e: up.set() if isinstance(e, NodeReachability) and e.reachable else None))
    try:
        await asyncio.wait_for(up.wait(), 10)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await col.close()
    assert len(asked) == 1 and asked[0].fingerprint == key_fingerprint(bed.host_key_pub("spark2"))
    assert not asked[0].changed
    addr = bed.nodes["spark2"]["address"]  # known_hosts names a port other than 22 with the address
    assert kh.read_text().split()[0] == (addr if cfg.port in (0, 22) else f"[{addr}]:{cfg.port}")


async def test_ssh_config_alias_and_proxyjump(bed, tmp_path):
    """Host aliases, User, IdentityFile, UserKnownHostsFile and ProxyJump come from ssh config."""
    from sparktui.config import NodeConfig
    from sparktui.nodes.ssh import SshNode

    config = load_config(bed.config)
    s1, s2 = config.node("spark1"), config.node("spark2")
    conf = tmp_path / "ssh_config"
    conf.write_text(f"""\
Host hop
    HostName {s1.host}
    Port {s1.port or 22}
    User root
    IdentityFile {s1.identity_file}
    UserKnownHostsFile {s1.known_hosts}
Host far
    HostName {s2.host}
    Port {s2.port or 22}
    User root
    ProxyJump hop
    IdentityFile {s2.identity_file}
    UserKnownHostsFile {s2.known_hosts}
""")
    for alias, want in (("hop", s1), ("far", s2)):
        node = SshNode(NodeConfig(name=alias, host=alias, ssh_config=str(conf), docker_socket=want.docker_socket))
        try:
            await node.connect()
            res = await node.run(["sh", "-c", "echo $DOCKER_HOST"])
            assert res.text.strip() == f"unix://{want.docker_socket}"
            # a hostile-looking argument stays one argument: nothing is executed from it
            marker = tmp_path / "pwned"
            res = await node.run(["ls", f"a b'$(touch {marker})"])
            assert res.returncode != 0 and not marker.exists()
        finally:
            await node.close()


async def test_rm_container_keeps_its_lines_in_the_session(live, container_name):
    """A --rm container takes its log with it from Docker, not from the session file."""
    engine, watch, bed = live
    bed.docker("spark1", "run", "-d", "--rm", "--name", container_name, "--network", "host",
               "sparktui-base:bookworm", "sh", "-c", "for i in $(seq 1 50); do echo rm-line $i; done; sleep 0.5")
    await watch.until(lambda b, s: (c := s.nodes["spark1"].containers.get(container_name)) is not None
                      and c.state is ContainerState.REMOVED, 15, "container shown as removed")
    await watch.until(lambda b, s: persisted(engine, "spark1", container_name).count("\n") >= 50, 5, "all lines")
    text = persisted(engine, "spark1", container_name)
    assert [ln.split(" ", 1)[1] for ln in text.splitlines()] == [f"rm-line {i}" for i in range(1, 51)]
    assert bed.docker("spark1", "inspect", container_name, check=False).returncode != 0  # gone from Docker


# 20,000 lines at once on stdout and stderr (multiplexed frames, many to a read), UTF-8 text, and one
# line of 15,000 characters (under the json-file driver's 16 KiB split) that can span reads: exact
BURST = """
import sys
for i in range(20000):
    out = sys.stderr if i % 3 == 0 else sys.stdout
    out.write(f"burst {i} é✓ " + "x" * (15000 if i == 777 else i % 50) + "\\n")
"""


def _burst_line(i: int) -> str:
    return f"burst {i} é✓ " + "x" * (15000 if i == 777 else i % 50)


async def test_a_burst_on_stdout_and_stderr_and_a_tty_container_arrive_whole(live, container_name, cleanup):
    engine, watch, bed = live
    runs = ((False, container_name), (True, container_name + "-tty"))
    for tty, name in runs:
        cleanup.append(("spark1", name))
        bed.docker("spark1", "run", "-d", *(["-t"] if tty else []), "--name", name, "--network", "host",
                   "sparktui-base:bookworm", "python3", "-c", BURST)
    want = [_burst_line(i) for i in range(20000)]
    for tty, name in runs:
        try:
            await watch.until(lambda b, s, name=name: persisted(engine, "spark1", name).count("\n") >= 20000, 60,
                              f"{name}: the whole burst persisted")
        except BaseException:
            n0 = persisted(engine, "spark1", name).count("\n")
            engine.session.flush()
            n1 = persisted(engine, "spark1", name).count("\n")
            ser = engine.logs.find("spark1", name)
            print("DEBUG", name, n0, n1, ser and (ser.total, ser.skipped, ser.last_seq), engine._pending, dict(engine._queued))
            raise
        got = [line.split(" ", 1)[1] for line in persisted(engine, "spark1", name).splitlines()]
        series = engine.logs.find("spark1", name)
        # all numbered; a follower that fell a second behind (a loaded machine) kept some in the file only
        assert series.total + series.skipped == 20000 and series.last_seq == 20000
        spark1 = next(src for src in engine.sources if src.node_name == "spark1")
        await watch.until(lambda b, s, name=name: name in spark1.logs.via, 15, f"{name}: its follower ended")
        assert spark1.logs.via[name] == "relay"  # in blocks through node_relay.py, not the forwarded socket
        if tty:  # a tty ends lines with \r\n, and stdout and stderr are one stream, in order
            assert [g.rstrip("\r") for g in got] == want
            if (pos := series.position_of(778)) is not None:  # one line number from node to screen
                assert series.get(pos).startswith("burst 777 é✓ xxxx")
        else:  # two streams: the daemon's order between them is its own
            assert sorted(got) == sorted(want)
