"""Unified memory and GPU of a simulated GB10 node as a pure function of (scene, node, t).

Numbers are those of a real DGX Spark: MemTotal ~127.6 GB in /proc/meminfo, vLLM sees
121.63 GiB, idle ~8 GB used; nvidia-smi has no memory figure on GB10 (unified) but per-process use
works.  GPU figures per phase: idle ~4-5 W, NCCL spin ~96 % at 15-21 W (busy-waiting, little work).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from ..model import GpuInfo, GpuProcess, MemoryInfo
from ..units import GIB, KIB
from .script import MODEL_GIB, Phase, Scene

KB = KIB  # /proc/meminfo's "kB" are KiB
MEM_TOTAL_KB = 124_610_196  # ~127.6 GB
MEM_TOTAL = MEM_TOTAL_KB * KB
SWAP_TOTAL = 16 * GIB - 4 * KB
IDLE_USED = 8.0e9
IDLE_CACHE = 3.3e9
RAY_USED = 0.6e9  # raylet, gcs, dashboard once `ray start` ran
CTX_GIB = 1.5  # CUDA context + torch before weights
GRAPHS_GIB = 0.92
VLLM_TOTAL_GIB = 121.63


@dataclass(frozen=True)
class NodeSnapshot:
    memory: MemoryInfo
    gpu: GpuInfo
    proc_bytes: int  # the vLLM worker's GPU (unified) memory, 0 when none
    phase: str
    load: float  # 1-min load average


def _rng(node_name: str, t: float, what: str) -> random.Random:
    return random.Random(f"{node_name}:{what}:{int(t)}")


def _phase_at(phases: list[Phase], t: float) -> tuple[str, float]:
    """Current phase name and progress 0..1 within it (by `until` or the next phase's start)."""
    cur, frac = "idle", 0.0
    for i, ph in enumerate(phases):
        if ph.at > t:
            break
        end = ph.until if ph.until is not None else (phases[i + 1].at if i + 1 < len(phases) else None)
        cur = ph.name
        frac = 1.0 if end is None or end <= ph.at else min(1.0, (t - ph.at) / (end - ph.at))
    return cur, frac


def _started(phases: list[Phase], name: str, t: float) -> Phase | None:
    for ph in phases:
        if ph.name == name and ph.at <= t:
            return ph
    return None


def proc_gib(scene: Scene, node_name: str, t: float) -> float:
    phases = scene.phases.get(node_name, [])
    name, _ = _phase_at(phases, t)
    if name in ("idle", "dead"):
        return 0.0
    world = scene.world or 1
    gib = CTX_GIB
    w = _started(phases, "weights", t)
    if w is not None:
        end = float(w.until) if w.until is not None else w.at + 30.0
        frac = min(1.0, max(0.0, (t - w.at) / (end - w.at)))
        gib += MODEL_GIB / world * frac
    if _started(phases, "kv", t) is not None:
        gib += float(scene.params.get("kv_gib", 21.47))
    g = _started(phases, "graphs", t)
    if g is not None:
        gib += GRAPHS_GIB * min(1.0, (t - g.at) / 10.0)
    return gib


def psi_some(used_frac_avail: float) -> float:
    """PSI `some avg10` rises once MemAvailable falls under 10 % of MemTotal."""
    return 0.0 if used_frac_avail >= 0.10 else min(85.0, (0.10 - used_frac_avail) * 650.0)


def _avail_frac(scene: Scene, node_name: str, t: float) -> float:
    used = IDLE_USED + (RAY_USED if t >= 1.0 else 0.0) + proc_gib(scene, node_name, t) * GIB
    return max(0.0, MEM_TOTAL - used) / MEM_TOTAL


def serving_load(node_name: str, t: float) -> float:
    """0..1 request load while serving: changes every 10 s, deterministic."""
    r = _rng(node_name, t // 10, "load")
    return 0.35 + 0.6 * r.random()


def snapshot(scene: Scene, node_name: str, t: float, gpu_pid: int, gpu_name: str) -> NodeSnapshot:
    phases = scene.phases.get(node_name, [])
    name, frac = _phase_at(phases, t)
    pg = proc_gib(scene, node_name, t)
    rng = _rng(node_name, t, "mem")
    used = IDLE_USED + (RAY_USED if t >= 1.0 else 0.0) + pg * GIB + rng.uniform(-40e6, 40e6)
    used = min(used, MEM_TOTAL - 0.35e9)
    # safetensors reads fill the page cache; it is squeezed when memory runs out
    cache = IDLE_CACHE
    w = _started(phases, "weights", t)
    if w is not None:
        end = float(w.until) if w.until is not None else w.at + 30.0
        cache += 18e9 * min(1.0, max(0.0, (t - w.at) / (end - w.at)))
    cache = max(0.4e9, min(cache, MEM_TOTAL - used - 0.3e9))
    dead = _started(phases, "dead", t)
    if dead is not None:  # evicted page cache does not come back when the process dies
        cache = min(cache, snapshot(scene, node_name, max(0.0, dead.at - 0.5), gpu_pid, gpu_name).memory.cached)
    avail = MEM_TOTAL - used
    af = avail / MEM_TOTAL
    some = psi_some(af)
    swap_used = 0.0 if af >= 0.06 else (0.06 - af) * 40e9
    mem = MemoryInfo(total=MEM_TOTAL, available=int(avail), cached=int(cache), swap_total=SWAP_TOTAL,
                     swap_free=int(SWAP_TOTAL - min(swap_used, SWAP_TOTAL)),
                     psi_some_avg10=round(some, 2), psi_full_avg10=round(some * 0.45, 2))
    g = _rng(node_name, t, "gpu")
    if name in ("idle", "dead", "stall", "ctx"):
        util, power, clock, temp = 0.0, g.uniform(4.2, 5.1) + (1.2 if name in ("ctx", "stall") else 0), 850, 38
    elif name == "weights":
        util, power, clock, temp = g.uniform(3, 12), g.uniform(11.5, 16.0), 1805, 44
    elif name == "profile":
        util, power, clock, temp = g.uniform(88, 99), g.uniform(55, 68), 2405, 58
    elif name == "kv":
        util, power, clock, temp = g.uniform(10, 25), g.uniform(18, 24), 2405, 52
    elif name == "graphs":
        util, power, clock, temp = g.uniform(60, 80), g.uniform(35, 45), 2405, 55
    elif name == "spin":
        util, power, clock, temp = g.uniform(95.0, 97.0), g.uniform(15.0, 21.0), 2405, 47
    else:  # serving
        ld = serving_load(node_name, t)
        util, power, clock, temp = 60 + 37 * ld * g.uniform(0.95, 1.0), 35 + 40 * ld + g.uniform(-2, 2), 2405, 50 + 15 * ld
    procs = ()
    if pg > 0:
        procs = (GpuProcess(pid=gpu_pid, name=gpu_name, used_memory_bytes=int(pg * GIB)),)
    gpu = GpuInfo(index=0, name="NVIDIA GB10", util_percent=round(util), power_w=round(power, 2),
                  power_limit_w=None, clock_sm_mhz=float(clock), temp_c=float(round(temp)),
                  mem_used_bytes=None, mem_total_bytes=None, processes=procs)
    load = {"idle": 0.15, "dead": 0.2, "stall": 1.05, "spin": 2.1, "weights": 3.4}.get(name, 1.6)
    return NodeSnapshot(memory=mem, gpu=gpu, proc_bytes=int(pg * GIB), phase=name, load=load)
