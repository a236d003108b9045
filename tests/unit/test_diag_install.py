"""A broken or mismatched install: torch ops and symbols the image lacks, an ABI version, vLLM's
pynccl without libnccl, a GPU capability the build lacks, the loader's and the op registry's words
anywhere in a log, and the import error printed after the inspection failure it caused.

Each detector is checked on a held-in excerpt of the corpus (fed without our header lines) or a real
line, and on a counterpart without the structure that must name nothing.
"""

from __future__ import annotations

import pytest

from corpus_helpers import body, diagnose_lines, held_in, line_errors, named, ranked, scan_named

# ------------------------------------------------------------------ broken installs

def test_torch_ops_namespace_without_the_op_is_a_broken_install():
    # vLLM installed without its compiled ops: torch.ops._C has no silu_and_mul
    assert scan_named(body("a/vllm_docext_22_opnamespace_silu_and_mul"))[:1] == ["broken_install"]


def test_undefined_symbol_inside_an_import_warning_is_a_broken_install():
    # vLLM logs the failed import of its _C extension as a WARNING with the ImportError's repr
    assert scan_named(body("a/vllm_vllm_5501_c_abi3_undefined_symbol_warning"))[:1] == ["broken_install"]


# ------------------------------------------------------------------ vLLM's pynccl without libnccl

def test_pynccl_library_load_failure_is_a_broken_install(tmp_path):
    assert ranked("a/vllm_vllm_4257_libnccl_missing_init_device", tmp_path)[:1] == ["broken_install"]
    assert ranked("a/vllm_vllm_4294_ray_libnccl_load_failed", tmp_path)[:1] == ["broken_install"]


def test_pynccl_finding_its_library_is_no_fault():
    lines = [
        "INFO 04-22 15:53:32 utils.py:580] Found nccl from library libnccl.so.2",
        "INFO 04-22 15:53:32 pynccl.py:63] vLLM is using nccl==2.18.1",
    ]
    assert not [f for f in diagnose_lines(lines) if f.id == "broken_install"]


# ------------------------------------------------------------------ a report printed before its cause

def _inspect_then_import_error(gap: int) -> list[str]:
    # vLLM names the architecture it could not inspect, then the subprocess's own output follows
    head = ["ERROR 10-23 23:20:26 registry.py:272] Error in inspecting model architecture 'LlamaForCausalLM'"]
    filler = [f"ERROR 10-23 23:20:26 registry.py:272]   step {i} of the inspecting subprocess" for i in range(gap)]
    tail = ["ImportError: /usr/local/lib/python3.12/dist-packages/vllm/_C.abi3.so: undefined symbol: "
            "_ZN3c1013MessageLoggerC1EPKcii"]
    return head + filler + tail


def test_the_import_error_printed_after_the_inspection_failure_is_its_cause():
    got = [f.id for f in diagnose_lines(_inspect_then_import_error(60)) if f.severity != "info"]
    assert got[:2] == ["broken_install", "unsupported_architecture"]


def test_a_later_unrelated_crash_is_not_the_inspection_failures_cause():
    got = [f.id for f in diagnose_lines(_inspect_then_import_error(500)) if f.severity != "info"]
    assert got[:1] == ["unsupported_architecture"]


def test_the_held_in_registry_excerpts_keep_the_install_first(tmp_path):
    for rel in ("a/vllm_vllm_9624_registry_inspect_subprocess_failed", "a/vllm_vllm_9713_windows_registry_inspect"):
        assert ranked(rel, tmp_path)[:1] == ["broken_install"]


# ----------------------------------------------------------------------------- GPU capability

def test_caught_importerror_warning_does_not_mask_the_bf16_error():
    # vLLM logs "Failed to import from vllm._C with ImportError('libcudart...')" as a WARNING and goes on;
    # the failure is the bf16 ValueError on a V100
    got = named(held_in("a/vllm_glm4_510_v100_bf16_dtype"))
    assert got[0] == "dtype_unsupported_gpu"
    assert "broken_install" not in got


# ----------------------------------------------------------------------------- the loader's and the op registry's words


@pytest.mark.parametrize("line", [
    # a/other_flashattention_867's line (no "ImportError:" before it), cut
    "/.local/lib/python3.10/site-packages/flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so: undefined symbol: "
    "_ZN2at4_ops15sum_IntList_out4callERKNS_6TensorEN3c1016OptionalArrayRefIlEEbSt8optional",
    # ld.so's wording for an executable, and an op namespace the build lacks
    "python3: symbol lookup error: /usr/lib/libnccl.so.2: undefined symbol: cudaGetDriverEntryPointByVersion",
    "RuntimeError: operator _C::rms_norm does not exist",
])
def test_loader_and_operator_facts_name_a_broken_install_anywhere_in_the_log(line):
    # followed by more output: a line pattern, not only the log's last words
    assert line_errors([line, "INFO 06-04 22:38:32 [app.py:20] still starting"])[:1] == ["broken_install"]


@pytest.mark.parametrize("line", [
    "INFO 06-04 22:38:31 [x.py:1] checked 214 symbols: no undefined symbol in libfoo",
    "RuntimeError: the operator you asked for does not exist",  # no namespace::name
])
def test_the_same_words_without_the_structure_name_nothing(line):
    assert "broken_install" not in line_errors([line, "INFO 06-04 22:38:32 [app.py:20] still starting"])
