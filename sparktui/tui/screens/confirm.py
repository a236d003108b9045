"""The one confirmation modal for anything destructive (y / n / esc; No has the focus)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Button, Static


class YesNoModal(ModalScreen[bool]):
    """A question its buttons and the y / n / esc keys answer; True only for the yes button or y."""

    YES_ID = "yes"  # the id of the yes button

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == self.YES_ID)

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


class ConfirmModal(YesNoModal):
    """``full``: what the detail summarises (a launch's exact commands), hidden until ``v``.  The title
    and the buttons are docked, so only the body scrolls: Yes / No stay on screen whatever its length."""

    AUTO_FOCUS = "#no"  # the safe answer has the focus: Enter alone never destroys
    BINDINGS = [
        Binding("y", "answer(True)", "Yes", id="confirm-yes"),
        Binding("n", "answer(False)", "No", id="confirm-no"),
        Binding("escape", "answer(False)", "Cancel", id="confirm-cancel"),
        Binding("v", "toggle_full", "Full commands", id="confirm-full"),
        Binding("up", "scroll_body('up')", show=False),
        Binding("down", "scroll_body('down')", show=False),
        Binding("pageup", "scroll_body('page_up')", show=False),
        Binding("pagedown", "scroll_body('page_down')", show=False),
    ]

    def __init__(self, title: str, detail: str = "", full: str = "") -> None:
        super().__init__()
        self.title_text = title
        self.detail = detail
        self.full = full

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog" + (" -has-full" if self.full else "")):
            # the title and detail can carry node data (paths, names): plain text, not markup
            yield Static(Content(self.title_text), classes="dialog-title")
            with Vertical(classes="dialog-foot"):  # one dock: two docks at one edge overlap
                with Horizontal(classes="dialog-buttons"):
                    # Content, not a str: a str label is markup, where "[y]" is a tag and vanishes
                    yield Button(Content("Yes [y]"), id="yes", variant="error")
                    yield Button(Content("No [n]"), id="no", variant="primary")
                if self.full:
                    yield Static(self._hint(), classes="dialog-keys")
            with VerticalScroll(classes="dialog-body", can_focus=False):
                if self.detail:
                    yield Static(Content(self.detail), classes="dialog-detail")
                if self.full:
                    yield Static(Content(self.full), classes="dialog-full")

    def _hint(self) -> Content:
        shown = self.query_one(".dialog").has_class("-full-shown") if self.is_mounted else False
        return Content.styled(f"v {'hide' if shown else 'show'} the full commands   ↑↓ PgUp PgDn scroll", "$text-muted")

    def check_action(self, action: str, parameters: tuple) -> bool | None:
        return bool(self.full) if action == "toggle_full" else True

    def action_toggle_full(self) -> None:
        dialog = self.query_one(".dialog")
        dialog.toggle_class("-full-shown")  # the state is a class: the stylesheet shows the commands
        self.query_one(".dialog-keys", Static).update(self._hint())
        if dialog.has_class("-full-shown"):
            self.call_after_refresh(self._reveal_full, 20)

    def _reveal_full(self, tries: int) -> None:
        """Scroll the commands' top into view once the layout has given them a size: the class change
        that shows them is laid out a refresh or more later (a busy machine: more), and scrolling to
        a widget not laid out yet scrolls nowhere."""
        full = self.query_one(".dialog-full")
        if not self.query_one(".dialog").has_class("-full-shown"):
            return
        if full.size.height == 0 and tries > 0:
            self.call_after_refresh(self._reveal_full, tries - 1)
            return
        self.query_one(".dialog-body").scroll_to_widget(full, top=True, animate=False)

    def action_scroll_body(self, how: str) -> None:
        getattr(self.query_one(".dialog-body", VerticalScroll), f"scroll_{how}")(animate=False)
