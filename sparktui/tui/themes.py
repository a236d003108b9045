"""Themes are data: TOML files in ``themes/`` (repo top level, the source of truth) loaded into
``textual.theme.Theme``.  ``sparktui/tui/themes`` is a symlink to it, so an editable install
reads the top-level folder and a built wheel carries real copies (setuptools follows the link).
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import fields
from pathlib import Path

from textual.theme import Theme

DEFAULT_THEME = "sparktui-dark"
_THEME_KEYS = {f.name for f in fields(Theme)}


class ThemeError(Exception):
    pass


def theme_dirs() -> list[Path]:
    here = Path(__file__).resolve().parent
    dirs = []
    if os.environ.get("SPARKTUI_THEMES_DIR"):
        dirs.append(Path(os.environ["SPARKTUI_THEMES_DIR"]))
    dirs += [here / "themes", here.parent.parent / "themes"]
    return dirs


def load_theme(path: Path) -> Theme:
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ThemeError(f"{path}: {exc}") from None
    unknown = sorted(set(raw) - _THEME_KEYS)
    if unknown:
        raise ThemeError(f"{path}: unknown key {unknown[0]!r} (hint: keys are {', '.join(sorted(_THEME_KEYS))})")
    if "name" not in raw or "primary" not in raw:
        raise ThemeError(f"{path}: a theme needs 'name' and 'primary'")
    return Theme(**raw)


def load_themes() -> dict[str, Theme]:
    """Every theme found, first directory wins for a name."""
    out: dict[str, Theme] = {}
    for d in theme_dirs():
        if not d.is_dir():
            continue
        for path in sorted(d.glob("*.toml")):
            theme = load_theme(path)
            out.setdefault(theme.name, theme)
    return out
