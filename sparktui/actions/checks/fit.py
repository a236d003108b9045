"""Memory fit on unified memory (GB10): model bytes / TP + KV margin against what vLLM may take.

vLLM reserves ``gpu_memory_utilization x total`` at startup and refuses to start when less than
that is free ("Free memory on device ... is less than desired GPU memory utilization").  The
weights of one rank are ``model bytes / TP``; what is left of the reservation holds the KV cache.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...units import GIB, gib
from . import CheckResult, fail, ok, warn

MIN_KV_BYTES = 2 * GIB  # below this vLLM cannot hold a useful KV cache ("No available memory for the cache blocks")
OVERHEAD_FRACTION = 0.05  # activations, CUDA graphs, NCCL buffers on top of the weights


@dataclass(frozen=True)
class Fit:
    per_rank_weights: int
    reservation: int  # util x total
    needed: int  # weights + overhead + minimal KV
    kv_left: int  # reservation - weights - overhead
    single_node_needed: int
    fits: bool
    fits_single_node: bool
    free_ok: bool  # MemAvailable >= reservation


def parse_meminfo(text: str) -> dict[str, int]:
    out = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            out[key.strip()] = int(parts[0]) * (1024 if parts[1:2] == ["kB"] else 1)
    return out


async def read_meminfo(node, path: str) -> dict[str, int]:
    """A node's meminfo (its ``meminfo_path``); a NodeError when it cannot be read."""
    return parse_meminfo((await node.read_file(path)).decode("utf-8", "replace"))


def compute_fit(model_bytes: int, tp: int, mem_total: int, mem_available: int, util: float) -> Fit:
    tp = max(1, tp)
    per_rank = -(-model_bytes // tp)
    overhead = int(per_rank * OVERHEAD_FRACTION)
    reservation = int(util * mem_total)
    needed = per_rank + overhead + MIN_KV_BYTES
    single = model_bytes + int(model_bytes * OVERHEAD_FRACTION) + MIN_KV_BYTES
    return Fit(per_rank, reservation, needed, reservation - per_rank - overhead, single,
               needed <= reservation, single <= reservation, mem_available >= reservation)


def fit_results(node_name: str, model_bytes: int, size_source: str, tp: int, mem_total: int, mem_available: int,
                util: float) -> list[CheckResult]:
    f = compute_fit(model_bytes, tp, mem_total, mem_available, util)
    ev = [f"model {gib(model_bytes)} ({size_source}) / TP {tp} = {gib(f.per_rank_weights)} of weights per node",
          f"MemTotal {gib(mem_total)}, MemAvailable {gib(mem_available)}; vLLM reserves "
          f"{util:.2f} x total = {gib(f.reservation)}",
          f"left for KV cache after weights + {int(OVERHEAD_FRACTION * 100)}% overhead: {gib(f.kv_left)} "
          f"(needs >= {gib(MIN_KV_BYTES)})"]
    data = {"per_rank_weights": f.per_rank_weights, "reservation": f.reservation, "kv_left": f.kv_left,
            "fits": f.fits, "fits_single_node": f.fits_single_node, "free_ok": f.free_ok}
    out: list[CheckResult] = []
    if not f.fits:
        out.append(fail("memory_fit", f"model does not fit at TP={tp}: {gib(f.needed)} needed per node, "
                        f"{gib(f.reservation)} reservable", node_name, ev,
                        "raise tensor_parallel (more nodes), use a smaller quantisation, or raise "
                        "gpu_memory_utilization (practical ceiling on GB10: 0.85-0.90)",
                        "insufficient_free_memory", data=data))
    elif not f.free_ok:
        out.append(fail("memory_fit", f"only {gib(mem_available)} free, vLLM will ask for {gib(f.reservation)}",
                        node_name, ev,
                        "free memory first: stop other GPU users (GUI, VS Code server, old containers), drop the "
                        "page cache (sudo sh -c 'sync; echo 3 > /proc/sys/vm/drop_caches'), or lower "
                        "gpu_memory_utilization", "insufficient_free_memory", data=data))
    else:
        out.append(ok("memory_fit", f"fits at TP={tp}: {gib(f.per_rank_weights)} weights + "
                      f"{gib(f.kv_left)} for KV per node", node_name, ev, data=data))
    if tp > 1 and not f.fits_single_node:
        out.append(warn("memory_fit_single", f"one node alone cannot hold the model ({gib(f.single_node_needed)} "
                        f"> {gib(f.reservation)}): single-node validation will end in an OOM", node_name,
                        [ev[0], ev[1]],
                        "expected for this model: `validate` then checks architecture support only and "
                        "reports the OOM as predicted; serve it with TP across the nodes",
                        "insufficient_free_memory", data=data))
    return out


CPU_KV_VAR = "VLLM_CPU_KVCACHE_SPACE"  # GiB of KV cache vLLM's CPU backend allocates on each rank


def cpu_kv_request(env: dict[str, str]) -> int | None:
    """Bytes of KV cache a rank of the CPU build will allocate (``VLLM_CPU_KVCACHE_SPACE``, GiB), or
    None when it is not set or not a number (then vLLM's own default and its own error apply)."""
    raw = (env.get(CPU_KV_VAR) or "").strip()
    try:
        gib_asked = float(raw)
    except ValueError:
        return None
    return int(gib_asked * GIB) if gib_asked > 0 else None


def kv_over_memory(env: dict[str, str], meminfo: dict[str, int]) -> str | None:
    """Why a rank's KV cache cannot be allocated on its node, or None.

    vLLM's CPU worker refuses to start when the KV cache it is asked for is more than the memory
    available on its node ("Available memory on node 0 (…) on kv cache allocation is less than
    requested memory for kv (…)"), after it has imported torch and loaded the weights: a minute on
    a small model.  The same comparison, made before anything starts, says it in a second."""
    asked = cpu_kv_request(env)
    avail = meminfo.get("MemAvailable", meminfo.get("MemFree"))
    if asked is None or avail is None or asked <= avail:
        return None
    return (f"{CPU_KV_VAR}={env[CPU_KV_VAR]} asks {gib(asked)} of KV cache, more than the node's "
            f"{gib(avail)} MemAvailable (MemTotal {gib(meminfo.get('MemTotal', 0))})")
