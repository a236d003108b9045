"""Guided actions on the test bed, through the CLI (issue 6): doctor / build-image / push-image /
validate on `--scenario seed`, hostile input, cancel.  Real sshd + dockerd per node; the lean images
run the stand-in vLLM, kept here for what the real CPU vLLM cannot show or would make slow: the
story's 119 GiB model on GB10-sized memory (OOM predicted before start), the community image's
env-driven ENTRYPOINT, hostile paths, a full disk, cancel mid-build and mid-push.  The same flow on
the REAL vLLM is tests/e2e/test_real_vllm.py.  The bed is the session's (conftest: SPARKTUI_TESTBED_DIR/NET
or one of its own), with `--scenario seed` applied."""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
# the session's bed (conftest's `bed` fixture: SPARKTUI_TESTBED_DIR/NET, or a bed of the session's
# own); the `seed` fixture sets these before any test runs
BED_DIR = Path("/nonexistent-bed")
BED_NET = ""
HYBRID = "vllm-node-qwen35"


def docker(node: str, *args: str, check: bool = False) -> subprocess.CompletedProcess:
    sock = BED_DIR / "nodes" / node / "docker.sock"
    return subprocess.run(["docker", "-H", f"unix://{sock}", *args], capture_output=True, text=True, check=check,
                          timeout=120)


def image_id(node: str, ref: str) -> str | None:
    r = docker(node, "image", "inspect", "--format", "{{.Id}}", ref)
    return r.stdout.strip() if r.returncode == 0 else None


def containers(node: str) -> list[str]:
    return [l for l in docker(node, "ps", "-a", "--format", "{{.Names}} {{.Command}}").stdout.splitlines() if l]


def bed_procs(needle: str) -> list[str]:
    """Command lines of live processes started in this bed's node sessions (their DOCKER_HOST points
    into BED_DIR) that contain `needle`: other test runs on this machine do not count."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            env = (d / "environ").read_bytes()
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        if f"DOCKER_HOST=unix://{BED_DIR}/".encode() in env and needle in cmd:
            out.append(cmd)
    return out


def cli(*args: str, config: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    cfg = ["--config", str(config or BED_DIR / "cluster.toml")]
    cmd, rest = args[0], args[1:]
    return subprocess.run([sys.executable, "-m", "sparktui", cmd, *cfg, *rest], capture_output=True, text=True,
                          cwd=str(ROOT), timeout=timeout)


def as_json(r: subprocess.CompletedProcess) -> dict:
    assert "Traceback" not in r.stderr, r.stderr
    return json.loads(r.stdout)


def ids_of(result: dict, severity: str | None = None) -> set[str]:
    return {f["id"] for f in result["findings"] if severity is None or f["severity"] == severity}


def cancel_when(args: list[str], marker: str, timeout: float = 120) -> tuple[int, str]:
    """Run the CLI, send SIGINT (Ctrl+C) once `marker` shows on stderr; return (rc, stderr)."""
    proc = subprocess.Popen([sys.executable, "-m", "sparktui", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            cwd=str(ROOT), text=True, bufsize=1)
    seen, deadline = [], time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stderr], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                break
            line = proc.stderr.readline()
            if not line:
                break
            seen.append(line)
            if marker in line:
                proc.send_signal(signal.SIGINT)
                break
        else:
            pass
        assert any(marker in l for l in seen), "marker never appeared:\n" + "".join(seen)
        rest = proc.communicate(timeout=120)[1]
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, "".join(seen) + rest


@pytest.fixture(scope="module")
def seed(seed_bed):
    global BED_DIR, BED_NET
    BED_DIR, BED_NET = seed_bed.dir, seed_bed.net
    # every bed shares this machine's network namespace (--network host): take a serve port nobody holds
    import socket
    import tomllib

    sys.path.insert(0, str(ROOT / "scripts" / "testbed_scenarios"))
    import seed as seed_mod

    with socket.socket() as sk:
        sk.bind(("127.0.0.1", 0))
        port = sk.getsockname()[1]
    data = tomllib.loads((BED_DIR / "cluster.toml").read_text())
    data["cluster"]["serve_port"] = port
    seed_mod.write_config(BED_DIR / "cluster.toml", data)
    yield BED_DIR


def write_config(tmp_path: Path, *, model_path: str | None = None, **cluster) -> Path:
    import tomllib

    sys.path.insert(0, str(ROOT / "scripts" / "testbed_scenarios"))
    import seed as seed_mod  # the scenario's own TOML writer

    data = tomllib.loads((BED_DIR / "cluster.toml").read_text())
    if model_path is not None:
        data["cluster"]["model_path"] = model_path
    data["cluster"].update(cluster)
    out = tmp_path / "cluster.toml"
    seed_mod.write_config(out, data)
    return out


# ------------------------------------------------------------------ the story, in order

def test_seed_doctor_fails_architecture_warns_entrypoint_and_memory(seed):
    r = cli("doctor", "--json")
    assert r.returncode == 1, r.stderr
    res = as_json(r)
    assert "unsupported_architecture" in ids_of(res, "error")
    warnings = ids_of(res, "warning")
    assert "docker_entrypoint_error" in warnings  # the community image's env-driven ENTRYPOINT
    assert "insufficient_free_memory" in warnings  # one node cannot hold 119 GiB
    checks = {(c["check"], c["status"]) for c in res["data"]["checks"]}
    assert ("memory_fit", "ok") in checks  # ... but TP=2 fits
    arch = next(c for c in res["data"]["checks"] if c["check"] == "architecture")
    assert "Qwen3_5MoeForConditionalGeneration" in arch["title"] and arch["fix"]


def test_build_and_push_make_doctor_pass(seed):
    r = cli("build-image", "--yes", "--json")
    assert r.returncode == 0, r.stderr
    built = as_json(r)
    assert 'RUN ["python3", "/opt/sparktui/patch_vllm_registry.py", "--arch", ' \
           '"Qwen3_5MoeForConditionalGeneration=qwen3_5:Qwen3_5MoeForConditionalGeneration"' in built["data"]["dockerfile"]
    # the bed's base is CPU vLLM: no CUDA toolkit, so no nccl-tests stage, and the result says why in one line
    assert built["data"]["nccl_tests"].startswith("nccl-tests not added: ") and "nvcc" in built["data"]["nccl_tests"]
    assert "AS nccl-tests" not in built["data"]["dockerfile"]
    assert built["summary"].endswith(built["data"]["nccl_tests"])
    assert image_id("spark1", HYBRID) == built["data"]["id"]
    assert image_id("spark2", HYBRID) is None
    r = cli("push-image", "--yes", "--json")
    assert r.returncode == 0, r.stderr
    pushed = as_json(r)
    assert image_id("spark1", HYBRID) == image_id("spark2", HYBRID) == pushed["data"]["id"]
    assert pushed["data"]["mb_per_s"]["spark2"] > 0
    assert "MB/s" in r.stderr  # the progress line
    # spark2 holds the base's layers: only the patch layers above them crossed
    step = next(s for s in pushed["steps"] if s["name"] == "push spark2")
    size = json.loads(docker("spark1", "image", "inspect", "--format", "{{json .Size}}", HYBRID).stdout)
    assert step["data"]["layers_left_out"] >= 1 and step["data"]["bytes"] < size / 10, step
    assert "that spark2 holds" in step["message"]
    r = cli("doctor", "--json")
    res = as_json(r)
    errors = [f for f in res["findings"] if f["severity"] == "error"]
    # Ray's fixed ports (6379/8265) may be held by another test's Ray in this shared network namespace
    import tomllib

    port = tomllib.loads((BED_DIR / "cluster.toml").read_text())["cluster"]["serve_port"]
    foreign = [f for f in errors if f["id"] == "port_in_use" and all(f":{port} " not in e for e in f["evidence"])]
    assert [f for f in errors if f not in foreign] == []
    assert r.returncode == (1 if foreign else 0)
    assert res["data"]["image"] == HYBRID
    assert {c["status"] for c in res["data"]["checks"] if c["check"] in ("architecture", "image_id")} == {"ok"}


def test_validate_hybrid_reports_architecture_ok_and_predicted_oom(seed):
    if image_id("spark1", HYBRID) is None:
        assert cli("build-image", "--yes").returncode == 0
    r = cli("validate", "--yes", "--json", "--image", HYBRID)
    res = as_json(r)
    assert r.returncode == 0, res
    assert res["summary"].startswith("architecture OK, OOM as predicted")
    assert res["data"]["architecture_resolved"] and res["data"]["oom"] and res["data"]["predicted_oom"]
    plan = next(s for s in res["steps"] if s["name"] == "plan")
    assert plan["status"] == "warn" and "OOM expected" in plan["message"]
    assert "OOM expected" in r.stderr.split("start:")[0]  # said BEFORE the container starts
    assert not [c for c in containers("spark1") if "validate" in c]


def test_validate_community_image_uses_its_env_contract(seed):
    r = cli("validate", "--yes", "--json", "--image", "vllm-qwen35-community")
    res = as_json(r)
    plan = next(s for s in res["steps"] if s["name"] == "plan")
    assert plan["data"]["mode"] == "env"
    assert plan["data"]["env"]["MODEL_PATH"] == "/root/.cache/huggingface/hub/Qwen3.5-122B-A10B-FP8"
    import tomllib

    assert plan["data"]["env"]["PORT"] == str(tomllib.loads((BED_DIR / "cluster.toml").read_text())["cluster"]["serve_port"])
    assert r.returncode == 0 and res["data"]["architecture_resolved"], res


def test_validate_old_image_fails_with_the_reason(seed):
    res = as_json(r := cli("validate", "--yes", "--json", "--image", "vllm-node"))
    assert r.returncode == 1
    assert ids_of(res) & {"transformers_version_mismatch", "unsupported_architecture"}
    assert not [c for c in containers("spark1") if "validate" in c]


# ------------------------------------------------------------------ hostile input

def test_hostile_model_path_stays_one_path(seed, tmp_path):
    pwned = Path(f"/tmp/pwned-{uuid.uuid4().hex[:6]}")
    src = BED_DIR / "models" / "Qwen3.5-122B-A10B-FP8"
    odd = BED_DIR / "models" / f"odd dir 'q\" $(touch {pwned})"
    shutil.rmtree(odd, ignore_errors=True)
    shutil.copytree(src, odd)
    try:
        cfg = write_config(tmp_path, model_path=str(odd))
        res = as_json(cli("doctor", "--json", config=cfg))
        model_checks = [c for c in res["data"]["checks"] if c["check"] == "model_path"]
        assert {c["status"] for c in model_checks} == {"ok"}
        assert all(c["title"].startswith(str(odd) + ":") for c in model_checks)
        if image_id("spark1", HYBRID) is None:
            assert cli("build-image", "--yes").returncode == 0
        r = cli("validate", "--yes", "--json", "--image", HYBRID, config=cfg)
        res = as_json(r)
        assert r.returncode == 0 and res["data"]["architecture_resolved"], res  # the stand-in read the mounted config
        assert not pwned.exists(), "a shell interpreted the model path"
    finally:
        shutil.rmtree(odd, ignore_errors=True)
        pwned.unlink(missing_ok=True)


def test_missing_model_dir(seed, tmp_path):
    cfg = write_config(tmp_path, model_path=str(BED_DIR / "models" / "nope"))
    r = cli("doctor", "--json", config=cfg)
    assert r.returncode == 1 and "model_path_missing" in ids_of(as_json(r), "error")
    before = containers("spark1")
    r = cli("validate", "--yes", "--json", config=cfg)
    res = as_json(r)
    assert r.returncode == 1 and "model_path_missing" in ids_of(res)
    assert "does not exist" in res["summary"]
    assert containers("spark1") == before  # nothing was started


def test_unknown_image(seed):
    for args in (("validate", "--yes", "--json", "--image", "no-such-image:1"),
                 ("push-image", "--yes", "--json", "--image", "no-such-image:1"),
                 ("build-image", "--yes", "--json", "--base", "no-such-image:1", "--tag", "never-made")):
        r = cli(*args)
        res = as_json(r)
        assert r.returncode == 1, args
        assert "image_not_found" in ids_of(res), (args, res)
        assert "no-such-image:1" in res["summary"]
    assert image_id("spark1", "never-made") is None


def test_unknown_registry_layout_fails_the_build_cleanly(seed):
    df = ("FROM vllm-node\nRUN printf 'def models():\\n    return {}\\n' > "
          "/opt/standin/site/vllm/model_executor/models/registry.py\n")
    b = subprocess.run(["docker", "-H", f"unix://{BED_DIR}/nodes/spark1/docker.sock", "build", "-q", "-t",
                        "odd-registry", "-"], input=df, capture_output=True, text=True, timeout=120)
    assert b.returncode == 0, b.stderr
    docker("spark1", "rmi", "-f", "odd-hybrid")
    before = containers("spark1")
    r = cli("build-image", "--yes", "--json", "--base", "odd-registry", "--tag", "odd-hybrid")
    res = as_json(r)
    assert r.returncode == 1
    assert "unknown layout" in res["summary"] and "_TEXT_GENERATION_MODELS" in res["summary"]
    assert "image_build_failed" in ids_of(res)
    assert image_id("spark1", "odd-hybrid") is None
    assert containers("spark1") == before  # no intermediate containers left


def test_push_to_a_full_disk_fails_cleanly(seed, seed_bed):
    """spark2's dockerd on a 64 MB tmpfs data root: docker load runs out of space mid-stream."""
    sys.path.insert(0, str(ROOT / "scripts"))
    env_before = dict(os.environ)
    os.environ.update(seed_bed.env)
    try:
        from testbed_lib.bed import Bed

        bed = Bed()
        n = bed.node("spark2")
        data = n.dir / "docker" / "data"
        if image_id("spark1", HYBRID) is None:
            assert cli("build-image", "--yes").returncode == 0
        bed.stop_dockerd(n)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(data)], check=True)
        try:
            bed.start_dockerd(n)
            r = cli("push-image", "--yes", "--json", "--image", HYBRID)
            res = as_json(r)
            assert r.returncode == 1
            assert "image_push_failed" in ids_of(res)
            assert "no space left" in res["summary"].lower()
            assert "nothing new on the target" in res["summary"]
            assert image_id("spark2", HYBRID) is None
            assert bed_procs("docker save") == []
        finally:
            bed.stop_dockerd(n)
            if subprocess.run(["umount", str(data)], capture_output=True).returncode != 0:
                # busy a moment longer (containerd still exiting on a loaded machine): detach it now, or
                # spark2's dockerd comes back on the empty tmpfs and every later test finds no image there
                subprocess.run(["umount", "-l", str(data)], check=True)
            bed.start_dockerd(n)
    finally:
        os.environ.clear()
        os.environ.update(env_before)
    assert image_id("spark2", "sparktui-base:bookworm") is not None  # spark2 is back on its own data root


# ------------------------------------------------------------------ cancel

def test_cancel_during_build_cleans_up(seed):
    # a base whose registry import takes long inside our build only (the patch script is there): the
    # patch's verify-by-import keeps the build busy; the plan's probe of the base stays quick
    df = ("FROM vllm-node\nRUN echo 'import os, time; os.path.exists(\"/opt/sparktui/patch_vllm_registry.py\") "
          "and time.sleep(60)' >> /opt/standin/site/vllm/model_executor/models/registry.py\n")
    b = subprocess.run(["docker", "-H", f"unix://{BED_DIR}/nodes/spark1/docker.sock", "build", "-q", "-t",
                        "slow-base", "-"], input=df, capture_output=True, text=True, timeout=120)
    assert b.returncode == 0, b.stderr
    docker("spark1", "rmi", "-f", "slow-hybrid")
    before = containers("spark1")
    try:
        rc, err = cancel_when(["build-image", "--config", str(BED_DIR / "cluster.toml"), "--yes", "--base",
                               "slow-base", "--tag", "slow-hybrid"], "Step 3/")
        assert rc == 130, err
        assert "cancelled" in err
        assert image_id("spark1", "slow-hybrid") is None
        assert containers("spark1") == before  # the aborted RUN step's container was removed by the cleanup
    finally:
        # left on the shared bed, every later doctor whose image lacks the architecture probes it among
        # the "other images" and waits out its 60 s import (tests/e2e/test_newcomer_on_bed.py: ~60 s a test)
        docker("spark1", "rmi", "-f", "slow-base")


def test_cancel_during_push_cleans_up(seed):
    big = "big-image"
    # 1.5 GB more (zeros: cheap to make; docker save does not compress): the copy must outlast the
    # first progress line (dd's, after 1 s) on a fast machine too: 400 MB once finished before it
    if image_id("spark1", big) is None:
        b = subprocess.run(["docker", "-H", f"unix://{BED_DIR}/nodes/spark1/docker.sock", "build", "-q", "-t", big,
                            "-"], input="FROM vllm-node\nRUN head -c 1536M /dev/zero > /big.bin\n",
                           capture_output=True, text=True, timeout=300)
        assert b.returncode == 0, b.stderr
    docker("spark2", "rmi", "-f", big)
    rc, err = cancel_when(["push-image", "--config", str(BED_DIR / "cluster.toml"), "--yes", "--image", big],
                          "MB/s")
    assert rc == 130, err
    assert image_id("spark2", big) is None  # nothing half-loaded under the tag
    assert bed_procs("docker save") == [] and bed_procs("sparktui-push-") == []
    assert bed_procs("SPARKTUI-SKIPPED") == []  # the layer filter (its source is its command line)


def test_a_stale_layer_plan_falls_back_to_the_whole_image_and_full_sends_everything(seed):
    """The target was asked what it holds, then lost a layer before the copy (an image removed and
    pruned): docker load finds a layer's file missing, and the image is sent again whole.  `--full`
    sends every layer whatever the target holds."""
    import asyncio

    from sparktui.actions.base import ActionContext
    from sparktui.actions.cli_runner import close_nodes, make_nodes
    from sparktui.actions.push import PushImageAction
    from sparktui.config import load_config
    from sparktui.probes.layers import plan_layers

    img = f"stale-{uuid.uuid4().hex[:6]}"
    b = subprocess.run(["docker", "-H", f"unix://{BED_DIR}/nodes/spark1/docker.sock", "build", "-q", "-t", img, "-"],
                       input="FROM vllm-node\nRUN echo one > /one\nRUN echo two > /two\n",
                       capture_output=True, text=True, timeout=300)
    assert b.returncode == 0, b.stderr
    try:
        class Stale(PushImageAction):
            async def _plan(self, target, info):  # as if spark2 held every layer but the top
                return plan_layers(info.layers, [(info.layers[:-1], 0)])

        async def push():
            config = load_config(BED_DIR / "cluster.toml")
            nodes = make_nodes(config)
            try:
                return await Stale(image=img, targets=["spark2"]).run(ActionContext(config, nodes, assume_yes=True))
            finally:
                await close_nodes(nodes)

        res = asyncio.run(push())
        assert res.ok, res.summary
        steps = {s.name: s for s in res.steps if s.name.startswith("push")}
        assert steps["push spark2"].status == "warn" and "sending the whole image" in steps["push spark2"].message
        assert steps["push spark2 whole"].status == "ok" and "left out" not in steps["push spark2 whole"].message
        assert image_id("spark2", img) == image_id("spark1", img)
        assert docker("spark2", "run", "--rm", img, "cat", "/one", "/two").stdout.split() == ["one", "two"]

        docker("spark2", "rmi", img, check=True)
        r = cli("push-image", "--yes", "--json", "--full", "--image", img)
        pushed = as_json(r)
        assert r.returncode == 0, pushed["summary"]
        step = next(s for s in pushed["steps"] if s["name"] == "push spark2")
        assert "layers_left_out" not in step["data"]
        size = json.loads(docker("spark1", "image", "inspect", "--format", "{{json .Size}}", img).stdout)
        assert step["data"]["bytes"] >= size  # every layer crossed (the tar adds headers)
    finally:
        for node in ("spark1", "spark2"):
            docker(node, "rmi", "-f", img)


def test_cancel_during_validate_removes_the_container(seed):
    if image_id("spark1", HYBRID) is None:
        assert cli("build-image", "--yes").returncode == 0
    rc, err = cancel_when(["validate", "--config", str(BED_DIR / "cluster.toml"), "--yes", "--image", HYBRID],
                          "start:")
    assert rc == 130, err
    assert not [c for c in containers("spark1") if "validate" in c]


def test_doctor_with_an_unreachable_node(seed, tmp_path):
    import tomllib

    data = tomllib.loads((BED_DIR / "cluster.toml").read_text())
    sys.path.insert(0, str(ROOT / "scripts" / "testbed_scenarios"))
    import seed as seed_mod

    data["node"][1]["host"] = BED_NET + ".99"  # nothing listens there
    cfg = tmp_path / "cluster.toml"
    seed_mod.write_config(cfg, data)
    r = cli("doctor", "--json", config=cfg)
    res = as_json(r)
    assert r.returncode == 1
    ssh = [c for c in res["data"]["checks"] if c["check"] == "ssh"]
    assert [(c["node"], c["status"]) for c in ssh] == [("spark1", "ok"), ("spark2", "fail")]
    assert "ssh_unreachable" in ids_of(res, "error")
    image = next(c for c in res["data"]["checks"] if c["check"] == "image_id")
    assert image["status"] != "ok" and "spark2" in image["title"]  # never "same everywhere" unverified
