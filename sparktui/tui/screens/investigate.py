"""The Investigate screen: every evidence item as it arrives, then the verdict side by side per node.

Built like the generic ActionScreen (the registry entry names it: key ``i``), so the action runs in
its worker and IO stays out of the widgets.  Differences: one table row per evidence item (not per
step), and the result shows the verdict, its confidence, one next action, the evidence lines in
one column per node, and the R7 items.
"""

from __future__ import annotations

from textual import work
from textual.containers import Horizontal
from textual.content import Content
from textual.widgets import DataTable, Static

from ...logs.redact import redact
from ...logs.sanitize import safe
from ..messages import ActionDone
from .action import ActionScreen


def clean(line: str) -> str:
    """An evidence line (a log line, py-spy or nvidia-smi output): no escapes, no secrets."""
    return redact(safe(line))


SIM_INTERVAL = 5.0  # sim evidence is deterministic: a short second round is enough


class InvestigateScreen(ActionScreen):
    """Key ``i`` (registry entry "investigate")."""

    DEFAULT_CSS = """
    InvestigateScreen .verdict-columns { height: auto; }
    InvestigateScreen .verdict-node { width: 1fr; height: auto; padding: 0 1; border-left: solid $panel; }
    """

    def __init__(self, entry, action_cls, make_context=None) -> None:
        super().__init__(entry, action_cls, make_context)
        self._rows = 0
        self.action_obj = None

    @work(exclusive=True, exit_on_error=False, group="action", description="investigate")
    async def run_action(self) -> None:
        ctx = self.make_context(emit=self._emit, confirm=self._confirm)
        sim = all(n.backend == "sim" for n in ctx.nodes.values()) and ctx.nodes
        self.action_obj = self.action_cls(interval=SIM_INTERVAL) if sim else self.action_cls()
        result = await self.action_obj.run(ctx)
        self.post_message(ActionDone(result))

    def row_key(self, ev) -> str:
        self._rows += 1  # every evidence item keeps its own row, in arrival order
        return f"item-{self._rows}"

    def show_event(self, ev) -> None:
        super().show_event(ev)
        table = self.query_one(DataTable)
        table.move_cursor(row=table.row_count - 1)

    def _show_result(self) -> None:
        # the verdict as the action reports it (Verdict.to_json in ActionResult.data)
        verdict = self.result.data.get("verdict") if self.result is not None else None
        if not verdict:
            super()._show_result()
            return
        summary = self.query_one("#action-summary", Static)
        tone = "$error" if verdict["problem"] else "$success"
        parts = [
            Content.assemble((f"{verdict['rule']}  ", tone + " bold"), (safe(verdict["title"]), "bold"),
                             (f"   confidence {verdict['confidence']:.2f}", "$text-muted")),
            Content.assemble(("findings: ", "$text-muted"), ", ".join(verdict["finding_ids"]) or "none"),
            Content.assemble(("next: ", "$accent bold"), safe(verdict["next_action"])),
        ]
        for item in verdict["latent"]:
            parts.append(Content.assemble(("R7 ", "$warning bold"), safe(item["title"])))
            parts += [Content.styled("    " + clean(line)[:300], "$text-muted") for line in item.get("evidence", [])[:4]]
        summary.update(Content("\n").join(parts))
        # evidence side by side: one column per node
        old = self.query(".verdict-columns")
        for w in old:
            w.remove()
        cols = Horizontal(classes="verdict-columns")
        summary.parent.mount(cols)  # type: ignore[union-attr]
        for node, lines in verdict["evidence"].items():
            body = Content("\n").join([Content.styled(safe(node), "bold")] + [Content(clean(line)[:300]) for line in lines])
            cols.mount(Static(body, classes="verdict-node"))
