"""R7, latent misconfiguration: what is wrong even when nothing hangs (always reported).

Compares ranks and nodes with each other: env that must match, the libnccl actually loaded,
container settings, the transport NCCL chose.  Pure.
"""

from __future__ import annotations

import ipaddress

from ..units import GIB
from .evidence import Evidence
from .facts import RankFacts

# env that is per-process by nature and must not be diffed
_PER_PROCESS = {"RANK", "LOCAL_RANK", "GROUP_RANK", "LOCAL_WORLD_SIZE", "CUDA_VISIBLE_DEVICES", "NCCL_DEBUG_FILE",
                "VLLM_HOST_IP", "TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE",
                "TORCH_NCCL_DEBUG_INFO_PIPE_FILE"}


def _item(id_: str, severity: str, title: str, evidence: list[str], advice: str = "") -> dict:
    return {"id": id_, "severity": severity, "title": title, "evidence": evidence, "advice": advice}


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
        items.append(_item("nccl_socket_transport", "warning", "NCCL runs over NET/Socket, not NET/IB (no RDMA)",
                           ev_lines, "Give the container the RDMA devices (--device /dev/infiniband, IPC_LOCK, memlock) "
                           "and check NCCL_IB_DISABLE is unset; expect NET/IB/…/GDRDMA on a Spark pair."))
    for r in ranks:
        m = r.first("ib_using")
        want = ev.expected_hcas.get(r.node) or []
        if m and len(want) >= 2 and m.groups[0].count("[") < 2:
            items.append(_item("nccl_single_hca", "warning", f"{r.label}: NCCL uses one HCA of {len(want)}",
                               [f"{r.node}: {m.line[:160]}"],
                               "Pin NCCL_IB_HCA to both x4 halves (e.g. =" + ",".join(want) + ")."))
        rings = r.first("rings")
        if m and rings and rings.groups[1] == "0":
            items.append(_item("nccl_gdr_off", "warning", f"{r.label}: GPUDirect RDMA is off (GDR 0)",
                               [f"{r.node}: {rings.line[:160]}"], "Check NCCL_NET_GDR_LEVEL / NCCL_NET_GDR_C2C."))
        b = r.first("bootstrap_if")
        if b and (b.groups[0] == "lo" or b.groups[0].startswith(("docker", "tailscale", "virbr", "lxcbr"))):
            items.append(_item("wrong_network_interface", "warning",
                               f"{r.label}: NCCL bootstrap bound to {b.groups[0]}", [f"{r.node}: {b.line[:160]}"],
                               "Set NCCL_SOCKET_IFNAME/GLOO_SOCKET_IFNAME to the fabric interface on every node."))
    diff = env_diff(ranks)
    if diff:
        lines = []
        for k, vals in diff.items():
            lines.append(f"{k}: " + " | ".join(f"{who}={v}" for who, v in vals.items()))
        items.append(_item("nccl_env_mismatch", "warning", "Ranks run with different NCCL/Gloo/rendezvous settings: "
                           + ", ".join(diff), lines,
                           "Launch every rank with the same NCCL_*/GLOO_* settings (the IFNAME may differ only if "
                           "the interface names do)."))
    hosts = {}
    for r in ranks:
        ip = r.env.get("VLLM_HOST_IP")
        if not ip:
            continue
        hosts.setdefault(ip, set()).add(r.node)
        fab = ev.fabric_ips.get(r.node)
        if fab and not _same_subnet(ip, fab):
            items.append(_item("ray_ip_mismatch", "warning", f"{r.label}: VLLM_HOST_IP {ip} is not on the fabric subnet",
                               [f"{r.node}: VLLM_HOST_IP={ip}, fabric IP {fab}"], f"Set VLLM_HOST_IP={fab} on {r.node}."))
    for ip, nodes in hosts.items():
        if len(nodes) > 1:
            items.append(_item("ray_ip_mismatch", "warning", f"Several nodes claim VLLM_HOST_IP={ip}",
                               [f"{n}: VLLM_HOST_IP={ip}" for n in sorted(nodes)], "Each node needs its own fabric IP."))
    libs = {r.label: (r.libnccl, r.libnccl_sha256) for r in ranks if r.libnccl_sha256}
    if len({sha for _, sha in libs.values()}) > 1:
        items.append(_item("nccl_library_mismatch", "warning", "Ranks load different libnccl builds",
                           [f"{who}: {path} sha256 {sha[:16]}" for who, (path, sha) in libs.items()],
                           "Use one NCCL build everywhere (VLLM_NCCL_SO_PATH, or the same wheel)."))
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
                items.append(_item("container_settings", "warning", f"{n.node}: container {cid[:12]} settings",
                                   [f"{n.node}: " + ", ".join(probs)],
                                   "Launch with --network host --ipc host --shm-size 10g --cap-add SYS_PTRACE "
                                   "--ulimit memlock=-1 (sparktui's pre-armed launch does)."))
    return items


def _same_subnet(a: str, b: str, prefix: int = 24) -> bool:
    try:
        return ipaddress.ip_network(f"{a}/{prefix}", strict=False) == ipaddress.ip_network(f"{b}/{prefix}", strict=False)
    except ValueError:
        return False
