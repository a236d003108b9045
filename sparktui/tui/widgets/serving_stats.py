"""The serving node's load from vLLM's ``/metrics``: numbers and sparklines (head node pane).

``ServingStats.show(serving, now, width)`` is the only way data gets in (no IO here).  State is a CSS
class: ``-up`` (numbers and sparklines), ``-down`` (one line: it served before, now nothing
answers); neither (never served) keeps it hidden.  ``-broken`` / ``-doubtful`` (red / amber): the
cluster behind the server is half or its engine died / a hang is suspected; the first line says why.  Absent series render as "–", never as 0.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.content import Content
from textual.widgets import Static

from ..format import clock, level
from .node_stats import SPARK

if TYPE_CHECKING:
    from ...model import ServingSample
    from ...state import ServingState

NA = "–"


def _num(v: float | None, fmt: str = "{:.0f}") -> str:
    return NA if v is None else fmt.format(v)


def _rate(v: float | None) -> str:
    if v is None:
        return NA
    return f"{v:.0f}" if v >= 100 else f"{v:.1f}"


def _ms(seconds: float | None) -> str:
    if seconds is None:
        return NA
    ms = seconds * 1000
    if ms >= 10_000:
        return f"{seconds:.0f} s"
    if ms >= 1000:
        return f"{seconds:.1f} s"
    return f"{ms:.0f} ms" if ms >= 10 else f"{ms:.1f} ms"


def spark(values: tuple[float | None, ...], width: int, top: float | None = None) -> Content:
    """A text sparkline on 0..top (default: the window's maximum); a None is a gap."""
    data = values[-max(1, width):]
    known = [v for v in data if v is not None]
    scale = top if top is not None else max(known, default=0.0)
    parts: list[tuple[str, str]] = []
    for v in data:
        if v is None:
            parts.append((" ", ""))
            continue
        frac = min(max(v / scale, 0.0), 1.0) if scale > 0 else 0.0
        parts.append((SPARK[min(7, int(frac * 8))], "$accent"))
    return Content.assemble(*parts)


def _latency(label: str, mean: float | None, p90: float | None, mean_all: float | None) -> list:
    if mean is not None:
        out: list = [(label + " ", "bold"), _ms(mean)]
        if p90 is not None:
            out.append((f" p90 {_ms(p90)}", "$text-muted"))
        return out
    # no request finished in the interval: the lifetime mean, marked as such
    return [(label + " ", "bold"), (f"{_ms(mean_all)} avg" if mean_all is not None else NA, "$text-muted")]


def numbers(s: "ServingSample") -> Content:
    kv = s.kv_cache_usage
    parts: list = [("SERVE ", "bold"), ("● ", "$success"),
                   "run ", (_num(s.running), "bold"), "  wait ", (_num(s.waiting), "$warning bold" if s.waiting else "bold"),
                   "  KV ", (NA if kv is None else f"{kv * 100:.0f}%", level(kv) if kv is not None else ""),
                   "  done ", (_num(s.requests_total), "bold")]
    if s.requests_ps:
        parts.append((f" (+{s.requests_ps:.1f}/s)", "$text-muted"))
    parts += ["  prompt ", _rate(s.prompt_tps), "  gen ", (_rate(s.generation_tps), "bold"), (" tok/s", "$text-muted")]
    if s.reset:
        parts.append(("  server restarted", "$warning"))
    if s.note:
        parts.append(("  " + s.note[:120], "$text-muted"))
    return Content.assemble(*parts)


def latencies(s: "ServingSample") -> Content:
    parts: list = ["      "]
    parts += _latency("TTFT", s.ttft_mean, s.ttft_p90, s.ttft_mean_all)
    parts.append("  ")
    parts += _latency("e2e", s.e2e_mean, s.e2e_p90, s.e2e_mean_all)
    if s.itl_mean is not None:
        parts += ["  ", ("ITL ", "bold"), _ms(s.itl_mean)]
    return Content.assemble(*parts)


def sparklines(serving: "ServingState", width: int) -> Content:
    """Three labelled sparklines side by side: generation tok/s, TTFT, running requests."""
    series = (("gen", serving.series("generation_tps"), None),
              ("TTFT", serving.series("ttft_mean"), None),
              ("run", serving.series("running"), None))
    cell = max(4, (width - 6) // len(series) - 6)
    parts: list = ["      "]
    for label, values, top in series:
        parts += [(f"{label:<5}", "$text-muted"), spark(values, cell, top), " " * (cell - len(values[-cell:]) + 2)]
    return Content.assemble(*parts)


def down_line(serving: "ServingState") -> Content:
    s = serving.sample
    parts: list = [("SERVE ", "bold"), ("✖ not serving", "$error"),
                   (f" since {clock(serving.down_since)}", "$text-muted")]
    if serving.last_up is not None and serving.last_up.requests_total is not None:
        parts.append((f"  {serving.last_up.requests_total:.0f} done before", "$text-muted"))
    if s.error:
        parts.append(("  " + s.error[:120], "$text-muted"))
    return Content.assemble(*parts)


def no_metrics_line(s: "ServingSample") -> Content:
    return Content.assemble(("SERVE ", "bold"), ("● up", "$success"), ("  no metrics: " + (s.error or "")[:120], "$text-muted"))


def render(serving: "ServingState", width: int) -> Content:
    if not serving.up:
        return down_line(serving)
    s = serving.sample
    if s.error:  # it answers, but without vLLM's series (no /metrics, another exporter)
        return no_metrics_line(s)
    return Content("\n").join([numbers(s), latencies(s), sparklines(serving, width)])


def alarm_line(level: str, why: str) -> Content:
    mark, style = ("✖ ", "$error") if level == "error" else ("▲ ", "$warning")
    return Content.assemble(("SERVE ", "bold"), (mark, style), (why[:160], style))


class ServingStats(Static):
    """Hidden until the node has served; ``show`` is called by the pane on every state change."""

    def show(self, serving: "ServingState | None", width: int, alarm: "tuple[str, str] | None" = None) -> None:
        up = serving is not None and serving.up
        # a node that never answered (not the serving node, or no server yet) shows nothing at all
        down = serving is not None and not serving.up and serving.last_up is not None
        self.set_class(up, "-up")
        self.set_class(down, "-down")
        self.set_class(alarm is not None and alarm[0] == "error", "-broken")
        self.set_class(alarm is not None and alarm[0] != "error", "-doubtful")
        if up or down:
            content = render(serving, width)
            if alarm is not None:  # the reason first, then the numbers (max 3 rows: no sparklines)
                rest = numbers(serving.sample) if up and not serving.sample.error else content
                content = Content("\n").join([alarm_line(*alarm), rest])
            rows = str(getattr(content, "plain", content)).count("\n")
            # nowrap rows: only a change in their number needs a layout pass (a whole-screen render)
            self.update(content, layout=rows != getattr(self, "_rows", None))
            self._rows = rows
