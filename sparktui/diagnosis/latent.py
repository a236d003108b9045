"""R7, latent misconfiguration: what is wrong even when nothing hangs (always reported).

Compares ranks and nodes with each other: env that must match, the libnccl actually loaded,
container settings, the transport NCCL chose.  Pure.
"""

from __future__ import annotations

import ipaddress

from ..logs.redact import MASK, is_secret_key
from ..units import GIB
from .evidence import Evidence
from .facts import RankFacts, rules_data

# env that is per-process by nature and must not be diffed
_PER_PROCESS = {"RANK", "LOCAL_RANK", "GROUP_RANK", "LOCAL_WORLD_SIZE", "CUDA_VISIBLE_DEVICES", "NCCL_DEBUG_FILE",
                "VLLM_HOST_IP", "TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE",
                "TORCH_NCCL_DEBUG_INFO_PIPE_FILE"}


def _item(key: str, evidence: list[str], **fmt) -> dict:
    """An R7 item: its id and words from verdict_rules.toml's [latent.KEY], filled from ``fmt``."""
    spec = rules_data()["latent"][key]
    return {"id": spec["id"], "severity": "warning", "title": spec["title"].format(**fmt), "evidence": evidence,
            "advice": spec["advice"].format(**fmt)}


def env_diff(ranks: list[RankFacts]) -> dict[str, dict[str, str]]:
    """Variables whose value differs between ranks: name -> {rank label: value or '(unset)'}."""
    with_env = [r for r in ranks if r.env]
    if len(with_env) < 2:
        return {}
    names = sorted({k for r in with_env for k in r.env} - _PER_PROCESS)
    out = {}
    for k in names:
        vals = {r.label: r.env.get(k, "(unset)") for r in with_env}
        if len(set(vals.values())) > 1:
            out[k] = vals
    return out


def latent_findings(ev: Evidence, ranks: list[RankFacts]) -> list[dict]:
    items: list[dict] = []
    socket_ranks = [r for r in ranks if r.has("net_socket") or r.has("ib_no_device")]
    if socket_ranks:
        ev_lines = [f"{r.node}: {r.label}: " + (r.first("ib_no_device") or r.first("net_socket")).line[:160]
                    for r in socket_ranks[:4]]
        items.append(_item("socket_transport", ev_lines))
    for r in ranks:
        m = r.first("ib_using")
        want = ev.expected_hcas.get(r.node) or []
        if m and len(want) >= 2 and m.groups[0].count("[") < 2:
            items.append(_item("single_hca", [f"{r.node}: {m.line[:160]}"], rank=r.label, hcas=len(want),
                               want=",".join(want)))
        rings = r.first("rings")
        if m and rings and rings.groups[1] == "0":
            items.append(_item("gdr_off", [f"{r.node}: {rings.line[:160]}"], rank=r.label))
        b = r.first("bootstrap_if")
        if b and (b.groups[0] == "lo" or b.groups[0].startswith(("docker", "tailscale", "virbr", "lxcbr"))):
            items.append(_item("bootstrap_interface", [f"{r.node}: {b.line[:160]}"], rank=r.label,
                               interface=b.groups[0]))
    diff = env_diff(ranks)
    if diff:
        lines = []
        for k, vals in diff.items():
            # a bundle or capture may carry a secret env (HF_TOKEN): that it differs is the finding, not its value
            shown = {who: (MASK if is_secret_key(k) and v != "(unset)" else v) for who, v in vals.items()}
            lines.append(f"{k}: " + " | ".join(f"{who}={v}" for who, v in shown.items()))
        items.append(_item("env_mismatch", lines, names=", ".join(diff)))
    hosts = {}
    for r in ranks:
        ip = r.env.get("VLLM_HOST_IP")
        if not ip:
            continue
        hosts.setdefault(ip, set()).add(r.node)
        fab = ev.fabric_ips.get(r.node)
        if fab and not _same_subnet(ip, fab):
            items.append(_item("host_ip_off_fabric", [f"{r.node}: VLLM_HOST_IP={ip}, fabric IP {fab}"], rank=r.label,
                               ip=ip, fabric_ip=fab, node=r.node))
    for ip, nodes in hosts.items():
        if len(nodes) > 1:
            items.append(_item("host_ip_shared", [f"{n}: VLLM_HOST_IP={ip}" for n in sorted(nodes)], ip=ip))
    libs = {r.label: (r.libnccl, r.libnccl_sha256) for r in ranks if r.libnccl_sha256}
    if len({sha for _, sha in libs.values()}) > 1:
        items.append(_item("library_mismatch", [f"{who}: {path} sha256 {sha[:16]}" for who, (path, sha) in libs.items()]))
    for n in ev.nodes:
        for cid, s in n.containers.items():
            probs = []
            if s.get("NetworkMode") not in (None, "host"):
                probs.append(f"NetworkMode={s.get('NetworkMode')}")
            if s.get("IpcMode") not in (None, "host"):
                probs.append(f"IpcMode={s.get('IpcMode')}")
            shm = s.get("ShmSize")
            if isinstance(shm, int) and s.get("IpcMode") != "host" and shm < GIB:
                probs.append(f"ShmSize={shm // (1 << 20)} MiB")
            caps = s.get("CapAdd") or []
            if "SYS_PTRACE" not in caps and "CAP_SYS_PTRACE" not in caps and not s.get("Privileged"):
                probs.append("no SYS_PTRACE (py-spy cannot attach)")
            if probs:
                items.append(_item("container_settings", [f"{n.node}: " + ", ".join(probs)], node=n.node,
                                   container=cid[:12]))
    return items


def _same_subnet(a: str, b: str, prefix: int = 24) -> bool:
    try:
        return ipaddress.ip_network(f"{a}/{prefix}", strict=False) == ipaddress.ip_network(f"{b}/{prefix}", strict=False)
    except ValueError:
        return False
