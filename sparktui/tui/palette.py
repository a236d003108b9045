"""The command palette: the same registry as the footer and help, with prefixes
``view:`` ``node:`` ``action:``, plus one entry per node and per log source.  Textual's own entries
come under ``system:``."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from textual.command import DiscoveryHit, Hit, Hits, Provider

from . import keymap

if TYPE_CHECKING:
    from .app import SparkApp

SYSTEM_GROUP = "system"  # Textual's built-in entries (app.get_system_commands); sparktui's are view/node/action


class SparkCommands(Provider):
    def _commands(self) -> list[tuple[str, str, str]]:
        """(title, help, action string run on the main screen or app)."""
        app: "SparkApp" = self.app  # type: ignore[assignment]
        out: list[tuple[str, str, str]] = []
        for e in keymap.entries():
            if not e.palette:
                continue
            title, target_action = f"{e.palette}: {e.description}", e.action
            if e.id.startswith("action-"):
                name = e.id[len("action-"):]
                if app.action_not_offered(name):  # listed, marked; chosen, it says why (the app's guided)
                    out.append((f"{title} (not in the demo)", f"key {self._keys(e)} · not in the demo",
                                f"app.guided({name!r})"))
                    continue
                if not app.action_allowed(name):
                    continue  # hidden when read-only (mutating) or when there is no node to act on
            if e.scope not in ("app", "main") and getattr(self.screen, "binding_scope", "") != e.scope:
                continue  # a panel's own keys (the findings panel's `a`): offered while it is open
            target = "app." if e.scope == "app" else "screen."
            out.append((title, f"key {self._keys(e)}", target + target_action))
        for i, n in enumerate(app.engine.config.nodes):
            out.append((f"node: {n.name}", f"show node {n.name} (key {i + 1})", f"screen.select_node({i})"))
            for src in app.engine.logs.sources(n.name):
                out.append((f"node: {n.name} log {src}", "show this log", f"app.show_log({i}, {src!r})"))
        return out

    @staticmethod
    def _keys(e: keymap.Entry) -> str:
        return ", ".join(keymap.display_key(k) for k in e.key_list)

    async def discover(self) -> Hits:
        for title, help_text, action in self._commands():
            yield DiscoveryHit(title, partial(self._run, action), help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, help_text, action in self._commands():
            score = matcher.match(title)
            if score > 0:
                yield Hit(score, matcher.highlight(title), partial(self._run, action), text=title, help=help_text)

    async def _run(self, action: str) -> None:
        await self.app.run_action(action, self.app.screen)
