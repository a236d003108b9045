"""Docker image reference syntax, checked at config load so a typo fails there (one line, exit 2)
and not halfway through doctor or build-image.

Grammar (distribution/reference, as `docker` normalises it):
    reference  := name [ ":" tag ] [ "@" digest ]
    name       := [domain "/"] path-component ["/" path-component]*
    domain     := host [":" port]      (the first component, when it has "." or ":", is
                                        "localhost", or has upper case letters)
    path-component := [a-z0-9]+ ( ( [_.] | "__" | "-"+ ) [a-z0-9]+ )*
    tag        := [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}
    digest     := algorithm ":" hex{32,}
"""

from __future__ import annotations

import re

_COMPONENT = re.compile(r"[a-z0-9]+(?:(?:[_.]|__|-+)[a-z0-9]+)*")
_DOMAIN_PART = r"(?:[A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9-]*[A-Za-z0-9])"
_DOMAIN = re.compile(rf"(?:{_DOMAIN_PART}(?:\.{_DOMAIN_PART})*|\[[0-9A-Fa-f:.]+\])(?::[0-9]+)?")
_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
_DIGEST = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}")
NAME_MAX = 255


def problem(ref: str) -> str | None:
    """Why ``ref`` is not a valid image reference, else None."""
    if not ref:
        return "is empty"
    if ref != ref.strip() or any(ch.isspace() for ch in ref):
        return "contains whitespace"
    rest, _, digest = ref.partition("@")
    if "@" in ref and not _DIGEST.fullmatch(digest):
        return f"digest {digest!r} is not ALGORITHM:HEX (e.g. sha256:<64 hex digits>)"
    name, tag = rest, None
    slash, colon = rest.rfind("/"), rest.rfind(":")
    if colon > slash:  # a ":" after the last "/" starts the tag (before it, it is a registry port)
        name, tag = rest[:colon], rest[colon + 1:]
        if not _TAG.fullmatch(tag):
            return f"tag {tag!r} is not valid (letters, digits, '_', '.', '-'; at most 128)"
    if not name:
        return "has no repository name"
    if len(name) > NAME_MAX:
        return f"repository name is longer than {NAME_MAX} characters"
    parts = name.split("/")
    first = parts[0]
    if len(parts) > 1 and (any(c in first for c in ".:") or first == "localhost" or first.lower() != first):
        if not _DOMAIN.fullmatch(first):
            return f"registry {first!r} is not a host[:port]"
        parts = parts[1:]
    for comp in parts:
        if not _COMPONENT.fullmatch(comp):
            why = "must be lowercase" if _COMPONENT.fullmatch(comp.lower()) else "is not valid"
            return (f"repository name component {comp!r} {why} (lowercase letters, digits and single "
                    "'.', '_', '__' or '-' between them)")
    return None
