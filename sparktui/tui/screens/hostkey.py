"""Asks whether to trust a node's SSH host key that known_hosts does not vouch for.

Shown by the app when a node's state holds a ``model.HostKeyOffer`` (its collector met a
``nodes.base.HostKeyError`` and said so on the reachability event); the answer is
True only on an explicit yes.  "No" has the focus, and a *changed* key is flagged as a possible
man-in-the-middle.  The caller records the key (``SshNode.trust_offered_key(fingerprint)``) and
reconnects; this screen does no IO.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.widgets import Button, Static

from .confirm import YesNoModal

if TYPE_CHECKING:
    from ...model import HostKeyOffer


class HostKeyModal(YesNoModal):
    YES_ID = "hostkey-yes"
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

    @classmethod
    def from_offer(cls, node: str, offer: "HostKeyOffer") -> "HostKeyModal":
        """From the ``HostKeyOffer`` a node's reachability event carried."""
        return cls(node, offer.host, offer.fingerprint, offer.changed, offer.hint)

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
