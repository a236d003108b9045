"""The stand-in vLLM as a real subprocess on 127.0.0.1: log order, faults, HTTP via the openai client."""

from __future__ import annotations

import json
import os
import queue
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import sparktui.sim.standin_vllm as standin

STANDIN = Path(standin.__file__)
MODEL_BYTES = 119_000_000_000

REGISTRY = '''\
# SPDX-License-Identifier: Apache-2.0
import importlib

_TEXT_GENERATION_MODELS = {
    # [Decoder-only]
    "LlamaForCausalLM": ("llama", "LlamaForCausalLM"),
    "Qwen3ForCausalLM": ("qwen3", "Qwen3ForCausalLM"),
    "Qwen3MoeForCausalLM": ("qwen3_moe", "Qwen3MoeForCausalLM"),
%s}

_EMBEDDING_MODELS = {
    "BertModel": ("bert", "BertEmbeddingModel"),
    **{
        k: (mod, arch)
        for k, (mod, arch) in _TEXT_GENERATION_MODELS.items()
        if arch == "LlamaForCausalLM"
    },
}

_MULTIMODAL_MODELS = {
    "Qwen2VLForConditionalGeneration": (
        "qwen2_vl",
        "Qwen2VLForConditionalGeneration",
    ),
}
'''
PATCHED = ('    "Qwen3_5ForConditionalGeneration": ("qwen3_5", "Qwen3_5ForConditionalGeneration"),\n'
           '    "Qwen3_5MoeForConditionalGeneration": ("qwen3_5", "Qwen3_5MoeForConditionalGeneration"),\n')

CONFIGMAP = '''\
from collections import OrderedDict

CONFIG_MAPPING_NAMES = OrderedDict[str, str](
    [
        # Add configs here
        ("llama", "LlamaConfig"),
        ("qwen3", "Qwen3Config"),
        ("qwen3_moe", "Qwen3MoeConfig"),
%s    ]
)
'''


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def bed(tmp_path):
    model = tmp_path / "models" / "Qwen3.5-122B-A10B-FP8"
    model.mkdir(parents=True)
    (model / "config.json").write_text(json.dumps(
        {"architectures": ["Qwen3_5MoeForConditionalGeneration"], "model_type": "qwen3_5_moe"}))
    (model / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {"total_size": MODEL_BYTES}, "weight_map": {}}))
    reg = tmp_path / "vllm" / "model_executor" / "models" / "registry.py"
    reg.parent.mkdir(parents=True)
    reg.write_text(REGISTRY % PATCHED)
    cm = tmp_path / "transformers" / "models" / "auto" / "configuration_auto.py"
    cm.parent.mkdir(parents=True)
    cm.write_text(CONFIGMAP % '        ("qwen3_5_moe", "Qwen3_5MoeConfig"),\n')
    env = dict(os.environ, SPARKTUI_STANDIN_REGISTRY=str(reg), SPARKTUI_STANDIN_CONFIGMAP=str(cm),
               SPARKTUI_STANDIN_LOAD_SECONDS="0.2", SPARKTUI_STANDIN_STEP_SECONDS="0",
               SPARKTUI_STANDIN_LOG_EVERY="0.3", NCCL_DEBUG="INFO", VLLM_HOST_IP="127.0.0.1",
               SPARKTUI_STANDIN_PEERS="spark2:127.0.0.3", NCCL_SOCKET_IFNAME="lo")
    env.pop("SPARKTUI_STANDIN_FAULT", None)
    return {"model": model, "registry": reg, "configmap": cm, "env": env}


class Proc:
    """The stand-in as a subprocess; stdout lines collected by a reader thread."""

    def __init__(self, bed, *extra, fault: str | None = None, env: dict | None = None, tp: int = 2):
        self.port = free_port()
        e = dict(bed["env"], **(env or {}))
        if fault:
            e["SPARKTUI_STANDIN_FAULT"] = fault
        argv = [sys.executable, str(STANDIN), "serve", str(bed["model"]), "--host", "127.0.0.1",
                "--port", str(self.port), "--tensor-parallel-size", str(tp), "--gpu-memory-utilization", "0.9",
                "--max-model-len", "32768", "--served-model-name", "qwen35", "--reasoning-parser", "qwen3", *extra]
        self.p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=e, text=True)
        self.lines: list[str] = []
        self.q: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.p.stdout:
            self.q.put(line.rstrip("\n"))
        self.q.put(None)

    def wait_for(self, pattern: str, timeout: float = 20) -> str:
        rx = re.compile(pattern)
        for ln in self.lines:
            if rx.search(ln):
                return ln
        deadline = time.monotonic() + timeout
        while True:
            try:
                ln = self.q.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no line matching {pattern!r} in {timeout}s; got:\n" + "\n".join(self.lines[-15:]))
            if ln is None:
                raise AssertionError(f"exited {self.p.wait()} before {pattern!r}; got:\n" + "\n".join(self.lines[-15:]))
            self.lines.append(ln)
            if rx.search(ln):
                return ln

    def finish(self, timeout: float = 20) -> int:
        rc = self.p.wait(timeout=timeout)
        while True:
            ln = self.q.get(timeout=5)
            if ln is None:
                unfilled = [x for x in self.lines if re.search(r"\$\{?[A-Za-z_]", x)]
                assert not unfilled, unfilled[:3]
                return rc
            self.lines.append(ln)

    def stop(self):
        if self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()


def _index(lines, pattern):
    rx = re.compile(pattern)
    return next(i for i, ln in enumerate(lines) if rx.search(ln))


def test_import_has_no_side_effects():
    out = subprocess.run([sys.executable, "-c", "import sparktui.sim.standin_vllm as s; print(s.VERSION)"],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and out.stdout.strip() == standin.VERSION and out.stderr == ""


def test_registry_and_configmap_readers(bed):
    archs = standin.read_registry(str(bed["registry"]))
    assert "Qwen3_5MoeForConditionalGeneration" in archs and "Qwen2VLForConditionalGeneration" in archs
    assert archs.index("LlamaForCausalLM") == 0 and "BertModel" in archs
    cm = standin.read_config_map(str(bed["configmap"]))
    assert cm["qwen3_5_moe"] == "Qwen3_5MoeConfig" and cm["llama"] == "LlamaConfig"


async def test_healthy_start_order_and_openai_api(bed, tmp_path):
    from openai import AsyncOpenAI

    proc = Proc(bed, "--distributed-executor-backend", "ray", env={"PATH": fake_ray(tmp_path, "2.0")})
    try:
        proc.wait_for(r"Application startup complete\.")
        lines = proc.lines
        order = [r"non-default args: \{", r"Resolved architecture: Qwen3_5MoeForConditionalGeneration",
                 r"world_size=2 rank=1 local_rank=0 distributed_init_method=tcp://127\.0\.0\.1:\d+ backend=nccl",
                 r"NCCL INFO NET/IB : Using \[0\]rocep1s0f1:1/RoCE \[1\]roceP2p1s0f1:1/RoCE \[RO\]; OOB lo:127\.0\.0\.1<0>",
                 r"\(RayWorkerWrapper pid=\d+, ip=127\.0\.0\.3\) spark2:\d+:\d+ \[0\] NCCL INFO .* - Init COMPLETE",
                 r"Loading safetensors checkpoint shards: +0% Completed \| 0/40",
                 r"Loading safetensors checkpoint shards: 100% Completed \| 40/40",
                 r"Loading weights took [\d.]+ seconds", r"Model loading took 55\.4\d GiB memory",
                 r"Available KV cache memory: [\d.]+ GiB", r"GPU KV cache size: [\d,]+ tokens",
                 r"Maximum concurrency for 32,768 tokens per request", r"Graph capturing finished",
                 r"Starting vLLM server on http://127\.0\.0\.1:\d+", r"Application startup complete\."]
        idx = [_index(lines, p) for p in order]
        assert idx == sorted(idx)
        assert f"(APIServer pid={proc.p.pid})" in lines[0]

        client = AsyncOpenAI(base_url=f"http://127.0.0.1:{proc.port}/v1", api_key="none", max_retries=0)
        models = await client.models.list()
        assert [m.id for m in models.data] == ["qwen35"]
        r = await client.chat.completions.create(model="qwen35", messages=[{"role": "user", "content": "hello there"}])
        msg = r.choices[0].message
        assert r.choices[0].finish_reason == "stop" and msg.content.startswith("Stand-in reply: hello there")
        extra = msg.model_extra or {}
        assert extra["reasoning"] and extra["reasoning"] == extra["reasoning_content"]
        # thinking consumes max_tokens: content null, finish_reason length (the story's symptom)
        r = await client.chat.completions.create(model="qwen35", max_tokens=3,
                                                 messages=[{"role": "user", "content": "why"}])
        assert r.choices[0].message.content is None and r.choices[0].finish_reason == "length"
        r = await client.chat.completions.create(model="qwen35", messages=[{"role": "user", "content": "hi"}],
                                                 extra_body={"chat_template_kwargs": {"enable_thinking": False}})
        assert (r.choices[0].message.model_extra or {}).get("reasoning") is None and r.choices[0].message.content
        # streaming SSE
        stream = await client.chat.completions.create(model="qwen35", stream=True,
                                                      stream_options={"include_usage": True},
                                                      messages=[{"role": "user", "content": "stream me"}])
        reasoning, content, finish, usage = "", "", None, None
        async for chunk in stream:
            if chunk.usage:
                usage = chunk.usage
            for ch in chunk.choices:
                d = ch.delta.model_extra or {}
                reasoning += d.get("reasoning") or ""
                content += ch.delta.content or ""
                finish = ch.finish_reason or finish
        assert reasoning.startswith("The user wrote 2 words") and content == "Stand-in reply: stream me."
        assert finish == "stop" and usage and usage.completion_tokens > 0
        with pytest.raises(Exception) as exc:
            await client.chat.completions.create(model="nope", messages=[{"role": "user", "content": "x"}])
        assert getattr(exc.value, "status_code", None) == 404
        await client.close()

        import aiohttp
        async with aiohttp.ClientSession() as s:
            async with s.get(f"http://127.0.0.1:{proc.port}/health") as resp:
                assert resp.status == 200
            async with s.get(f"http://127.0.0.1:{proc.port}/metrics") as resp:
                text = await resp.text()
        assert "# TYPE vllm:generation_tokens_total counter" in text
        gen = float(re.search(r'^vllm:generation_tokens_total\{engine="0",model_name="qwen35"\} ([\d.]+)$', text, re.M)[1])
        assert gen > 0
        assert re.search(r'^vllm:num_requests_running\{engine="0",model_name="qwen35"\} 0\.0$', text, re.M)
        proc.wait_for(r'INFO:     127\.0\.0\.1:\d+ - "POST /v1/chat/completions HTTP/1\.1" 200 OK')
        proc.wait_for(r"Avg prompt throughput: [\d.]+ tokens/s, Avg generation throughput: [\d.]+ tokens/s")
        assert not [x for x in proc.lines if re.search(r"\$\{?[A-Za-z_]", x)]
    finally:
        proc.stop()


async def test_reasoning_field_choice(bed):
    from openai import AsyncOpenAI

    proc = Proc(bed, env={"SPARKTUI_STANDIN_REASONING_FIELDS": "reasoning",
                          "SPARKTUI_STANDIN_MEM_BYTES": str(200 * 10**9)}, tp=1)
    try:
        proc.wait_for(r"Application startup complete\.")
        client = AsyncOpenAI(base_url=f"http://127.0.0.1:{proc.port}/v1", api_key="none", max_retries=0)
        r = await client.chat.completions.create(model="qwen35", messages=[{"role": "user", "content": "a b"}])
        extra = r.choices[0].message.model_extra or {}
        assert extra.get("reasoning") and "reasoning_content" not in extra
        await client.close()
        assert not any("NCCL INFO" in ln for ln in proc.lines)  # TP=1: no NCCL
    finally:
        proc.stop()


def test_unsupported_arch_natural(bed):
    bed["registry"].write_text(REGISTRY % "")  # the unpatched image
    proc = Proc(bed)
    try:
        assert proc.finish() == 1
    finally:
        proc.stop()
    err = _index(proc.lines, r"Value error, Model architectures \['Qwen3_5MoeForConditionalGeneration'\] are not "
                             r"supported for now\. Supported architectures: dict_keys\(\['LlamaForCausalLM', "
                             r"'Qwen3ForCausalLM', 'Qwen3MoeForCausalLM', 'BertModel'")
    assert _index(proc.lines, r"Traceback \(most recent call last\):") < err
    assert not any("Resolved architecture" in ln for ln in proc.lines)


def test_unsupported_arch_forced(bed):
    proc = Proc(bed, fault="unsupported-arch")
    try:
        assert proc.finish() == 1
    finally:
        proc.stop()
    assert any("are not supported for now" in ln for ln in proc.lines)


def test_transformers_does_not_know_model_type(bed):
    bed["configmap"].write_text(CONFIGMAP % "")
    proc = Proc(bed)
    try:
        assert proc.finish() == 1
    finally:
        proc.stop()
    assert any("has model type `qwen3_5_moe` but Transformers does not recognize this architecture" in ln
               for ln in proc.lines)


def test_model_path_missing(bed, tmp_path):
    (bed["model"] / "config.json").unlink()
    proc = Proc(bed)
    try:
        assert proc.finish() == 1
    finally:
        proc.stop()
    assert any("Invalid repository ID or local directory specified" in ln for ln in proc.lines)


def test_oom_natural_on_one_node(bed):
    proc = Proc(bed, tp=1)  # 119 GB on one rank > 128e9 * 0.9 * ... budget
    try:
        assert proc.finish() == 1
    finally:
        proc.stop()
    i_res = _index(proc.lines, r"Resolved architecture")
    i_oom = _index(proc.lines, r"torch\.OutOfMemoryError: CUDA out of memory")
    assert i_res < _index(proc.lines, r"Loading safetensors checkpoint shards") < i_oom
    assert not any("40/40" in ln for ln in proc.lines)


def test_oom_forced_and_free_memory(bed):
    proc = Proc(bed, fault="oom")
    try:
        assert proc.finish() == 1
    finally:
        proc.stop()
    assert any("CUDA out of memory" in ln for ln in proc.lines)
    proc = Proc(bed, env={"SPARKTUI_STANDIN_FREE_BYTES": str(int(2.6 * 1024 ** 3))})
    try:
        assert proc.finish() == 1
    finally:
        proc.stop()
    assert any(re.search(r"Free memory on device cuda:0 \(2\.60/121\.63 GiB\) on startup is less than desired GPU "
                         r"memory utilization \(0\.9, 109\.47 GiB\)", ln) for ln in proc.lines)


def test_nccl_hang_stays_alive_and_silent(bed):
    proc = Proc(bed, fault="nccl-hang")
    try:
        last = proc.wait_for(r"spark2:\d+:\d+ \[0\] NCCL INFO Channel 00/0 : 1\[0\] -> 0\[0\] \[send\] via NET/IB/0")
        assert proc.lines.count(last) == 1
        assert any(re.search(r"spark1?.*rank 0 nranks 2 .* - Init COMPLETE|rank 0 nranks 2 .*Init COMPLETE", ln)
                   for ln in proc.lines)
        with pytest.raises(subprocess.TimeoutExpired):
            proc.p.wait(timeout=1.0)  # still alive
        with pytest.raises(AssertionError):
            proc.wait_for(r"Loading safetensors|Init COMPLETE.*rank 1|rank 1 nranks 2 .*Init COMPLETE", timeout=0.5)
        # like vLLM the API socket is bound before the engine starts: a client connects, gets no answer
        with socket.create_connection(("127.0.0.1", proc.port), timeout=5) as s:
            s.settimeout(0.5)
            s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            with pytest.raises(socket.timeout):
                s.recv(100)
    finally:
        proc.stop()


async def test_desync_request_hangs_then_rpc_timeout(bed):
    from openai import AsyncOpenAI

    proc = Proc(bed, fault="desync", env={"SPARKTUI_STANDIN_RPC_TIMEOUT": "1.5"})
    try:
        proc.wait_for(r"Application startup complete\.")
        client = AsyncOpenAI(base_url=f"http://127.0.0.1:{proc.port}/v1", api_key="none", max_retries=0, timeout=30)
        with pytest.raises(Exception):
            await client.chat.completions.create(model="qwen35", messages=[{"role": "user", "content": "x"}])
        await client.close()
        assert proc.finish() == 1
        assert any("RPC call to sample_tokens timed out" in ln for ln in proc.lines)
        assert any("EngineDeadError" in ln for ln in proc.lines)
    finally:
        proc.stop()


async def test_worker_death(bed):
    from openai import AsyncOpenAI

    proc = Proc(bed, fault="worker-death")
    try:
        proc.wait_for(r"Application startup complete\.")
        client = AsyncOpenAI(base_url=f"http://127.0.0.1:{proc.port}/v1", api_key="none", max_retries=0)
        with pytest.raises(Exception) as exc:
            await client.chat.completions.create(model="qwen35", messages=[{"role": "user", "content": "x"}])
        assert getattr(exc.value, "status_code", None) == 500
        await client.close()
        assert proc.finish() == 1
        assert _index(proc.lines, r"RayWorkerProc rank=\[1\] died unexpectedly") < _index(proc.lines, r"EngineDeadError")
    finally:
        proc.stop()


def test_bad_fault_and_bad_args(bed):
    proc = Proc(bed, fault="bogus")
    try:
        assert proc.finish() == 2
    finally:
        proc.stop()
    assert any("unknown SPARKTUI_STANDIN_FAULT 'bogus'" in ln for ln in proc.lines)
    out = subprocess.run([sys.executable, str(STANDIN), "serve", "/m", "--no-such-flag"], capture_output=True,
                         text=True, timeout=30)
    assert out.returncode == 2 and "unrecognized arguments: --no-such-flag" in out.stderr


def test_port_in_use(bed):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = subprocess.run([sys.executable, str(STANDIN), "serve", str(bed["model"]), "--host", "127.0.0.1",
                              "--port", str(port)], capture_output=True, text=True, timeout=30, env=bed["env"])
    assert out.returncode == 1
    assert re.search(r"^\(APIServer pid=\d+\) OSError: \[Errno 98\] Address already in use$", out.stdout, re.M)
    assert "Resolved architecture" not in out.stdout


def test_version_comes_from_the_image(bed, tmp_path):
    (tmp_path / "vllm" / "_version.py").write_text('__version__ = "0.14.0rc2"\n')
    bed["registry"].write_text(REGISTRY % "")
    proc = Proc(bed)
    try:
        assert proc.finish() == 1
    finally:
        proc.stop()
    assert "vLLM API server version 0.14.0rc2" in proc.lines[1]


async def test_no_reasoning_parser_keeps_thinking_in_content_and_completions(bed):
    from openai import AsyncOpenAI

    port = free_port()
    argv = [sys.executable, str(STANDIN), "serve", str(bed["model"]), "--host", "127.0.0.1", "--port", str(port),
            "--served-model-name", "qwen35"]
    env = dict(bed["env"], SPARKTUI_STANDIN_MEM_BYTES=str(200 * 10**9))
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True)
    try:
        for line in p.stdout:
            if "Application startup complete." in line:
                break
        client = AsyncOpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", max_retries=0)
        r = await client.chat.completions.create(model="qwen35", messages=[{"role": "user", "content": "hi you"}])
        msg = r.choices[0].message
        assert msg.content.startswith("<think>\nThe user wrote 2 words") and "</think>\n\nStand-in reply" in msg.content
        assert (msg.model_extra or {}).get("reasoning") is None
        stream = await client.chat.completions.create(model="qwen35", stream=True,
                                                      messages=[{"role": "user", "content": "hi you"}])
        text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
        assert text == msg.content
        c = await client.completions.create(model="qwen35", prompt="tell me", max_tokens=50)
        assert c.choices[0].text.startswith("Stand-in reply: tell me") and c.usage.completion_tokens > 0
        await client.close()
    finally:
        p.terminate()
        p.wait(timeout=10)


RAY_STATUS = """\
#!/bin/sh
# a `ray` on PATH answering `ray status` like a cluster with %s GPU(s)
[ "$1" = status ] || exit 2
cat <<'OUT'
======== Autoscaler status: 2026-11-29 20:00:00.000000 ========
Node status
---------------------------------------------------------------
Active:
 1 node_2f1c0e9a8b7d6c5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a
Pending:
 (no pending nodes)
Recent failures:
 (no failures)

Resources
---------------------------------------------------------------
Usage:
 0.0/20.0 CPU
 0.0/%s GPU
 0B/100.00GiB memory

Demands:
 (no resource demands)
OUT
"""


def fake_ray(tmp_path, gpus: str) -> str:
    """PATH with a `ray` whose `ray status` has the real output shape (no Ray installable here)."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    ray = bindir / "ray"
    ray.write_text(RAY_STATUS % (gpus, gpus))
    ray.chmod(0o755)
    return f"{bindir}:{os.environ['PATH']}"


@pytest.mark.parametrize("gpus,expect_rc", [("2.0", None), ("1.0", 1)])
def test_ray_placement_group_needs_the_gpus(bed, tmp_path, gpus, expect_rc):
    env = {"PATH": fake_ray(tmp_path, gpus), "SPARKTUI_STANDIN_PG_WAIT_SECONDS": "0.1",
           "SPARKTUI_STANDIN_PG_TIMEOUT": "0.35"}
    proc = Proc(bed, "--distributed-executor-backend", "ray", env=env)
    try:
        if expect_rc is None:
            proc.wait_for(r"Application startup complete\.")
            return
        assert proc.finish() == 1
    finally:
        proc.stop()
    waits = [ln for ln in proc.lines if "Waiting for creating a placement group of specs" in ln]
    assert len(waits) >= 2 and "'node:127.0.0.1': 0.001" in waits[0]
    assert "Cannot provide a placement group" in proc.lines[-1]
    assert not any("world_size=" in ln for ln in proc.lines)


def test_ray_not_running(bed, tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "ray").write_text("#!/bin/sh\necho 'ConnectionError: Could not find any running Ray instance.' >&2\nexit 1\n")
    (bindir / "ray").chmod(0o755)
    proc = Proc(bed, "--distributed-executor-backend", "ray", env={"PATH": f"{bindir}:{os.environ['PATH']}"})
    try:
        assert proc.finish() == 1
    finally:
        proc.stop()
    assert "Could not find any running Ray instance" in proc.lines[-1]


def test_multiprocessing_backend_prefixes(bed):
    proc = Proc(bed)  # no --distributed-executor-backend: vLLM's own worker processes
    try:
        proc.wait_for(r"Application startup complete\.")
    finally:
        proc.stop()
    assert any(re.match(r"^\(Worker_TP1 pid=\d+\) spark2:\d+:\d+ \[0\] NCCL INFO", ln) for ln in proc.lines)
    assert not any("Ray" in ln for ln in proc.lines)


def test_missing_parts_are_a_clear_error(tmp_path, bed):
    if Path("/opt/standin/scripts/blocks.toml").is_file():
        pytest.skip("this machine has /opt/standin/scripts/blocks.toml (the last fallback)")
    lone = tmp_path / "lone"
    lone.mkdir()
    (lone / "standin_vllm.py").write_bytes(STANDIN.read_bytes())
    env = dict(bed["env"], SPARKTUI_STANDIN_SCRIPTS=str(tmp_path / "none"))
    argv = [sys.executable, str(lone / "standin_vllm.py"), "serve", str(bed["model"])]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=30, env=env)
    assert out.returncode == 2 and out.stdout == "" and "Traceback" not in out.stderr
    assert out.stderr.startswith("standin_vllm: standin_http.py is missing beside this script")
    (lone / "standin_http.py").write_bytes(STANDIN.with_name("standin_http.py").read_bytes())
    out = subprocess.run(argv, capture_output=True, text=True, timeout=30, env=env)
    assert out.returncode == 2 and out.stdout == "" and "Traceback" not in out.stderr
    assert out.stderr.startswith("standin_vllm: line templates not found: install the stand-in as")
    (lone / "scripts").mkdir()
    (lone / "scripts" / "blocks.toml").write_bytes(STANDIN.with_name("scripts").joinpath("blocks.toml").read_bytes())
    env.pop("SPARKTUI_STANDIN_SCRIPTS")
    out = subprocess.run(argv + ["--port", str(free_port()), "--host", "127.0.0.1"], capture_output=True,
                         text=True, timeout=30, env=dict(env, SPARKTUI_STANDIN_FAULT="unsupported-arch"))
    assert out.returncode == 1 and "are not supported for now" in out.stdout
