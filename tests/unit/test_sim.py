"""SimCluster: memory curve, log order per scenario, determinism, Node formats."""

from __future__ import annotations

import asyncio
import csv
import json
import io
import re

import pytest

from sparktui.cli import SCENARIOS
from sparktui.config import Config, NodeConfig, demo_config
from sparktui.model import (ContainerChanged, ContainersSnapshot, ContainerState, GpuSample, LogBatch,
                            MemorySample, NodeReachability)
from sparktui.nodes.base import Node, NotSupported
from sparktui.sim import SimCluster

GB = 1e9


def _mem(events, node):
    return [(e.ts, e.memory) for e in events if isinstance(e, MemorySample) and e.node == node]


def _gpu(events, node):
    return [(e.ts, e.gpus[0]) for e in events if isinstance(e, GpuSample) and e.node == node]


def _lines(events, node, source=None):
    out = []
    for e in events:
        if isinstance(e, LogBatch) and e.node == node and (source is None or e.source == source):
            out.extend(e.lines)
    return out


def _texts(events, node, source="vllm_qwen35"):
    return [ln.text for ln in _lines(events, node, source)]


def _index(texts, pattern):
    rx = re.compile(pattern)
    for i, t in enumerate(texts):
        if rx.search(t):
            return i
    raise AssertionError(f"no line matches {pattern!r}")


def three_node_config() -> Config:
    base = demo_config()
    n3 = NodeConfig(name="spark3", backend="sim", host="spark3", fabric_ip="192.168.200.14",  # data only, never contacted
                    fabric_if="enp1s0f1np1", ib_hcas=("rocep1s0f1", "roceP2p1s0f1"), role="worker")
    return Config(path="<test>", cluster=base.cluster, nodes=tuple(base.nodes) + (n3,))


def test_scenarios_match_cli():
    from sparktui.sim.script import scenarios

    assert sorted(SCENARIOS) == scenarios()


def test_healthy_memory_curve():
    ev = SimCluster(demo_config()).events_until(120)
    for node in ("spark1", "spark2"):
        mem = _mem(ev, node)
        first = mem[0][1]
        assert 127.0 * GB < first.total < 128.2 * GB  # MemTotal ~127.6 GB as on GB10
        assert 7.5 * GB < first.used < 8.5 * GB  # idle ~8 GB
        start = ev[0].ts
        during_load = [m.used for ts, m in mem if ts - start <= 50]
        assert 66 * GB < max(during_load) < 74 * GB  # 119 GB FP8 at TP=2: ~70 GB per node
        assert all(m.available > 0.1 * m.total for _, m in mem)  # no pressure when healthy
        assert all((m.psi_some_avg10 or 0) == 0 for _, m in mem)
        used = [m.used for _, m in mem]
        assert used[60] > used[20] > used[5]  # rises over the load


def test_oom_memory_runs_out_on_one_node():
    ev = SimCluster(demo_config(), "oom").events_until(80)
    head = _mem(ev, "spark1")
    peak = max(head, key=lambda x: x[1].used)[1]
    assert peak.available < 0.05 * peak.total  # runs out
    assert max(m.psi_some_avg10 for _, m in head) > 10  # PSI rises
    assert head[-1][1].used < 10 * GB  # process died, memory back
    worker = _mem(ev, "spark2")
    assert max(m.used for _, m in worker) < 10 * GB  # the other node stays idle
    texts = _texts(ev, "spark1")
    i_oom = _index(texts, r"torch\.OutOfMemoryError: CUDA out of memory")
    assert _index(texts, r"Resolved architecture: Qwen3_5MoeForConditionalGeneration") < i_oom
    assert _index(texts, r"Loading safetensors checkpoint shards: +\d+% Completed \| 38/40") < i_oom
    exits = [e for e in ev if isinstance(e, ContainerChanged) and e.node == "spark1"]
    assert exits and exits[-1].container.state is ContainerState.EXITED and exits[-1].container.exit_code == 1


def test_healthy_milestones_in_real_order():
    ev = SimCluster(demo_config()).events_until(90)
    head = _texts(ev, "spark1")
    order = [
        r"Ray runtime started\.",
        r"non-default args: \{",
        r"Resolved architecture: Qwen3_5MoeForConditionalGeneration",
        r"\(RayWorkerWrapper pid=\d+, ip=192\.168\.200\.13\) INFO .*world_size=2 rank=1 .*backend=nccl",
        r"NCCL INFO NET/IB : Using \[0\]rocep1s0f1:1/RoCE \[1\]roceP2p1s0f1:1/RoCE \[RO\]; OOB enp1s0f1np1:192\.168\.200\.12<0>",
        r"spark2:\d+:\d+ \[0\] NCCL INFO Channel 00/0 : 1\[0\] -> 0\[0\] \[send\] via NET/IB/0",
        r"ncclCommInitRank comm 0x[0-9a-f]+ rank 1 nranks 2 .* - Init COMPLETE",
        r"Loading safetensors checkpoint shards: +0% Completed \| 0/40 \[00:00<\?, \?it/s\]",
        r"Loading safetensors checkpoint shards: 100% Completed \| 40/40",
        r"Loading weights took [\d.]+ seconds",
        r"Model loading took [\d.]+ GiB memory and [\d.]+ seconds",
        r"Available KV cache memory: [\d.]+ GiB",
        r"GPU KV cache size: [\d,]+ tokens",
        r"Maximum concurrency for 32,768 tokens per request: [\d.]+x",
        r"Capturing CUDA graphs .*67/67",
        r"Starting vLLM server on http://0\.0\.0\.0:8001",
        r"Application startup complete\.",
        r"Avg prompt throughput: [\d.]+ tokens/s, Avg generation throughput: [\d.]+ tokens/s",
    ]
    idx = [_index(head, p) for p in order]
    assert idx == sorted(idx)
    ready = ev[0].ts + 75  # ~60-90 s at speed 1
    assert any("Application startup complete." in ln.text and ln.ts <= ready for ln in _lines(ev, "spark1"))
    # the worker node's own container shows `ray start`; its rank's raw lines are in the Ray worker log
    assert any("Ray runtime started." in t for t in _texts(ev, "spark2"))
    wlog = [ln for ln in _lines(ev, "spark2") if ln.source.startswith("/tmp/ray/session_latest/logs/worker-")]
    assert any(re.match(r"^spark2:\d+:\d+ \[0\] NCCL INFO .*Init COMPLETE$", ln.text) for ln in wlog)


def test_log_lines_carry_seq_and_docker_timestamps():
    ev = SimCluster(demo_config(), start=1_775_690_000.0).events_until(40)
    for node in ("spark1", "spark2"):
        by_src: dict[str, list] = {}
        for ln in _lines(ev, node):
            by_src.setdefault(ln.source, []).append(ln)
        for src, lines in by_src.items():
            assert [ln.seq for ln in lines] == list(range(1, len(lines) + 1)), src
            for ln in lines:
                assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z", ln.raw_ts)
                assert ln.ts >= 1_775_690_000.0
            assert [ln.ts for ln in lines] == sorted(ln.ts for ln in lines)
    first = _lines(ev, "spark1")[0]
    assert first.raw_ts.startswith("2026-04-08T23:13:2")


def test_events_until_is_deterministic_and_prefix_stable():
    a = SimCluster(demo_config(), "healthy").events_until(45)
    b = SimCluster(demo_config(), "healthy").events_until(45)
    assert a == b
    c = SimCluster(demo_config(), "healthy").events_until(20)
    assert a[: len(c)] == c


def test_nccl_hang_one_rank_stalls_then_silence():
    ev = SimCluster(demo_config(), "nccl-hang").events_until(120)
    r0 = [ln.text for ln in _lines(ev, "spark1") if ln.source.startswith("/tmp/ray")]
    r1 = [ln.text for ln in _lines(ev, "spark2") if ln.source.startswith("/tmp/ray")]
    assert any("Init COMPLETE" in t for t in r0)
    assert not any("Init COMPLETE" in t for t in r1)
    assert any("Init START" in t for t in r1)
    assert re.search(r"Channel 00/0 : 1\[0\] -> 0\[0\] \[send\] via NET/IB/0$", r1[-1])
    last_ts = max(ln.ts for n in ("spark1", "spark2") for ln in _lines(ev, n))
    assert last_ts - ev[0].ts < 20  # then silence
    spin = [g for ts, g in _gpu(ev, "spark1") if ts - ev[0].ts > 30]
    assert all(94 <= g.util_percent <= 98 and 15 <= g.power_w <= 21 for g in spin)
    idle = [g for ts, g in _gpu(ev, "spark2") if ts - ev[0].ts > 30]
    assert all(g.util_percent == 0 and g.power_w < 8 for g in idle)


def test_unsupported_arch_traceback_and_exit():
    ev = SimCluster(demo_config(), "unsupported-arch").events_until(30)
    texts = _texts(ev, "spark1")
    i_tb = _index(texts, r"Traceback \(most recent call last\):")
    i_err = _index(texts, r"Value error, Model architectures \['Qwen3_5MoeForConditionalGeneration'\] are not "
                          r"supported for now\. Supported architectures: dict_keys\(\[.*'Qwen3MoeForCausalLM'")
    assert i_tb < i_err
    assert not any("Resolved architecture" in t for t in texts)
    ch = [e for e in ev if isinstance(e, ContainerChanged)]
    assert [(e.node, e.container.state, e.container.exit_code) for e in ch] == [
        ("spark1", ContainerState.RUNNING, None), ("spark2", ContainerState.RUNNING, None),
        ("spark1", ContainerState.EXITED, 1)]
    last = [e for e in ev if isinstance(e, ContainersSnapshot) and e.node == "spark1"][-1]
    assert last.containers[0].status.startswith("Exited (1) ")


def test_containers_and_reachability():
    ev = SimCluster(demo_config()).events_until(1)
    assert [e.node for e in ev if isinstance(e, NodeReachability) and e.reachable and e.backend == "sim"] == [
        "spark1", "spark2"]
    snaps = {e.node: e.containers for e in ev if isinstance(e, ContainersSnapshot)}
    for node, cs in snaps.items():
        main = next(c for c in cs if c.name == "vllm_qwen35")
        assert main.state is ContainerState.RUNNING and main.image == "vllm-node-qwen35"
        assert main.image_id.startswith("sha256:") and len(main.id) == 64
        assert len(cs) == 2  # plus one unrelated container
    assert "--role head" in next(c for c in snaps["spark1"] if c.name == "vllm_qwen35").command
    assert any(c.state is ContainerState.EXITED for c in snaps["spark2"])
    # the same image id on both nodes
    assert len({c.image_id for cs in snaps.values() for c in cs if c.name == "vllm_qwen35"}) == 1


def test_three_nodes():
    ev = SimCluster(three_node_config()).events_until(90)
    head = _texts(ev, "spark1")
    assert any("world_size=3 rank=2" in t for t in head)
    assert any("Channel 00/02 : 0 1 2" in t for t in head)
    for node in ("spark1", "spark2", "spark3"):
        assert _mem(ev, node)
    t0 = ev[0].ts
    load_peak = max(m.used for ts, m in _mem(ev, "spark3") if ts - t0 <= 50)
    assert 45 * GB < load_peak < 55 * GB  # a third of the model each


def test_unknown_scenario_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown sim scenario 'nope'"):
        SimCluster(demo_config(), "nope")


# ---------------------------------------------------------------------- SimNode


def _at(sim: SimCluster, t: float):
    """Pin the live clock of ``sim`` at simulated time t."""
    sim.pin_clock(t)
    assert abs(sim.now_t() - t) < 0.5


async def test_simnode_nvidia_smi_gb10_formats():
    sim = SimCluster(demo_config())
    node = sim.node("spark1")
    assert isinstance(node, Node) and node.backend == "sim"
    _at(sim, 80)
    res = await node.run(["nvidia-smi", "--query-gpu=index,name,utilization.gpu,power.draw,memory.used,clocks.sm",
                          "--format=csv"])
    rows = list(csv.reader(io.StringIO(res.text), skipinitialspace=True))
    assert rows[0] == ["index", "name", "utilization.gpu [%]", "power.draw [W]", "memory.used [MiB]",
                       "clocks.current.sm [MHz]"]
    idx, name, util, power, mem, clock = rows[1]
    assert name == "NVIDIA GB10" and mem == "[N/A]"
    assert re.fullmatch(r"\d+ %", util) and re.fullmatch(r"\d+\.\d\d W", power) and clock == "2405 MHz"
    res = await node.run(["nvidia-smi", "--query-gpu=utilization.gpu,power.draw,memory.total",
                          "--format=csv,noheader,nounits"])
    u, p, m = [x.strip() for x in res.text.strip().split(",")]
    assert 0 <= int(u) <= 100 and 30 < float(p) < 90 and m == "[N/A]"
    res = await node.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader"])
    pid, used = [x.strip() for x in res.text.strip().split(",")]
    assert int(pid) > 0 and re.fullmatch(r"\d+ MiB", used) and int(used.split()[0]) > 50_000
    bad = await node.run(["nvidia-smi", "--query-gpu=bogus", "--format=csv"])
    assert bad.returncode != 0 and "not a valid field" in bad.text


async def test_simnode_proc_files_parse():
    sim = SimCluster(demo_config(), "oom")
    node = sim.node("spark1")
    _at(sim, 54)
    info = {}
    for line in (await node.read_file("/proc/meminfo")).decode().splitlines():
        k, v = line.split(":", 1)
        info[k] = int(v.split()[0])
    assert 124_000_000 < info["MemTotal"] < 125_000_000
    assert info["MemAvailable"] < 0.05 * info["MemTotal"]
    assert info["MemFree"] <= info["MemAvailable"]
    psi = (await node.read_file("/proc/pressure/memory")).decode()
    m = re.fullmatch(r"some avg10=(\d+\.\d\d) avg60=(\d+\.\d\d) avg300=(\d+\.\d\d) total=(\d+)\n"
                     r"full avg10=(\d+\.\d\d) avg60=(\d+\.\d\d) avg300=(\d+\.\d\d) total=(\d+)\n", psi)
    assert m and float(m.group(1)) > 10 and float(m.group(5)) > 0
    la = (await node.read_file("/proc/loadavg")).decode()
    assert re.fullmatch(r"\d+\.\d\d \d+\.\d\d \d+\.\d\d \d+/\d+ \d+\n", la)
    cat = await node.run(["cat", "/proc/loadavg"])
    assert cat.ok and cat.text == la or cat.text.split()[3] == la.split()[3]
    missing = await node.run(["cat", "/nope"])
    assert missing.returncode == 1 and "No such file or directory" in missing.err_text
    with pytest.raises(FileNotFoundError):
        await node.read_file("/nope")
    cfg = await node.read_file("/home/aurora/models/Qwen3.5-122B-A10B-FP8/config.json")
    assert b"Qwen3_5MoeForConditionalGeneration" in cfg


async def test_simnode_unknown_command_and_registry():
    sim = SimCluster(demo_config())
    node = sim.node("spark2")
    res = await node.run(["py-spy-nope", "dump"])
    assert res.returncode == 127 and res.err_text == "bash: py-spy-nope: command not found\n"
    node.register_command("echo-node", lambda n, argv, stdin: (0, n.name + " " + " ".join(argv[1:]) + "\n", b""))
    res = await node.run(["echo-node", "a b", "$(x)"])
    assert res.ok and res.text == "spark2 a b $(x)\n"
    with pytest.raises(NotSupported):
        await node.docker()
    with pytest.raises(KeyError):
        sim.node("spark9")


async def test_live_sources_follow_the_clock():
    from sparktui.engine import Engine

    cfg = demo_config()
    sim = SimCluster(cfg, "healthy", speed=200.0)
    eng = Engine(cfg, sim.sources())
    done = asyncio.Event()

    def on_batch(batch):
        if any(isinstance(e, LogBatch) and any("Application startup complete." in ln.text for ln in e.lines)
               for e in batch):
            done.set()

    eng.subscribe(on_batch)
    await eng.start()
    try:
        await asyncio.wait_for(done.wait(), timeout=10)
    finally:
        await eng.stop()
    st = eng.state.node("spark1")
    assert st.reachable and st.memory is not None and st.gpus[0].name == "NVIDIA GB10"
    assert st.containers["vllm_qwen35"].state is ContainerState.RUNNING


async def test_simnode_ip_ss_test_and_docker_cli():
    from sparktui.probes.links import parse_ibdev2netdev, parse_ip_addr
    from sparktui.probes.model import probe_model

    sim = SimCluster(demo_config(), "unsupported-arch")
    head, worker = sim.node("spark1"), sim.node("spark2")
    _at(sim, 30)
    rdma = parse_ibdev2netdev((await head.run(["ibdev2netdev"])).text)
    links = {ln.name: ln for ln in parse_ip_addr((await head.run(["ip", "-j", "addr"])).text, rdma)}
    assert links["enp1s0f1np1"].addresses == ("192.168.200.12/24",) and links["enp1s0f1np1"].mtu == 9000  # data only, never contacted
    assert links["enp1s0f1np1"].rdma_device == "rocep1s0f1" and links["enP2p1s0f1np1"].rdma_device == "roceP2p1s0f1"
    ss = (await head.run(["ss", "-Hltn"])).text
    assert ":6379 " in ss and ":8001 " not in ss  # Ray up, vLLM never served
    assert (await head.run(["test", "-d", "/home/aurora/models/Qwen3.5-122B-A10B-FP8"])).ok
    assert not (await head.run(["test", "-d", "/home/aurora/models/nope"])).ok
    info = await probe_model(head, "/home/aurora/models/Qwen3.5-122B-A10B-FP8")
    assert info.architectures == ("Qwen3_5MoeForConditionalGeneration",) and info.shard_count == 40
    assert 118e9 < info.total_bytes < 120e9
    ps = (await head.run(["docker", "ps", "-a"])).text.splitlines()
    assert ps[0].startswith("CONTAINER ID") and any("vllm_qwen35" in r and "Exited (1)" in r for r in ps[1:])
    assert not any("vllm_qwen35" in r for r in (await head.run(["docker", "ps"])).text.splitlines()[1:])
    logs = await head.run(["docker", "logs", "--timestamps", "--tail", "3", "vllm_qwen35"])
    rows = logs.text.splitlines()
    assert len(rows) == 3 and re.match(r"^\d{4}-\d\d-\d\dT[\d:.]+Z \(APIServer pid=1\) ", rows[-1])
    assert "For further information visit https://errors.pydantic.dev" in rows[-1]
    insp = json.loads((await worker.run(["docker", "inspect", "vllm_qwen35"])).text)[0]
    assert insp["State"]["Running"] is True and insp["HostConfig"]["NetworkMode"] == "host"
    missing = await worker.run(["docker", "inspect", "nope"])
    assert missing.returncode == 1 and "No such object: nope" in missing.err_text
    from sparktui.nodes.base import NodeError

    with pytest.raises(NodeError):
        await head.read_file("/etc/nope")


# NCCL line envelope as NCCL writes it (Ray prefix, host:pid:tid, [dev], NCCL INFO; diagnosis/nccl_lines.py)
NCCL_ENVELOPE = re.compile(
    r"^(?:\((\w+) pid=(\d+)(?:, ip=([\d.]+))?\) )?(?:\[([^\]]+)\] )?([^:\s]+):(\d+):(\d+) (?:\[(\d+)\] )?"
    r"(?:([\w/.]+):(\d+)(?: \(([^)]*)\))? )?NCCL (INFO|WARN|TRACE|CALL) (.*)$")
NET_IB = re.compile(r"NET/IB ?: Using((?: \[\d+\]\w+:\d+\S*/(?:RoCE|IB))+) ?(\[RO\])?; OOB ([\w.-]+):(\S+)")


def test_nccl_lines_follow_the_real_grammar():
    ev = SimCluster(demo_config()).events_until(30)
    nccl = [ln for n in ("spark1", "spark2") for ln in _lines(ev, n) if " NCCL " in ln.text]
    assert len(nccl) > 50
    for ln in nccl:
        m = NCCL_ENVELOPE.match(ln.text)
        assert m, ln.text
        host = m.group(5)
        if m.group(1):  # Ray-prefixed in the head's driver output: the host matches the ip
            assert (host, m.group(3)) in {("spark1", "192.168.200.12"), ("spark2", "192.168.200.13")}  # data only, never contacted
        else:
            assert host == ln.node
    ib = [NET_IB.search(ln.text) for ln in nccl if "NET/IB : Using" in ln.text]
    assert ib and all(m and m.group(1) == " [0]rocep1s0f1:1/RoCE [1]roceP2p1s0f1:1/RoCE" for m in ib)


def test_speed_compresses_wall_time_not_the_script():
    fast = SimCluster(demo_config(), speed=4.0, start=1_000_000.0).events_until(80)
    ready = next(ln for ln in _lines(fast, "spark1") if "Application startup complete." in ln.text)
    assert 1_000_000.0 + 15 < ready.ts < 1_000_000.0 + 20  # ~71 simulated s at 4x
    slow = SimCluster(demo_config(), speed=1.0, start=1_000_000.0).events_until(80)
    assert _texts(fast, "spark1")[:60] != [] and len(_lines(fast, "spark1")) == len(_lines(slow, "spark1"))
    with pytest.raises(ValueError):
        SimCluster(demo_config(), speed=0)


async def test_evidence_module_is_loaded_when_present(monkeypatch):
    import sys
    import types

    seen = []
    mod = types.ModuleType("sparktui.sim.evidence")
    mod.register = lambda node: (seen.append(node.name),
                                 node.register_command("py-spy", lambda n, a, i: (0, f"dump {n.name}\n", b"")))
    monkeypatch.setitem(sys.modules, "sparktui.sim.evidence", mod)
    sim = SimCluster(demo_config(), "nccl-hang")
    node = sim.node("spark2")
    assert seen == ["spark2"]
    res = await node.run(["py-spy", "dump", "--pid", "1"])
    assert res.ok and res.text == "dump spark2\n"


async def test_simnode_stream_follows_docker_logs():
    sim = SimCluster(demo_config(), speed=50.0)
    node = sim.node("spark1")
    sim._anchor()
    got = []

    async def follow():
        async for line in node.stream(["docker", "logs", "-f", "--timestamps", "vllm_qwen35"]):
            got.append(line.decode())
            if "Application startup complete." in got[-1]:
                return

    await asyncio.wait_for(follow(), timeout=10)
    assert re.match(r"^\d{4}-\d\d-\d\dT[\d:.]+Z ", got[0]) and "Resolved architecture" in "".join(got)
    assert len(got) == len(set(got))


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_placeholder_is_filled(scenario):
    ev = SimCluster(three_node_config() if scenario == "healthy" else demo_config(), scenario).events_until(100)
    texts = [ln.text for e in ev if isinstance(e, LogBatch) for ln in e.lines]
    assert texts and not [t for t in texts if re.search(r"\$\{?\w", t)]
