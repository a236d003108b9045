"""Milestones, suspected hangs at end of input, the engine processor, the demo scenarios, and the
real excerpts from public bug reports in tests/fixtures/logs/."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparktui.diagnosis import Diagnoser
from sparktui.model import ContainerChanged, ContainerInfo, FindingRaised, LogBatch, LogLine, MilestoneReached

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"

# lines in vLLM's own formats (the catalogue/milestone examples come from real logs)
STARTUP = [
    "(APIServer pid=1) INFO 03-27 10:00:05 [model.py:547] Resolved architecture: Qwen3_5MoeForConditionalGeneration",
    "2026-03-27 10:00:01,123\tINFO worker.py:1514 -- Connecting to existing Ray cluster at address: 192.168.100.11:6379...",  # log text only, never contacted
    "INFO 03-27 10:01:00 [gpu_model_runner.py:2602] Starting to load model /models/qwen35...",
    "Loading safetensors checkpoint shards:   0% Completed | 0/40 [00:00<?, ?it/s]",
    "Loading safetensors checkpoint shards:   2% Completed | 1/40 [00:04<02:40,  4.10s/it]\r"
    "Loading safetensors checkpoint shards:   5% Completed | 2/40 [00:08<02:36,  4.12s/it]",
    "Loading safetensors checkpoint shards:  45% Completed | 18/40 [01:23<01:40,  4.35s/it]",
]
FINISH = [
    "Loading safetensors checkpoint shards: 100% Completed | 40/40 [03:00<00:00,  4.50s/it]",
    "INFO 03-27 10:04:00 [gpu_model_runner.py:2653] Model loading took 58.9129 GiB and 181.223546 seconds",
    "INFO 03-27 10:04:30 [gpu_worker.py:298] Available KV cache memory: 21.43 GiB",
    "INFO 03-27 10:04:31 [kv_cache_utils.py:1087] GPU KV cache size: 936,192 tokens",
    "INFO 03-27 10:04:31 [kv_cache_utils.py:1091] Maximum concurrency for 262,144 tokens per request: 3.57x",
    "INFO 03-27 10:05:10 [gpu_model_runner.py:3480] Graph capturing finished in 38 secs, took 1.27 GiB",
    "(APIServer pid=1) INFO 03-27 10:05:12 [api_server.py:1880] Starting vLLM API server 0 on http://0.0.0.0:8000",
    '(APIServer pid=1) INFO:     127.0.0.1:50312 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
]


def test_full_startup_milestones_in_order():
    dg = Diagnoser()
    out = dg.feed_lines("spark1/vllm", STARTUP + FINISH, node="spark1")
    ms = {m.id: m for m in out}
    assert list(dict.fromkeys(m.id for m in out)) == [
        "arch_resolved", "ray_joined", "weights_loading", "weights_loaded", "kv_cache", "cuda_graphs",
        "api_ready", "first_prompt"]
    kv = dg.scanners["spark1/vllm"].milestones.reached["kv_cache"]
    assert dict(kv.detail) == {"gib": "21.43", "tokens": "936,192", "max_len": "262,144", "concurrency": "3.57"}
    assert "21.43 GiB" in kv.text and "3.57x" in kv.text
    loaded = dict(ms["weights_loaded"].detail)
    assert loaded == {"gib": "58.9129", "secs": "181.223546"}
    progress = [m.progress for m in out if m.id == "weights_loading" and m.progress is not None]
    assert progress == [0.0, 2 / 40, 18 / 40, 1.0]  # the CR-redrawn bar counts its last state
    assert dg.finish() == []


def test_log_ending_inside_weight_loading_is_a_suspected_hang():
    dg = Diagnoser()
    dg.feed_lines("spark2/vllm", STARTUP)
    fin = [e.finding for e in dg.finish()]
    assert [f.id for f in fin] == ["suspected_hang"]
    assert "18/40" in fin[0].title and fin[0].line == len(STARTUP)
    assert any("45% Completed" in e for e in fin[0].evidence)  # the last lines are the evidence


def test_engine_protocol_batches_lines_and_container_events():
    dg = Diagnoser()
    lines = tuple(LogLine("spark1", "vllm", t, seq=i + 1) for i, t in enumerate(STARTUP[:3]))
    evs = dg.feed(LogBatch("spark1", "vllm", lines))
    assert all(isinstance(e, MilestoneReached) and e.node == "spark1" for e in evs)
    evs = dg.feed(LogLine("spark1", "vllm", "RuntimeError: CUDA error: out of memory", seq=10))
    assert [(e.finding.id, e.finding.line, e.finding.source) for e in evs] == [("cuda_oom", 10, "spark1/vllm")]
    assert isinstance(evs[0], FindingRaised) and evs[0].node == "spark1"
    evs = dg.feed(ContainerChanged("spark2", ContainerInfo(id="c" * 64, name="vllm", image="vllm-node")))
    assert [e.milestone.id for e in evs] == ["container_started"]


def test_live_traceback_is_closed_by_tick_when_the_stream_goes_quiet():
    dg = Diagnoser(flush_after=0.0)
    tb = ["Traceback (most recent call last):", '  File "x.py", line 1, in <module>', "    f()",
          "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.17 GiB."]
    assert dg.feed(LogBatch("n", "c", tuple(LogLine("n", "c", t) for t in tb))) == []
    evs = dg.tick()
    assert [e.finding.id for e in evs] == ["cuda_oom"]


@pytest.mark.parametrize("scenario, expected", [("oom", "cuda_oom"), ("unsupported-arch", "unsupported_architecture")])
def test_demo_scenarios_are_caught_by_the_catalogue(scenario, expected):
    from sparktui.config import demo_config
    from sparktui.sim.cluster import SimCluster

    dg = Diagnoser()
    found = []
    for ev in SimCluster(demo_config(), scenario).events_until(600):
        found += [e.finding for e in dg.feed(ev) if isinstance(e, FindingRaised)]
    found += [e.finding for e in dg.finish() if isinstance(e, FindingRaised)]
    assert expected in [f.id for f in found]
    f = next(f for f in found if f.id == expected)
    assert f.node and f.advice and f.evidence
    assert dg.findings[0].id == expected  # the root cause first (engine_dead follows the OOM)


def _excerpts():
    for p in sorted(LOGS.glob("*.log")):
        head = [ln for ln in p.read_text(encoding="utf-8").split("\n") if ln.startswith("# ")]
        assert any(ln.startswith("# source: https://") for ln in head), p  # evidence names its source
        expect = next(ln for ln in head if ln.startswith("# expect:")).split(":", 1)[1]
        yield pytest.param(p, [x.strip() for x in expect.split(",") if x.strip()], id=p.stem)


@pytest.mark.parametrize("path, expect", list(_excerpts()))
def test_real_public_excerpts(path, expect):
    lines = [ln for ln in path.read_text(encoding="utf-8").split("\n") if not ln.startswith("# ")]
    dg = Diagnoser()
    dg.feed_lines(path.name, lines)
    dg.finish()
    got = [f.id for f in dg.findings]
    if expect:
        assert set(expect) <= set(got), got
        assert got[0] in expect
    else:
        assert [f for f in dg.findings if f.severity == "error"] == []


def _excerpt_lines(name: str) -> list[str]:
    return [ln for ln in (LOGS / name).read_text(encoding="utf-8").split("\n") if not ln.startswith("# ")]


def test_milestones_from_real_sglang_and_vllm_v0_logs():
    dg = Diagnoser()
    dg.feed_lines("sglang", _excerpt_lines("ktransformers_1870_sglang_startup.log"))
    dg.feed_lines("vllm", _excerpt_lines("dynamo_288_vllm_loading.log"))
    assert dg.finish() == []  # loading reached 100 % and finished: no suspected hang
    sg = dg.scanners["sglang"].milestones.reached
    assert dict(sg["weights_loaded"].detail) == {"gib": "3.76", "secs": "654.79"}  # the last TP rank to finish
    assert dict(sg["kv_cache"].detail)["tokens"] == "580364"
    vl = dg.scanners["vllm"].milestones.reached
    assert vl["weights_loading"].progress == 1.0 and dict(vl["weights_loaded"].detail) == {"gib": "14.9888"}


def test_sim_nccl_hang_names_the_rank_stuck_in_init():
    from sparktui.config import demo_config
    from sparktui.sim.cluster import SimCluster

    dg = Diagnoser()
    for ev in SimCluster(demo_config(), "nccl-hang").events_until(900):
        dg.feed(ev)
    dg.finish()
    assert dg.findings[0].id == "nccl_init_hang"
    behind = dg.summary()["behind"]
    assert behind and {b["rank"] for b in behind} == {1}
    assert "never completed" in behind[0]["reason"]


def test_diagnoser_as_engine_processor_feeds_state():
    from sparktui.config import demo_config
    from sparktui.engine import Engine
    from sparktui.sim.cluster import SimCluster

    cfg = demo_config()
    eng = Engine(cfg, processors=[Diagnoser()])
    eng.process(SimCluster(cfg, "oom").events_until(600))
    ids = [f.id for f in eng.state.findings]
    assert "cuda_oom" in ids
    node = eng.state.nodes["spark1"]
    assert "weights_loading" in node.milestones and node.milestones["weights_loading"].progress > 0.5


def test_nodes_running_different_image_ids_raise_image_mismatch():
    from sparktui.model import ContainersSnapshot, ContainerState

    def snap(node, image_id):
        c = ContainerInfo(id=node * 8, name="vllm_qwen35", image="vllm-node-qwen35", image_id=image_id,
                          state=ContainerState.RUNNING)
        return ContainersSnapshot(node, (c,))

    dg = Diagnoser()
    assert dg.feed(snap("spark1", "sha256:" + "a" * 64)) == []
    assert dg.feed(snap("spark2", "sha256:" + "a" * 64)) == []
    evs = dg.feed(snap("spark2", "sha256:" + "b" * 64))
    assert [e.finding.id for e in evs] == ["image_mismatch"]
    assert any("spark1" in e for e in evs[0].finding.evidence) and any("spark2" in e for e in evs[0].finding.evidence)
    assert dg.feed(snap("spark2", "sha256:" + "b" * 64)) == []  # reported once


def test_sglang_log_ending_inside_distributed_init_is_a_suspected_hang():
    # SGLang across two nodes without SGLANG_HOST_IP: both ranks print this, then nothing
    lines = ["[2026-02-27 17:00:00 TP0] Init torch distributed begin.",
             "[2026-02-27 17:00:01 TP0] CustomAllreduce is disabled because this process group spans across nodes."]
    dg = Diagnoser()
    dg.feed_lines("sglang-node0", lines)
    fin = [e.finding for e in dg.finish()]
    # the hang's cause (its own tests: test_diag_cluster.py), then the hang it explains
    assert [(f.id, f.line) for f in fin] == [("sglang_host_ip_missing", 2), ("suspected_hang", 1)]
    assert "torch.distributed init" in fin[1].title and any("CustomAllreduce" in e for e in fin[1].evidence)
    done = Diagnoser()
    done.feed_lines("ok", lines + ["[2026-02-27 17:00:09 TP0] Init torch distributed ends. mem usage=0.35 GB"])
    assert done.finish() == []
