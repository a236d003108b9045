"""`?`: every key of the binding registry, grouped, with what it does."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Static

from .. import keymap

SCOPE_TITLES = {"app": "Everywhere", "main": "Node panes and logs", "findings": "Findings panel (f)"}


def help_content(read_only: bool, keys_for: dict[str, str] | None = None, node_count: int | None = None,
                 demo: bool = False) -> Content:
    """The help text.  ``keys_for`` maps binding id -> keys after the user's keymap; ``node_count``
    leaves out the keys of panes the cluster does not have; ``demo`` marks the actions the demo does not offer."""
    keys_for = keys_for or {}
    lines: list[Content] = []
    shown_entries = keymap.entries() if node_count is None else keymap.for_cluster(node_count)
    for scope, title in SCOPE_TITLES.items():
        lines.append(Content.styled(title, "bold $accent"))
        for e in shown_entries:
            if e.scope != scope:
                continue
            keys = keys_for.get(e.id, e.keys)
            shown = ", ".join(keymap.display_key(k.strip()) for k in keys.split(","))
            desc = e.description
            if demo and not e.in_demo:
                desc += "  (not in the demo: it needs Docker on real nodes)"
            elif e.mutating:
                desc += "  (changes the node; hidden when read-only)" if not read_only else "  (hidden: read-only)"
            elif e.loads:
                desc += f"  ({e.loads}; refused when read-only)" if not read_only else "  (refused: read-only)"
            style = "$text-muted" if ((e.mutating or e.loads) and read_only) or (demo and not e.in_demo) else ""
            lines.append(Content.assemble((f"  {shown:<18}", "bold $primary"), (desc, style)))
        lines.append(Content(""))
    lines.append(Content.styled("In the filter box: Enter keeps the filter, Esc closes it; Esc again clears it.", "$text-muted"))
    lines.append(Content.styled("In the log: ↑/↓ PgUp/PgDn scroll (scrolling up detaches), End/G follows again.", "$text-muted"))
    lines.append(Content.styled("Up past the oldest line held in memory (or Home, o): the session file, every line.",
                                "$text-muted"))
    return Content("\n").join(lines)


class HelpScreen(ModalScreen[None]):
    BINDINGS = [
        Binding("escape,question_mark,f1,q", "dismiss", "Close", id="help-close"),
    ]

    def __init__(self, read_only: bool = False, keys_for: dict[str, str] | None = None,
                 node_count: int | None = None, *, demo: bool = False) -> None:
        super().__init__()
        self.demo = demo
        self.read_only = read_only
        self.keys_for = keys_for
        self.node_count = node_count

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog help"):
            yield Static("sparktui — keys", classes="dialog-title")
            yield Static(help_content(self.read_only, self.keys_for, self.node_count, self.demo), id="help-body")

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(None)
