"""A bundle written by `investigate --bundle` is handed to others: it holds no secret a worker's
command line, env, container settings or logs carried (masked as sessions mask them), its files are
the operator's alone (0600, the folders it makes 0700, a folder that was there keeps its mode), and
it still reads back to the same verdict (issue 30 item 12)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from sparktui.cli import main
from sparktui.diagnosis.evidence import read_bundle, write_bundle
from sparktui.diagnosis.verdict import decide

ROOT = Path(__file__).resolve().parents[2]
DEV_BUNDLE = ROOT / "tests" / "fixtures" / "device-runs" / "desync" / "bundle"

API_KEY = "Zq7SECRETapiKeyValue"  # no token shape: only the flag says it is a key
HF = "hf_" + "Abc123XyZ" * 3
WANDB = "wandbSecretValue9876"
SECRETS = (API_KEY, HF, WANDB)


@pytest.fixture
def umask_022():
    old = os.umask(0o022)  # the usual umask: files would be 0644 and folders 0755 unless asked otherwise
    yield
    os.umask(old)


def _evidence_with_secrets():
    ((_, ev),) = read_bundle(DEV_BUNDLE)
    node = ev.nodes[0]
    w = node.workers[0]
    w.cmdline = f"python3 -m vllm.entrypoints.openai.api_server --model m --api-key {API_KEY} --port 8000"
    w.env = {**w.env, "HF_TOKEN": HF, "WANDB_API_KEY": WANDB}
    node.containers["c0ffee"] = {"Env": [f"HF_TOKEN={HF}", "NCCL_DEBUG=INFO"],
                                 "Cmd": ["vllm", "serve", "m", "--api-key", API_KEY]}
    rank = next(iter(node.logs))
    node.logs[rank] = [f"export HF_TOKEN={HF}", f"args: --api-key={API_KEY}", *node.logs[rank]]
    node.notes.append(f"worker 1: launched as vllm serve --api-key {API_KEY}")
    node.threads[0].text += f"\n## env HF_TOKEN={HF}\n"
    return ev


def _mode(p: Path) -> int:
    return stat.S_IMODE(p.lstat().st_mode)


def test_a_bundle_holds_no_secret_and_is_private(tmp_path, umask_022, capsys):
    ev = _evidence_with_secrets()
    verdict = {**decide(ev).to_json(), "quoted": [f"cmd: --api-key {API_KEY}"]}
    out = tmp_path / "made" / "bundle"  # neither folder exists yet
    write_bundle(ev, out, verdict=verdict)

    files = [p for p in out.rglob("*") if p.is_file()]
    assert len(files) > 10
    for p in files:
        data = p.read_bytes()
        for s in SECRETS:
            assert s.encode() not in data, (p.name, s)
        assert _mode(p) == 0o600, (p, oct(_mode(p)))
    for d in [out, *(p for p in out.rglob("*") if p.is_dir())]:
        assert _mode(d) == 0o700, (d, oct(_mode(d)))
    # the names stay: a reader still sees that a key was set
    node_json = (out / "gpuhost" / "node.json").read_text()
    assert "--api-key ***" in node_json and '"HF_TOKEN": "***"' in node_json

    # and it is still a bundle: the same verdict offline
    capsys.readouterr()
    assert main(["investigate", "--offline", str(out)]) == 1
    assert capsys.readouterr().out.startswith("R4: Collective desync")


def test_a_folder_that_was_there_keeps_its_mode(tmp_path, umask_022):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)  # e.g. a team's drop folder: not ours to tighten
    write_bundle(_evidence_with_secrets(), shared)
    assert _mode(shared) == 0o1777
    assert _mode(shared / "gpuhost") == 0o700
    assert _mode(shared / "meta.json") == 0o600
