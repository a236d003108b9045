"""vLLM's Prometheus ``/metrics``: parse one scrape into a snapshot, derive rates from two of them.

Parsing is ``prometheus_client``'s text parser; this module only picks vLLM's series (names of
vLLM 0.32's ``vllm/v1/metrics/loggers.py``) and sums them over their label sets (engine,
model_name, finished_reason...).  The parser strips ``_total`` from a counter's *family* name, but
not from its samples, so series are matched on sample names.  A series the server does not expose
stays None: nothing here turns "unknown" into 0.  ``scrape`` is the only IO (aiohttp).  No Textual.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..model import ServingSample

# sample names (after summing over labels) -> snapshot field; the first present wins
_GAUGES = {
    "running": ("vllm:num_requests_running",),
    "waiting": ("vllm:num_requests_waiting",),
    # renamed in vLLM v1; older servers call it gpu_cache_usage_perc (both 0..1)
    "kv_cache_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
}
_COUNTERS = {
    "prompt_tokens": "vllm:prompt_tokens",
    "generation_tokens": "vllm:generation_tokens",
    "request_success": "vllm:request_success",
}
_HISTOGRAMS = {
    "ttft": "vllm:time_to_first_token_seconds",
    "e2e": "vllm:e2e_request_latency_seconds",
    # renamed from time_per_output_token_seconds; the newer name wins when both are there
    "itl": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
}


class MetricsError(Exception):
    """One line: why a scrape gave no snapshot.  ``kind``: refused (nothing listening), http, parse."""

    def __init__(self, message: str, kind: str = "error", status: int | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.status = status


@dataclass(frozen=True, slots=True)
class Histogram:
    """One histogram summed over its label sets; ``buckets`` are cumulative ``(le, count)``, +Inf last."""

    count: float
    sum: float
    buckets: tuple[tuple[float, float], ...] = ()


@dataclass(frozen=True, slots=True)
class MetricsSnapshot:
    running: float | None = None
    waiting: float | None = None
    kv_cache_usage: float | None = None  # 0..1
    prompt_tokens: float | None = None  # counters: cumulative since the server started
    generation_tokens: float | None = None
    request_success: float | None = None  # finished requests, every finished_reason
    ttft: Histogram | None = None
    e2e: Histogram | None = None
    itl: Histogram | None = None
    vllm_series: int = 0  # how many vllm:* samples the text held (0: not a vLLM server)
    unusable: tuple[str, ...] = ()  # vllm:* samples dropped for a NaN/±Inf/absurd value (shown as "–")


@dataclass(frozen=True, slots=True)
class Rates:
    """What happened between two snapshots.  None: not measurable (series absent, or no request
    finished in the interval for a latency), never a made-up 0."""

    interval_s: float
    prompt_tps: float | None = None
    generation_tps: float | None = None
    requests_ps: float | None = None
    finished: float | None = None  # requests finished in the interval
    ttft_mean: float | None = None  # seconds
    ttft_p50: float | None = None
    ttft_p90: float | None = None
    e2e_mean: float | None = None
    e2e_p50: float | None = None
    e2e_p90: float | None = None
    itl_mean: float | None = None
    reset: bool = False  # a counter went down: the server restarted inside the interval


# ----------------------------------------------------------------------------- parsing


def parse(text: str) -> MetricsSnapshot:
    """A snapshot of the vLLM series in Prometheus text; MetricsError (one line) when it is not that."""
    from prometheus_client.parser import text_string_to_metric_families

    sums: dict[str, float] = {}
    buckets: dict[str, dict[float, float]] = {}
    n_vllm = 0
    unusable: dict[str, None] = {}  # ordered set
    try:
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                if not s.name.startswith("vllm:"):
                    continue
                n_vllm += 1
                try:
                    value = float(s.value)
                except OverflowError:  # the parser gives a 400-digit integer as an int: absurd, like ±Inf
                    value = math.inf
                if not math.isfinite(value) or abs(value) > 1e300:
                    # NaN/±Inf/absurd: absent, so no consumer (widget, events.jsonl) sees it; named for the note
                    unusable[s.name] = None
                    continue
                sums[s.name] = sums.get(s.name, 0.0) + value
                if s.name.endswith("_bucket") and "le" in s.labels:
                    le = float(s.labels["le"])
                    if math.isnan(le) or le == -math.inf:
                        continue  # a bound no quantile can use (NaN sorts nowhere): the bucket is absent
                    per_le = buckets.setdefault(s.name[: -len("_bucket")], {})
                    per_le[le] = per_le.get(le, 0.0) + value
    except ValueError as exc:
        raise MetricsError(_parse_error(text, exc), kind="parse") from None

    def gauge(names: tuple[str, ...]) -> float | None:
        return next((sums[n] for n in names if n in sums), None)

    def counter(base: str) -> float | None:
        # the exposition names counters <base>_total; an untyped or old exporter may omit the suffix
        return sums.get(base + "_total", sums.get(base))

    def histogram(names: str | tuple[str, ...]) -> Histogram | None:
        for base in (names,) if isinstance(names, str) else names:
            if base + "_count" in sums and base + "_sum" in sums:
                bk = tuple(sorted(buckets.get(base, {}).items()))
                return Histogram(sums[base + "_count"], sums[base + "_sum"], bk)
        return None

    return MetricsSnapshot(
        **{k: gauge(v) for k, v in _GAUGES.items()},
        **{k: counter(v) for k, v in _COUNTERS.items()},
        **{k: histogram(v) for k, v in _HISTOGRAMS.items()},
        vllm_series=n_vllm,
        unusable=tuple(unusable)[:8],
    )


def _parse_error(text: str, exc: ValueError) -> str:
    """Name the first line the parser refuses, so the message says where, not just what."""
    from prometheus_client.parser import text_string_to_metric_families

    for no, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        try:
            for _ in text_string_to_metric_families(line + "\n"):
                pass
        except ValueError:
            shown = line if len(line) <= 80 else line[:77] + "..."
            return f"not Prometheus text (line {no}: {shown!r})"
    return f"not Prometheus text ({str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__})"


# ----------------------------------------------------------------------------- rates


def _delta(prev: float | None, cur: float | None) -> tuple[float | None, bool]:
    """(increase, reset).  A counter that went down restarted: everything it holds is new."""
    if cur is None or prev is None:
        return None, False
    if cur < prev:
        return cur, True
    return cur - prev, False


def _hist_delta(prev: Histogram | None, cur: Histogram | None) -> tuple[Histogram | None, bool]:
    if cur is None or prev is None:
        return None, False
    if cur.count < prev.count:
        return cur, True
    before = dict(prev.buckets)
    bk = tuple((le, max(0.0, c - before.get(le, 0.0))) for le, c in cur.buckets)
    return Histogram(cur.count - prev.count, cur.sum - prev.sum, bk), False


def mean(h: Histogram | None) -> float | None:
    return h.sum / h.count if h is not None and h.count > 0 else None


def quantile(q: float, h: Histogram | None) -> float | None:
    """``histogram_quantile`` as Prometheus computes it: linear inside the bucket holding rank q.
    A rank in the +Inf bucket answers with the highest finite bound (all that is known)."""
    if h is None or not h.buckets or h.count <= 0:
        return None
    total = h.buckets[-1][1]
    if total <= 0:
        return None
    rank = q * total
    lo_le, lo_count = 0.0, 0.0
    for le, count in h.buckets:
        if count >= rank:
            if math.isinf(le):
                return lo_le if lo_le > 0 else None
            return lo_le + (le - lo_le) * (rank - lo_count) / (count - lo_count)
        lo_le, lo_count = le, count
    return None


def rates(prev: MetricsSnapshot, prev_t: float, cur: MetricsSnapshot, cur_t: float) -> Rates:
    """Rates over ``[prev_t, cur_t]`` (monotonic seconds) from counter and histogram deltas."""
    dt = cur_t - prev_t
    if dt <= 0:
        return Rates(interval_s=0.0)
    prompt, r1 = _delta(prev.prompt_tokens, cur.prompt_tokens)
    gen, r2 = _delta(prev.generation_tokens, cur.generation_tokens)
    done, r3 = _delta(prev.request_success, cur.request_success)
    ttft, r4 = _hist_delta(prev.ttft, cur.ttft)
    e2e, r5 = _hist_delta(prev.e2e, cur.e2e)
    itl, r6 = _hist_delta(prev.itl, cur.itl)
    per_s = lambda d: None if d is None else d / dt  # noqa: E731
    return Rates(
        interval_s=dt,
        prompt_tps=per_s(prompt),
        generation_tps=per_s(gen),
        requests_ps=per_s(done),
        finished=done,
        ttft_mean=mean(ttft), ttft_p50=quantile(0.5, ttft), ttft_p90=quantile(0.9, ttft),
        e2e_mean=mean(e2e), e2e_p50=quantile(0.5, e2e), e2e_p90=quantile(0.9, e2e),
        itl_mean=mean(itl),
        reset=r1 or r2 or r3 or r4 or r5 or r6,
    )


def serving_sample(node_name: str, snap: MetricsSnapshot, r: Rates | None, **kw) -> ServingSample:
    """The event for one scrape (``r``: rates since the previous one, None on the first)."""
    error = None if snap.vllm_series else "no vLLM series in /metrics"
    note = None
    if snap.unusable:
        names = ", ".join(n.removeprefix("vllm:") for n in snap.unusable[:3])
        more = f" and {len(snap.unusable) - 3} more" if len(snap.unusable) > 3 else ""
        note = f"– : the server sent NaN/Inf/out-of-range for {names}{more}"
    return ServingSample(
        node=node_name, up=True, error=error,
        running=snap.running, waiting=snap.waiting, kv_cache_usage=snap.kv_cache_usage,
        requests_total=snap.request_success, prompt_tokens_total=snap.prompt_tokens,
        generation_tokens_total=snap.generation_tokens,
        interval_s=r.interval_s if r else None,
        prompt_tps=r.prompt_tps if r else None, generation_tps=r.generation_tps if r else None,
        requests_ps=r.requests_ps if r else None,
        ttft_mean=r.ttft_mean if r else None, ttft_p90=r.ttft_p90 if r else None,
        e2e_mean=r.e2e_mean if r else None, e2e_p90=r.e2e_p90 if r else None,
        itl_mean=r.itl_mean if r else None,
        ttft_mean_all=mean(snap.ttft), e2e_mean_all=mean(snap.e2e),
        reset=bool(r and r.reset), note=note, **kw,
    )


# ----------------------------------------------------------------------------- IO


async def scrape(base_url: str, timeout: float = 5.0, *, api_key: str | None = None) -> MetricsSnapshot:
    """GET ``base_url/metrics`` and parse it.  MetricsError with one line on any failure:
    ``kind="refused"`` when nothing answers (no server yet; through an SSH forward a refused port
    shows as a connection closed before any reply), ``"http"`` for a status, ``"parse"``."""
    import asyncio

    import aiohttp

    url = base_url.rstrip("/") + "/metrics"
    # vLLM leaves /metrics open even with --api-key; a proxy in front may not
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout), headers=headers) as http:
            async with http.get(url) as r:
                if r.status != 200:
                    raise MetricsError(f"{url}: HTTP {r.status} {r.reason or ''}".rstrip(), kind="http", status=r.status)
                body = await r.text(errors="replace")
    except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError) as exc:
        raise MetricsError(f"{url}: {_one_line(exc)}", kind="refused") from None
    except (asyncio.TimeoutError, TimeoutError):
        raise MetricsError(f"{url}: no answer within {timeout:g} s", kind="timeout") from None
    except aiohttp.ClientError as exc:
        raise MetricsError(f"{url}: {_one_line(exc)}") from None
    return parse(body)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:200]
