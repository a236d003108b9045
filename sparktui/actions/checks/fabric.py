"""Fabric checks: each node's fabric IP on one subnet, reachable from its peers, MTU equal, and the
interface Ray/NCCL/Gloo will use pinned to the fabric one."""

from __future__ import annotations

import ipaddress
import json

from ...config import Config
from ...nodes.base import Node, NodeError
from . import CheckResult, fail, ok, skip, warn

PIN_VARS = ("VLLM_HOST_IP", "NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME")


def find_interface(ip_json: list[dict], ip: str) -> tuple[str, ipaddress.IPv4Interface | ipaddress.IPv6Interface, int | None] | None:
    for link in ip_json:
        for a in link.get("addr_info", []):
            if a.get("local") == ip:
                return link.get("ifname", "?"), ipaddress.ip_interface(f"{ip}/{a.get('prefixlen', 32)}"), link.get("mtu")
    addr = ipaddress.ip_address(ip)
    for link in ip_json:  # a scope-host address (127.0.0.1/8 on lo) answers for its whole prefix
        for a in link.get("addr_info", []):
            if a.get("scope") == "host" and a.get("local"):
                net = ipaddress.ip_interface(f"{a['local']}/{a.get('prefixlen', 32)}").network
                if addr in net:
                    return link.get("ifname", "?"), ipaddress.ip_interface(f"{ip}/{net.prefixlen}"), link.get("mtu")
    return None


def fabric_results(config: Config, found: dict[str, tuple | None], reach: dict[str, list[str]],
                   unreachable: tuple[str, ...] = ()) -> list[CheckResult]:
    """found: node -> (ifname, interface, mtu) or None; reach: node -> peers it could not reach;
    unreachable: nodes SSH could not reach (left out, the ssh check already failed them)."""
    out: list[CheckResult] = []
    nodes = tuple(n for n in config.nodes if n.name not in unreachable)
    if len(nodes) < 2 and unreachable:
        return [skip("fabric", f"not compared: {', '.join(unreachable)} unreachable")]
    missing_cfg = [n.name for n in nodes if not n.fabric_ip]
    if missing_cfg:
        return [warn("fabric", f"no fabric_ip configured for {', '.join(missing_cfg)}", "", [],
                     "set fabric_ip (the CX-7 address) and fabric_if per node, or Ray/NCCL may pick the external "
                     "or Wi-Fi address (the story's `Ray picked the external IP`)", "wrong_network_interface")]
    ev = []
    for n in nodes:
        f = found.get(n.name)
        ev.append(f"{n.name}: {n.fabric_ip} on {f[0]} ({f[1].with_prefixlen}), MTU {f[2]}" if f
                  else f"{n.name}: {n.fabric_ip} is not on any interface")
    absent = [n.name for n in nodes if not found.get(n.name)]
    if absent:
        out.append(fail("fabric", f"fabric IP not configured on {', '.join(absent)}", "", ev,
                        "bring the CX-7 port up with its address (netplan), or fix fabric_ip", "wrong_network_interface"))
        return out
    nets = {found[n.name][1].network for n in nodes}
    if len(nets) > 1:
        out.append(fail("fabric", "fabric IPs are on different subnets", "", ev,
                        "put every node's fabric address in one subnet (e.g. 192.168.100.x/24)", "wrong_network_interface"))
    mtus = {found[n.name][2] for n in nodes}
    if len(mtus) > 1:
        out.append(fail("fabric_mtu", f"MTU differs across nodes: {sorted(m or 0 for m in mtus)}", "", ev,
                        "set mtu: 9000 on both ends (else IBV_WC_RETRY_EXC_ERR / stalls)", "nccl_network_error"))
    wrong_if = [f"{n.name}: {found[n.name][0]} != {n.fabric_if}" for n in nodes
                if n.fabric_if and found[n.name][0] != n.fabric_if]
    if wrong_if:
        out.append(fail("fabric_if", "fabric IP is on another interface than fabric_if", "", wrong_if,
                        "fix fabric_if so NCCL_SOCKET_IFNAME/GLOO_SOCKET_IFNAME name the interface holding fabric_ip",
                        "wrong_network_interface"))
    unreach = [f"{k} cannot reach {', '.join(v)}" for k, v in reach.items() if v]
    if unreach:
        out.append(fail("fabric_reach", "peers not reachable over the fabric", "", unreach,
                        "check the cable/link state and addresses (ping -M do -s 8972 PEER)", "nccl_network_error"))
    env = dict(config.cluster.env)
    if "NCCL_IB_GID_INDEX" in env:
        out.append(warn("fabric_pin", "NCCL_IB_GID_INDEX is pinned", "", [f"NCCL_IB_GID_INDEX={env['NCCL_IB_GID_INDEX']}"],
                        "leave it unset: the GID index can drift (3 -> 4) and hang after load", "nccl_ib_error"))
    no_if = [n.name for n in nodes if not n.fabric_if]
    if no_if:
        out.append(warn("fabric_pin", f"fabric_if not set for {', '.join(no_if)}: interface not pinned", "", ev,
                        "set fabric_if so the start pins " + ", ".join(PIN_VARS) + " to it", "wrong_network_interface"))
    if not out:
        out.append(ok("fabric", f"fabric on {next(iter(nets))}, MTU {next(iter(mtus))}, peers reachable, "
                      f"{'/'.join(PIN_VARS)} pinned to {nodes[0].fabric_if}", "", ev))
    return out


async def node_addrs(node: Node) -> list[dict] | None:
    """The node's `ip -j addr show`, or None where it gives nothing (no `ip`, no JSON, no answer)."""
    try:
        res = await node.run(["ip", "-j", "addr", "show"], timeout=15)
        return json.loads(res.text or "[]") if res.ok else None
    except (NodeError, ValueError):
        return None


async def gather_fabric(config: Config, nodes: dict[str, Node]) -> tuple[dict, dict, dict]:
    """(found, reach, addrs): node -> its fabric_ip's interface, node -> peers it could not reach,
    node -> its `ip -j addr show` (for the socket-interface check; absent where `ip` gave nothing)."""
    found: dict[str, tuple | None] = {}
    reach: dict[str, list[str]] = {}
    addrs: dict[str, list[dict]] = {}
    for n in config.nodes:
        if n.name not in nodes:
            continue
        got = await node_addrs(nodes[n.name])
        if got is not None:
            addrs[n.name] = got
        if n.fabric_ip:
            found[n.name] = find_interface(addrs[n.name], n.fabric_ip) if n.name in addrs else None
    for n in config.nodes:
        if n.name not in nodes or not n.fabric_ip:
            continue
        bad = []
        for peer in config.nodes:
            if peer.name == n.name or not peer.fabric_ip:
                continue
            try:
                res = await nodes[n.name].run(["ping", "-c", "1", "-W", "2", peer.fabric_ip], timeout=10)
                if res.returncode == 127:  # no ping installed: at least the route must exist
                    res = await nodes[n.name].run(["ip", "route", "get", peer.fabric_ip], timeout=10)
                if not res.ok:
                    bad.append(f"{peer.name} ({peer.fabric_ip})")
            except NodeError:
                bad.append(f"{peer.name} ({peer.fabric_ip})")
        reach[n.name] = bad
    return found, reach, addrs


# the variables that name the interface a rank's sockets bind to (NCCL's bootstrap and socket transport,
# Gloo's pairs, torch's TensorPipe): one with no address makes that rank's rendezvous fail or hang
SOCKET_IF_VARS = ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME")
SOCKET_IF_FIX = ("pin the interface that holds the node's fabric address (fabric_if, or the node's env in the "
                 "config); `ip -br addr` on the node lists them")


def addressed_interfaces(ip_json: list[dict]) -> set[str]:
    """Interfaces of `ip -j addr show` holding an IPv4 address or a global IPv6 one (a link-local
    fe80:: alone cannot carry a rendezvous to another host)."""
    out: set[str] = set()
    for link in ip_json:
        for a in link.get("addr_info", []):
            if a.get("family") == "inet" or (a.get("family") == "inet6" and a.get("scope") == "global"):
                out.add(str(link.get("ifname", "")))
    return out


def unusable_socket_ifs(env: dict[str, str], ip_json: list[dict]) -> list[str]:
    """``VAR=value`` of each socket-interface variable in ``env`` that names no interface holding an
    address on the node.  NCCL reads its value as name prefixes (``=`` before them: exact names) and
    ``^`` as an exclusion list, which names nothing to check; Gloo and TensorPipe read exact names."""
    have = addressed_interfaces(ip_json)
    bad = []
    for var in SOCKET_IF_VARS:
        value = env.get(var, "").strip()
        if not value or value.startswith("^"):
            continue
        exact = var != "NCCL_SOCKET_IFNAME" or value.startswith("=")
        names = [x.strip() for x in value.lstrip("=").split(",") if x.strip()]
        if not names:
            continue
        if not any(h == n or (not exact and h.startswith(n)) for n in names for h in have):
            bad.append(f"{var}={value}")
    return bad


def socket_if_results(envs: dict[str, dict[str, str]], addrs: dict[str, list[dict]]) -> list[CheckResult]:
    """One row per node whose launch env pins a socket interface: does it hold an address there (the
    same rule the launch's preflight refuses on)."""
    out: list[CheckResult] = []
    for node, env in envs.items():
        pinned = [f"{v}={env[v]}" for v in SOCKET_IF_VARS if env.get(v)]
        if not pinned or node not in addrs:
            continue
        bad = unusable_socket_ifs(env, addrs[node])
        if bad:
            out.append(fail("socket_interface", f"{', '.join(bad)} names no interface with an address on {node}",
                            node, [f"{node}: addressed: {', '.join(sorted(addressed_interfaces(addrs[node]))) or 'none'}"],
                            SOCKET_IF_FIX, "wrong_network_interface"))
        else:
            out.append(ok("socket_interface", f"{', '.join(pinned)}: addressed", node))
    return out
