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


def _int(v: object) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def parse_ip_addr(text: str, rdma: dict[str, str] | None = None) -> list[LinkInfo]:
    """`ip -j addr` as links.  The node's text is a stranger's: anything but a list of interface
    objects is a one-line ValueError, and a field of the wrong type is left out, never a crash."""
    try:
        data = json.loads(text or "[]")
    except RecursionError:
        raise ValueError("ip -j addr: not JSON (nested too deep)") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"ip -j addr: not JSON ({exc.msg})") from None
    except ValueError:  # a number past the digit limit, and the like
        raise ValueError("ip -j addr: not JSON (a value out of range)") from None
    if not isinstance(data, list):
        raise ValueError(f"ip -j addr: a JSON {type(data).__name__}, not a list of interfaces")
    rdma = rdma or {}
    links = []
    for it in data:
        if not isinstance(it, dict) or not isinstance(it.get("ifname"), str):
            continue
        infos = it.get("addr_info")
        addrs = tuple(f"{a['local']}/{a['prefixlen']}" for a in (infos if isinstance(infos, list) else ())
                      if isinstance(a, dict) and isinstance(a.get("local"), str) and _int(a.get("prefixlen")) is not None)
        state = it.get("operstate")
        links.append(LinkInfo(name=it["ifname"], addresses=addrs, mtu=_int(it.get("mtu")),
                              state=state.upper() if isinstance(state, str) else "UNKNOWN",
                              rdma_device=rdma.get(it["ifname"])))
    return links
