#!/usr/bin/env python3
"""Write the README's table of keys from the binding registry (sparktui/tui/keymap.toml plus one
key per guided action of sparktui/actions/registry.py), between its ``generated:keys`` markers.

    scripts/gen_readme_keys.py [--check]

``--check`` writes nothing and exits 1 when the table differs (tests/unit/test_readme_keys.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from docgen import ROOT, main, splice  # noqa: E402

SCRIPT = "scripts/gen_readme_keys.py"
TARGET = ROOT / "README.md"
WHERE = {"app": "everywhere", "main": "main screen", "findings": "findings panel"}


def table() -> str:
    from sparktui.tui import keymap

    rows = ["| key | what it does | where |", "|---|---|---|"]
    for e in keymap.entries():
        keys = ", ".join(f"`{keymap.display_key(k)}`" for k in e.key_list)
        notes = (["changes a node; hidden with `--read-only`"] if e.mutating else
                 [f"{e.loads}; refused with `--read-only`"] if e.loads else [])
        if not e.in_demo:
            notes.append("not in `sparktui demo`: it needs Docker on real nodes")
        what = e.description + (f" ({'; '.join(notes)})" if notes else "")
        rows.append(f"| {keys} | {what.replace('|', chr(92) + '|')} | {WHERE.get(e.scope, e.scope)} |")
    return "\n".join(rows)


def render(current: str) -> str:
    return splice(current, "keys", SCRIPT, table())


if __name__ == "__main__":
    sys.exit(main(None, TARGET, render, SCRIPT, "Write the README's table of keys from the keymap."))
