"""What a launch starts, decided before anything runs: one container per node, its command, its
environment pinned to the node's own fabric address, its mounts, devices and labels.  Pure (no IO),
so the confirmation can show the exact commands and tests can check every flag.

Executors (``cluster.executor``):
- ``ray``: every container runs ``ray start --block`` (head or worker); once Ray reports every node
  and GPU, ``vllm serve ... --distributed-executor-backend ray`` is started detached in the head.
- ``mp``: vLLM's own multi-node executor, no Ray: every container runs ``vllm serve`` with
  ``--nnodes/--node-rank/--master-addr/--master-port``; ranks other than 0 are ``--headless``.
Engine ``sglang`` launches like ``mp`` with SGLang's own arguments (``--dist-init-addr``).
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import re
import shlex
from dataclasses import dataclass

from ..config import Config, NodeConfig
from ..logs.redact import MASK, is_secret_key, redact_argv
from ..probes.cluster import (LABEL, LABEL_EXECUTOR, LABEL_LAUNCH, LABEL_NNODES, LABEL_NODE, LABEL_PLAN, LABEL_RANK,
                              LABEL_ROLE, LABEL_SERVE)
from .prearm import prearm

# flags the plan owns: a copy in serve_args would contradict it, so it is dropped (and said)
_OWNED_WITH_VALUE = {"--tensor-parallel-size", "-tp", "--distributed-executor-backend", "--nnodes", "--node-rank",
                     "--master-addr", "--master-port", "--host", "--port", "--tp", "--dist-init-addr",
                     "--tp-size", "--model-path"}
_OWNED_FLAGS = {"--headless"}
_NUMBER = re.compile(r"-\d")  # a negative number is a value, not a flag


class PlanError(ValueError):
    """The config cannot be launched as it stands; ``str()`` is one line with the fix."""


@dataclass(frozen=True)
class NodePlan:
    node: str
    rank: int
    role: str  # head | worker
    ip: str
    container: str
    image: str
    command: tuple[str, ...]
    env: dict[str, str]
    volumes: dict[str, dict[str, str]]  # host path -> {"bind": ..., "mode": "ro"|"rw"}
    labels: dict[str, str]
    ipc_mode: str | None = "host"
    shm_size: str | None = None
    cap_add: tuple[str, ...] = ()
    devices: tuple[str, ...] = ()
    ulimits: tuple[tuple[str, int, int], ...] = ()

    def run_kwargs(self) -> dict:
        """Keyword arguments for docker SDK ``containers.run`` (detached, host network)."""
        import docker.types  # noqa: PLC0415 - only the launch itself needs the SDK

        kw: dict = dict(name=self.container, detach=True, network_mode="host", environment=dict(self.env),
                        volumes={k: dict(v) for k, v in self.volumes.items()}, labels=dict(self.labels),
                        command=list(self.command))
        if self.ipc_mode:
            kw["ipc_mode"] = self.ipc_mode
        if self.shm_size:
            kw["shm_size"] = self.shm_size
        if self.cap_add:
            kw["cap_add"] = list(self.cap_add)
        if self.devices:
            kw["devices"] = [f"{d}:{d}:rwm" for d in self.devices]
        if self.ulimits:
            kw["ulimits"] = [docker.types.Ulimit(name=n, soft=s, hard=h) for n, s, h in self.ulimits]
        return kw

    def docker_run_argv(self, *, masked: bool = False) -> list[str]:
        """The same container as a ``docker run`` line, for the confirmation and the record;
        ``masked`` (display only) hides secrets by the shape of their name or flag (logs/redact.py)."""
        return [word for group in self.docker_run_groups(masked=masked) for word in group]

    def docker_run_groups(self, *, masked: bool = False) -> list[list[str]]:
        """``docker_run_argv`` cut into argument groups (a flag with its value, the image, the command
        and each of its flags), so a long command can be shown one group per line."""
        groups = [["docker", "run", "-d"], ["--name", self.container], ["--network", "host"]]
        if self.ipc_mode:
            groups.append(["--ipc", self.ipc_mode])
        if self.shm_size:
            groups.append(["--shm-size", self.shm_size])
        groups += [["--cap-add", c] for c in self.cap_add]
        groups += [["--device", d] for d in self.devices]
        groups += [["--ulimit", f"{n}={s}" if s == h else f"{n}={s}:{h}"] for n, s, h in self.ulimits]
        groups += [["-v", mount_text(host, v)] for host, v in self.volumes.items()]
        groups += [["--label", f"{k}={v}"] for k, v in self.labels.items()]
        groups += [["-e", f"{k}={MASK}" if masked and is_secret_key(k) else f"{k}={v}"] for k, v in self.env.items()]
        return groups + [[self.image]] + flag_groups(redact_argv(self.command) if masked else list(self.command))

    def mounts(self) -> list[str]:
        """The mounts as ``docker -v`` writes them (a path mounted at itself once)."""
        return [host if host == v["bind"] and v.get("mode") != "ro" else mount_text(host, v)
                for host, v in self.volumes.items()]


@dataclass(frozen=True)
class ClusterPlan:
    name: str
    executor: str
    engine: str
    tp: int
    nodes: tuple[NodePlan, ...]  # head first
    serve_argv: tuple[str, ...]  # ray: exec'd in the head container; mp/sglang: part of each command
    serve_host: str
    serve_port: int
    plan_hash: str
    warnings: tuple[str, ...] = ()
    launch_id: str = ""
    rendezvous_port: int = 0  # where the workers join the head: Ray's port, else the master port

    @property
    def head(self) -> NodePlan:
        return self.nodes[0]

    def commands_text(self, *, wrapped: bool = False) -> str:
        """Every command the launch will run, one node at a time, as a shell would show them.
        ``wrapped``: each command one argument group a line, continued with ``\\`` (still one shell
        command, so it can be pasted), instead of one line of a couple of thousand characters."""
        def join(groups: list[list[str]]) -> str:
            if wrapped:
                return " \\\n    ".join(shlex.join(g) for g in groups)
            return shlex.join([w for g in groups for w in g])

        lines = []
        for np in self.nodes:
            lines.append(f"# {np.node} ({np.role}, rank {np.rank}, {np.ip})")
            lines.append(join(np.docker_run_groups(masked=True)))
        if self.serve_argv:
            lines.append(f"# then, once Ray lists {len(self.nodes)} nodes, in {self.head.container} on {self.head.node}")
            lines.append(join([["docker", "exec", "-d", self.head.container],
                               *flag_groups(redact_argv(self.serve_argv))]))
        return "\n".join(lines)

    def summary_lines(self) -> list[str]:
        """One line per node, what a person checks before saying yes: node, role, fabric address,
        image, executor, rank and TP, ports, mounts (last: the paths are what runs long).  The CLI
        and the TUI show these; the full ``docker run`` commands (``commands_text``) on request."""
        kind = "ray" if self.executor == "ray" and self.engine == "vllm" else "master"
        width = max(len(np.node) for np in self.nodes)
        lines = []
        for np in self.nodes:
            # a worker listens on none of the plan's ports: it joins the head's
            ports = (f"{self.serve_port} api, {self.rendezvous_port} {kind}" if np.role == "head"
                     else f"joins {self.head.node}:{self.rendezvous_port}")
            lines.append(f"{np.node:<{width}}  {np.role:<6}  {np.ip}  {np.image}  {self.engine}/{self.executor}  "
                         f"rank {np.rank}/{len(self.nodes)} TP {self.tp}  ports {ports}  "
                         f"mounts {', '.join(np.mounts()) or '-'}")
        return lines


def mount_text(host: str, v: dict[str, str]) -> str:
    return f"{host}:{v['bind']}" + (":ro" if v.get("mode") == "ro" else "")


def flag_groups(argv: list[str] | tuple[str, ...]) -> list[list[str]]:
    """A command cut before each flag: its leading words (``vllm serve MODEL``), then each flag with
    the value words that follow it (``--port 8001``, ``--headless``)."""
    groups: list[list[str]] = []
    for word in argv:
        if not groups or (word.startswith("-") and len(word) > 1 and not _NUMBER.match(word)):
            groups.append([word])
        else:
            groups[-1].append(word)
    return groups


def node_ip(n: NodeConfig) -> str:
    """The address a node's ranks bind to: its fabric IP, else its SSH address when that is an IP."""
    if n.fabric_ip:
        return n.fabric_ip
    try:
        ipaddress.ip_address(n.host)
        return n.host
    except ValueError:
        raise PlanError(f"node {n.name} has no fabric_ip: set it to the node's RoCE/CX-7 address "
                        "(every rank pins VLLM_HOST_IP, NCCL/GLOO sockets and Ray to it)") from None


def strip_owned(args: tuple[str, ...]) -> tuple[tuple[str, ...], list[str]]:
    """serve_args without the flags the plan sets itself; the dropped ones, for a warning."""
    out: list[str] = []
    dropped: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        flag = a.split("=", 1)[0]
        if flag in _OWNED_WITH_VALUE:
            if "=" in a:
                dropped.append(a)
                i += 1
            else:
                dropped.append(" ".join(args[i:i + 2]))
                i += 2
            continue
        if a in _OWNED_FLAGS:
            dropped.append(a)
            i += 1
            continue
        out.append(a)
        i += 1
    return tuple(out), dropped


def pinned_env(config: Config, n: NodeConfig, ip: str, head_ip: str) -> dict[str, str]:
    """The fabric pinning every rank gets (NCCL, Gloo, Ray and vLLM each pick an interface of their own unless told), for this node."""
    c = config.cluster
    env: dict[str, str] = {"VLLM_HOST_IP": ip, "MASTER_ADDR": head_ip, "MASTER_PORT": str(c.master_port)}
    if n.fabric_if:
        for k in ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME", "UCX_NET_DEVICES",
                  "OMPI_MCA_btl_tcp_if_include"):
            env[k] = n.fabric_if
    if n.ib_hcas:
        env["NCCL_IB_HCA"] = ",".join(n.ib_hcas)
        env["NCCL_IB_DISABLE"] = "0"
    if c.executor == "ray" and c.engine == "vllm":
        env.update(RAY_NODE_IP_ADDRESS=ip, RAY_OVERRIDE_NODE_IP_ADDRESS=ip, RAY_memory_monitor_refresh_ms="0")
    if c.engine == "sglang":
        env["SGLANG_HOST_IP"] = ip  # else its ZMQ queue advertises the default route (a cross-node init hang)
    return env


def _serve_common(config: Config, model: str, tp: int) -> list[str]:
    c = config.cluster
    argv = ["--host", c.serve_host, "--port", str(c.serve_port), "--tensor-parallel-size", str(tp),
            "--gpu-memory-utilization", f"{c.gpu_memory_utilization}"]
    if c.max_model_len:
        argv += ["--max-model-len", str(c.max_model_len)]
    return argv


def plan_cluster(config: Config, *, launch_id: str = "", owner: dict[str, str] | None = None) -> ClusterPlan:
    """``owner``: the operator's labels (lock.owner_labels) every container carries; not in the plan hash."""
    c = config.cluster
    if not config.nodes:
        raise PlanError("no nodes configured")
    if c.engine == "sglang" and c.executor == "ray":
        raise PlanError('engine "sglang" starts its ranks itself (--nnodes/--dist-init-addr): set executor = "mp"')
    tp = config.tp
    ordered = [config.head] + [n for n in config.nodes if n.name != config.head.name]
    ips = {n.name: node_ip(n) for n in ordered}
    head_ip = ips[ordered[0].name]
    mount = config.model_mount
    model = c.served_model or mount
    extra, dropped = strip_owned(tuple(c.serve_args))
    warnings = [f"serve_args: dropped {', '.join(dropped)} (the launch sets it from the config)"] if dropped else []
    pre = prearm(config)
    nnodes = len(ordered)
    if tp % nnodes:
        warnings.append(f"tensor_parallel {tp} does not divide over {nnodes} nodes")
    serve_argv: tuple[str, ...] = ()
    if c.executor == "ray" and c.engine == "vllm":
        serve_argv = ("vllm", "serve", model, *_serve_common(config, model, tp),
                      "--distributed-executor-backend", "ray", *extra)
    # the plan's identity: what a running cluster must match to be "this" cluster, not a stale one
    ident = {"image": c.image, "executor": c.executor, "engine": c.engine, "tp": tp, "nodes": [n.name for n in ordered],
             "model": c.model_path, "serve": [c.serve_host, c.serve_port], "args": list(c.serve_args),
             "env": sorted(c.env)}
    plan_hash = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:12]
    plans = []
    for rank, n in enumerate(ordered):
        ip = ips[n.name]
        role = "head" if rank == 0 else "worker"
        env = {**pre.env, **pinned_env(config, n, ip, head_ip), **dict(c.env), **dict(n.env)}
        if c.nccl_debug:
            env["NCCL_DEBUG"] = c.nccl_debug
        if c.engine == "sglang":
            command = ("python3", "-m", "sglang.launch_server", "--model-path", model, "--tp", str(tp),
                       "--nnodes", str(nnodes), "--node-rank", str(rank),
                       "--dist-init-addr", f"{head_ip}:{c.master_port}", "--host", c.serve_host,
                       "--port", str(c.serve_port), "--mem-fraction-static", f"{c.gpu_memory_utilization}", *extra)
        elif c.executor == "mp":
            command = ("vllm", "serve", model, *_serve_common(config, model, tp), "--distributed-executor-backend", "mp",
                       "--nnodes", str(nnodes), "--node-rank", str(rank), "--master-addr", head_ip,
                       "--master-port", str(c.master_port), *(("--headless",) if rank else ()), *extra)
        elif rank == 0:
            command = ("ray", "start", "--block", "--head", "--port", str(c.ray_port), "--node-ip-address", ip,
                       "--num-gpus", str(max(1, n.gpu_count)), "--disable-usage-stats")
        else:
            command = ("ray", "start", "--block", "--address", f"{head_ip}:{c.ray_port}", "--node-ip-address", ip,
                       "--num-gpus", str(max(1, n.gpu_count)))
        path = config.model_path_for(n.name)
        volumes = {pre.run_dir: {"bind": pre.run_dir, "mode": "rw"}}
        if path:
            volumes[path] = {"bind": mount, "mode": "ro" if c.mount_readonly else "rw"}
        labels = {LABEL: c.name, LABEL_NODE: n.name, LABEL_RANK: str(rank), LABEL_ROLE: role, LABEL_LAUNCH: launch_id,
                  LABEL_PLAN: plan_hash, LABEL_EXECUTOR: f"{c.engine}/{c.executor}", LABEL_NNODES: str(nnodes),
                  LABEL_SERVE: f"{c.serve_host}:{c.serve_port}", **(owner or {})}
        rdma = bool(n.ib_hcas)
        caps = ("SYS_PTRACE",) + (("IPC_LOCK",) if rdma else ())  # py-spy inside; RDMA pins memory
        ulimits = (("stack", 67108864, 67108864),) + ((("memlock", -1, -1),) if rdma else ())
        plans.append(NodePlan(
            node=n.name, rank=rank, role=role, ip=ip, container=c.name, image=c.image, command=tuple(command),
            env=env, volumes=volumes, labels=labels, ipc_mode="host" if c.ipc == "host" else None,
            shm_size=None if c.ipc == "host" else c.shm_size, cap_add=caps,
            devices=("/dev/infiniband",) if rdma else (), ulimits=ulimits))
    return ClusterPlan(name=c.name, executor=c.executor, engine=c.engine, tp=tp, nodes=tuple(plans),
                       serve_argv=serve_argv, serve_host=c.serve_host, serve_port=c.serve_port, plan_hash=plan_hash,
                       warnings=tuple(warnings), launch_id=launch_id,
                       rendezvous_port=c.ray_port if c.executor == "ray" and c.engine == "vllm" else c.master_port)
