"""The last guard before the terminal: no control character from any widget's text is written.

Widgets already show node data through ``logs.sanitize.safe`` (controls as visible symbols); this
filter is the backstop for a field nobody thought of.  Rich gives ESC and the other C0/C1 controls
a cell width of 0 and passes them to the terminal as they are, so an ESC ] 52 in a GPU name would
set the operator's clipboard (tmux ``set-clipboard on``) and ESC ] 0 would retitle the pane.
Dropping them keeps every strip's width exact; what is left (``]52;c;…``) is inert text.
"""

from __future__ import annotations

from rich.segment import Segment
from textual.color import Color
from textual.filter import LineFilter

# C0 controls (TAB too: Rich has expanded tabs by now), DEL and C1
_DROP = dict.fromkeys((*range(0x00, 0x20), *range(0x7F, 0xA0)))


class TerminalSafe(LineFilter):
    def apply(self, segments: list[Segment], background: Color) -> list[Segment]:
        out = segments
        for i, seg in enumerate(segments):
            text = seg.text
            if text.isprintable() or seg.control:  # the common case; control segments are Textual's own
                continue
            clean = text.translate(_DROP)
            if clean != text:
                if out is segments:
                    out = list(segments)
                out[i] = Segment(clean, seg.style, seg.control)
        return out
