"""GPU runtime statuses named by their structure: allocation status codes and XLA's
RESOURCE_EXHAUSTED are an out of memory, CUDA status enums name their cause; the same names in a
notice, or statuses that are no failure, name nothing.
"""

from __future__ import annotations

import pytest

from sparktui.diagnosis.exc_shapes import default_shapes

from corpus_helpers import line_errors

# ----------------------------------------------------------------------------- allocation status codes


@pytest.mark.parametrize("line", [
    # the driver API's and ROCm's status names, in sentences no pattern has
    "RuntimeError: cuMemCreate returned CUDA_ERROR_OUT_OF_MEMORY for a 4096 MiB chunk",
    "RuntimeError: hipMalloc(&ptr, 8589934592) returned hipErrorOutOfMemory",
])
def test_allocation_status_codes_are_an_out_of_memory(line):
    assert line_errors([line])[:1] == ["cuda_oom"]


def test_xla_resource_exhausted_is_an_out_of_memory():
    assert default_shapes().classify("jaxlib.xla_extension.XlaRuntimeError",
                                     "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 2.00GiB.") == "cuda_oom"


@pytest.mark.parametrize("line", [
    "INFO 06-04 22:38:31 [worker.py:1] CUDA_ERROR_OUT_OF_MEMORY handling: retry with a smaller chunk enabled",
    "RESOURCE_EXHAUSTED limits: 3 requests per second",
])
def test_the_same_names_in_a_notice_are_no_failure(line):
    assert line_errors([line]) == []


# ----------------------------------------------------------------------------- CUDA status enums


@pytest.mark.parametrize("line, fid", [
    # runtime (cudaError*) and driver API (CUDA_ERROR_*) statuses in sentences no pattern has
    ("RuntimeError: cudaMemcpyAsync returned cudaErrorLaunchTimeout", "cuda_error"),
    ("RuntimeError: cuModuleLoadData failed: CUDA_ERROR_NO_BINARY_FOR_GPU", "cuda_error"),
    ("RuntimeError: cudaGetDeviceCount returned cudaErrorNoDevice", "no_gpu_visible"),
    ("RuntimeError: cuInit failed: CUDA_ERROR_NO_DEVICE", "no_gpu_visible"),
    ("RuntimeError: cuInit failed: CUDA_ERROR_INSUFFICIENT_DRIVER", "cuda_driver_too_old"),
    ("RuntimeError: cuInit failed: CUDA_ERROR_SYSTEM_NOT_READY", "gpu_fabric_not_ready"),
    # the specific status wins over the generic one
    ("RuntimeError: cudaMallocAsync returned cudaErrorMemoryAllocation", "cuda_oom"),
])
def test_cuda_status_enums_name_their_cause(line, fid):
    assert line_errors([line])[:1] == [fid]


@pytest.mark.parametrize("line", [
    # statuses that say nothing failed: polled for, or peer access already set up
    "DEBUG 06-04 22:38:31 [stream.py:1] event query: cudaErrorNotReady, polling again",
    "x.cc:12 cudaDeviceEnablePeerAccess returned cudaErrorPeerAccessAlreadyEnabled; continuing",
    "x.cc:12 cuCtxEnablePeerAccess: CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED; continuing",
])
def test_cuda_statuses_that_are_no_failure_name_nothing(line):
    assert line_errors([line, "INFO 06-04 22:38:32 [app.py:20] still starting"]) == []
