"""Fabric link state from `ip -j addr` (name, addresses, MTU, state) and `ibdev2netdev` (which RDMA
device backs which netdev: `rocep1s0f1 port 1 ==> enp1s0f1np1 (Up)`)."""

from __future__ import annotations

import json
import re

from ..model import LinkInfo

IP_ADDR = ["ip", "-j", "addr"]
IBDEV2NETDEV = ["ibdev2netdev"]
_IBDEV = re.compile(r"^(\S+)\s+port\s+\d+\s+==>\s+(\S+)\s+\((\w+)\)")


def parse_ibdev2netdev(text: str) -> dict[str, str]:
    """netdev -> rdma device."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        m = _IBDEV.match(line.strip())
        if m:
            out[m.group(2)] = m.group(1)
    return out


def parse_ip_addr(text: str, rdma: dict[str, str] | None = None) -> list[LinkInfo]:
    try:
        data = json.loads(text or "[]")
    except json.JSONDecodeError as exc:
        raise ValueError(f"ip -j addr: not JSON ({exc.msg})") from None
    rdma = rdma or {}
    links = []
    for it in data:
        if not isinstance(it, dict) or "ifname" not in it:
            continue
        addrs = tuple(f"{a['local']}/{a['prefixlen']}" for a in it.get("addr_info", ())
                      if isinstance(a, dict) and "local" in a and "prefixlen" in a)
        state = str(it.get("operstate", "UNKNOWN")).upper()
        links.append(LinkInfo(name=it["ifname"], addresses=addrs, mtu=it.get("mtu"), state=state,
                              rdma_device=rdma.get(it["ifname"])))
    return links
