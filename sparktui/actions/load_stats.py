"""Per-request records of a load test -> the summary ``vllm bench serve`` prints, under its field names.

Definitions follow vLLM's ``benchmarks/serve.py`` (``calculate_metrics``) so the numbers can be set
side by side with a ``vllm bench serve`` run:
- only successful requests enter the latency lists; failed ones only count in ``failed``;
- TTFT: request sent -> first token chunk; ITL: the gaps between consecutive token chunks, pooled
  over all requests; E2EL: request sent -> last chunk of the answer;
- TPOT per request = (E2EL - TTFT) / (output_tokens - 1), only for requests with > 1 output token;
- output tokens from the server's ``usage`` (when it is a plain count); without it, the number of token chunks (vLLM falls back
  to its tokenizer, or 1);
- mean, median, std (population, numpy's default), percentiles with numpy's default linear
  interpolation; an empty list reads as 0, as ``np.percentile(ttfts or 0, p)`` does;
- throughputs are per second of the run's wall-clock ``duration``.

``latency_plot`` renders a text plot with plotext (imported lazily; "" when it is missing).  No IO.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from ..probes.api_guard import token_count

PERCENTILES = (50.0, 90.0, 99.0)
METRICS = ("ttft", "tpot", "itl", "e2el")


@dataclass
class RequestRecord:
    """One request as the client saw it; times in seconds (``start`` relative to the run's start)."""

    index: int
    start: float
    ok: bool = False
    ttft: float | None = None
    itl: list[float] = field(default_factory=list)
    latency: float | None = None
    prompt_tokens: int = 0  # from usage
    input_len: int | None = None  # the prompt's length in tokens as counted when it was built
    output_tokens: int | None = None  # from usage; None when the server sent none
    chunks: int = 0  # token chunks received (content or reasoning)
    error_kind: str | None = None  # http_401 / timeout / connection / api / no_token / ...
    error: str | None = None  # one line, never a header


def percentile(values: Sequence[float], p: float) -> float:
    """numpy's default (``method="linear"``) percentile of ``values``; 0.0 when empty."""
    if not values:
        return 0.0
    xs = sorted(values)
    rank = (len(xs) - 1) * p / 100.0
    lo = math.floor(rank)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (rank - lo)


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values) if values else 0.0


def _std(values: Sequence[float]) -> float:
    if not values:
        return 0.0
    m = _mean(values)
    return math.sqrt(math.fsum((v - m) ** 2 for v in values) / len(values))


def output_len(r: RequestRecord) -> int:
    # a server's count only when it is one (10**400 or NaN would overflow or poison every sum)
    return token_count(r.output_tokens) or max(r.chunks, 1)


def summarize(records: Iterable[RequestRecord], duration: float, *, max_concurrency: int | None = None,
              percentiles: Sequence[float] = PERCENTILES) -> dict:
    """The ``vllm bench serve`` result object (its scalar fields) plus ``errors`` by kind."""
    recs = list(records)
    ok = [r for r in recs if r.ok]
    failed = [r for r in recs if not r.ok]
    lists: dict[str, list[float]] = {m: [] for m in METRICS}
    total_in = total_out = 0
    for r in ok:
        n = output_len(r)
        total_out += n
        total_in += token_count(r.prompt_tokens) or 0
        ttft = r.ttft or 0.0
        lat = r.latency or 0.0
        if n > 1:
            lists["tpot"].append((lat - ttft) / (n - 1))
        lists["itl"].extend(r.itl)
        lists["ttft"].append(ttft)
        lists["e2el"].append(lat)
    dur = duration if duration > 0 else float("nan")
    out: dict = {
        "duration": duration,
        "completed": len(ok),
        "failed": len(failed),
        "total_input_tokens": total_in,
        "total_output_tokens": total_out,
        "request_throughput": len(ok) / dur if duration > 0 else 0.0,
        "output_throughput": total_out / dur if duration > 0 else 0.0,
        "total_token_throughput": (total_in + total_out) / dur if duration > 0 else 0.0,
        "max_concurrency": max_concurrency,
    }
    for m in METRICS:
        vals = lists[m]
        out[f"mean_{m}_ms"] = _mean(vals) * 1000
        out[f"median_{m}_ms"] = percentile(vals, 50) * 1000
        out[f"std_{m}_ms"] = _std(vals) * 1000
        for p in percentiles:
            word = str(int(p)) if int(p) == p else str(p)
            out[f"p{word}_{m}_ms"] = percentile(vals, p) * 1000
    errors: dict[str, int] = {}
    for r in failed:
        kind = r.error_kind or "error"
        errors[kind] = errors.get(kind, 0) + 1
    out["errors"] = dict(sorted(errors.items(), key=lambda kv: (-kv[1], kv[0])))
    # one example message per kind: what an operator reads first
    examples: dict[str, str] = {}
    for r in failed:
        examples.setdefault(r.error_kind or "error", r.error or "")
    out["error_examples"] = examples
    out.update(input_lengths(recs))
    return out


def input_lengths(records: Iterable[RequestRecord]) -> dict:
    """The input lengths of the requests sent, in tokens: the server's ``usage.prompt_tokens`` where it
    answered (the ground truth), else the count made when the prompt was built; None when neither."""
    lens = [n for r in records if (n := token_count(r.prompt_tokens) or token_count(r.input_len))]
    return {"mean_input_len": _mean(lens) if lens else None, "min_input_len": min(lens, default=None),
            "max_input_len": max(lens, default=None)}


def table_rows(summary: dict, percentiles: Sequence[float] = PERCENTILES) -> list[tuple[str, list[float]]]:
    """(metric label, [mean, median, p...]) for a text or DataTable rendering."""
    names = {"ttft": "TTFT", "tpot": "TPOT", "itl": "ITL", "e2el": "E2EL"}
    rows = []
    for m in METRICS:
        vals = [summary[f"mean_{m}_ms"], summary[f"median_{m}_ms"]]
        for p in percentiles:
            word = str(int(p)) if int(p) == p else str(p)
            vals.append(summary[f"p{word}_{m}_ms"])
        rows.append((names[m], vals))
    return rows


NO_VALUE = "–"  # a latency no completed request measured (the JSON keeps vllm bench serve's 0.0)


def table_cells(summary: dict, percentiles: Sequence[float] = PERCENTILES) -> list[tuple[str, list[str]]]:
    """``table_rows`` as text for the CLI and the TUI: ms to 0.1, "–" when nothing completed."""
    none = summary.get("completed", 0) == 0
    return [(name, [NO_VALUE if none else f"{v:.1f}" for v in vals]) for name, vals in table_rows(summary, percentiles)]


def latency_plot(records: Iterable[RequestRecord], width: int = 80, height: int = 16, *, color: bool = True) -> str:
    """TTFT and E2EL (ms) of each successful request against its start time in the run (s)."""
    try:
        import plotext as plt
    except ImportError:  # the summary table still says everything; the plot is a bonus
        return ""
    ok = sorted((r for r in records if r.ok), key=lambda r: r.start)
    if not ok:
        return ""
    xs = [r.start for r in ok]
    plt.clear_figure()
    plt.plotsize(max(width, 30), max(height, 8))
    plt.theme("clear")
    plt.scatter(xs, [(r.latency or 0) * 1000 for r in ok], label="E2EL ms", marker="dot", color="blue")
    plt.scatter(xs, [(r.ttft or 0) * 1000 for r in ok], label="TTFT ms", marker="x", color="orange")
    plt.xlabel("request start (s)")
    plt.title("latency per request")
    text = plt.build()
    plt.clear_figure()
    return text if color else plt.uncolorize(text)
