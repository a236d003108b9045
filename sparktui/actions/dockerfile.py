"""The hybrid image recipe: a Dockerfile FROM the chosen base that runs the registry patch, and
the in-memory build context (tar) sent to the head node's Docker API.

Which entries to add comes from ``cluster.add_architectures`` or, when that is empty, from what
the doctor found missing (the model's ``architectures`` and ``model_type``), named the way vLLM
and transformers name them (``qwen3_5_moe`` -> module ``qwen3_5``, config ``Qwen3_5MoeConfig``).
"""

from __future__ import annotations

import io
import json
import re
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path

from ..model import BUILD_LABEL

PATCH_SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "patch_vllm_registry.py"
IN_IMAGE_DIR = "/opt/sparktui"


@dataclass(frozen=True)
class HybridSpec:
    base: str
    tag: str
    architectures: tuple[tuple[str, str, str], ...]  # (arch, module, class)
    model_types: tuple[tuple[str, str], ...]  # (model_type, ConfigClass)
    clear_entrypoint: bool = False  # the base has an ENTRYPOINT the cluster start would fight
    workdir: str | None = None


def module_for(model_type: str) -> str:
    """vLLM keeps the MoE and dense variants in one module: qwen3_5_moe -> qwen3_5."""
    return re.sub(r"_moe$", "", model_type) or model_type


def config_class_for(model_type: str) -> str:
    """transformers' naming: qwen3_5_moe -> Qwen3_5MoeConfig, qwen3_moe -> Qwen3MoeConfig."""
    out = ""
    for part in model_type.split("_"):
        if not part:
            continue
        if out and out[-1].isdigit() and part[0].isdigit():
            out += "_"  # keep digits apart: Qwen3_5, not Qwen35
        out += part[0].upper() + part[1:]
    return out + "Config"


def entries_from_model(architectures, model_type: str) -> tuple[tuple[tuple[str, str, str], ...], tuple[tuple[str, str], ...]]:
    mod = module_for(model_type) if model_type else ""
    arches = tuple((a, mod or a.lower(), a) for a in architectures)
    types = ((model_type, config_class_for(model_type)),) if model_type else ()
    return arches, types


def render_dockerfile(spec: HybridSpec) -> str:
    patch = [f"{IN_IMAGE_DIR}/patch_vllm_registry.py"]
    for arch, module, cls in spec.architectures:
        patch += ["--arch", f"{arch}={module}:{cls}"]
    for mtype, cls in spec.model_types:
        patch += ["--model-type", f"{mtype}={cls}"]
    # exec-form (JSON) RUN: no shell ever re-parses these words
    lines = [
        "# written by sparktui build-image",
        f"FROM {spec.base}",
        # the RUN step's container is sparktui's own, not the cluster's (model.is_own_probe)
        f"LABEL {BUILD_LABEL}={json.dumps(spec.tag or '1')}",
        f"COPY patch_vllm_registry.py {IN_IMAGE_DIR}/patch_vllm_registry.py",
        "RUN " + json.dumps(["python3", *patch]),
    ]
    if spec.clear_entrypoint:
        # the cluster start runs `./run-cluster-node.sh ...` as the command; an ENTRYPOINT would get it as args
        lines += ["ENTRYPOINT []", 'CMD ["/bin/bash"]']
    if spec.workdir:
        lines.append(f"WORKDIR {spec.workdir}")
    labels = {"sparktui.hybrid.base": spec.base,
              "sparktui.hybrid.architectures": ",".join(a for a, _, _ in spec.architectures),
              "sparktui.hybrid.model_types": ",".join(t for t, _ in spec.model_types),
              BUILD_LABEL: ""}  # blank: the cluster's containers from this image are not build steps
    lines.append("LABEL " + " ".join(f"{k}={json.dumps(v)}" for k, v in labels.items()))
    return "\n".join(lines) + "\n"


def _add(tar: tarfile.TarFile, name: str, data: bytes, mode: int = 0o644) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = mode
    info.mtime = int(time.time())
    tar.addfile(info, io.BytesIO(data))


def build_context(spec: HybridSpec, patch_script: Path = PATCH_SCRIPT) -> io.BytesIO:
    """The build context as a tar in memory: Dockerfile + the patch script.  Nothing on disk."""
    if not patch_script.is_file():
        raise FileNotFoundError(f"patch script not found at {patch_script}")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        _add(tar, "Dockerfile", render_dockerfile(spec).encode())
        _add(tar, "patch_vllm_registry.py", patch_script.read_bytes(), 0o755)
    buf.seek(0)
    return buf
