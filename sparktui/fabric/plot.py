"""busbw by message size as a text plot (plotext, as the load test's latency plot), beside the
curve a healthy link would draw.  "" when plotext is missing or nothing was measured.  No IO."""

from __future__ import annotations

from typing import Sequence

from .parse import PerfRow

# the expected curve: a link of bandwidth B with a fixed per-operation cost moves a message of s bytes
# at B * s / (s + B * LATENCY): latency-bound for small messages, the line rate for large ones.  25 us is
# a RoCE all-reduce's small-message time between two nodes (the order nccl-tests shows at 8 B).
LATENCY_S = 25e-6


def expected_busbw(size: int, line_rate_gbps: float) -> float:
    """GB/s a healthy link reaches at ``size`` bytes (2 ranks: busbw = algbw)."""
    bw = line_rate_gbps / 8 * 1e9  # bytes/s
    return bw * size / (size + bw * LATENCY_S) / 1e9


def busbw_plot(rows: Sequence[PerfRow], line_rate_gbps: float, width: int = 80, height: int = 16, *,
               color: bool = True) -> str:
    try:
        import plotext as plt
    except ImportError:
        return ""
    rows = [r for r in rows if r.size > 0]
    if not rows:
        return ""
    xs = [r.size for r in rows]
    plt.clear_figure()
    plt.limitsize(False, False)  # the width asked for, not the terminal plotext guesses (none in a worker)
    plt.plotsize(max(width, 30), max(height, 8))
    plt.theme("clear")
    plt.xscale("log")
    plt.plot(xs, [expected_busbw(s, line_rate_gbps) for s in xs], label=f"expected ({line_rate_gbps:g} Gb/s)",
             marker="dot", color="green")
    plt.plot(xs, [r.busbw for r in rows], label="busbw GB/s", marker="hd", color="blue")
    ticks = xs[:: max(1, len(xs) // 6)]
    plt.xticks(ticks, [_human(x) for x in ticks])
    plt.xlabel("message size (log)")
    plt.title("all_reduce_perf busbw by size")
    text = plt.build()
    plt.clear_figure()
    return text if color else plt.uncolorize(text)


def _human(n: int) -> str:
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if n >= 1 << shift:
            v = n / (1 << shift)
            return f"{v:g}{unit}"
    return f"{n}B"
