"""GPU state from `nvidia-smi --query-gpu` / `--query-compute-apps` (csv, noheader, nounits).

A GB10 answers ``[N/A]`` for memory.used/memory.total (its memory is the host's, read from
/proc/meminfo) while per-process used_memory still works; other fields can say
``Not Supported``.  Both become None.  No nvidia-smi at all -> GpuSample(available=False).
"""

from __future__ import annotations

import csv
import io

from ..units import MIB
from ..model import GpuInfo, GpuProcess, GpuSample

GPU_FIELDS = ("index", "name", "utilization.gpu", "power.draw", "power.limit", "clocks.sm",
              "temperature.gpu", "memory.used", "memory.total")
APP_FIELDS = ("pid", "process_name", "used_memory")
QUERY_GPU = ["nvidia-smi", "--query-gpu=" + ",".join(GPU_FIELDS), "--format=csv,noheader,nounits"]
QUERY_APPS = ["nvidia-smi", "--query-compute-apps=" + ",".join(APP_FIELDS), "--format=csv,noheader,nounits"]
_MISSING = {"[n/a]", "n/a", "[not supported]", "not supported", "[unknown error]", "[insufficient permissions]", ""}


def _num(v: str) -> float | None:
    v = v.strip()
    if v.lower() in _MISSING:
        return None
    # tolerate units in case someone drops nounits ("80.52 W", "0 %", "143771 MiB")
    head = v.split()[0] if v.split() else v
    try:
        return float(head)
    except ValueError:
        return None


def _rows(text: str) -> list[list[str]]:
    return [[c.strip() for c in row] for row in csv.reader(io.StringIO(text)) if row and any(c.strip() for c in row)]


def parse_query_gpu(text: str) -> list[GpuInfo]:
    gpus = []
    for row in _rows(text):
        if len(row) != len(GPU_FIELDS):
            raise ValueError(f"nvidia-smi --query-gpu: expected {len(GPU_FIELDS)} fields, got {row!r}")
        idx = _num(row[0])
        if idx is None:
            raise ValueError(f"nvidia-smi --query-gpu: bad index in {row!r}")
        used, total = _num(row[7]), _num(row[8])
        gpus.append(GpuInfo(
            index=int(idx), name=row[1], util_percent=_num(row[2]), power_w=_num(row[3]),
            power_limit_w=_num(row[4]), clock_sm_mhz=_num(row[5]), temp_c=_num(row[6]),
            mem_used_bytes=int(used * MIB) if used is not None else None,
            mem_total_bytes=int(total * MIB) if total is not None else None,
        ))
    return gpus


def parse_compute_apps(text: str) -> list[GpuProcess]:
    procs = []
    for row in _rows(text):
        if len(row) != len(APP_FIELDS):
            raise ValueError(f"nvidia-smi --query-compute-apps: expected {len(APP_FIELDS)} fields, got {row!r}")
        pid = _num(row[0])
        if pid is None:
            continue
        mem = _num(row[2])
        procs.append(GpuProcess(pid=int(pid), name=row[1], used_memory_bytes=int(mem * MIB) if mem is not None else None))
    return procs


def gpu_sample(node_name: str, query_rc: int, query_out: str, apps_rc: int | None = None, apps_out: str = "",
               err: str = "") -> GpuSample:
    """Build a sample from the two commands' exit codes and output."""
    if query_rc == 127 or "not found" in err.lower() and query_rc != 0:
        return GpuSample(node=node_name, gpus=(), available=False, error="nvidia-smi not found")
    if query_rc != 0:
        msg = (query_out.strip() or err.strip() or f"exit {query_rc}").splitlines()[0]
        return GpuSample(node=node_name, gpus=(), available=True, error=f"nvidia-smi: {msg}")
    try:
        gpus = parse_query_gpu(query_out)
        procs = parse_compute_apps(apps_out) if apps_rc == 0 else []
    except ValueError as exc:
        return GpuSample(node=node_name, gpus=(), available=True, error=str(exc))
    if procs and gpus:
        # compute-apps here has no GPU column; a Spark has one GPU, so they belong to it
        gpus[0] = _with_procs(gpus[0], tuple(procs))
    return GpuSample(node=node_name, gpus=tuple(gpus), available=True)


def _with_procs(g: GpuInfo, procs: tuple[GpuProcess, ...]) -> GpuInfo:
    from dataclasses import replace

    return replace(g, processes=procs)
