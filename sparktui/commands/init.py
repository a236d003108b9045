"""`sparktui init`: write a commented cluster.toml from the ~/.ssh/config hosts the user picks,
with what each node was found to have (fabric interface and address, MTU, RDMA devices, the Docker
socket that answers, images, model directories).

Nodes are written by their ssh config alias, so User/Port/IdentityFile/ProxyJump/known_hosts stay
in one place (the ssh config).  The text is validated with load_config before it replaces
anything, and an existing file is only replaced with --yes or an explicit yes at a terminal.

Exit codes: 0 written, 1 a node could not be probed (unreachable, no Docker) or the user declined,
2 usage (no hosts, unknown host, file exists without --yes and no terminal to ask).
"""

from __future__ import annotations

import asyncio
import json
import os
import posixpath
import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..config import ConfigError, NodeConfig, default_config_path, load_config
from ..logs.sanitize import safe

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")


class InitError(Exception):
    """One line for the user; ``code`` is the exit status."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class SshHost:
    alias: str
    hostname: str = ""
    user: str = ""
    port: int | None = None
    identity: str = ""

    def where(self) -> str:
        s = f"{self.user + '@' if self.user else ''}{self.hostname or self.alias}"
        return s + (f":{self.port}" if self.port else "")


# ------------------------------------------------------------------ ~/.ssh/config
def ssh_config_path() -> Path:
    return Path.home() / ".ssh" / "config"


def host_aliases(text: str) -> list[str]:
    """Concrete Host names in file order: patterns (*, ?, negations) name no machine to pick."""
    out: list[str] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = re.match(r"(?i)host(?:\s*=\s*|\s+)(.*)$", line)
        if not m:
            continue
        for name in m.group(1).split("#", 1)[0].split():
            name = name.strip('"')
            if name and not any(c in name for c in "*?!") and name not in out:
                out.append(name)
    return out


def read_hosts(path: Path) -> list[SshHost]:
    """Each alias with what asyncssh's own parser resolves for it (the rules it connects with)."""
    from ..nodes.hostkeys import read_ssh_config

    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InitError(f"no ssh config at {path} (hint: add a Host entry per node there, or "
                        "write the config by hand from cluster.example.toml)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InitError(f"cannot read {path}: {exc}") from None
    hosts = []
    for alias in host_aliases(text):
        try:
            conf = read_ssh_config([str(path)], alias, None, None)
        except Exception as exc:  # asyncssh.ConfigParseError and friends: say which file
            raise InitError(f"{path}: {exc}") from None
        ids = conf.get("IdentityFile") or []
        port = conf.get("Port")
        hosts.append(SshHost(alias, str(conf.get("Hostname") or ""), str(conf.get("User") or ""),
                             int(port) if port else None, str(ids[0]) if ids else ""))
    return hosts


def _interactive() -> bool:
    return sys.stdin.isatty() and sys.stdout.isatty()


def pick(hosts: list[SshHost], wanted: list[str] | None) -> list[SshHost]:
    by = {h.alias: h for h in hosts}
    if wanted:
        missing = [w for w in wanted if w not in by]
        if missing:
            raise InitError(f"{', '.join(missing)} not found in {ssh_config_path()} "
                            f"(hosts there: {', '.join(by) or 'none'})")
        if len(set(wanted)) != len(wanted):
            raise InitError("a host was given twice")
        return [by[w] for w in wanted]
    if not hosts:
        raise InitError(f"{ssh_config_path()} names no hosts (hint: add a Host entry per node)")
    if not _interactive():
        raise InitError("which nodes? pass --host NAME for each (the first is the head); "
                        f"hosts in {ssh_config_path()}: {', '.join(by)}")
    print("Hosts in", ssh_config_path())
    for i, h in enumerate(hosts, 1):
        print(f"  {i:2}  {h.alias:20} {h.where()}")
    while True:
        ans = input("Nodes to use (numbers or names, the first is the head): ").replace(",", " ").split()
        chosen = []
        for a in ans:
            if a.isdigit() and 1 <= int(a) <= len(hosts):
                chosen.append(hosts[int(a) - 1])
            elif a in by:
                chosen.append(by[a])
            else:
                print(f"  {a!r} is not one of them")
                chosen = []
                break
        if chosen and len({h.alias for h in chosen}) == len(chosen):
            return chosen


# ------------------------------------------------------------------ probing
async def _probe_one(h: SshHost, timeout: float):
    from ..nodes.base import HostKeyError, NodeError
    from ..nodes.ssh import SshNode
    from ..probes.inventory import probe_inventory

    node = SshNode(NodeConfig(name=node_name(h.alias), host=h.alias))
    try:
        try:
            await asyncio.wait_for(node.connect(), timeout)
        except HostKeyError as exc:
            what = "changed" if exc.changed else "not known yet"
            return (f"{h.alias}: host key {what} ({exc.fingerprint}); check it, run `ssh {h.alias}` once "
                    "to accept it, then init again")
        except asyncio.TimeoutError:
            return f"{h.alias}: no SSH answer from {h.where()} within {timeout:.0f} s"
        except NodeError as exc:
            return f"{h.alias}: cannot connect over SSH: {exc}"
        try:
            return await asyncio.wait_for(probe_inventory(node), timeout * 6)
        except (NodeError, asyncio.TimeoutError) as exc:
            return f"{h.alias}: probing failed: {exc or 'timed out'}"
    finally:
        await node.close()


def node_name(alias: str) -> str:
    if _NAME_RE.match(alias):
        return alias
    return re.sub(r"[^A-Za-z0-9_.-]", "-", alias).strip("-._")[:63] or "node"


# ------------------------------------------------------------------ the file
def _q(s: str) -> str:
    return json.dumps(s)  # a TOML basic string (JSON escapes are valid TOML escapes)


def _common_model(invs) -> str | None:
    sets = [{m.path for m in inv.models} for inv in invs]
    common = set.intersection(*sets) if sets else set()
    for m in invs[0].models:  # first node's order: ~/models before a hash-named snapshot
        if m.path in common:
            return m.path
    return None


def _model_name(path: str) -> str:
    m = re.search(r"models--[^/]+--([^/]+)/snapshots/", path)
    return m.group(1) if m else posixpath.basename(path.rstrip("/")) or "model"


def _pick_image(invs) -> str | None:
    common = set.intersection(*[set(inv.images) for inv in invs]) if invs else set()
    vllm = sorted(t for t in common if "vllm" in t.lower())
    return (vllm or sorted(common) or [None])[0]


def render(hosts: list[SshHost], invs: list, ssh_config: Path) -> str:
    head = invs[0]
    image = _pick_image(invs)
    model = _common_model(invs)
    out = [
        "# sparktui cluster config, written by `sparktui init` from " + str(ssh_config) + ".",
        "# Nodes are named by their ssh config alias: user, port, key, ProxyJump and known_hosts come from there.",
        "# Every key is explained in cluster.example.toml; `sparktui status` checks the nodes answer,",
        "# `sparktui doctor` checks the rest.",
        "",
        "[cluster]",
        'name = "vllm_node"                     # the container name on every node',
    ]
    if image:
        out.append(f"image = {_q(image)}" + "   # present on every node")
    else:
        out.append('image = "vllm-node"                    # not on the nodes yet: build-image, or docker pull + push-image')
    seen = sorted({t for inv in invs for t in inv.images})
    if seen:
        out.append("# images found: " + ", ".join(seen[:12]) + (" ..." if len(seen) > 12 else ""))
    if model:
        name = _model_name(model)
        mount = f"/models/{name}"
        out += [f"model_path = {_q(model)}   # on every node's disk",
                f"model_mount = {_q(mount)}   # inside the container",
                f"served_model = {_q(mount)}"]
        if "/snapshots/" in model:
            out.append("# an HF cache snapshot: its files link into ../../blobs; mount the whole models--… folder"
                       " or use a plain copy (hf download --local-dir) if the container cannot follow them")
    else:
        out.append('# model_path = "/home/me/models/MyModel"   # no model directory found on every node')
    found = sorted({m.path for inv in invs for m in inv.models})
    for p in found[:12]:
        arches = next((",".join(m.architectures) for inv in invs for m in inv.models if m.path == p and m.architectures), "")
        on = [inv.name for inv in invs if any(m.path == p for m in inv.models)]
        out.append(f"#   model found: {p}" + (f" ({arches})" if arches else "") + f" on {', '.join(on)}")
    out += [f"tensor_parallel = {len(invs)}                   # one GPU per node",
            "serve_port = 8000",
            "gpu_memory_utilization = 0.90",
            'executor = "ray"                       # or "mp": vLLM\'s own multi-node executor, no Ray',
            ""]
    for i, (h, inv) in enumerate(zip(hosts, invs)):
        out += ["[[node]]",
                f"name = {_q(inv.name)}",
                f'role = "{"head" if i == 0 else "worker"}"',
                f"host = {_q(h.alias)}" + f"   # ssh config: {h.where()}" + (f", key {h.identity}" if h.identity else ""),
                f"# seen: hostname {inv.hostname or '?'}, {inv.arch or '?'}"
                + (f", Docker {inv.docker_version}" if inv.docker_version else "")]
        if inv.docker_socket:
            out.append(f"docker_socket = {_q(inv.docker_socket)}")
        if inv.fabric is not None and inv.fabric_ip:
            out.append(f"fabric_ip = {_q(inv.fabric_ip)}   # VLLM_HOST_IP, Ray, NCCL bootstrap")
            out.append(f"fabric_if = {_q(inv.fabric.name)}   # MTU {inv.fabric.mtu or '?'}")
            hcas = [d.name for d in inv.rdma if d.up and d.netdev == inv.fabric.name] or \
                   [d.name for d in inv.rdma if d.up]
            if hcas:
                out.append("ib_hcas = [" + ", ".join(_q(x) for x in hcas) + "]")
        else:
            out.append("# no RDMA-backed interface with an IPv4 address was found (ibdev2netdev); set the fabric by hand:")
            out.append('# fabric_ip = "192.168.200.12"')
            out.append('# fabric_if = "enp1s0f1np1"')
        for ln in inv.links:
            if ln.name == "lo" or not ln.addresses:
                continue
            rd = f", RDMA {ln.rdma_device}" if ln.rdma_device else ""
            out.append(f"#   interface {ln.name}: {' '.join(ln.addresses)}, MTU {ln.mtu}, {ln.state}{rd}")
        for d in inv.rdma:
            out.append(f"#   RDMA {d.name} ==> {d.netdev} ({'Up' if d.up else 'Down'})")
        if len(invs) > 1 and inv is not head and inv.fabric and head.fabric and inv.fabric.mtu != head.fabric.mtu:
            out.append(f"# warning: MTU {inv.fabric.mtu} here, {head.fabric.mtu} on {head.name}: NCCL needs them equal")
        out.append("")
    return "\n".join(out)


def _confirm(question: str) -> bool:
    try:
        return input(question + " [y/N] ").strip().lower() in ("y", "yes")
    except EOFError:
        return False


def write_validated(text: str, dest: Path) -> None:
    """Write beside the destination, load it as the app will, then move it into place."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".cluster-", suffix=".toml", dir=dest.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        load_config(tmp)
        os.replace(tmp, dest)
    except BaseException:
        os.unlink(tmp)
        raise


def run(args) -> int:
    dest = Path(os.path.expanduser(args.output)) if args.output else default_config_path()
    try:
        if dest.exists() and not args.yes:
            if not _interactive():
                raise InitError(f"{dest} exists; pass --yes to overwrite it, or --output PATH")
        hosts = pick(read_hosts(ssh_config_path()), args.host)
        if dest.exists() and not args.yes and not _confirm(safe(f"{dest} exists. Overwrite it?")):
            print("sparktui init: nothing written", file=sys.stderr)
            return 1

        async def probe_all():
            return await asyncio.gather(*(_probe_one(h, args.timeout) for h in hosts))

        print(f"probing {', '.join(h.alias for h in hosts)} ...", file=sys.stderr)
        results = asyncio.run(probe_all())
    except InitError as exc:
        print(f"sparktui init: {safe(str(exc))}", file=sys.stderr)
        return exc.code
    problems = [r for r in results if isinstance(r, str)]
    problems += [f"{inv.name}: {inv.docker_error}" for inv in results if not isinstance(inv, str) and inv.docker_error]
    if problems:
        for p in problems:  # one line per node; messages quote remote output: no escapes
            print(f"sparktui init: {safe(p)}", file=sys.stderr)
        print(f"sparktui init: nothing written to {safe(dest)}", file=sys.stderr)
        return 1
    text = render(hosts, results, ssh_config_path())
    try:
        write_validated(text, dest)
    except ConfigError as exc:  # a bug of ours or a value that made no sense: never write it
        print(f"sparktui init: the generated config does not load: {safe(exc)}", file=sys.stderr)
        return 1
    for inv in results:
        fab = f"fabric {inv.fabric.name} {inv.fabric_ip} MTU {inv.fabric.mtu}" if inv.fabric else "no RDMA fabric found"
        print(safe(f"{inv.name}: Docker at {inv.docker_socket} ({len(inv.images)} images), {fab}, "
                   f"{len(inv.models)} model dir(s)"))
    print(safe(f"wrote {dest}; next: sparktui status" + ("" if args.output is None else f" --config {dest}")))
    return 0
