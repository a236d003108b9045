"""Host memory from /proc/meminfo and /proc/pressure/memory (on a GB10 this is the GPU's memory too),
and the host's CPU and IO pressure from /proc/pressure.

Pure parsers: the collector reads both files over the node's existing connection (SFTP, no
process per sample) and hands the text here.
"""

from __future__ import annotations

from ..model import MemoryInfo

MEMINFO = "/proc/meminfo"
PSI_MEMORY = "/proc/pressure/memory"
PSI_CPU = "/proc/pressure/cpu"
PSI_IO = "/proc/pressure/io"


def parse_meminfo(text: str) -> dict[str, int]:
    """``Name:  123 kB`` lines -> {Name: bytes}; lines without a unit (HugePages_*) stay counts."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        name, sep, rest = line.partition(":")
        if not sep:
            continue
        parts = rest.split()
        if not parts or not parts[0].isdigit():
            continue
        value = int(parts[0])
        if len(parts) > 1 and parts[1].lower() == "kb":
            value *= 1024
        out[name.strip()] = value
    return out


def parse_psi(text: str) -> dict[str, float]:
    """``some avg10=0.12 avg60=... total=...`` -> {"some_avg10": 0.12, "full_avg10": ...}."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        kind, _, fields = line.partition(" ")
        for f in fields.split():
            key, eq, val = f.partition("=")
            if eq and key.startswith("avg"):
                try:
                    out[f"{kind}_{key}"] = float(val)
                except ValueError:
                    pass
    return out


def memory_info(meminfo_text: str, psi_text: str | None = None) -> MemoryInfo:
    m = parse_meminfo(meminfo_text)
    if "MemTotal" not in m:
        raise ValueError("no MemTotal in /proc/meminfo")
    # kernels before 3.14 lack MemAvailable: free + page cache is the classic estimate
    available = m.get("MemAvailable", m.get("MemFree", 0) + m.get("Cached", 0) + m.get("Buffers", 0))
    psi = parse_psi(psi_text) if psi_text else {}
    return MemoryInfo(
        total=m["MemTotal"], available=available, cached=m.get("Cached", 0),
        swap_total=m.get("SwapTotal", 0), swap_free=m.get("SwapFree", 0),
        psi_some_avg10=psi.get("some_avg10"), psi_full_avg10=psi.get("full_avg10"),
    )


def some_avg10(psi_text: str | None) -> float | None:
    """One /proc/pressure file -> its ``some avg10`` (percent), None when there is none."""
    return parse_psi(psi_text).get("some_avg10") if psi_text else None
