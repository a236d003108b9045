"""Host-key checking helpers: which known_hosts applies, is an offered key unknown or changed,
what to tell the operator, and (after an explicit yes) how to record the key."""

from __future__ import annotations

import getpass
import os
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

if TYPE_CHECKING:
    import asyncssh

GLOBAL_KNOWN_HOSTS = ("/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2")  # OpenSSH's defaults


def default_known_hosts() -> str:
    return str(Path.home() / ".ssh" / "known_hosts")


class CheckingOff(Exception):
    """The configuration would turn host-key checking off; sparktui refuses to connect."""


@dataclass(frozen=True)
class TrustStore:
    """The known_hosts files that vouch for a host's key: what asyncssh is given, explicitly."""

    files: tuple[str, ...]  # every file consulted, existing or not
    write_to: str  # where a key the operator trusts is recorded

    def asyncssh_arg(self) -> Any:
        """Never None (None turns checking off in asyncssh): the readable files, else an empty set
        that trusts nothing, so every key is "unknown" and reaches the operator."""
        import asyncssh

        readable = [f for f in self.files if os.path.isfile(f) and os.access(f, os.R_OK)]
        return readable or asyncssh.import_known_hosts("")


def ssh_config_paths(ssh_config: str | None) -> list[str]:
    """The ssh config files asyncssh reads: the node's own, else ~/.ssh/config when readable."""
    if ssh_config:
        return [os.path.expanduser(ssh_config)]
    default = Path.home() / ".ssh" / "config"
    return [str(default)] if os.access(default, os.R_OK) else []


def read_ssh_config(paths: Sequence[str], host: str, port: int | None, user: str | None):
    """asyncssh's own parse of the ssh config for one host (the same Host/Match rules it connects with)."""
    from asyncssh.config import SSHClientConfig

    try:
        local = getpass.getuser()
    except (KeyError, OSError):
        local = "root"
    return SSHClientConfig.load(None, list(paths), False, False, False, local, user or (), host, port or ())


def trust_store(known_hosts: str | None, paths: Sequence[str], ssh_conf: Any, where: str) -> TrustStore:
    """Resolve the known_hosts files for a host; raise ``CheckingOff`` where they amount to none.

    The node's ``known_hosts`` wins; else ssh config's UserKnownHostsFile (+ GlobalKnownHostsFile),
    else OpenSSH's defaults.  ``UserKnownHostsFile none`` makes asyncssh skip checking entirely,
    so it is refused rather than honoured."""
    if known_hosts is not None:
        if known_hosts.strip().lower() in ("", "none", "/dev/null"):
            raise CheckingOff(f"known_hosts = {known_hosts!r} turns host-key checking off for {where}")
        path = os.path.expanduser(known_hosts)
        return TrustStore((path,), path)
    user_files = ssh_conf.get("UserKnownHostsFile", ()) if ssh_conf is not None else ()
    src = " or ".join(paths) or "ssh config"
    if user_files == [] or any(f in ("/dev/null",) for f in user_files or ()):
        raise CheckingOff(f"UserKnownHostsFile none in {src} turns host-key checking off for {where}")
    global_files = ssh_conf.get("GlobalKnownHostsFile", ()) if ssh_conf is not None else ()
    users = [os.path.expanduser(f) for f in user_files] or [default_known_hosts()]
    globals_ = [os.path.expanduser(f) for f in global_files] if global_files != () else list(GLOBAL_KNOWN_HOSTS)
    return TrustStore(tuple(users + globals_), users[0])


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


def classify(key: "asyncssh.SSHKey", host: str, addr: str, port: int,
             store: "TrustStore | str | None") -> OfferedKey:
    """Describe an offered key; ``changed`` when any trusted file already holds other keys for the host."""
    import asyncssh

    if not isinstance(store, TrustStore):
        path = store or default_known_hosts()
        store = TrustStore((path,), path)
    changed = False
    for path in store.files:
        if not os.path.exists(path):
            continue
        try:
            if asyncssh.read_known_hosts(path).match(host, addr, port)[0]:
                changed = True
        except (OSError, ValueError, asyncssh.KeyImportError):
            continue
    pub = key.export_public_key("openssh").decode().split()
    return OfferedKey(host=host, addr=addr, port=port, fingerprint=key.get_fingerprint("sha256"),
                      key_type=pub[0], public_line=f"{pub[0]} {pub[1]}", changed=changed,
                      known_hosts=store.write_to)


def known_hosts_line(k: OfferedKey) -> str:
    """The exact known_hosts line that trusts the offered key, and only it."""
    return f"{host_field(k.host, k.port)} {k.public_line}"


def add_command(k: OfferedKey) -> str:
    """A shell command that records exactly the shown key (no re-fetch that could get another one)."""
    q = shlex.quote
    add = f"printf '%s\\n' {q(known_hosts_line(k))} >> {q(k.known_hosts)}"
    if k.changed:
        return f"ssh-keygen -R {q(host_field(k.host, k.port))} -f {q(k.known_hosts)} && {add}"
    return add


def hint(k: OfferedKey) -> str:
    check = f"ssh-keygen -lf /etc/ssh/{_key_file(k.key_type)}"
    if k.changed:
        return (f"If the node was really reinstalled, run `{check}` on its console and compare with "
                f"{k.fingerprint}; only if they match: {add_command(k)}")
    return (f"Run `{check}` on the node's console and compare with {k.fingerprint}; "
            f"only if they match: {add_command(k)}")


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
        fh.write(known_hosts_line(k) + "\n")
