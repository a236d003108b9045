"""build-image adds nccl-tests' all_reduce_perf (issue 33): a build stage only when the base image has
nvcc, mpirun, nccl.h and mpi.h, otherwise no stage and a one-line note; --no-nccl-tests leaves it out."""

from __future__ import annotations

import asyncio
import json
import subprocess
import tarfile
from pathlib import Path

import pytest

from sparktui.actions.dockerfile import (NCCL_TESTS_BIN, NCCL_TESTS_PROBE, NCCL_TESTS_SRC, HybridSpec,
                                         NcclTestsBuild, build_context, plan_nccl_tests, render_dockerfile)
from sparktui.actions.image import BuildImageAction, _is_build_step, build_failure_advice
from sparktui.cli import build_parser

NGC = NcclTestsBuild(cuda_home="/usr/local/cuda", mpi_home="/opt/hpcx/ompi", nccl_home="/usr")
ARCH = (("Qwen3ForCausalLM", "qwen3", "Qwen3ForCausalLM"),)


def _stages(text: str) -> list[list[str]]:
    out: list[list[str]] = []
    for line in text.splitlines():
        if line.startswith("FROM "):
            out.append([])
        if out:
            out[-1].append(line)
    return out


def test_the_stage_builds_with_the_probed_paths_and_copies_all_reduce_perf_onto_path():
    text = render_dockerfile(HybridSpec("nvcr.io/nvidia/vllm:25.11-py3", "hyb", ARCH, (), nccl_tests=NGC))
    build, final = _stages(text)
    assert build[0] == "FROM nvcr.io/nvidia/vllm:25.11-py3 AS nccl-tests"
    assert final[0] == "FROM nvcr.io/nvidia/vllm:25.11-py3"
    run = next(l for l in build if l.startswith("RUN "))
    script = json.loads(run[4:])[2]
    assert "make MPI=1 MPI_HOME=/opt/hpcx/ompi CUDA_HOME=/usr/local/cuda NCCL_HOME=/usr " in script
    assert script.endswith("; test -x build/all_reduce_perf")
    assert f"COPY --from=nccl-tests {NCCL_TESTS_SRC}/build/all_reduce_perf {NCCL_TESTS_BIN}" in final
    assert any('sparktui.hybrid.nccl_tests="2.' in l for l in final)
    # the step's container is sparktui's own, for the Diagnoser and for a cancel's sweep
    assert any(l.startswith('LABEL sparktui.build="hyb"') for l in build)
    assert _is_build_step(" ".join(json.loads(run[4:])))
    # the script is valid sh
    assert subprocess.run(["sh", "-n", "-c", script], capture_output=True, timeout=10).returncode == 0


def test_a_path_with_a_space_stays_one_make_word():
    odd = NcclTestsBuild(cuda_home="/opt/my cuda", mpi_home="/opt/mpi", nccl_home="/usr")
    script = json.loads(next(l for l in render_dockerfile(HybridSpec("b", "t", (), (), nccl_tests=odd)).splitlines()
                             if l.startswith("RUN ") and "nccl" in l)[4:])[2]
    assert "'CUDA_HOME=/opt/my cuda'" in script


def test_without_it_one_stage_and_no_copy():
    text = render_dockerfile(HybridSpec("vllm-cpu", "hyb", ARCH, ()))
    assert len(_stages(text)) == 1
    assert "nccl-tests" not in text and "all_reduce_perf" not in text
    with tarfile.open(fileobj=build_context(HybridSpec("b", "t", (), (), nccl_tests=NGC))) as tar:
        assert sorted(tar.getnames()) == ["Dockerfile", "patch_vllm_registry.py"]  # ADD fetches the source


def test_plan_from_a_full_ngc_like_probe():
    out = ("nvcc=/usr/local/cuda/bin/nvcc\nmpirun=/opt/hpcx/ompi/bin/orterun\nnccl_home=/usr\n"
           "mpi_home=/opt/hpcx/ompi\n")
    build, note = plan_nccl_tests(out, "nvcr.io/nvidia/vllm:25.11-py3")
    assert build == NGC
    assert note.startswith("adds nccl-tests ")


def test_plan_names_what_the_base_lacks_in_one_line():
    assert plan_nccl_tests("nvcc=\nmpirun=\n", "vllm-cpu") == (
        None, "nccl-tests not added: vllm-cpu has no nvcc, mpirun, nccl.h, mpi.h")
    build, note = plan_nccl_tests("nvcc=/usr/local/cuda/bin/nvcc\nmpirun=\nnccl_home=/usr\n", "cuda-no-mpi")
    assert build is None and note == "nccl-tests not added: cuda-no-mpi has no mpirun, mpi.h"
    assert plan_nccl_tests("", "x")[1] == "nccl-tests not added: x has no nvcc, mpirun, nccl.h, mpi.h"


def _install(root, prefix: str, tool: str, header: str) -> None:
    """root/prefix/bin/tool (executable) and root/prefix/include/header, as a toolkit lays them out."""
    (root / prefix / "bin").mkdir(parents=True)
    (root / prefix / "include").mkdir()
    (root / prefix / "bin" / tool).write_text("#!/bin/sh\n")
    (root / prefix / "bin" / tool).chmod(0o755)
    (root / prefix / "include" / header).write_text("")


def _fake_root(tmp_path, *, cuda: bool, mpi: bool):
    """A directory tree with the files the probe looks for, and a PATH that finds its tools."""
    bins = []
    if cuda:
        _install(tmp_path, "cuda", "nvcc", "nccl.h")
        bins.append(str(tmp_path / "cuda/bin"))
    if mpi:
        _install(tmp_path, "ompi", "orterun", "mpi.h")
        # NGC images reach mpirun through links (/usr/local/mpi -> /opt/hpcx/ompi; OpenMPI's mpirun -> orterun)
        (tmp_path / "link/bin").mkdir(parents=True)
        (tmp_path / "link/bin/mpirun").symlink_to(tmp_path / "ompi/bin/orterun")
        bins.append(str(tmp_path / "link/bin"))
    return ":".join(bins + ["/usr/bin", "/bin"])


def _probe(path: str) -> str:
    r = subprocess.run(["sh", "-c", NCCL_TESTS_PROBE], capture_output=True, text=True, timeout=10,
                       env={"PATH": path})
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_the_probe_script_finds_the_tools_through_path_and_links(tmp_path):
    path = _fake_root(tmp_path, cuda=True, mpi=True)
    build, note = plan_nccl_tests(_probe(path), "base")
    assert build == NcclTestsBuild(cuda_home=str(tmp_path / "cuda"), mpi_home=str(tmp_path / "ompi"),
                                   nccl_home=str(tmp_path / "cuda")), note


def test_the_probe_script_on_a_base_without_mpi(tmp_path):
    if any(Path(d, "mpirun").exists() for d in ("/usr/bin", "/bin")):
        pytest.skip("this machine has an mpirun on the probe's PATH")
    path = _fake_root(tmp_path, cuda=True, mpi=False)
    assert plan_nccl_tests(_probe(path), "cuda-only") == (None, "nccl-tests not added: cuda-only has no mpirun, mpi.h")


def test_no_nccl_tests_option_reaches_the_action_and_asks_nothing():
    args = build_parser().parse_args(["build-image", "--no-nccl-tests"])
    assert args.nccl_tests is False
    assert build_parser().parse_args(["build-image"]).nccl_tests is True
    action = BuildImageAction(nccl_tests=args.nccl_tests)
    # no node: the option decides before any probe would run
    assert asyncio.run(action._nccl_tests(None, "base")) == (None, "nccl-tests not added: --no-nccl-tests")


def test_a_failed_nccl_tests_step_points_at_the_option():
    text = render_dockerfile(HybridSpec("b", "t", (), (), nccl_tests=NGC))
    run = next(l for l in text.splitlines() if l.startswith("RUN ") and "nccl" in l)
    # what the classic builder streams: "Step n/m : <instruction>", then the step's output
    lines = ["Step 1/9 : FROM b AS nccl-tests", f"Step 4/9 : {run}", "make: *** [Makefile:22: src.build] Error 2"]
    assert "--no-nccl-tests" in build_failure_advice(lines, "The command returned a non-zero code: 2")
    patch = ["Step 7/9 : RUN [\"python3\", \"/opt/sparktui/patch_vllm_registry.py\"]", "Traceback"]
    assert build_failure_advice(patch, "returned a non-zero code: 1") == "read the build output above"
