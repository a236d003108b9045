"""Host-key checking helpers: which known_hosts applies, is an offered key unknown or changed,
what to tell the operator, and (after an explicit yes) how to record the key."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import asyncssh


def default_known_hosts() -> str:
    return str(Path.home() / ".ssh" / "known_hosts")


@dataclass(frozen=True)
class OfferedKey:
    """A host key a server offered that known_hosts did not vouch for."""

    host: str  # the name we connected to (known_hosts is matched on it)
    addr: str
    port: int
    fingerprint: str  # SHA256:... as `ssh-keygen -lf` prints it
    key_type: str  # ssh-ed25519
    public_line: str  # "ssh-ed25519 AAAA..." (what known_hosts stores after the host field)
    changed: bool  # known_hosts had other keys for this host: possible man-in-the-middle
    known_hosts: str  # the file it would be written to


def host_field(host: str, port: int) -> str:
    return host if port in (0, 22) else f"[{host}]:{port}"


def classify(key: "asyncssh.SSHKey", host: str, addr: str, port: int, known_hosts: str | None) -> OfferedKey:
    """Describe an offered key; ``changed`` when the file already trusts other keys for the host."""
    import asyncssh

    path = known_hosts or default_known_hosts()
    changed = False
    if os.path.exists(path):
        try:
            trusted = asyncssh.read_known_hosts(path).match(host, addr, port)[0]
            changed = bool(trusted)
        except (OSError, ValueError, asyncssh.KeyImportError):
            changed = False
    pub = key.export_public_key("openssh").decode().split()
    return OfferedKey(host=host, addr=addr, port=port, fingerprint=key.get_fingerprint("sha256"),
                      key_type=pub[0], public_line=f"{pub[0]} {pub[1]}", changed=changed, known_hosts=path)


def hint(k: OfferedKey) -> str:
    port = [] if k.port in (0, 22) else ["-p", str(k.port)]
    scan = " ".join(["ssh-keyscan", *port, "-H", k.host, ">>", k.known_hosts])
    if k.changed:
        remove = " ".join(["ssh-keygen", "-R", host_field(k.host, k.port), "-f", k.known_hosts])
        return (f"If the node was really reinstalled, check the new fingerprint on its console "
                f"(ssh-keygen -lf /etc/ssh/{_key_file(k.key_type)}), then: {remove} && {scan}")
    return (f"Check the fingerprint on the node's console (ssh-keygen -lf /etc/ssh/{_key_file(k.key_type)}), "
            f"then add it: {scan}")


def _key_file(key_type: str) -> str:
    short = {"ssh-ed25519": "ed25519", "ssh-rsa": "rsa", "ecdsa-sha2-nistp256": "ecdsa"}.get(key_type, "ed25519")
    return f"ssh_host_{short}_key.pub"


def trust(k: OfferedKey) -> None:
    """Record an offered key after the operator said yes (a changed key replaces the old ones)."""
    path = Path(k.known_hosts)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    if k.changed:
        subprocess.run(["ssh-keygen", "-R", host_field(k.host, k.port), "-f", str(path)],
                       capture_output=True, check=False)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(f"{host_field(k.host, k.port)} {k.public_line}\n")
