"""scripts/patch_vllm_registry.py on files in vLLM's / transformers' real layouts (the test-bed
stand-in copies), run as a subprocess exactly as an image build runs it."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from sparktui.actions.dockerfile import (HybridSpec, build_context, config_class_for, entries_from_model,
                                         module_for, render_dockerfile)

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "patch_vllm_registry.py"
SITE = ROOT / "scripts" / "testbed_images" / "site"
REG = Path("vllm/model_executor/models/registry.py")
CMAP = Path("transformers/models/auto/configuration_auto.py")
ARCH = "Qwen3_5MoeForConditionalGeneration=qwen3_5:Qwen3_5MoeForConditionalGeneration"


@pytest.fixture
def site(tmp_path) -> Path:
    dst = tmp_path / "site"
    shutil.copytree(SITE, dst)
    return dst


def run_patch(site: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(site)}
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=60)


def registry_dicts(path: Path) -> dict[str, set[str]]:
    tree = ast.parse(path.read_text())
    out = {}
    for n in tree.body:
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Dict) and isinstance(n.targets[0], ast.Name):
            out[n.targets[0].id] = {k.value for k in n.value.keys if isinstance(k, ast.Constant)}
    return out


def test_adds_entries_where_vllm_keeps_them_and_verifies_by_import(site):
    r = run_patch(site, "--arch", ARCH, "--arch", "Qwen3_5ForCausalLM=qwen3_5:Qwen3_5ForCausalLM",
                  "--model-type", "qwen3_5_moe=Qwen3_5MoeConfig")
    assert r.returncode == 0, r.stderr
    assert "verified by import" in r.stdout
    d = registry_dicts(site / REG)
    assert "Qwen3_5MoeForConditionalGeneration" in d["_MULTIMODAL_MODELS"]
    assert "Qwen3_5ForCausalLM" in d["_TEXT_GENERATION_MODELS"]
    assert '"Qwen3_5MoeForConditionalGeneration": ("qwen3_5", "Qwen3_5MoeForConditionalGeneration"),' in (site / REG).read_text()
    # importable and merged like vLLM does
    out = subprocess.run([sys.executable, "-c", "from vllm.model_executor.models.registry import ModelRegistry as R;"
                          "from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES as C;"
                          "print('Qwen3_5MoeForConditionalGeneration' in R.get_supported_archs(), C['qwen3_5_moe'])"],
                         capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(site)})
    assert out.stdout.split() == ["True", "Qwen3_5MoeConfig"]


def test_idempotent(site):
    assert run_patch(site, "--arch", ARCH, "--model-type", "qwen3_5_moe=Qwen3_5MoeConfig").returncode == 0
    before = ((site / REG).read_bytes(), (site / CMAP).read_bytes())
    r = run_patch(site, "--arch", ARCH, "--model-type", "qwen3_5_moe=Qwen3_5MoeConfig")
    assert r.returncode == 0, r.stderr
    assert "already has every entry" in r.stdout
    assert ((site / REG).read_bytes(), (site / CMAP).read_bytes()) == before


def test_existing_entry_in_any_dict_is_not_duplicated(site):
    r = run_patch(site, "--arch", "Qwen3MoeForCausalLM=qwen3_moe:Qwen3MoeForCausalLM")
    assert r.returncode == 0
    assert (site / REG).read_text().count('"Qwen3MoeForCausalLM":') == 1


def test_unknown_registry_layout_fails_clearly_and_changes_nothing(site):
    (site / REG).write_text("def models():\n    return {'LlamaForCausalLM': ('llama', 'LlamaForCausalLM')}\n")
    before_reg, before_map = (site / REG).read_bytes(), (site / CMAP).read_bytes()
    r = run_patch(site, "--arch", ARCH, "--model-type", "qwen3_5_moe=Qwen3_5MoeConfig")
    assert r.returncode == 3
    assert "unknown layout" in r.stderr and "_TEXT_GENERATION_MODELS" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1  # one clear line, no traceback
    assert (site / REG).read_bytes() == before_reg and (site / CMAP).read_bytes() == before_map


def test_unknown_config_map_layout_leaves_registry_untouched_too(site):
    (site / CMAP).write_text("CONFIG_MAPPING_NAMES = dict(bert='BertConfig')\n")
    before = (site / REG).read_bytes()
    r = run_patch(site, "--arch", ARCH, "--model-type", "qwen3_5_moe=Qwen3_5MoeConfig")
    assert r.returncode == 3 and "CONFIG_MAPPING_NAMES" in r.stderr
    assert (site / REG).read_bytes() == before


def test_failed_import_restores_the_file(site):
    reg = site / REG
    reg.write_text(reg.read_text() + "\nraise ImportError('torch is missing')\n")
    before = reg.read_bytes()
    r = run_patch(site, "--arch", ARCH)
    assert r.returncode == 1
    assert "torch is missing" in r.stderr and "restored" in r.stderr
    assert reg.read_bytes() == before


def test_missing_package_and_bad_arguments(tmp_path):
    r = run_patch(tmp_path, "--arch", ARCH)  # no vllm on this PYTHONPATH
    assert r.returncode == 3 and "registry not found" in r.stderr
    r = run_patch(tmp_path, "--arch", "Qwen3_5$(touch x)")
    assert r.returncode == 2
    assert run_patch(tmp_path).returncode == 2


def test_naming_follows_vllm_and_transformers():
    assert module_for("qwen3_5_moe") == "qwen3_5"
    assert config_class_for("qwen3_5_moe") == "Qwen3_5MoeConfig"
    assert config_class_for("qwen3_moe") == "Qwen3MoeConfig"
    arches, types = entries_from_model(["Qwen3_5MoeForConditionalGeneration"], "qwen3_5_moe")
    assert arches == (("Qwen3_5MoeForConditionalGeneration", "qwen3_5", "Qwen3_5MoeForConditionalGeneration"),)
    assert types == (("qwen3_5_moe", "Qwen3_5MoeConfig"),)


def test_dockerfile_and_context():
    spec = HybridSpec(base="vllm-node", tag="vllm-node-qwen35",
                      architectures=(("Qwen3_5MoeForConditionalGeneration", "qwen3_5", "Qwen3_5MoeForConditionalGeneration"),),
                      model_types=(("qwen3_5_moe", "Qwen3_5MoeConfig"),), clear_entrypoint=True)
    text = render_dockerfile(spec)
    lines = text.splitlines()
    assert "FROM vllm-node" in lines
    assert any(l.startswith("COPY patch_vllm_registry.py ") for l in lines)
    assert 'RUN ["python3", "/opt/sparktui/patch_vllm_registry.py", "--arch", "Qwen3_5MoeForConditionalGeneration=qwen3_5:Qwen3_5MoeForConditionalGeneration", "--model-type", "qwen3_5_moe=Qwen3_5MoeConfig"]' in lines
    assert "ENTRYPOINT []" in lines
    assert "ENTRYPOINT []" not in render_dockerfile(HybridSpec("b", "t", (), ()))
    with tarfile.open(fileobj=build_context(spec)) as tar:
        assert sorted(tar.getnames()) == ["Dockerfile", "patch_vllm_registry.py"]
        assert tar.extractfile("Dockerfile").read().decode() == text
