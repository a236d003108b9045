"""The one confirmation modal for anything destructive (y / n / esc; No has the focus)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
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
    AUTO_FOCUS = "#no"  # the safe answer has the focus: Enter alone never destroys
    BINDINGS = [
        Binding("y", "answer(True)", "Yes", id="confirm-yes"),
        Binding("n", "answer(False)", "No", id="confirm-no"),
        Binding("escape", "answer(False)", "Cancel", id="confirm-cancel"),
    ]

    def __init__(self, title: str, detail: str = "") -> None:
        super().__init__()
        self.title_text = title
        self.detail = detail

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            # the title and detail can carry node data (paths, names): plain text, not markup
            yield Static(Content(self.title_text), classes="dialog-title")
            if self.detail:
                yield Static(Content(self.detail), classes="dialog-detail")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Yes [y]", id="yes", variant="error")
                yield Button("No [n]", id="no", variant="primary")
