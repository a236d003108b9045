"""Where a rank's Python stack waits, read off the stacks pasted into its log: ``py-spy dump``'s text,
faulthandler's dump (both innermost frame first), or the traceback a Ctrl+C printed (innermost last).

A rank blocked inside a torch.distributed collective is named by that collective; ranks blocked in
different ones are out of step (a desync: one entered an all_reduce the others skipped), whichever
tool printed the stacks.  Pure functions over a log's last lines (``SourceScanner.window``).
"""

from __future__ import annotations

import re
from typing import Sequence

from . import lineprefix
from .pyspy import COLLECTIVE_NAMES

# py-spy's text dump: "    all_reduce (torch/distributed/distributed_c10d.py:3075)"
_PYSPY = re.compile(r"^\s*(?P<fn>[\w.<>]+) \((?P<file>[^()\s]+\.py):(?P<n>\d+)\)\s*$")
# faulthandler's dump: '  File "/x/distributed_c10d.py", line 2050 in all_reduce'
_FAULT = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<n>\d+) in (?P<fn>[\w.<>]+)\s*$')
# a traceback's frame: '  File "/x/distributed_c10d.py", line 2050, in all_reduce'
_TB = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<n>\d+), in (?P<fn>[\w.<>]+)\s*$')
# torch.distributed's collectives and point-to-point calls, as their Python functions are named: the
# live investigation's names (pyspy.py) and the ones that are too common a word to count there without
# the file ("reduce", "gather": here a frame counts only in a torch.distributed file)
COLLECTIVES = frozenset(COLLECTIVE_NAMES) | {
    "_reduce_scatter_base", "all_to_all_single", "monitored_barrier", "reduce", "gather", "scatter", "isend",
    "irecv", "batch_isend_irecv", "broadcast_object_list", "all_gather_object", "gather_object", "scatter_object_list",
}
_DIST_FILE = re.compile(r"(?:^|/)torch/distributed/[\w/]*\.py$|(?:^|/)distributed_c10d\.py$")
# how deep below the innermost frame a collective may sit: torch's own wrappers and a wait inside it
_DEPTH = 4


def _frames(window: Sequence[tuple[int, str]]) -> list[list[tuple[int, str, str, str]]]:
    """The window's stacks, each a list of (line, function, file, style) innermost first."""
    stacks: list[list[tuple[int, str, str, str]]] = []
    run: list[tuple[int, str, str, str]] = []
    style = ""
    for n, t in window:
        text = lineprefix.body(lineprefix.clean(t))
        for rx, st in ((_PYSPY, "pyspy"), (_FAULT, "fault"), (_TB, "tb")):
            m = rx.match(text)
            if m is not None:
                if run and st != style:
                    stacks.append(run)
                    run = []
                style = st
                run.append((n, m.group("fn"), m.group("file"), st))
                break
        else:
            # a traceback quotes each frame's source line under it (indented): the stack goes on
            if run and style == "tb" and text[:1].isspace() and text.strip():
                continue
            if run:
                stacks.append(run)
                run = []
    if run:
        stacks.append(run)
    return [s[::-1] if s[0][3] == "tb" else s for s in stacks]


def blocked(window: Sequence[tuple[int, str]]) -> tuple[int, str, str] | None:
    """(line, collective, frame) of the torch.distributed collective the window's last stack that
    waits in one waits in, or None.  (A stack after it, such as the Ctrl+C that ended the wait
    printed from the launcher's own frames, does not undo where the rank waited.)"""
    for stack in reversed(_frames(window)):
        for n, fn, path, _ in stack[:_DEPTH]:
            if fn.rsplit(".", 1)[-1] in COLLECTIVES and _DIST_FILE.search(path):
                return n, fn.rsplit(".", 1)[-1], f"{fn} ({path})"
    return None
