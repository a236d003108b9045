"""Byte sizes for people: one formatter (a leaf module; nothing here imports sparktui)."""

from __future__ import annotations

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30


def human_bytes(n: float) -> str:
    """1536 -> '1.5 KiB'; whole bytes below 1 KiB; GiB is the largest unit."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"  # unreachable: the loop returns at GiB
