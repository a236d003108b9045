"""Byte sizes: the constants and the formatters, in one place (a leaf module; nothing here imports sparktui)."""

from __future__ import annotations

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30
MB = 1_000_000  # decimal megabytes: how docker sizes images and how transfer rates are told


def human_bytes(n: float) -> str:
    """1536 -> '1.5 KiB'; whole bytes below 1 KiB; GiB is the largest unit."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"  # unreachable: the loop returns at GiB


def mib(n: int) -> str:
    """MiB to one decimal from 1 MiB up (file limits read alike: '1024.0 MiB'), whole bytes below."""
    return f"{n / MIB:.1f} MiB" if n >= MIB else f"{n} bytes"


def gib(n: float | None, unit: str = " GiB") -> str:
    """Bytes in GiB to one decimal, '?' when unknown; unit='' where the column names the unit once."""
    return "?" if n is None else f"{n / GIB:.1f}{unit}"
