"""The fabric check: prove the node-to-node link carries what NCCL needs, before a model loads.

Steps (each reports progress through ``on_progress(step, fraction, message)``):

1. path: on every node, which interface holds its fabric address (and its MTU), the RDMA ports
   (/sys/class/infiniband: state, rate, RoCE v2 GID at index 3), what NCCL/Gloo are pinned to (the
   launch's env, given by the caller); for every ordered pair a ping with don't-fragment at the
   configured MTU, run on the node itself (and a small one when it fails, to tell MTU from reach);
2. iperf3: TCP with several streams between the fabric addresses (server on one node, client on
   the other), ``-J`` parsed;
3. all_reduce_perf: nccl-tests in the cluster's image, across the nodes with mpirun, with the
   launch's NCCL env (skipped with the reason when the image lacks it, or with --quick);
4. verdict: bandwidth against the line rate, causes ranked from what was seen (verdict.py).

Commands go to the node backends as argument lists; nothing here knows ssh from local.
"""

from __future__ import annotations

import asyncio
import ipaddress
import itertools
import random
import shlex
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from ..nodes.base import NodeError
from ..probes.links import IP_ADDR, parse_ip_addr
from .parse import (RDMA_PORTS_SH, IperfResult, PerfRun, PingResult, RdmaPort, parse_iperf3, parse_perf, parse_ping,
                    parse_rdma_ports)
from .verdict import Verdict, judge

if TYPE_CHECKING:
    from ..config import Config
    from ..model import LinkInfo
    from ..nodes.base import Node

STEPS = ("path", "iperf3", "all_reduce_perf", "verdict")
IPERF_PORT = 5201
IPERF_STREAMS = 4
DEFAULT_SIZE = 1 << 30
QUICK_IPERF_BYTES = 256 << 20
PING_COUNT = 3

Progress = Callable[[str, float, str], None]


@dataclass
class NodePath:
    name: str
    fabric_ip: str
    interface: str = ""  # the interface holding fabric_ip ("" when none does)
    mtu: int | None = None
    nccl_ifname: str = ""  # NCCL_SOCKET_IFNAME of the launch's env ("" when not pinned)
    gloo_ifname: str = ""
    ib_hca: str = ""  # NCCL_IB_HCA of the launch's env
    rdma: list[RdmaPort] = field(default_factory=list)
    rdma_note: str = ""  # "no RDMA devices" (a fact on a host without them), or why it was not read
    error: str = ""

    def to_json(self) -> dict:
        return {"name": self.name, "fabric_ip": self.fabric_ip, "interface": self.interface, "mtu": self.mtu,
                "nccl_socket_ifname": self.nccl_ifname, "gloo_socket_ifname": self.gloo_ifname,
                "nccl_ib_hca": self.ib_hca, "rdma": [p.__dict__ for p in self.rdma], "rdma_note": self.rdma_note,
                "error": self.error}


@dataclass
class PairPath:
    src: str
    dst: str
    dst_ip: str
    mtu: int
    df: PingResult | None = None  # the don't-fragment ping at the configured MTU
    small: PingResult | None = None  # a default-size ping, run only when the big one failed
    error: str = ""

    @property
    def reachable(self) -> bool:
        return bool((self.df and self.df.received) or (self.small and self.small.received))

    @property
    def mtu_ok(self) -> bool:
        return bool(self.df and self.df.ok)

    def to_json(self) -> dict:
        return {"src": self.src, "dst": self.dst, "dst_ip": self.dst_ip, "mtu": self.mtu, "reachable": self.reachable,
                "mtu_ok": self.mtu_ok, "df_ping": self.df.to_json() if self.df else None,
                "small_ping": self.small.to_json() if self.small else None, "error": self.error}


@dataclass
class IperfPair:
    client: str
    server: str
    result: IperfResult | None = None
    error: str = ""

    def to_json(self) -> dict:
        return {"client": self.client, "server": self.server, **(self.result.to_json() if self.result else {}),
                "error": self.error or (self.result.error if self.result else "")}


@dataclass
class FabricOptions:
    size: int = DEFAULT_SIZE  # all_reduce_perf's largest message (-e); iperf3 moves this much per pair
    quick: bool = False  # path + a short iperf3 only
    port: int = 0  # iperf3's port; 0: one picked per check, so two checks (or a stale server) never meet


@dataclass
class FabricReport:
    line_rate_gbps: float
    mtu: int
    nodes: list[NodePath] = field(default_factory=list)
    pairs: list[PairPath] = field(default_factory=list)
    iperf: list[IperfPair] = field(default_factory=list)
    iperf_note: str = ""  # why iperf3 did not run
    perf: PerfRun | None = None
    perf_note: str = ""  # why all_reduce_perf did not run
    perf_command: str = ""
    verdict: Verdict | None = None

    def to_json(self) -> dict:
        return {"line_rate_gbps": self.line_rate_gbps, "mtu": self.mtu, "nodes": [n.to_json() for n in self.nodes],
                "pairs": [p.to_json() for p in self.pairs], "iperf3": [p.to_json() for p in self.iperf],
                "iperf3_note": self.iperf_note,
                "all_reduce_perf": self.perf.to_json() if self.perf else None, "all_reduce_perf_note": self.perf_note,
                "all_reduce_perf_command": self.perf_command,
                "verdict": self.verdict.to_json() if self.verdict else None}


def interface_of(links: "list[LinkInfo]", ip: str) -> "LinkInfo | None":
    """The link holding ``ip``: its own address first, else the smallest network containing it (a
    loopback /8 answers for every 127.x address, as the kernel does)."""
    try:
        addr = ipaddress.ip_address(ip)
    except ValueError:
        return None
    best: tuple[int, LinkInfo] | None = None
    for link in links:
        for a in link.addresses:
            try:
                iface = ipaddress.ip_interface(a)
            except ValueError:
                continue
            if iface.ip == addr:
                return link
            if addr in iface.network and (best is None or iface.network.prefixlen > best[0]):
                best = (iface.network.prefixlen, link)
    return best[1] if best else None


def _wrong_evidence(perf: PerfRun) -> str:
    """One line on the wrong results, in the table's own terms: #wrong counts, or an old table's error column."""
    parts = []
    counted = [row for row in perf.rows if row.wrong]
    if counted:
        parts.append(f"#wrong {perf.wrong} over {len(counted)} sizes (first at {counted[0].size} B)")
    errs = [row for row in perf.rows if row.error_out_of_bounds]
    if errs:
        first = errs[0]
        worst = max(e for e in (first.oop_error, first.ip_error) if e is not None)
        parts.append(f"error above {first.error_limit:g} ({first.type}) at {len(errs)} sizes "
                     f"(first at {first.size} B: {worst:g})")
    if perf.out_of_bounds:
        parts.append(f"out of bounds values: {perf.out_of_bounds}")
    return "; ".join(parts)


class FabricCheck:
    def __init__(self, config: "Config", nodes: "dict[str, Node]", envs: dict[str, dict[str, str]],
                 options: FabricOptions | None = None, *, image: str = "",
                 on_progress: Progress | None = None) -> None:
        self.config = config
        self.nodes = nodes
        self.envs = envs  # node -> the env the launch gives its ranks (pinned + cluster + node)
        self.options = options or FabricOptions()
        self.image = image
        self._progress = on_progress or (lambda step, frac, msg: None)
        c = config.cluster
        self.report = FabricReport(line_rate_gbps=c.line_rate_gbps, mtu=c.fabric_mtu)

    def progress(self, step: str, fraction: float, message: str = "") -> None:
        self._progress(step, max(0.0, min(1.0, fraction)), message)

    def members(self) -> list:
        return [n for n in self.config.nodes if n.name in self.nodes]

    def ip_of(self, n) -> str:
        return n.fabric_ip or n.host

    # ------------------------------------------------------------------------------------ 1. path
    async def path(self) -> None:
        members = self.members()
        pairs = [(a, b) for a, b in itertools.permutations(members, 2)]
        total = len(members) + len(pairs)
        done = 0
        for n in members:
            self.report.nodes.append(await self._node_path(n))
            done += 1
            self.progress("path", done / total, f"{n.name}: interfaces and RDMA ports")
        for a, b in pairs:
            self.report.pairs.append(await self._ping(a, b))
            done += 1
            self.progress("path", done / total, f"{a.name} -> {b.name}: ping -M do at MTU {self.report.mtu}")

    async def _node_path(self, n) -> NodePath:
        env = self.envs.get(n.name, {})
        np_ = NodePath(n.name, self.ip_of(n), nccl_ifname=env.get("NCCL_SOCKET_IFNAME", ""),
                       gloo_ifname=env.get("GLOO_SOCKET_IFNAME", ""), ib_hca=env.get("NCCL_IB_HCA", ""))
        node = self.nodes[n.name]
        try:
            res = await node.run(IP_ADDR, timeout=15)
            link = interface_of(parse_ip_addr(res.text), np_.fabric_ip) if res.ok else None
            if link is not None:
                np_.interface, np_.mtu = link.name, link.mtu
            elif not res.ok:
                np_.error = f"ip -j addr exited {res.returncode}: {res.err_text.strip()[:200]}"
        except (NodeError, ValueError) as exc:
            np_.error = str(exc)
        try:
            res = await node.run(["sh", "-c", RDMA_PORTS_SH], timeout=15)
            np_.rdma = parse_rdma_ports(res.text) if res.ok else []
            if res.returncode == 127:  # no shell to list them with: unknown, not "none"
                np_.rdma_note = "RDMA ports not read (no sh on the node)"
            else:
                np_.rdma_note = "" if np_.rdma else "no RDMA devices"
        except NodeError as exc:
            np_.rdma_note = f"RDMA ports not read: {exc}"
        return np_

    async def _ping(self, a, b) -> PairPath:
        mtu = self.report.mtu
        pp = PairPath(a.name, b.name, self.ip_of(b), mtu)
        node = self.nodes[a.name]
        src = self.ip_of(a)
        big = ["ping", "-M", "do", "-s", str(mtu - 28), "-c", str(PING_COUNT), "-W", "1", "-I", src, pp.dst_ip]
        try:
            res = await node.run(big, timeout=PING_COUNT * 2 + 10)
            if res.returncode == 127:
                pp.error = f"ping is not installed on {a.name}"
                return pp
            pp.df = parse_ping(res.text + "\n" + res.err_text)
            if not pp.df.ok:
                small = ["ping", "-c", "1", "-W", "1", "-I", src, pp.dst_ip]
                res = await node.run(small, timeout=10)
                pp.small = parse_ping(res.text + "\n" + res.err_text)
        except NodeError as exc:
            pp.error = str(exc)
        return pp

    # ------------------------------------------------------------------------------------ 2. iperf3
    async def iperf(self) -> None:
        members = self.members()
        pairs = list(itertools.combinations(members, 2))
        if not pairs:
            self.report.iperf_note = "fewer than two nodes"
            return
        for i, (client, server) in enumerate(pairs):
            self.progress("iperf3", i / len(pairs), f"{client.name} -> {server.name}: iperf3 -P {IPERF_STREAMS}")
            holed = [p for p in self.report.pairs if {p.src, p.dst} == {client.name, server.name}
                     and p.df and p.reachable and not p.mtu_ok]
            if holed:
                # full-size frames are lost on this path: TCP stalls in the black hole until its timeout,
                # and the number would measure the MTU fault, not the link
                skipped = IperfPair(client.name, server.name)
                skipped.error = (f"not run: full-size frames do not pass {holed[0].src} -> {holed[0].dst} "
                                 f"(the path MTU check failed); fix the MTU first")
                self.report.iperf.append(skipped)
                continue
            self.report.iperf.append(await self._iperf_pair(client, server))
        self.progress("iperf3", 1.0, "done")
        missing = [p.error for p in self.report.iperf if "not installed" in p.error]
        if missing and len(missing) == len(self.report.iperf):
            self.report.iperf_note = missing[0]

    async def _iperf_pair(self, client, server) -> IperfPair:
        out = IperfPair(client.name, server.name)
        cnode, snode = self.nodes[client.name], self.nodes[server.name]
        sip, cip = self.ip_of(server), self.ip_of(client)
        port = str(self.options.port or random.randrange(IPERF_PORT, IPERF_PORT + 4000))
        nbytes = min(self.options.size, QUICK_IPERF_BYTES) if self.options.quick else self.options.size
        # time allowed: the bytes at 1 Gb/s, at least a minute (a slow link is a finding, not a hang)
        limit = max(60.0, nbytes * 8 / 1e9 + 30)
        for node, name in ((cnode, client.name), (snode, server.name)):
            try:
                res = await node.run(["iperf3", "--version"], timeout=15)
            except NodeError as exc:
                out.error = str(exc)
                return out
            if res.returncode == 127:
                out.error = f"iperf3 is not installed on {name}"
                return out
        # -1: the server serves one test and exits; coreutils timeout ends it where no test came (a
        # client that never connected), so nothing is left listening on the node
        server_argv = ["timeout", str(int(limit + 20)), "iperf3", "-s", "-1", "-B", sip, "-p", port]
        server_task = asyncio.create_task(snode.run(server_argv, timeout=limit + 30))
        # the client ends by itself too: a link that stalls mid-test is a finding, not a hang of the check
        argv = ["timeout", str(int(limit)), "iperf3", "-c", sip, "-B", cip, "-p", port, "-P", str(IPERF_STREAMS),
                "-n", str(nbytes), "-J", "--connect-timeout", "3000"]
        try:
            res = None
            for attempt in range(20):  # the server takes a moment to listen: refused means "not yet"
                if server_task.done():
                    break
                res = await cnode.run(argv, timeout=limit)
                text = res.text.strip()
                # iperf3 3.12 -J exits 0 with "Connection refused" in its JSON: the words decide, not the code
                if "refused" not in (text + res.err_text).lower():
                    break
                await asyncio.sleep(0.1 * (attempt + 1))
            if server_task.done() and (res is None or not res.ok):
                sres = server_task.result()
                out.error = f"iperf3 server on {server.name} exited {sres.returncode}: " \
                            f"{(sres.err_text or sres.text).strip()[-200:]}"
                return out
            if res is not None and res.returncode == 124:  # coreutils timeout ended the client
                out.error = f"iperf3 {client.name} -> {server.name} did not finish within {int(limit)} s: the link stalled"
                return out
            try:
                out.result = parse_iperf3(res.text) if res is not None else None
            except ValueError as exc:
                out.error = f"{exc}: {(res.err_text or res.text).strip()[-200:]}"
        except NodeError as exc:
            out.error = str(exc)
        finally:
            if not server_task.done():
                try:
                    await asyncio.wait_for(asyncio.shield(server_task), 5)
                except (asyncio.TimeoutError, NodeError):
                    server_task.cancel()
                    # the wrapper ends with its channel, the iperf3 under it may not (a SIGKILL is not
                    # passed on): end that server by its exact command line, or the port stays taken
                    try:
                        await snode.run(["pkill", "-x", "-f", shlex.join(server_argv[2:])], timeout=10)
                    except (NodeError, OSError):
                        pass
            elif not server_task.cancelled():
                server_task.exception()  # retrieved: a failed server was already reported above
        return out

    # ------------------------------------------------------------------------------------ 3. all_reduce_perf
    def perf_argv(self, hosts: list[str], env: dict[str, str]) -> list[str]:
        """The docker command the head runs: mpirun inside the image, one rank per node, the launch's
        NCCL env exported to every rank (-x) and NCCL INFO on so the transport shows."""
        size = str(self.options.size)
        run_env = {**env, "NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET"}
        keys = sorted(k for k in run_env if k.startswith(("NCCL_", "UCX_", "OMPI_")))
        argv = ["docker", "run", "--rm", "--network", "host", "--ipc", "host", "--gpus", "all",
                "--device", "/dev/infiniband", "--ulimit", "memlock=-1", "--cap-add", "IPC_LOCK"]
        for k in keys:
            argv += ["-e", f"{k}={run_env[k]}"]
        argv += ["--entrypoint", "mpirun", self.image, "--allow-run-as-root", "-np", str(len(hosts)),
                 "-H", ",".join(f"{h}:1" for h in hosts)]
        for k in keys:
            argv += ["-x", k]
        return argv + ["all_reduce_perf", "-b", "8", "-e", size, "-f", "2", "-g", "1"]

    async def perf(self) -> None:
        if self.options.quick:
            self.report.perf_note = "skipped (--quick)"
            return
        members = self.members()
        if len(members) < 2 or not self.image:
            self.report.perf_note = "skipped: needs two nodes and the cluster's image"
            return
        head = next((n for n in members if n.role == "head"), members[0])
        node = self.nodes[head.name]
        self.progress("all_reduce_perf", 0.05, f"looking for all_reduce_perf and mpirun in {self.image}")
        probe = ["docker", "run", "--rm", "--entrypoint", "sh", self.image, "-c",
                 "command -v all_reduce_perf && command -v mpirun"]
        try:
            res = await node.run(probe, timeout=120)
        except NodeError as exc:
            self.report.perf_note = f"skipped: {exc}"
            return
        if not res.ok:
            why = "docker is not installed" if res.returncode == 127 else \
                f"all_reduce_perf or mpirun is not in {self.image}"
            self.report.perf_note = (f"skipped: {why} (build-image adds nccl-tests where the base image has nvcc "
                                     "and MPI; iperf3 measured TCP only)")
            return
        argv = self.perf_argv([self.ip_of(n) for n in members], self.envs.get(head.name, {}))
        self.report.perf_command = shlex.join(argv)
        self.progress("all_reduce_perf", 0.1, f"mpirun -np {len(members)} all_reduce_perf -e {self.options.size}")
        try:
            res = await node.run(argv, timeout=600)
        except NodeError as exc:
            self.report.perf_note = f"failed: {exc}"
            return
        self.report.perf = parse_perf(res.text + "\n" + res.err_text)
        if not self.report.perf.rows:
            last = (res.err_text or res.text).strip().splitlines()[-1:] or ["(no output)"]
            self.report.perf_note = f"no table (exit {res.returncode}): {last[0][:200]}"
        self.progress("all_reduce_perf", 1.0, "done")

    # ------------------------------------------------------------------------------------ 4. verdict
    def signals(self) -> dict[str, list[str]]:
        """What was seen, as verdict signals with their evidence."""
        r = self.report
        seen: dict[str, list[str]] = {}

        def add(sig: str, line: str) -> None:
            seen.setdefault(sig, []).append(line)

        uses_ib = any(n.ib_hcas for n in self.config.nodes)
        for p in r.pairs:
            if p.df and not p.mtu_ok and p.reachable:
                said = f" (the kernel says mtu={p.df.path_mtu})" if p.df.path_mtu else ""
                add("mtu", f"{p.src} -> {p.dst} ({p.dst_ip}): ping -M do -s {p.mtu - 28} failed{said}, "
                           f"a small ping passed" + (f": {p.df.text}" if p.df.text else ""))
        mtus = {n.mtu for n in r.nodes if n.mtu}
        if len(mtus) > 1:
            add("mtu", "interface MTU differs: " + ", ".join(f"{n.name} {n.interface} {n.mtu}" for n in r.nodes))
        for n in r.nodes:
            if not n.nccl_ifname:
                add("wrong_if", f"{n.name}: NCCL_SOCKET_IFNAME is not pinned (NCCL picks an interface itself)")
            elif n.interface and n.nccl_ifname.lstrip("=") != n.interface:
                add("wrong_if", f"{n.name}: NCCL_SOCKET_IFNAME={n.nccl_ifname} but {n.fabric_ip} is on {n.interface}")
            if n.gloo_ifname and n.interface and n.gloo_ifname != n.interface:
                add("wrong_if", f"{n.name}: GLOO_SOCKET_IFNAME={n.gloo_ifname} but {n.fabric_ip} is on {n.interface}")
            if not n.interface and not n.error:
                add("wrong_if", f"{n.name}: {n.fabric_ip} is on no interface")
            active = [p for p in n.rdma if p.up]
            if uses_ib and not n.rdma and n.rdma_note == "no RDMA devices":
                add("socket", f"{n.name}: no RDMA devices, although the config names ib_hcas (NCCL will use sockets)")
            for p in n.rdma:
                if not p.up:
                    add("link_speed", f"{n.name}: {p.device} port {p.port} is {p.state}")
            hcas = [h for h in n.ib_hca.lstrip("=^").split(",") if h]
            if len(active) >= 2 and len(hcas) == 1:
                add("one_hca", f"{n.name}: NCCL_IB_HCA={n.ib_hca} names one of {len(active)} active RDMA devices "
                               f"({', '.join(p.device for p in active)})")
            rated = [p.rate_gbps for p in active if p.rate_gbps]
            if rated and len(active) >= 1:
                per_half = r.line_rate_gbps / max(len(hcas) or len(active), 1)
                slow = [p for p in active if p.rate_gbps and p.rate_gbps < 0.9 * per_half]
                for p in slow:
                    add("link_speed", f"{n.name}: {p.device} runs at {p.rate_gbps:g} Gb/s (expected {per_half:g})")
            gid = self.envs.get(n.name, {}).get("NCCL_IB_GID_INDEX")
            if gid is not None:
                add("gid", f"{n.name}: NCCL_IB_GID_INDEX={gid} is forced")
                if gid == "3":
                    for p in active:
                        if p.gid3_type and "v2" not in p.gid3_type.lower():
                            add("gid", f"{n.name}: {p.device} GID index 3 is {p.gid3_type}, not RoCE v2")
        if r.perf is not None:
            if r.perf.socket:
                ifs = f" on {', '.join(r.perf.socket_ifaces)}" if r.perf.socket_ifaces else ""
                add("socket", f"NCCL INFO: NET/Socket{ifs}")
            if len(r.perf.ib_devices) == 1 and any(len(n.rdma) >= 2 for n in r.nodes):
                add("one_hca", f"NCCL INFO: NET/IB uses only {r.perf.ib_devices[0]}")
            for g in r.perf.gid_errors:
                add("gid", f"NCCL WARN: {g}")
            if r.perf.bootstrap_if and any(n.interface and r.perf.bootstrap_if != n.interface for n in r.nodes[:1]):
                add("wrong_if", f"NCCL bootstrap used {r.perf.bootstrap_if}, not {r.nodes[0].interface}")
            if r.perf.failed:
                add("wrong", _wrong_evidence(r.perf))
        return seen

    def summary(self, step: str) -> tuple[str, str]:
        """(status, one line) of a finished step: ok / warn / fail / skip."""
        r = self.report
        if step == "path":
            errs = [p.error for p in r.pairs if p.error]
            if errs and len(errs) == len(r.pairs):
                return "skip", errs[0]
            down = [f"{p.src} -> {p.dst}" for p in r.pairs if not p.error and not p.reachable]
            if down:
                return "fail", f"unreachable: {', '.join(down)}"
            short = [f"{p.src} -> {p.dst}" for p in r.pairs if not p.error and not p.mtu_ok]
            if short:
                return "warn", f"MTU {r.mtu} does not pass {', '.join(short)}"
            ifs = sorted({n.interface for n in r.nodes if n.interface})
            rdma = "; ".join(f"{n.name}: {n.rdma_note or f'{sum(p.up for p in n.rdma)}/{len(n.rdma)} RDMA ports up'}"
                             for n in r.nodes)
            return "ok", f"{len(r.pairs)} paths carry MTU {r.mtu} on {', '.join(ifs) or '?'}; {rdma}"
        if step == "iperf3":
            if r.iperf_note:
                return "skip", r.iperf_note
            bad = [f"{p.client} -> {p.server}: {p.error or p.result.error}" for p in r.iperf
                   if p.error or (p.result and p.result.error)]
            got = [f"{p.client} -> {p.server} {p.result.gbps:.1f} Gb/s" for p in r.iperf if p.result and not p.result.error]
            return ("fail" if bad else "ok"), "; ".join(bad + got) or "no pair"
        if step == "all_reduce_perf":
            if r.perf is None or not r.perf.rows:
                return "skip", r.perf_note or "not run"
            return ("fail" if r.perf.failed else "ok"), \
                f"peak busbw {r.perf.peak_busbw:.2f} GB/s over {len(r.perf.rows)} sizes, #wrong {r.perf.wrong}" \
                + (f"; {_wrong_evidence(r.perf)}" if r.perf.failed and not r.perf.wrong else "")
        return "ok", ""

    def judge(self) -> Verdict:
        r = self.report
        # one rank crosses no link (busbw is 0 by definition): such a table says nothing of the fabric
        if r.perf is not None and r.perf.rows and r.perf.nranks != 1:
            measured, source = (r.perf.peak_busbw or 0.0) * 8, "all_reduce_perf busbw"  # GB/s -> Gb/s
        else:
            got = [p.result.gbps for p in r.iperf if p.result and not p.result.error]
            measured, source = (min(got), "iperf3 TCP") if got else (None, "")
        first = self.members()[:2]
        hcas = sorted({h for n in self.config.nodes for h in n.ib_hcas}) or ["rocep1s0f1", "roceP2p1s0f1"]
        ifname = next((n.fabric_if for n in self.config.nodes if n.fabric_if), None) or \
            next((n.interface for n in r.nodes if n.interface), "<fabric interface>")
        values = {"fabric_if": ifname, "hcas": ",".join(hcas), "mtu": str(r.mtu), "payload": str(r.mtu - 28),
                  "peer": self.ip_of(first[-1]) if first else "<peer>"}
        return judge(measured, r.line_rate_gbps, source, self.signals(), values)

    async def run(self, step: Callable | None = None) -> FabricReport:
        """Every step in order.  ``step(name)``, when given, is an async context manager a face wraps
        each step in (the action's ctx.step)."""
        for name, fn in (("path", self.path), ("iperf3", self.iperf), ("all_reduce_perf", self.perf)):
            if step is None:
                await fn()
                continue
            async with step(name) as rec:
                await fn()
                rec.status, rec.message = self.summary(name)
        self.report.verdict = self.judge()
        self.progress("verdict", 1.0, self.report.verdict.title)
        return self.report
