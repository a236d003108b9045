"""One node: header, container table, memory + sparkline, GPU, serving load, startup progress, log view.

``update_from(node_state, now)`` is the only way data gets in; it re-renders a part only when the
(immutable) state object behind it changed, so the app's repaints (at most one per ``MIN_REFRESH``,
see docs/architecture.md "Refresh rate") stay cheap.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, ProgressBar, Static

from ...logs.archive import LogArchive
from ...logs.sanitize import safe
from ...model import MILESTONE_ORDER
from . import node_stats
from .file_lines import FileLines
from .log_view import LogView
from .serving_stats import ServingStats

if TYPE_CHECKING:
    from ...logs.store import LogStore
    from ...state import NodeState


class NodePane(Vertical):
    COMPONENT_CLASSES = {"state--running", "state--stopped", "state--other"}
    ALLOW_MAXIMIZE = True  # `z` zooms the pane; Textual only maximizes focusable widgets by default

    def __init__(self, node: str, store: "LogStore", *, role: str = "", default_source: str = "",
                 gpu_mem_util: float | None = None, fabric_if: str | None = None, clock: Callable[[], float],
                 log_file: Callable[[str], Path | None] | None = None, id: str | None = None) -> None:
        """``log_file(source)``: the session file of one of this node's sources (None: not recorded)."""
        super().__init__(id=id)
        self.node = node
        self.store = store
        self.role = role
        self.default_source = default_source
        self.gpu_mem_util = gpu_mem_util
        self.fabric_if = fabric_if
        self.clock = clock
        self._seen: dict[str, object] = {}
        self._widths: list[int] = []
        self._retry_base = 0.0
        self.log_file = log_file
        self._archives: dict[Path, LogArchive] = {}  # session files read back, touched by workers only
        self.border_title = node

    def compose(self) -> ComposeResult:
        yield Static(classes="pane-header")
        table: DataTable = DataTable(cursor_type="row", zebra_stripes=False, classes="containers")
        yield table
        yield Static(classes="memory")
        yield Static(classes="mem-spark")
        yield Static(classes="gpu")
        yield Static(classes="links")
        yield ServingStats(classes="serving")
        with Horizontal(classes="startup"):
            yield ProgressBar(total=len(MILESTONE_ORDER), show_eta=False, show_percentage=False)
            yield Static(classes="startup-label")
        yield LogView(self.store, self.node, log_file=self.log_file)

    @property
    def log_view(self) -> LogView:
        return self.query_one(LogView)

    # ------------------------------------------------------------------ data in
    def update_from(self, ns: "NodeState | None", now: float, *, has_error: bool = False,
                    alarm: "tuple[str, str] | None" = None) -> None:
        if ns is None:
            return
        self.set_class(ns.reachable is False, "-unreachable")
        if self._changed("retry", (ns.reachable, ns.unreachable_since, ns.retry_in, ns.error)):
            self._retry_base = now  # "retry in" counts down from when the collector said it
        retry_left = None if ns.retry_in is None else max(0.0, ns.retry_in - (now - self._retry_base))
        if self._changed("header", (ns.reachable, ns.unreachable_since, retry_left and int(retry_left), ns.error, ns.docker_error, ns.backend)):
            self.query_one(".pane-header", Static).update(node_stats.header(ns, now, self.role, retry_left),
                                                          layout=False)  # one fixed row
        if self._changed("containers", (ns.containers, int(now))):
            self._fill_table(ns, now)
        if self._changed("memory", (ns.memory, ns.memory_history, self.size.width)):
            # fixed one-row widgets updated every sample: skip the layout pass
            mem = self.query_one(".memory", Static)
            # the line is fitted to the room it really has (its parts are dropped, not cut, to fit)
            mem.update(node_stats.memory(ns, mem.content_region.width or self.size.width - 4, self.gpu_mem_util),
                       layout=False)
            self.query_one(".mem-spark", Static).update(node_stats.sparkline(ns.memory_history, self.size.width - 4),
                                                        layout=False)
        if self._changed("gpu", (ns.gpus, ns.gpu_available, ns.gpu_error)):
            self._update_rows(self.query_one(".gpu", Static), node_stats.gpu(ns))
        if self._changed("links", ns.links):
            self.query_one(".links", Static).update(node_stats.links(ns, self.fabric_if), layout=False)  # one row
        if self._changed("serving", (ns.serving, self.size.width, alarm)):
            self.query_one(ServingStats).show(ns.serving, self.size.width - 4, alarm)
        if self._changed("startup", (ns.milestones, has_error, ns.containers)):
            value, label = node_stats.startup(ns)
            self.query_one(ProgressBar).update(progress=value)
            self.query_one(".startup", Horizontal).set_class(has_error, "-error")
            if self._changed("startup-label", label):
                self.query_one(".startup-label", Static).update(label, layout=False)  # one fixed row
        view = self.log_view
        if view.source is None:  # the user's choice sticks, even before its log has lines
            chosen = self._default_source(ns)
            if chosen:
                view.set_source(chosen)
                self.sync_cursor()
        view.refresh_data()

    def _update_rows(self, widget: Static, content: object) -> None:
        """Update a ``height: auto`` widget; ask for a layout pass (it renders the whole screen)
        only when the rows it needs may have changed, not on every new figure."""
        plain = str(getattr(content, "plain", content))
        rows = (plain.count("\n"), max(map(len, plain.split("\n"))) > widget.size.width)
        widget.update(content, layout=self._changed(f"rows:{id(widget)}", rows))

    def _changed(self, part: str, key: object) -> bool:
        old = self._seen.get(part, _MISSING)
        if old is not _MISSING and _same(old, key):
            return False
        self._seen[part] = key
        return True

    def _default_source(self, ns: "NodeState") -> str | None:
        with_logs = set(self.store.sources(self.node))
        if self.default_source in with_logs:
            return self.default_source
        for c in ns.container_list():
            if c.name in with_logs:
                return c.name
        return sorted(with_logs)[0] if with_logs else None

    def _fill_table(self, ns: "NodeState", now: float) -> None:
        table = self.query_one(DataTable)
        keys = [str(k.value) for k in table.rows]
        keep_key = keys[table.cursor_row] if 0 <= table.cursor_row < len(keys) else None
        keep = table.cursor_row
        rows = []
        for c in ns.container_list():
            state = c.state.value + (f" ({c.health})" if c.health else "")
            # names, images and states come from the node's dockerd: one safe line each
            rows.append((c, (safe(c.name), safe(c.image), safe(state), safe(node_stats.uptime_or_exit(c, now)))))
        widths = [max([len(h)] + [len(r[1][i]) for r in rows]) for i, h in enumerate(COLUMNS)]
        widths = [min(w, cap) for w, cap in zip(widths, (28, 40, 20, 12))]
        if widths != self._widths:  # explicit widths: re-add the columns when content needs it
            table.clear(columns=True)
            for label, w in zip(COLUMNS, widths):
                table.add_column(label, width=w, key=label)
            self._widths = widths
        else:
            table.clear()
        for c, cells in rows:
            style = self.get_component_rich_style(node_stats.state_class(c.state), partial=True)
            # names and images are data: Text, never markup
            table.add_row(Text(cells[0]), Text(cells[1]), Text(cells[2], style=style), Text(cells[3]), key=c.name)
        if table.row_count:  # the cursor stays on the same container across refreshes
            names = [c.name for c, _ in rows]
            row = names.index(keep_key) if keep_key in names else min(keep, table.row_count - 1)
            table.move_cursor(row=row, animate=False, scroll=False)

    def sync_cursor(self) -> None:
        """The table's cursor sits on the container whose log is shown."""
        table = self.query_one(DataTable)
        keys = [str(k.value) for k in table.rows]
        if self.log_view.source in keys:
            table.move_cursor(row=keys.index(self.log_view.source), animate=False)

    def sources(self) -> list[str]:
        """Log sources of this node: containers (table order) first, then other files."""
        have = self.store.sources(self.node)
        table = self.query_one(DataTable)
        ordered = [str(k.value) for k in table.rows if str(k.value) in have]
        return ordered + sorted(s for s in have if s not in ordered)

    def cycle_source(self, delta: int) -> None:
        srcs = self.sources()
        if not srcs:
            return
        cur = self.log_view.source
        i = srcs.index(cur) if cur in srcs else -1
        self.log_view.set_source(srcs[(i + delta) % len(srcs)])
        self.sync_cursor()

    def on_file_lines_wanted(self, event: FileLines.Wanted) -> None:
        """The file view wants pages: read in a thread (the file can be 1 GiB), answered by message."""
        event.stop()
        archive = self._archives.get(event.path)
        if archive is None:
            archive = self._archives[event.path] = LogArchive(event.path)
        self.run_worker(partial(read_pages, archive, event.pages, event.page, event.lines), thread=True,
                        group="session-file", exit_on_error=False, description=f"read {event.path.name}")

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        name = str(event.row_key.value)
        self.log_view.set_source(name)


def read_pages(archive: LogArchive, pages: tuple[int, ...], page: int, to: FileLines) -> None:
    """(In a worker thread.)  Index what the file gained, read ``pages``, post them to ``to``."""
    count = archive.refresh()
    got = {p: archive.read(p * page + 1, (p + 1) * page) for p in pages if p * page < count}
    to.post_message(FileLines.Read(archive.path, count, archive.capped, archive.error, pages, got))


_MISSING = object()
COLUMNS = ("NAME", "IMAGE", "STATE", "UP / EXIT")


def _same(a: object, b: object) -> bool:
    if isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b):
        return all(x is y or x == y for x, y in zip(a, b))
    return a is b or a == b
