"""``sparktui --version``: versions read from installed package metadata, so asking never imports
Textual, asyncssh or the docker SDK (a broken install still answers)."""

from __future__ import annotations

import platform
from importlib import metadata

# (label, distribution name)
PACKAGES = (("textual", "textual"), ("asyncssh", "asyncssh"), ("docker", "docker"))


def _dist_version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def version_text() -> str:
    try:
        own = metadata.version("sparktui")
    except metadata.PackageNotFoundError:  # running from a source tree that was never installed
        from . import __version__ as own
    lines = [f"sparktui {own}", f"Python {platform.python_version()} ({platform.python_implementation()})"]
    lines += [f"{label} {_dist_version(dist)}" for label, dist in PACKAGES]
    return "\n".join(lines)
