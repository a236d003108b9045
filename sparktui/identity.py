"""Who is at this terminal: the operator named in the cluster lock, the shared timeline and the labels
of the containers an action starts.  ``--operator NAME`` (the CLI puts it in ``$SPARKTUI_OPERATOR``),
else ``$SPARKTUI_OPERATOR``, else ``user@host`` (two engineers sharing one account need a name each)."""

from __future__ import annotations

import getpass
import os
import socket

ENV = "SPARKTUI_OPERATOR"
MAX_CHARS = 64  # a name, not a paragraph: it sits in one-line refusals and narrow columns


class OperatorError(ValueError):
    """An operator name that cannot be used; ``str()`` is one line."""


def check(name: str) -> str:
    """``name`` stripped, or OperatorError: printable, no line breaks, 1..MAX_CHARS characters."""
    text = name.strip()
    if not text:
        raise OperatorError("operator name is empty")
    if not text.isprintable():
        # shown escaped: the name is the user's text and must not reach the terminal as control codes
        raise OperatorError(f"operator name has control characters: {ascii(text)[:MAX_CHARS + 2]}")
    if len(text) > MAX_CHARS:
        raise OperatorError(f"operator name is {len(text)} characters long (at most {MAX_CHARS})")
    return text


def default_operator() -> str:
    try:
        user = getpass.getuser()
    except Exception:  # no passwd entry (some containers): the uid still names someone
        user = f"uid{os.getuid()}"
    return f"{user}@{socket.gethostname()}"


def operator_id() -> str:
    """This terminal's operator; OperatorError when ``$SPARKTUI_OPERATOR`` is set to something unusable
    (the CLI checks it once at start, so the faces never meet it)."""
    given = os.environ.get(ENV)
    return check(given) if given is not None else default_operator()
