"""`sparktui fabric [--json] [--size 1G] [--quick]`: the fabric check (sparktui/fabric/check.py):
path and MTU per node pair, iperf3 between the fabric addresses, all_reduce_perf in the cluster's
image, and the verdict against the line rate with the likely cause and its fix.  Progress on stderr;
exit 0 ok or warnings, 1 a failure (below line rate, #wrong, unreachable), 2 usage."""

from __future__ import annotations

import shutil
import sys

from ..actions.base import ActionResult


def text_report(data: dict, width: int = 100) -> str:
    """The report as text: path, iperf3, all_reduce_perf with its plot, verdict with causes and fixes."""
    from ..fabric.parse import PerfRow
    from ..fabric.plot import busbw_plot
    from ..logs.sanitize import safe

    lines = [f"line rate   {data['line_rate_gbps']:g} Gb/s, MTU {data['mtu']}"]
    for n in data["nodes"]:
        rdma = n["rdma_note"] or ", ".join(f"{p['device']} {p['state']} {p['rate_gbps'] or '?'} Gb/s" for p in n["rdma"])
        lines.append(f"node        {n['name']}: {n['fabric_ip']} on {n['interface'] or '(no interface)'} MTU {n['mtu']}; "
                     f"NCCL_SOCKET_IFNAME={n['nccl_socket_ifname'] or '(unset)'} "
                     f"GLOO_SOCKET_IFNAME={n['gloo_socket_ifname'] or '(unset)'}; {rdma}")
    for p in data["pairs"]:
        state = p["error"] or ("MTU ok" if p["mtu_ok"] else "MTU FAILS" if p["reachable"] else "UNREACHABLE")
        lines.append(f"path        {p['src']} -> {p['dst']} ({p['dst_ip']}): ping -M do -s {p['mtu'] - 28}: {state}")
    for p in data["iperf3"]:
        got = p["error"] or f"{p['gbps']:.2f} Gb/s, {p['streams']} streams, {p['retransmits']} retransmits"
        lines.append(f"iperf3      {p['client']} -> {p['server']}: {got}")
    if data["iperf3_note"] and not data["iperf3"]:
        lines.append(f"iperf3      {data['iperf3_note']}")
    perf = data["all_reduce_perf"]
    if perf and perf["rows"]:
        lines.append(f"all_reduce  peak busbw {perf['peak_busbw']:.2f} GB/s, avg {perf['avg_busbw']}, #wrong {perf['wrong']}"
                     + (", NCCL on sockets" if perf["socket"] else ""))
        plot = busbw_plot([PerfRow(**r) for r in perf["rows"]], data["line_rate_gbps"], width - 2, 16, color=False)
        if plot:
            lines += ["", plot.rstrip("\n"), ""]
    else:
        lines.append(f"all_reduce  {data['all_reduce_perf_note'] or 'not run'}")
    v = data["verdict"] or {}
    lines.append(f"verdict     {v.get('status', '?').upper()}: {v.get('title', '')}")
    for e in v.get("failures", []) + v.get("causes", []):
        lines.append(f"  cause     {e['title']}")
        lines += [f"      | {ev}" for ev in e["evidence"][:4]]
        lines.append(f"      fix: {e['fix']}")
    return "\n".join(safe(x) for x in lines)


def run(args) -> int:
    from ..actions.cli_runner import run_action
    from ..actions.fabric import FabricAction
    from ..fabric.check import FabricOptions

    if getattr(args, "read_only", False):  # it loads the fabric: an observer never starts it
        from ..actions.registry import entry

        print(f"sparktui: {entry('fabric').read_only_refusal()}", file=sys.stderr)
        return 1
    options = FabricOptions(size=args.size, quick=args.quick)
    width = min(shutil.get_terminal_size((100, 24)).columns, 120)

    def text(result: ActionResult) -> str:
        return text_report(result.data, width) if result.data.get("nodes") is not None else ""

    return run_action(args, lambda _config: FabricAction(options), extra_text=text, show_findings=False,
                      transient_progress=True)
