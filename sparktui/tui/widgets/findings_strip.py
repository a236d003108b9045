"""One line on the main screen: findings counted by severity and the root cause's title (the caller
passes them ranked: most severe and most causal first)."""

from __future__ import annotations

from typing import Sequence

from textual.content import Content
from textual.widgets import Static

from ...logs.sanitize import safe
from ...model import Finding

SEVERITY_STYLE = {"error": "$error", "warning": "$warning", "info": "$primary"}
HANG_IDS = {"suspected_hang", "nccl_init_hang", "nccl_watchdog_timeout", "nccl_collective_mismatch", "rendezvous_timeout"}


def summary(findings: Sequence[Finding], investigate_key: str | None = None) -> Content:
    if not findings:
        return Content.styled("findings: none so far", "$text-muted")
    counts = {s: sum(1 for f in findings if f.severity == s) for s in ("error", "warning", "info")}
    parts: list[str | tuple[str, str]] = [("findings ", "bold")]
    for sev, n in counts.items():
        if n:
            parts.append((f" {n} {sev} ", f"{SEVERITY_STYLE[sev]} reverse"))
            parts.append(" ")
    # the first of the ranked findings: the root cause, not the newest consequence of it
    top = findings[0]
    where = f" ({top.node})" if top.node else ""
    parts.append(("— root cause: " if len(findings) > 1 else "— ", "$text-muted"))
    parts.append((safe(top.title + where), SEVERITY_STYLE.get(top.severity, "")))
    parts.append(("   f: panel", "$text-muted"))
    if investigate_key and any(f.id in HANG_IDS for f in findings):
        parts.append((f"   {investigate_key}: investigate the hang", "$accent bold"))
    return Content.assemble(*parts)


class FindingsStrip(Static):
    _shown: tuple = ()

    def show(self, findings: Sequence[Finding], investigate_key: str | None = None) -> None:
        # called on every engine refresh: an unchanged strip costs nothing, a changed one repaints
        # its own row (one fixed row in app.tcss: a layout pass would re-render the whole screen)
        key = (tuple(findings), investigate_key)
        if key == self._shown:
            return
        self._shown = key
        self.set_class(any(f.severity == "error" for f in findings), "-error")
        self.update(summary(findings, investigate_key), layout=False)
