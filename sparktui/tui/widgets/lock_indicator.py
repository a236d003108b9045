"""Who holds the cluster lock, and for what: one line at the top right of every full screen.

The app polls the lock in a worker and hands the result down (``LockIndicator.show``); this widget
only renders it.  It floats over the right end of the screen's title row (absolute, on the screen's
overlay layer), so no screen's layout changes for it; it is hidden where there is no lock to share
(the demo's sim nodes, a replay)."""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Static


class LockIndicator(Static):
    DEFAULT_CSS = """
    LockIndicator {
        overlay: screen;
        position: absolute;
        width: auto;
        height: 1;
        padding: 0 1;
        background: $panel;
        color: $text-muted;
        display: none;
    }
    LockIndicator.-held { color: $warning; text-style: bold; }
    LockIndicator.-mine { color: $success; }
    """

    def on_mount(self) -> None:
        # a screen opened after the last poll shows what that poll found (the app hands it down)
        self.show(*getattr(self.app, "lock_view", ("", False, False)))

    def show(self, line: str, held: bool, mine: bool) -> None:
        """``line``: what to say ('' hides it); ``held`` / ``mine``: whose lock it is, as a class."""
        self.set_class(held and not mine, "-held")
        self.set_class(held and mine, "-mine")
        self.display = bool(line)
        if line:
            self.update(Content(line))
            self.place(len(line) + 2)

    def place(self, width: int | None = None) -> None:
        """Stick to the screen's right edge (an absolute widget is placed from the left)."""
        width = width if width is not None else self.size.width
        self.styles.offset = (max(0, self.screen.size.width - width), 0)
