"""Asks whether to trust a node's SSH host key that known_hosts does not vouch for.

Shown by the app when a collector or action reports ``nodes.base.HostKeyError``; the answer is
True only on an explicit yes.  "No" has the focus, and a *changed* key is flagged as a possible
man-in-the-middle.  The caller records the key (``SshNode.trust_offered_key(fingerprint)``) and
reconnects; this screen does no IO.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Button, Static


class HostKeyModal(ModalScreen[bool]):
    AUTO_FOCUS = "#hostkey-no"
    BINDINGS = [
        Binding("y", "answer(True)", "Trust", id="hostkey-yes"),
        Binding("n", "answer(False)", "Refuse", id="hostkey-no"),
        Binding("escape", "answer(False)", "Refuse", id="hostkey-cancel"),
    ]

    def __init__(self, node: str, host: str, fingerprint: str, changed: bool, hint: str = "") -> None:
        super().__init__()
        self.node = node
        self.host = host
        self.fingerprint = fingerprint
        self.changed = changed
        self.hint = hint

    def compose(self) -> ComposeResult:
        if self.changed:
            title = Content.styled(f"{self.node}: the host key of {self.host} has CHANGED", "bold $error")
            why = ("Someone may be intercepting the connection, or the node was reinstalled. "
                   "Trust the new key only if you checked its fingerprint on the node's console.")
        else:
            title = Content.styled(f"{self.node}: unknown host key for {self.host}", "bold $warning")
            why = "Nothing has been sent to this host yet. Compare the fingerprint with the node's own before trusting it."
        with Vertical(classes="dialog hostkey-dialog"):
            yield Static(title, classes="dialog-title")
            # host names and hints are data from config/servers: plain Content, never markup
            yield Static(Content(f"fingerprint  {self.fingerprint}"), classes="dialog-detail hostkey-fingerprint")
            yield Static(Content(why), classes="dialog-detail")
            if self.hint:
                yield Static(Content(self.hint), classes="dialog-detail hostkey-hint")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Trust and connect [y]", id="hostkey-yes", variant="error" if self.changed else "warning")
                yield Button("Refuse [n]", id="hostkey-no", variant="primary")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "hostkey-yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
