"""Loads the binding registry (keymap.toml + guided actions) into Textual ``Binding`` objects.

One list feeds the footer (BINDINGS), the help screen and the command palette, so they cannot
disagree.  A user keymap (``[keys] id = "key"``) remaps by binding id via ``App.set_keymap``.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from textual.binding import Binding

from ..actions import registry

KEYMAP_FILE = Path(__file__).with_name("keymap.toml")
FORBIDDEN_KEYS = {"ctrl+a", "ctrl+b"}  # tmux prefixes


@dataclass(frozen=True)
class Entry:
    id: str
    keys: str
    action: str
    description: str
    scope: str  # app | main
    palette: str = ""  # view | node | action | ""
    show: bool = False
    priority: bool = False
    mutating: bool = False  # guided actions that change a node
    loads: str = ""  # what a guided action does that read-only mode refuses (registry.ActionEntry.loads)
    in_demo: bool = True  # False: a guided action the demo does not offer (registry.ActionEntry.in_demo)
    label: str = ""  # short footer label
    display: str | None = None  # footer key display

    def binding(self) -> Binding:
        return Binding(self.keys, self.action, self.label or self.description, show=self.show,
                       key_display=self.display, priority=self.priority, id=self.id, tooltip=self.description)

    @property
    def key_list(self) -> list[str]:
        return [k.strip() for k in self.keys.split(",") if k.strip()]


class KeymapError(Exception):
    pass


def _load_file(path: Path) -> list[Entry]:
    raw = tomllib.loads(path.read_text(encoding="utf-8"))
    out = []
    for i, b in enumerate(raw.get("binding", [])):
        try:
            e = Entry(id=b["id"], keys=b["keys"], action=b["action"], description=b["description"],
                      scope=b.get("scope", "main"), palette=b.get("palette", ""),
                      show=bool(b.get("show", False)), priority=bool(b.get("priority", False)),
                      label=b.get("label", ""), display=b.get("display"))
        except KeyError as exc:
            raise KeymapError(f"{path}: binding[{i}] misses {exc.args[0]!r}") from None
        out.append(e)
    return out


@lru_cache(maxsize=1)
def entries() -> tuple[Entry, ...]:
    """Every binding: the data file, then one per guided action available in this build."""
    out = _load_file(KEYMAP_FILE)
    for ae in registry.present():
        # in the footer: the guided actions are what a newcomer looks for first
        out.append(Entry(id=f"action-{ae.name}", keys=ae.key, action=f"guided('{ae.name}')",
                         description=ae.title, scope="main", palette="action", show=ae.footer,
                         mutating=ae.mutating, loads=ae.loads, in_demo=ae.in_demo,
                         label=footer_label(ae.name)))
    for e in out:
        bad = FORBIDDEN_KEYS.intersection(e.key_list)
        if bad:
            raise KeymapError(f"binding {e.id!r} uses {sorted(bad)[0]} (a tmux prefix)")
    return tuple(out)


def footer_label(action: str) -> str:
    """A guided action's short footer label: "build-image" -> "Build", "load-test" -> "Load test"."""
    return action.removesuffix("-image").replace("-", " ").capitalize()


def node_index(e: Entry) -> int | None:
    """The pane a "select_node(i)" binding selects, else None."""
    if e.action.startswith("select_node(") and e.action.endswith(")"):
        arg = e.action[len("select_node("):-1]
        return int(arg) if arg.isdigit() else None
    return None


def for_cluster(node_count: int) -> list[Entry]:
    """The entries that apply to a cluster of ``node_count`` nodes: no "Node 3" key on a pair."""
    return [e for e in entries() if (i := node_index(e)) is None or i < node_count]


def bindings(scope: str) -> list[Binding]:
    return [e.binding() for e in entries() if e.scope == scope]


def user_keymap() -> dict[str, str]:
    """``$XDG_CONFIG_HOME/sparktui/keymap.toml`` -> {binding id: keys}; bad files are ignored."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    path = Path(base) / "sparktui" / "keymap.toml"
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return {}
    keys = raw.get("keys", {})
    return {str(k): str(v) for k, v in keys.items()
            if isinstance(v, str) and not FORBIDDEN_KEYS.intersection(x.strip() for x in v.split(","))}


def display_key(key: str) -> str:
    names = {"question_mark": "?", "slash": "/", "escape": "esc", "ctrl+q": "^q", "ctrl+p": "^p"}
    return names.get(key, key)
