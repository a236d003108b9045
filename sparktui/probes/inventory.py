"""What `sparktui init` reads from a node to write its config: fabric interfaces and addresses
(``ip -j addr`` + ``ibdev2netdev``), MTU, RDMA devices, the Docker socket that answers, images
present, and model directories (HF cache snapshots and ~/models/*) holding a config.json.

Every read goes through the Node handle, so the same probe runs over SSH and on this machine."""

from __future__ import annotations

import asyncio
import dataclasses
import ipaddress
import re
from dataclasses import dataclass, field

from ..model import LinkInfo
from ..nodes.base import Node, NodeError
from .links import IBDEV2NETDEV, IP_ADDR, parse_ip_addr
from .model import ModelProbeError, probe_model

DEFAULT_SOCKETS = ("/var/run/docker.sock", "/run/docker.sock")
_IBDEV = re.compile(r"^(\S+)\s+port\s+\d+\s+==>\s+(\S+)\s+\((\w+)\)")
MAX_MODELS = 12

# DOCKER_HOST as a session on the node sees it (rootless Docker and the test bed set it), then the
# usual sockets; `test -S` so a stale file is not taken for a daemon.
_SOCKET_SCRIPT = r"""
case "${DOCKER_HOST:-}" in unix://*) printf 'env %s\n' "${DOCKER_HOST#unix://}"; set -- "$@" "${DOCKER_HOST#unix://}";;
  ?*) printf 'other %s\n' "$DOCKER_HOST";; esac
for s in "$@" "${XDG_RUNTIME_DIR:-/run/user/$(id -u)}/docker.sock"; do [ -S "$s" ] && printf 'sock %s\n' "$s"; done
exit 0
"""

_MODELS_SCRIPT = r"""
hub="${HF_HUB_CACHE:-${HF_HOME:-$HOME/.cache/huggingface}/hub}"
for d in "$hub"/models--*/snapshots/* "$HOME"/models/* /models/*; do
  [ -f "$d/config.json" ] && printf '%s\n' "$d"
done
exit 0
"""


@dataclass(frozen=True)
class RdmaDevice:
    name: str  # rocep1s0f1
    netdev: str  # enp1s0f1np1
    up: bool


@dataclass(frozen=True)
class FoundModel:
    path: str
    architectures: tuple[str, ...] = ()
    total_bytes: int | None = None


@dataclass
class Inventory:
    name: str
    hostname: str = ""
    arch: str = ""
    links: list[LinkInfo] = field(default_factory=list)
    rdma: list[RdmaDevice] = field(default_factory=list)
    fabric: LinkInfo | None = None
    fabric_ip: str | None = None
    docker_socket: str | None = None
    docker_error: str | None = None  # one line: why no Docker Engine answered
    docker_version: str = ""
    images: list[str] = field(default_factory=list)
    models: list[FoundModel] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what could not be read (non-fatal)


def parse_ibdev2netdev_all(text: str) -> list[RdmaDevice]:
    """Every RDMA device line (a netdev may be backed by two: the GB10's x4 halves)."""
    out = []
    for line in text[:MAX_PROBE_TEXT].splitlines():
        m = _IBDEV.match(line.strip())
        if m:
            out.append(RdmaDevice(m.group(1), m.group(2), m.group(3).lower() == "up"))
    return out


# What the shell probes print is read only this far: a node's hostname, its sockets and a dozen model
# paths fit many times over; the rest of an endless answer is not split into lines.
MAX_PROBE_TEXT = 1 << 20


def parse_hostname_arch(text: str) -> tuple[str, str]:
    """`hostname; uname -m`: the first two words (either may be missing)."""
    parts = text[:MAX_PROBE_TEXT].split(maxsplit=2)
    return (parts + ["", ""])[0], (parts + ["", ""])[1]


def parse_sockets(text: str) -> tuple[list[str], str | None, str | None]:
    """The socket script's lines: sockets found, DOCKER_HOST's socket, a DOCKER_HOST not a socket."""
    found, env_sock, other = [], None, None
    for line in text[:MAX_PROBE_TEXT].splitlines():
        kind, _, val = line.partition(" ")
        if kind == "sock":
            found.append(val)
        elif kind == "env":
            env_sock = val
        elif kind == "other":
            other = val
    return found, env_sock, other


def parse_model_paths(text: str) -> list[str]:
    """The model search's lines: at most MAX_MODELS directories."""
    return [p for p in text[:MAX_PROBE_TEXT].splitlines() if p.strip()][:MAX_MODELS]


def _ipv4(addr: str) -> ipaddress.IPv4Address | None:
    try:
        ip = ipaddress.ip_interface(addr).ip
    except ValueError:
        return None
    return ip if isinstance(ip, ipaddress.IPv4Address) else None


def pick_fabric(links: list[LinkInfo], rdma: list[RdmaDevice]) -> tuple[LinkInfo | None, str | None]:
    """The RDMA-backed, up interface with an IPv4 address (the CX-7 / RoCE link).  Without RDMA
    nothing is guessed: the management address would bind NCCL/Gloo to the wrong network."""
    backed = {d.netdev for d in rdma if d.up}
    for ln in links:
        if ln.name in backed and ln.state in ("UP", "UNKNOWN"):
            for a in ln.addresses:
                ip = _ipv4(a)
                if ip is not None and not ip.is_loopback and not ip.is_link_local:
                    return ln, str(ip)
    return None, None


async def _links(node: Node, inv: Inventory) -> None:
    try:
        res = await node.run(IP_ADDR, timeout=15)
        if res.ok:
            inv.links = parse_ip_addr(res.text)
        else:
            inv.notes.append(f"ip -j addr failed: {res.err_text.strip()[:120] or res.returncode}")
    except (NodeError, ValueError) as exc:
        inv.notes.append(f"ip -j addr: {exc}")
    try:
        res = await node.run(IBDEV2NETDEV, timeout=15)
        if res.ok:
            inv.rdma = parse_ibdev2netdev_all(res.text)
        else:
            inv.notes.append("ibdev2netdev not available (no RDMA devices listed)")
    except NodeError:
        inv.notes.append("ibdev2netdev not available (no RDMA devices listed)")
    by_name = {ln.name: ln for ln in inv.links}
    for d in inv.rdma:  # ip's view, with the RDMA device named
        if d.netdev in by_name and by_name[d.netdev].rdma_device is None:
            by_name[d.netdev] = dataclasses.replace(by_name[d.netdev], rdma_device=d.name)
    inv.links = [by_name.get(ln.name, ln) for ln in inv.links]
    inv.fabric, inv.fabric_ip = pick_fabric(inv.links, inv.rdma)


async def _docker(node: Node, inv: Inventory, configured: str | None) -> None:
    from ..transport.threads import in_thread

    try:
        extra = [configured] if configured else []
        res = await node.run(["sh", "-c", _SOCKET_SCRIPT, "sh", *DEFAULT_SOCKETS, *extra], timeout=15)
    except NodeError as exc:
        inv.docker_error = f"cannot look for a Docker socket: {exc}"
        return
    found, env_sock, other = parse_sockets(res.text)
    # a configured socket, else the node's DOCKER_HOST (what its own docker CLI uses), else the usual
    # places: never falling back past the first two to another daemon
    candidates = [configured] if configured else [env_sock] if env_sock else found
    if not any(c in found for c in candidates):
        looked = candidates if (configured or env_sock) else list(DEFAULT_SOCKETS)
        extra_note = f" (DOCKER_HOST={other} is not a unix socket)" if other else ""
        inv.docker_error = f"no Docker Engine: no socket at {' or '.join(looked)}{extra_note}"
        return
    sock = next(c for c in candidates if c in found)
    # the node's Docker handle forwards cfg.docker_socket: point it at the socket found, then ask
    node.cfg = dataclasses.replace(node.cfg, docker_socket=sock)  # type: ignore[attr-defined]
    try:
        client = await node.docker()
        version = await in_thread(client.version)
        images = await in_thread(client.api.images)
    except Exception as exc:  # docker SDK errors are many kinds; all mean "no Engine answered"
        first = (str(exc).splitlines() or [type(exc).__name__])[0]
        inv.docker_error = f"no Docker Engine answers at {sock}: {first[:160]}"
        return
    inv.docker_socket = sock
    # the Engine's JSON is the node's word: only strings are taken from it
    inv.docker_version = str(version.get("Version", "")) if isinstance(version, dict) else ""
    tags = sorted({t for im in (images if isinstance(images, list) else ()) if isinstance(im, dict)
                   for t in (im.get("RepoTags") if isinstance(im.get("RepoTags"), list) else ())
                   if isinstance(t, str) and t and t != "<none>:<none>"})
    inv.images = tags


async def _models(node: Node, inv: Inventory) -> None:
    try:
        res = await node.run(["sh", "-c", _MODELS_SCRIPT], timeout=20)
    except NodeError as exc:
        inv.notes.append(f"model search: {exc}")
        return
    paths = parse_model_paths(res.text)
    for p in paths:
        try:
            m = await probe_model(node, p)
            inv.models.append(FoundModel(p, m.architectures, m.total_bytes))
        except (ModelProbeError, NodeError):
            inv.models.append(FoundModel(p))


async def probe_inventory(node: Node, *, docker_socket: str | None = None) -> Inventory:
    """Read everything init needs from a connected node.  Unreachable raises NodeError; the rest
    (no RDMA, no Docker, no models) is recorded on the Inventory."""
    inv = Inventory(name=node.name)
    res = await node.run(["sh", "-c", "hostname; uname -m"], timeout=15)
    inv.hostname, inv.arch = parse_hostname_arch(res.text)
    await asyncio.gather(_links(node, inv), _docker(node, inv, docker_socket), _models(node, inv))
    return inv
