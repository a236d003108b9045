"""The demo cluster answers prompts and /metrics: SimNode.local_port -> the in-process stand-in API
server on 127.0.0.1, reached through sparktui.probes.serving like a real node's forwarded port."""

from __future__ import annotations

import json
import socket
import threading
from urllib.parse import urlparse

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from sparktui.config import demo_config
from sparktui.nodes.base import NodeError
from sparktui.probes import serving
from sparktui.sim import SimCluster
from sparktui.sim.script import Phase
from sparktui.sim.serving import reasoning_fields

PORT = demo_config().cluster.serve_port


def head(sim: SimCluster):
    return sim.node(sim.scene.specs[0].name)


def listen_at(sim: SimCluster) -> float:
    """The healthy script's serve point: the head's `serving` phase (when `ss` shows the port)."""
    name = sim.scene.specs[0].name
    return next(p.at for p in sim.scene.phases[name] if p.name == "serving")


def refused(url: str) -> bool:
    u = urlparse(url)
    try:
        socket.create_connection((u.hostname, u.port), timeout=5).close()
    except ConnectionRefusedError:
        return True
    return False


def api_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("sim-api")]


async def raw_chat(url: str, stream: bool) -> list[dict]:
    """The server's JSON as sent: the message (plain) or every delta (streamed)."""
    body = {"model": "/root/.cache/huggingface/hub/Qwen3.5-122B-A10B-FP8", "stream": stream,
            "messages": [{"role": "user", "content": "why is the sky blue"}]}
    async with aiohttp.ClientSession() as http:
        async with http.post(url + "/v1/chat/completions", json=body) as r:
            assert r.status == 200
            text = await r.text()
    if not stream:
        return [json.loads(text)["choices"][0]["message"]]
    return [json.loads(ln[6:])["choices"][0]["delta"] for ln in text.splitlines()
            if ln.startswith("data: {") and json.loads(ln[6:])["choices"]]


async def test_healthy_demo_serves_prompts_and_metrics_from_the_serve_point():
    sim = SimCluster(demo_config(), "healthy")
    node = head(sim)
    at = listen_at(sim)
    try:
        sim.pin_clock(at - 5)  # loading: nothing listens yet
        with pytest.raises(serving.ServingError) as exc:
            await serving.endpoint(node, "0.0.0.0", PORT)
        assert exc.value.kind == "unreachable" and "Connection refused" in str(exc.value)
        assert "\n" not in str(exc.value)
        with pytest.raises(NodeError):
            await node.local_port("127.0.0.1", PORT)
        assert not api_threads()

        sim.pin_clock(at + 1)
        url = await serving.endpoint(node, "0.0.0.0", PORT)
        assert url.startswith("http://127.0.0.1:") and url == await serving.endpoint(node, "127.0.0.1", PORT)
        with pytest.raises(serving.ServingError):  # another port on the node: nothing there
            await serving.endpoint(node, "0.0.0.0", PORT + 1)
        info = await serving.server_info(url)
        assert info.healthy and info.version == sim.scene.params.get("vllm_version", "0.17.1rc1.dev25+g1a629ce0d")
        model = info.models[0]
        assert model == demo_config().cluster.served_model

        for stream in (False, True):
            a = await serving.chat(url, model, "hi", stream=stream)
            assert a.reasoning and a.reasoning.startswith("The user wrote 1 words")
            assert a.content == "Stand-in reply: hi." and "The user wrote" not in a.content
            assert a.finish_reason == "stop" and a.completion_tokens
        # 0.17+: only `reasoning` goes out, plain and streamed
        msg = (await raw_chat(url, False))[0]
        assert msg["reasoning"] and "reasoning_content" not in msg
        deltas = await raw_chat(url, True)
        assert any(d.get("reasoning") for d in deltas) and not any("reasoning_content" in d for d in deltas)

        async with aiohttp.ClientSession() as http:
            async with http.get(url + "/metrics") as r:
                fams = {f.name: f for f in text_string_to_metric_families(await r.text())}
        done = [s for s in fams["vllm:request_success"].samples if s.name == "vllm:request_success_total"]
        # the four above, and the requests the scripted log has shown served by the time of this scrape
        assert sum(s.value for s in done) == 4 + node._api.scripted
        ttft = [s for s in fams["vllm:time_to_first_token_seconds"].samples if s.name.endswith("_count")]
        assert ttft[0].value == 4 and ttft[0].labels["model_name"] == model
    finally:
        await node.close()
    assert refused(url)
    assert not api_threads()
    with pytest.raises(serving.ServingError):
        await serving.endpoint(node, "0.0.0.0", PORT)


async def test_old_vllm_version_sends_reasoning_content():
    sim = SimCluster(demo_config(), "healthy")
    sim.scene.params["vllm_version"] = "0.10.2"  # the scenario's configured vLLM version
    node = head(sim)
    try:
        sim.pin_clock(listen_at(sim) + 1)
        url = await serving.endpoint(node, "0.0.0.0", PORT)
        assert (await serving.server_info(url)).version == "0.10.2"
        msg = (await raw_chat(url, False))[0]
        assert msg["reasoning_content"] and "reasoning" not in msg
        deltas = await raw_chat(url, True)
        assert any(d.get("reasoning_content") for d in deltas) and not any("reasoning" in d for d in deltas)
        a = await serving.chat(url, demo_config().cluster.served_model, "hi", stream=True)
        assert a.reasoning and a.content == "Stand-in reply: hi."
    finally:
        await node.close()


@pytest.mark.parametrize("version, fields", [
    ("0.10.2", "reasoning_content"), ("0.11.0", "reasoning_content"), ("0.11.1", "both"),
    ("0.14.0rc2", "both"), ("0.16.9", "both"), ("0.17.0", "reasoning"),
    ("0.17.1rc1.dev25+g1a629ce0d", "reasoning"), ("v0.32.0", "reasoning")])
def test_reasoning_fields_by_version(version, fields):
    assert reasoning_fields(version) == fields


async def test_engine_death_then_exit_in_the_timeline():
    """A scenario where serving dies: the engine dies at t1 (API still up: 503 / 500 like vLLM's
    EngineDeadError), the container exits at t2 (the port is gone: refused)."""
    sim = SimCluster(demo_config(), "healthy")
    name = sim.scene.specs[0].name
    at = listen_at(sim)
    sim.scene.phases[name].append(Phase("dead", at + 20, None))
    sim.scene.exits[name] = (at + 30, 1)
    node = sim.node(name)
    try:
        sim.pin_clock(at + 1)
        url = await serving.endpoint(node, "0.0.0.0", PORT)
        assert (await serving.server_info(url)).healthy
        sim.pin_clock(at + 21)
        assert not (await serving.server_info(url)).healthy
        with pytest.raises(serving.ServingError) as exc:
            await serving.chat(url, demo_config().cluster.served_model, "hi")
        assert exc.value.status == 500 and "EngineCore encountered an issue" in str(exc.value)
        sim.pin_clock(at + 31)
        with pytest.raises(serving.ServingError, match="Connection refused"):
            await serving.endpoint(node, "0.0.0.0", PORT)
        assert refused(url) and not api_threads()
    finally:
        await node.close()


async def test_scenario_that_never_serves_refuses():
    sim = SimCluster(demo_config(), "oom")
    node = head(sim)
    for t in (10.0, 60.0, 200.0):
        sim.pin_clock(t)
        with pytest.raises(serving.ServingError, match="Connection refused"):
            await serving.endpoint(node, "0.0.0.0", PORT)
    await node.close()
    assert not api_threads()


async def test_collective_hang_holds_requests_until_close():
    """A `stall` after the serve point (a collective that never completes): requests hang inside the
    engine (stand-in desync), /metrics counts them running; close() drops them and leaves no thread."""
    import asyncio

    sim = SimCluster(demo_config(), "healthy")
    name = sim.scene.specs[0].name
    at = listen_at(sim)
    sim.scene.phases[name].append(Phase("stall", at + 10, None))
    node = sim.node(name)
    sim.pin_clock(at + 11)
    url = await serving.endpoint(node, "0.0.0.0", PORT)
    assert (await serving.server_info(url)).healthy  # the API process still answers /health
    held = asyncio.ensure_future(serving.chat(url, demo_config().cluster.served_model, "hi", stream=True))
    running = 0.0
    async with aiohttp.ClientSession() as http:
        for _ in range(500):  # until the request is inside the engine (each turn is one real scrape)
            async with http.get(url + "/metrics") as r:
                fams = {f.name: f for f in text_string_to_metric_families(await r.text())}
            running = fams["vllm:num_requests_running"].samples[0].value
            if running == 1 or held.done():
                break
    assert running == 1 and not held.done()
    await node.close()
    with pytest.raises(serving.ServingError) as exc:
        await held
    assert exc.value.kind == "connection"
    assert refused(url) and not api_threads()
