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
import shlex
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path

from ..model import BUILD_LABEL

PATCH_SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "patch_vllm_registry.py"
IN_IMAGE_DIR = "/opt/sparktui"
# nccl-tests, pinned: a release tarball (the classic builder's ADD fetches it; no git in the image needed)
NCCL_TESTS_VERSION = "2.19.6"  # its Makefile knows CUDA 13 (C++17, no libnvToolsExt, sm_120 PTX)
NCCL_TESTS_URL = f"https://github.com/NVIDIA/nccl-tests/archive/refs/tags/v{NCCL_TESTS_VERSION}.tar.gz"
NCCL_TESTS_SRC = f"{IN_IMAGE_DIR}/nccl-tests-src"  # in the build stage only; also marks its step containers
NCCL_TESTS_BIN = "/usr/local/bin/all_reduce_perf"  # on PATH, where `sparktui fabric` looks for it


@dataclass(frozen=True)
class NcclTestsBuild:
    """Where the base image keeps what `make MPI=1` in nccl-tests needs (its Makefile's variables)."""

    cuda_home: str  # CUDA_HOME: nvcc is $CUDA_HOME/bin/nvcc
    mpi_home: str  # MPI_HOME: -I$MPI_HOME/include -L$MPI_HOME/lib -lmpi
    nccl_home: str  # NCCL_HOME: -I$NCCL_HOME/include -L$NCCL_HOME/lib


@dataclass(frozen=True)
class HybridSpec:
    base: str
    tag: str
    architectures: tuple[tuple[str, str, str], ...]  # (arch, module, class)
    model_types: tuple[tuple[str, str], ...]  # (model_type, ConfigClass)
    clear_entrypoint: bool = False  # the base has an ENTRYPOINT the cluster start would fight
    workdir: str | None = None
    nccl_tests: NcclTestsBuild | None = None  # build all_reduce_perf in a stage and copy it in


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


# what the probe runs in the base image (sh -c): one key=value a line, empty when absent
NCCL_TESTS_PROBE = (
    'n=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null); echo "nvcc=$n"; '
    # mpirun is often a link (/usr/local/mpi/bin/mpirun, or OpenMPI's own mpirun -> orterun): its real home
    'm=$(command -v mpirun); [ -n "$m" ] && m=$(readlink -f "$m"); echo "mpirun=$m"; '
    'for d in "${n%/bin/nvcc}" /usr /usr/local; do [ -n "$d" ] && [ -f "$d/include/nccl.h" ] && '
    '{ echo "nccl_home=$d"; break; }; done; '
    'mh=${m%/bin/*}; [ -n "$m" ] && [ -f "$mh/include/mpi.h" ] && echo "mpi_home=$mh"; true'
)


def plan_nccl_tests(probe_output: str, base: str) -> tuple[NcclTestsBuild | None, str]:
    """From NCCL_TESTS_PROBE's output: what to build with, or None and the one-line reason."""
    seen: dict[str, str] = {}
    for line in probe_output.splitlines():
        k, sep, v = line.strip().partition("=")
        if sep and k in ("nvcc", "mpirun", "nccl_home", "mpi_home"):
            seen[k] = v.strip()
    nvcc, mpirun = seen.get("nvcc", ""), seen.get("mpirun", "")
    missing = [what for what, ok in (("nvcc", nvcc.endswith("/bin/nvcc")), ("mpirun", bool(mpirun)),
                                     ("nccl.h", bool(seen.get("nccl_home"))), ("mpi.h", bool(seen.get("mpi_home"))))
               if not ok]
    if missing:
        return None, f"nccl-tests not added: {base} has no {', '.join(missing)}"
    return (NcclTestsBuild(cuda_home=nvcc[:-len("/bin/nvcc")], mpi_home=seen["mpi_home"], nccl_home=seen["nccl_home"]),
            f"adds nccl-tests {NCCL_TESTS_VERSION} (all_reduce_perf)")


def _nccl_tests_stage(spec: HybridSpec, nt: NcclTestsBuild) -> list[str]:
    # the paths come from the base image's probe: quoted, so a space or a `$` in one stays a word
    make = shlex.join(["make", "MPI=1", f"MPI_HOME={nt.mpi_home}", f"CUDA_HOME={nt.cuda_home}",
                       f"NCCL_HOME={nt.nccl_home}"])
    # the Makefile picks NVCC_GENCODE from nvcc's version (sm_120 PTX from CUDA 12.8 on: GB10 included)
    script = (f"set -e; mkdir -p {NCCL_TESTS_SRC}; tar -xzf /tmp/nccl-tests.tar.gz -C {NCCL_TESTS_SRC} "
              f"--strip-components=1; cd {NCCL_TESTS_SRC}; {make} -j\"$(nproc)\"; test -x build/all_reduce_perf")
    return [
        f"FROM {spec.base} AS nccl-tests",
        f"LABEL {BUILD_LABEL}={json.dumps(spec.tag or '1')}",
        f"ADD {NCCL_TESTS_URL} /tmp/nccl-tests.tar.gz",
        "RUN " + json.dumps(["sh", "-c", script]),
    ]


def render_dockerfile(spec: HybridSpec) -> str:
    patch = [f"{IN_IMAGE_DIR}/patch_vllm_registry.py"]
    for arch, module, cls in spec.architectures:
        patch += ["--arch", f"{arch}={module}:{cls}"]
    for mtype, cls in spec.model_types:
        patch += ["--model-type", f"{mtype}={cls}"]
    # exec-form (JSON) RUN: no shell ever re-parses these words
    lines = ["# written by sparktui build-image"]
    if spec.nccl_tests:
        lines += _nccl_tests_stage(spec, spec.nccl_tests)
    lines += [
        f"FROM {spec.base}",
        # the RUN step's container is sparktui's own, not the cluster's (model.is_own_probe)
        f"LABEL {BUILD_LABEL}={json.dumps(spec.tag or '1')}",
        f"COPY patch_vllm_registry.py {IN_IMAGE_DIR}/patch_vllm_registry.py",
        "RUN " + json.dumps(["python3", *patch]),
    ]
    if spec.nccl_tests:
        lines.append(f"COPY --from=nccl-tests {NCCL_TESTS_SRC}/build/all_reduce_perf {NCCL_TESTS_BIN}")
    if spec.clear_entrypoint:
        # the cluster start runs `./run-cluster-node.sh ...` as the command; an ENTRYPOINT would get it as args
        lines += ["ENTRYPOINT []", 'CMD ["/bin/bash"]']
    if spec.workdir:
        lines.append(f"WORKDIR {spec.workdir}")
    labels = {"sparktui.hybrid.base": spec.base,
              "sparktui.hybrid.architectures": ",".join(a for a, _, _ in spec.architectures),
              "sparktui.hybrid.model_types": ",".join(t for t, _ in spec.model_types),
              "sparktui.hybrid.nccl_tests": NCCL_TESTS_VERSION if spec.nccl_tests else "",
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
