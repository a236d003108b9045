"""The main screen: one pane per node side by side, or one at a time with a switcher when narrow."""

from __future__ import annotations

import re
import time
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from textual import events
from textual.app import ComposeResult
from textual.binding import BindingsMap
from textual.containers import Horizontal
from textual.content import Content
from textual.markup import escape
from textual.screen import Screen
from textual.widgets import Footer, Input, Static

from .. import keymap
from ..messages import OpenAction
from ..widgets.findings_strip import FindingsStrip
from ..widgets.node_pane import NodePane
from .findings import FindingsScreen

if TYPE_CHECKING:
    from ...model import Finding
    from ..app import SparkApp

def export_path(engine, node: str, source: str) -> Path:
    from ...session import state_dir

    def safe(name: str) -> str:  # container names and file paths become one file-name part
        return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._")[:80] or "_"

    base = engine.session.path if engine.session is not None else state_dir()
    return base / "exports" / f"{safe(node)}-{safe(source)}-{time.strftime('%H%M%S')}.log"


def _write_lines(path: Path, texts: list[str]) -> None:
    from ...logs.redact import redact
    from ...logs.safe_files import open_private, private_dir

    # owner-only like the session it sits in; the store's texts are redacted already, the export
    # redacts again because it is where lines leave the app
    private_dir(path.parent)  # 0700 when made here; a folder we did not create keeps its mode
    with open_private(path, "w", encoding="utf-8") as fh:
        fh.write(redact("".join(t + "\n" for t in texts)))


GUIDED = re.compile(r"^guided\('([^']+)'\)$")  # a keymap action that opens a guided action
WIDE = 140  # columns needed for panes side by side
PANE_MIN = 60  # ... and per pane, so three nodes still fit at 200 columns


class MainScreen(Screen[None]):
    BINDINGS = keymap.bindings("main")
    app: "SparkApp"

    def __init__(self) -> None:
        super().__init__()
        # rebuilt per instance: the guided actions available depend on what this build contains
        self._bindings = BindingsMap([*Screen.BINDINGS, *keymap.bindings("main")])
        self.active = 0
        self._switcher_shown = ""
        inv = next((e for e in keymap.entries() if e.id == "action-investigate"), None)
        self._investigate_key = keymap.display_key(inv.key_list[0]) if inv else None

    def compose(self) -> ComposeResult:
        app = self.app
        cfg = app.engine.config
        yield Static(id="topbar")
        yield Static(id="node-switcher")
        with Horizontal(id="panes"):
            for i, n in enumerate(cfg.nodes):
                yield NodePane(n.name, app.engine.logs, role=n.role, default_source=cfg.cluster.name,
                               gpu_mem_util=cfg.cluster.gpu_memory_utilization, fabric_if=n.fabric_if,
                               clock=app.clock, log_file=partial(self._session_log, n.name), id=f"pane-{i}")
        yield FindingsStrip(id="findings-strip")
        yield Footer(show_command_palette=False)  # the top bar says ctrl+p: the room goes to the action keys

    def _session_log(self, node: str, source: str) -> Path | None:
        """Where the session keeps a source's lines (the file view reads it), or None."""
        session = self.app.engine.session
        return session.log_path(node, source) if session is not None else None

    def on_mount(self) -> None:
        self._layout(self.size.width)
        self._topbar()
        self.refresh_state()
        panes = self.panes
        if panes:
            panes[0].log_view.lines.focus()

    @property
    def panes(self) -> list[NodePane]:
        return list(self.query(NodePane))

    @property
    def active_pane(self) -> NodePane:
        panes = self.panes
        return panes[min(self.active, len(panes) - 1)]

    # ------------------------------------------------------------------ refresh
    def refresh_state(self) -> None:
        # an engine update can arrive between the screen's push and its children's mount (seen under
        # load in scripts/bench ingest: NoMatches for the strip): nothing to refresh yet
        strips = self.query(FindingsStrip)
        if not strips:
            return
        app = self.app
        state = app.engine.state
        now = app.clock()
        findings = app.engine.ranked_findings()
        error_nodes = {f.node for f in findings if f.severity == "error"}
        alarm = self._cluster_alarm(state, findings)
        for pane in self.panes:
            ns = state.nodes.get(pane.node)
            pane.update_from(ns, now, has_error=pane.node in error_nodes,
                             alarm=alarm if ns is not None and ns.serving is not None else None)
        key = self._investigate_key if self._investigate_key and app.action_allowed("investigate") else None
        strips.first().show(findings, key)
        self._switcher()

    def _cluster_alarm(self, state, findings) -> "tuple[str, str] | None":
        """Red/amber and why for the head's serving line: the assessment `status` makes, from the
        containers the engine holds (recomputed only when they or the findings change)."""
        from ...diagnosis.cluster import cluster_alarm

        key = (tuple(ns.containers for ns in state.nodes.values()), state.findings)
        cached = getattr(self, "_alarm_cache", None)
        if cached is None or cached[0] != key:
            self._alarm_cache = (key, cluster_alarm({n: ns.containers.values() for n, ns in state.nodes.items()},
                                                    findings, self.app.engine.config.cluster.name))
        return self._alarm_cache[1]

    def _topbar(self) -> None:
        app = self.app
        parts: list[str | tuple[str, str]] = [("sparktui", "bold $accent"), "  ", app.engine.config.cluster.name]
        if app.subtitle_text:
            parts.append(("  " + app.subtitle_text, "$text-muted"))
        if app.read_only:
            parts.append(("  READ-ONLY ", "$warning reverse bold"))
        parts.append(("   ?: help  ctrl+p: commands", "$text-muted"))
        self.query_one("#topbar", Static).update(Content.assemble(*parts))

    def _switcher(self) -> None:
        state = self.app.engine.state
        bits = []
        for i, pane in enumerate(self.panes):
            ns = state.nodes.get(pane.node)
            mark = "✖" if ns is not None and ns.reachable is False else "●"
            label = f" {i + 1} {escape(pane.node)} {mark} "
            style = "reverse bold" if i == self.active else ""
            bits.append(f"[@click=screen.select_node({i})][{style}]{label}[/][/]" if style else
                        f"[@click=screen.select_node({i})]{label}[/]")
        markup = "nodes:" + "".join(bits) + "   n: next"
        if markup != self._switcher_shown:  # every engine refresh comes here; one fixed row, no layout pass
            self._switcher_shown = markup
            self.query_one("#node-switcher", Static).update(Content.from_markup(markup), layout=False)

    # ------------------------------------------------------------------ layout
    def on_resize(self, event: events.Resize) -> None:
        self._layout(event.size.width)

    def _layout(self, width: int) -> None:
        self.set_class(width < max(WIDE, PANE_MIN * len(self.panes)), "-narrow")
        self.query_one(Footer).compact = width < WIDE  # narrow: more of the action keys fit
        for i, pane in enumerate(self.panes):
            pane.set_class(i == self.active, "-active")

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        for i, pane in enumerate(self.panes):
            if event.widget in pane.walk_children() or event.widget is pane:
                if i != self.active:
                    self.active = i
                    self._layout(self.size.width)
                    self._switcher()
                break

    # ------------------------------------------------------------------ actions (registry: scope "main")
    def action_select_node(self, index: int) -> None:
        panes = self.panes
        if not 0 <= index < len(panes):
            return
        self.active = index
        self._layout(self.size.width)
        self._switcher()
        panes[index].log_view.lines.focus()

    def action_next_node(self) -> None:
        self.action_select_node((self.active + 1) % max(1, len(self.panes)))

    def action_filter(self) -> None:
        self.active_pane.log_view.open_filter()

    def action_clear_filter(self) -> None:
        view = self.active_pane.log_view
        if view.filtering:
            view.close_filter(clear=not view.lines.filter_pattern or view.filter_error is not None)
        elif view.lines.filter_pattern:
            view.close_filter(clear=True)
        elif self.screen.maximized is not None:
            self.minimize()

    def action_follow(self) -> None:
        self.active_pane.log_view.follow_tail()

    def action_log_top(self) -> None:
        self.active_pane.log_view.to_top()

    def action_older_lines(self) -> None:
        view = self.active_pane.log_view
        why = view.toggle_file() if view.source else "no log is shown"
        if why is not None:
            self.app.notify(f"older lines: {why}", severity="information")

    def action_toggle_wrap(self) -> None:
        self.active_pane.log_view.toggle_wrap()

    def action_toggle_timestamps(self) -> None:
        self.active_pane.log_view.toggle_timestamps()

    def action_next_source(self) -> None:
        self.active_pane.cycle_source(+1)

    def action_prev_source(self) -> None:
        self.active_pane.cycle_source(-1)

    def action_save_log(self) -> None:
        view = self.active_pane.log_view
        if view.source is None:
            return
        texts = view.lines.shown_texts()
        target = export_path(self.app.engine, self.active_pane.node, view.source)
        self.app.run_worker(lambda: _write_lines(target, texts), thread=True, exit_on_error=False,
                            group="save-log", description="save log")
        self.app.notify(f"saved {len(texts):,} lines to {target}", title="log saved")

    def action_zoom(self) -> None:
        if self.maximized is not None:
            self.minimize()
        else:
            self.maximize(self.active_pane)

    def action_findings(self) -> None:
        self.app.push_screen(FindingsScreen(self.app.engine.all_findings()), self.jump_to_finding)

    def action_guided(self, name: str) -> None:
        self.post_message(OpenAction(name))  # messages up: the app opens it (or says why not)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "guided" and parameters:
            if self.app.action_not_offered(str(parameters[0])):
                return None  # shown dimmed (the demo's Docker actions); its key says why (on_key)
            return self.app.action_allowed(str(parameters[0]))
        if action == "select_node" and parameters:  # no "Node 3" key (nor its keys panel row) on a pair
            return isinstance(parameters[0], int) and parameters[0] < len(self.app.engine.config.nodes)
        return True

    def on_key(self, event: events.Key) -> None:
        """A refused guided action's key says why: its binding is hidden or dimmed (check_action), and
        Textual would drop the key without a word."""
        if isinstance(self.focused, Input):  # typing into the filter
            return
        keys = self.app._keys_by_id()
        for e in keymap.entries():
            m = GUIDED.match(e.action)
            if m and event.key in [k.strip() for k in keys.get(e.id, e.keys).split(",")]:
                why = self.app.action_refusal(m.group(1))
                if why:
                    event.stop()
                    event.prevent_default()
                    self.app.notify(why, severity="warning")
                return

    # ------------------------------------------------------------------ findings -> log
    def jump_to_finding(self, finding: "Finding | None") -> None:
        if finding is None:
            return
        src, node = finding.source or "", finding.node
        if node and src.startswith(node + "/"):
            source = src[len(node) + 1:]
        elif not node and "/" in src:
            node, source = src.split("/", 1)
        else:
            source = src
        panes = self.panes
        for i, pane in enumerate(panes):
            if pane.node == node:
                self.action_select_node(i)
                if source and source not in pane.store.sources(node):  # e.g. a doctor check: no log behind it
                    self.app.notify(f"{finding.title}: from {source}, no log line to show", severity="information")
                    return
                if source:
                    pane.log_view.set_source(source)
                    pane.sync_cursor()
                pane.log_view.close_file(follow=False)  # the live view first: it may hold the line
                if finding.line and not pane.log_view.lines.jump_to_line(finding.line):
                    # no longer held in memory: the session file has it
                    why = pane.log_view.open_file(finding.line, mark=True)
                    if why is not None:
                        self.app.notify(f"{finding.title}: line {finding.line} is no longer held in memory "
                                        f"and {why}", severity="information")
                pane.log_view.update_chrome()
                return
        self.app.notify(f"{finding.title}: no log line to show" + (f" (node {node})" if node else ""),
                        severity="information")
