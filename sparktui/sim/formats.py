"""Render simulated node state in the real text formats of the files and tools probes read.

/proc/meminfo and /proc/pressure/memory as the Linux kernel writes them; nvidia-smi's CSV query
output as a GB10 answers it (memory `[N/A]`: unified memory has no GPU figure; layout as in the
real captures of tests/fixtures/nccl-2gpu/*.gpu.csv and compute-apps.txt).
"""

from __future__ import annotations

from .physics import KB, MEM_TOTAL_KB, NodeSnapshot

DRIVER = "580.95.05"
GPU_UUID = "GPU-5b2a7c1e-90d4-4f1b-a3b7-{:012x}"
BUS_ID = "0000000F:01:00.0"


def meminfo(s: NodeSnapshot) -> str:
    m = s.memory
    total = MEM_TOTAL_KB
    avail = m.available // KB
    cached = m.cached // KB
    buffers = 412_356
    free = max(0, avail - cached - buffers)
    swap_total = m.swap_total // KB
    swap_free = m.swap_free // KB
    used_kb = total - avail
    rows = [
        ("MemTotal", total), ("MemFree", free), ("MemAvailable", avail), ("Buffers", buffers),
        ("Cached", cached), ("SwapCached", 0 if swap_free == swap_total else 5_128),
        ("Active", int(used_kb * 0.62)), ("Inactive", int(cached * 0.7)),
        ("Active(anon)", int(used_kb * 0.55)), ("Inactive(anon)", 131_072),
        ("Active(file)", int(cached * 0.3)), ("Inactive(file)", int(cached * 0.7)),
        ("Unevictable", 30_720), ("Mlocked", 30_720), ("SwapTotal", swap_total), ("SwapFree", swap_free),
        ("Zswap", 0), ("Zswapped", 0), ("Dirty", 1_204), ("Writeback", 0),
        ("AnonPages", int(used_kb * 0.58)), ("Mapped", 1_843_200), ("Shmem", 262_144),
        ("KReclaimable", 389_120), ("Slab", 1_101_824), ("SReclaimable", 389_120), ("SUnreclaim", 712_704),
        ("KernelStack", 38_912), ("PageTables", 96_256), ("SecPageTables", 0), ("NFS_Unstable", 0),
        ("Bounce", 0), ("WritebackTmp", 0), ("CommitLimit", total // 2 + swap_total),
        ("Committed_AS", int(used_kb * 1.1)), ("VmallocTotal", 133_141_626_880), ("VmallocUsed", 180_224),
        ("VmallocChunk", 0), ("Percpu", 22_528), ("HardwareCorrupted", 0), ("AnonHugePages", 0),
        ("ShmemHugePages", 0), ("ShmemPmdMapped", 0), ("FileHugePages", 0), ("FilePmdMapped", 0),
        ("CmaTotal", 0), ("CmaFree", 0), ("HugePages_Total", 0), ("HugePages_Free", 0),
        ("HugePages_Rsvd", 0), ("HugePages_Surp", 0), ("Hugepagesize", 2048), ("Hugetlb", 0),
    ]
    out = []
    for key, val in rows:
        if key.startswith("HugePages_"):
            out.append(f"{key + ':':<16}{val:>8}")
        else:
            out.append(f"{key + ':':<16}{val:>8} kB")
    return "\n".join(out) + "\n"


def pressure(some10: float, full10: float, some60: float, full60: float, some300: float, full300: float,
             some_total: int, full_total: int) -> str:
    return (f"some avg10={some10:.2f} avg60={some60:.2f} avg300={some300:.2f} total={some_total}\n"
            f"full avg10={full10:.2f} avg60={full60:.2f} avg300={full300:.2f} total={full_total}\n")


def loadavg(load: float, t: float, pid: int) -> str:
    return f"{load:.2f} {load * 0.9:.2f} {load * 0.7:.2f} {2 if load > 1 else 1}/1187 {pid}\n"


# nvidia-smi --query-gpu fields: header text and how a GB10 answers
_UNITS = {
    "utilization.gpu": "[%]", "power.draw": "[W]", "power.limit": "[W]", "clocks.sm": "[MHz]",
    "clocks.current.sm": "[MHz]", "clocks.max.sm": "[MHz]", "memory.total": "[MiB]", "memory.used": "[MiB]",
    "memory.free": "[MiB]", "utilization.memory": "[%]", "temperature.gpu": "",
}
_HEADER_NAME = {"clocks.sm": "clocks.current.sm", "temperature.gpu": "temperature.gpu"}


def query_gpu_value(field: str, s: NodeSnapshot, node_index: int, nounits: bool) -> str | None:
    g = s.gpu
    def u(v: str, unit: str) -> str:
        return v if nounits else f"{v} {unit}"
    f = field.strip()
    if f == "index":
        return "0"
    if f in ("name", "gpu_name"):
        return g.name
    if f in ("utilization.gpu",):
        return u(f"{int(g.util_percent or 0)}", "%")
    if f in ("power.draw", "power.draw.instant", "power.draw.average"):
        return u(f"{g.power_w:.2f}", "W")
    if f in ("power.limit", "enforced.power.limit", "memory.total", "memory.used", "memory.free",
             "utilization.memory", "memory.reserved"):
        return "[N/A]"
    if f in ("clocks.sm", "clocks.current.sm", "clocks.gr", "clocks.current.graphics"):
        return u(f"{int(g.clock_sm_mhz or 0)}", "MHz")
    if f in ("clocks.max.sm", "clocks.max.graphics"):
        return u("3003", "MHz")
    if f == "temperature.gpu":
        return f"{int(g.temp_c or 0)}"
    if f == "driver_version":
        return DRIVER
    if f in ("uuid", "gpu_uuid"):
        return GPU_UUID.format(node_index)
    if f in ("pci.bus_id", "gpu_bus_id"):
        return BUS_ID
    if f == "pstate":
        return "P0"
    if f in ("count",):
        return "1"
    return None


def header_for(field: str, nounits: bool) -> str:
    f = field.strip()
    name = _HEADER_NAME.get(f, f)
    unit = _UNITS.get(f, "")
    return f"{name} {unit}".rstrip() if unit and not nounits else name


def compute_apps_value(field: str, s: NodeSnapshot, nounits: bool) -> list[str] | None:
    out = []
    for p in s.gpu.processes:
        f = field.strip()
        if f == "pid":
            out.append(str(p.pid))
        elif f in ("process_name", "name"):
            out.append(p.name)
        elif f in ("used_memory", "used_gpu_memory"):
            mib = (p.used_memory_bytes or 0) // (1024 * 1024)
            out.append(str(mib) if nounits else f"{mib} MiB")
        elif f in ("gpu_uuid",):
            out.append(GPU_UUID.format(0))
        elif f in ("gpu_bus_id",):
            out.append(BUS_ID)
        else:
            return None
    return out


def compute_apps_header(field: str, nounits: bool) -> str:
    f = field.strip()
    if f in ("used_memory", "used_gpu_memory"):
        return "used_gpu_memory" if nounits else "used_gpu_memory [MiB]"
    return {"name": "process_name"}.get(f, f)


def smi_table(s: NodeSnapshot, now_text: str) -> str:
    """Plain `nvidia-smi` on a GB10: memory column `Not Supported`."""
    g = s.gpu
    lines = [
        now_text,
        "+-----------------------------------------------------------------------------------------+",
        f"| NVIDIA-SMI {DRIVER}              Driver Version: {DRIVER}      CUDA Version: 13.0     |",
        "+-----------------------------------------+------------------------+----------------------+",
        "| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |",
        "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |",
        "|                                         |                        |               MIG M. |",
        "|=========================================+========================+======================|",
        f"|   0  NVIDIA GB10                    On  |   {BUS_ID} Off |                  N/A |",
        f"| N/A   {int(g.temp_c or 0):>2}C    P0            {int(g.power_w or 0):>3}W /  N/A  | "
        f"         Not Supported | {int(g.util_percent or 0):>5}%      Default |",
        "|                                         |                        |                  N/A |",
        "+-----------------------------------------+------------------------+----------------------+",
        "",
        "+-----------------------------------------------------------------------------------------+",
        "| Processes:                                                                              |",
        "|  GPU   GI   CI              PID   Type   Process name                        GPU Memory |",
        "|        ID   ID                                                               Usage      |",
        "|=========================================================================================|",
    ]
    if not g.processes:
        lines.append("|  No running processes found                                                             |")
    for p in g.processes:
        mib = (p.used_memory_bytes or 0) // (1024 * 1024)
        lines.append(f"|    0   N/A  N/A        {p.pid:>9}      C   {p.name[:34]:<34} {mib:>7}MiB |")
    lines.append("+-----------------------------------------------------------------------------------------+")
    return "\n".join(lines) + "\n"
