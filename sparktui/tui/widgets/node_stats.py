"""Pure renderers of a node's facts into ``Content`` (styles are theme variables only).

Every piece of text that comes from a node (names, images, process names) enters as plain text,
never markup.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.content import Content

from ...logs.redact import redact
from ...logs.sanitize import safe
from ...model import MILESTONE_ORDER, PRESSURE_SHOWN, ContainerInfo, ContainerState
from ...units import gib
from ..format import bar, clock, duration, level

if TYPE_CHECKING:
    from ...state import NodeState

PHASE_LABELS = {
    "container_started": "container started",
    "ray_joined": "Ray node joined",
    "arch_resolved": "architecture resolved",
    "nccl_ready": "NCCL ready",
    "weights_loading": "loading weights",
    "weights_loaded": "weights loaded",
    "kv_cache": "KV cache sized",
    "cuda_graphs": "CUDA graphs captured",
    "api_ready": "API listening",
    "first_prompt": "first prompt answered",
}


def header(node: "NodeState", now: float, role: str = "", retry_left: float | None = None) -> Content:
    parts: list[str | tuple[str, str]] = [(node.name, "bold")]
    if node.reachable is None:
        parts.append(("  ◌ connecting…", "$text-muted"))
    elif node.reachable:
        parts.append(("  ● reachable", "$success"))
        if node.docker_error:
            parts.append(("  ⚠ docker: " + safe(node.docker_error)[:100], "$warning bold"))
    else:
        parts.append((f"  ✖ unreachable since {clock(node.unreachable_since)}", "$error bold"))
        retry = node.retry_in if retry_left is None else retry_left
        if retry is not None:
            parts.append((f", retry in {max(0, round(retry))}s", "$error"))
        if node.error:
            parts.append(("  " + safe(node.error)[:120], "$text-muted"))
    meta = " · ".join(x for x in (node.backend, role) if x)
    if meta:
        parts.append(("  " + meta, "$text-muted"))
    return Content.assemble(*parts)


def uptime_or_exit(c: ContainerInfo, now: float) -> str:
    if c.state is ContainerState.RUNNING:
        return "up " + duration(now - c.started_at) if c.started_at else (c.status or "up")
    if c.exit_code is not None:
        return f"exit {c.exit_code}"
    return c.status or "-"


def state_class(state: ContainerState) -> str:
    if state is ContainerState.RUNNING:
        return "state--running"
    if state in (ContainerState.EXITED, ContainerState.DEAD, ContainerState.REMOVED):
        return "state--stopped"
    return "state--other"


def memory(node: "NodeState", width: int, gpu_mem_util: float | None = None) -> Content:
    m = node.memory
    if m is None:
        return Content.styled("MEM  waiting for a sample…", "$text-muted")
    frac = m.used_fraction
    used = f" {gib(m.used, '')}/{gib(m.total, '')} GiB"
    # (drop order, text, style) in display order: a narrow pane drops page cache, then PSI, and then
    # shrinks the gauge, rather than cutting "vLLM wants" off mid-number
    extras: list[tuple[int, str, str]] = [(0, "  cache " + gib(m.cached, ''), "$text-muted")]
    if m.psi_some_avg10 is not None:
        psi_style = "$error" if m.psi_some_avg10 >= 10 else ("$warning" if m.psi_some_avg10 >= 1 else "$text-muted")
        extras.append((1, f"  PSI {m.psi_some_avg10:.1f}%", psi_style))
    p = node.pressure
    for what, share in (("CPU", p.cpu if p else None), ("IO", p.io if p else None)):
        # the node's tasks waiting for a CPU / for IO: shown once it slows them (the stall detector
        # allows a start-up more silence from 20 %)
        if share is not None and share >= PRESSURE_SHOWN:
            extras.append((1, f"  {what} wait {share:.0f}%", "$warning" if share >= 50 else "$text-muted"))
    if gpu_mem_util:
        want = gpu_mem_util * m.total
        style = "$error" if want > m.available and frac < 0.5 else "$text-muted"
        extras.append((2, f"  vLLM wants {gib(want, '')} ({gpu_mem_util:.2f}×)", style))
    fixed = len("MEM ") + len(used)

    def need() -> int:
        return fixed + sum(len(t) for _, t, _ in extras)

    while len(extras) > 1 and need() + GAUGE_MIN > width:
        extras.remove(min(extras))
    gauge_w = max(3, min(30, width - need()))  # below GAUGE_MIN only when the numbers need it
    filled, empty = bar(frac, gauge_w)
    parts: list[str | tuple[str, str]] = [("MEM ", "bold"), (filled, level(frac)), (empty, "$panel"), used,
                                          *((t, st) for _, t, st in extras)]
    return Content.assemble(*parts)


GAUGE_MIN = 8


def gpu(node: "NodeState") -> Content:
    if node.gpu_available is False:
        return Content.styled("GPU  none (no nvidia-smi" + (f": {safe(node.gpu_error)}" if node.gpu_error else "") + ")",
                              "$text-muted")
    if not node.gpus:
        return Content.styled("GPU  waiting for a sample…", "$text-muted")
    lines: list[Content] = []
    for g in node.gpus:
        parts: list[str | tuple[str, str]] = [(f"GPU{g.index} ", "bold"), safe(g.name)]
        if g.util_percent is not None:
            parts += ["  util ", (f"{g.util_percent:.0f}%", level(g.util_percent / 100, 0.5, 0.9))]
        if g.power_w is not None:
            lim = f"/{g.power_limit_w:.0f}" if g.power_limit_w else ""
            parts.append(f"  {g.power_w:.1f}{lim} W")
        if g.clock_sm_mhz is not None:
            parts.append(f"  SM {g.clock_sm_mhz:.0f} MHz")
        if g.temp_c is not None:
            parts.append(f"  {g.temp_c:.0f}°C")
        if g.unified_memory:
            parts.append(("  mem unified", "$text-muted"))
        else:
            parts.append(f"  mem {gib(g.mem_used_bytes, '')}/{gib(g.mem_total_bytes, '')} GiB")
        lines.append(Content.assemble(*parts))
        for p in g.processes[:3]:
            used = "[N/A]" if p.used_memory_bytes is None else gib(p.used_memory_bytes)
            lines.append(Content.assemble(("   pid ", "$text-muted"), str(p.pid), " ", safe(p.name)[:40], ("  " + used, "$text-muted")))
    return Content("\n").join(lines)


def links(node: "NodeState", fabric_if: str | None = None) -> Content:
    """The fabric links (RDMA-backed or the configured interface) in one line."""
    chosen = [ln for ln in node.links if ln.rdma_device or ln.name == fabric_if]
    if not chosen:
        return Content.styled("NET  no fabric link seen" if node.links else "NET  waiting for a sample…", "$text-muted")
    parts: list[str | tuple[str, str]] = [("NET ", "bold")]
    for ln in chosen[:3]:
        up = ln.state.upper() == "UP"
        parts.append((f" {safe(ln.name)} ", "bold" if ln.name == fabric_if else ""))
        parts.append(("UP" if up else safe(ln.state), "$success" if up else "$error"))
        addr = ln.addresses[0] if ln.addresses else "no address"
        extra = safe(" ".join(x for x in (addr, f"mtu {ln.mtu}" if ln.mtu else "", ln.rdma_device or "") if x))
        parts.append((" " + extra + " ", "$text-muted"))
    return Content.assemble(*parts)


def startup(node: "NodeState") -> tuple[float, Content]:
    """(progress in phases 0..len(MILESTONE_ORDER), label)."""
    ms = node.milestones
    if not ms:
        return 0.0, Content.styled("startup: waiting for the first milestone", "$text-muted")
    idx = max(MILESTONE_ORDER.index(k) for k in ms if k in MILESTONE_ORDER) if any(k in MILESTONE_ORDER for k in ms) else -1
    if idx < 0:
        return 0.0, Content.styled("startup: -", "$text-muted")
    phase = MILESTONE_ORDER[idx]
    m = ms[phase]
    value = float(idx + 1)
    if phase == "weights_loading" and m.progress is not None and m.progress < 1:
        value = idx + m.progress
    label = PHASE_LABELS.get(phase, phase)
    pct = f" {m.progress * 100:.0f}%" if phase == "weights_loading" and m.progress is not None else ""
    dead = _stopped_container(node, m.source)
    if dead is not None:  # the process behind the milestones is gone: the bar no longer advances
        end = f"exit {dead.exit_code}" if dead.exit_code is not None else dead.state.value
        return value, Content.assemble(("✖ ", "$error"), (f"stopped at {label}{pct}", "$error bold"),
                                       (f"  {safe(dead.name)} {end}", "$text-muted"))
    text = redact(safe(m.text))[:60]  # a milestone quotes a log line
    return value, Content.assemble(("▶ ", "$accent"), (label + pct, "bold"), ("  " + text, "$text-muted"))


def _stopped_container(node: "NodeState", source: str) -> ContainerInfo | None:
    """The container a milestone came from (source ``node/container``), when it no longer runs."""
    name = source.split("/", 1)[1] if source.startswith(node.name + "/") else source
    c = node.containers.get(name)
    if c is None or c.state not in (ContainerState.EXITED, ContainerState.DEAD, ContainerState.REMOVED):
        return None
    return c


SPARK = "▁▂▃▄▅▆▇█"


def sparkline(history: tuple[float, ...], width: int) -> Content:
    """Used-memory fractions on an absolute 0..1 scale (a flat line means flat memory)."""
    if not history:
        return Content("")
    data = history[-max(1, width):]
    parts: list[tuple[str, str]] = []
    for v in data:
        v = min(max(v, 0.0), 1.0)
        parts.append((SPARK[min(7, int(v * 8))], level(v)))
    return Content.assemble(*parts)
