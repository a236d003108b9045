"""Messages the TUI posts to itself.  High-rate ones coalesce (``can_replace``)."""

from __future__ import annotations

from textual.message import Message

from ..model import ActionEvent


class EngineUpdated(Message):
    """The engine processed a batch: refresh from ``engine.state`` / ``engine.logs``.

    Any number of batches between two refreshes collapse into one message.
    """

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, EngineUpdated)


class OpenAction(Message):
    """A screen asks the app to open a guided action (registry name); the app decides if it may."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name


class ActionProgress(Message):
    def __init__(self, event: ActionEvent) -> None:
        super().__init__()
        self.event = event


class ActionDone(Message):
    def __init__(self, result: object | None, error: str | None = None) -> None:
        super().__init__()
        self.result = result
        self.error = error


class LockPolled(Message):
    """The app's look at the cluster lock: its holder (None: free), or why it could not be read."""

    def __init__(self, holder: object | None, error: str = "") -> None:
        super().__init__()
        self.holder = holder
        self.error = error
