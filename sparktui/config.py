"""Cluster configuration: TOML in, validated frozen dataclasses out.

Every error is a ``ConfigError`` whose ``str()`` is one line naming the file, the key (and line
where it can be found) and a hint; the CLI prints it and exits 2.
"""

from __future__ import annotations

import ipaddress
import math
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .config_checks import check_distinct, check_image
from .config_error import ConfigError, line_of  # ConfigError: faces import it from here

BACKENDS = ("ssh", "local", "sim")
EXECUTORS = ("ray", "mp")  # Ray head + workers, or vLLM's own multi-node executor (--nnodes/--headless)
ENGINES = ("vllm", "sglang")
LAUNCHERS = ("sparktui", "spark-vllm-docker")  # our containers, or a launch-cluster.sh checkout
IPC_MODES = ("host", "private")
ROLES = ("head", "worker")
_HOST_RE = re.compile(r"^[A-Za-z0-9_]([A-Za-z0-9_.-]{0,251}[A-Za-z0-9_])?$")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
# sane bounds: a typo (tensor_parallel = 1e17 written as an integer, max_model_len = -1) fails at load
MAX_GPUS_PER_NODE = 64
MAX_TP = 1024
MAX_MODEL_LEN = 10_000_000


@dataclass(frozen=True)
class NodeConfig:
    name: str
    backend: str = "ssh"
    host: str = ""  # SSH target: address or ~/.ssh/config alias
    user: str | None = None
    port: int | None = None
    identity_file: str | None = None
    known_hosts: str | None = None  # None: ssh config's UserKnownHostsFile, else ~/.ssh/known_hosts
    ssh_config: str | None = None
    docker_socket: str = "/var/run/docker.sock"
    fabric_ip: str | None = None  # the node's RoCE/CX-7 address (VLLM_HOST_IP)
    fabric_if: str | None = None  # e.g. enp1s0f1np1
    ib_hcas: tuple[str, ...] = ()  # e.g. rocep1s0f1, roceP2p1s0f1
    role: str = "worker"
    model_path: str | None = None  # overrides cluster.model_path on this node
    gpu_count: int = 1
    env: tuple[tuple[str, str], ...] = ()  # this node's own additions to cluster.env
    # where this node's unified-memory figures are read; a test bed points it at a GB10-shaped copy
    meminfo_path: str = "/proc/meminfo"


@dataclass(frozen=True)
class ClusterConfig:
    name: str = "vllm_node"  # container name used by the launcher
    image: str = "vllm-node"
    model_path: str = ""  # host path on every node
    model_mount: str = ""  # where it appears inside the container
    mount_readonly: bool = True
    served_model: str = ""  # the path/name given to `vllm serve`
    tensor_parallel: int = 0  # 0: the number of GPUs of all nodes (Config.tp)
    serve_port: int = 8000
    serve_host: str = "0.0.0.0"
    gpu_memory_utilization: float = 0.9
    max_model_len: int | None = None
    serve_args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    launcher_dir: str | None = None  # spark-vllm-docker checkout on the head node
    nccl_debug: str | None = None
    add_architectures: tuple[tuple[str, str, str], ...] = ()  # (arch, module, class)
    base_image: str | None = None  # for build-image
    hybrid_image: str | None = None
    # extra ssh arguments a node uses to reach its peers (push-image streams node-to-node over them)
    peer_ssh_args: tuple[str, ...] = ()
    # launch (issue 10): how the cluster is started
    executor: str = "ray"
    engine: str = "vllm"
    launcher: str = "sparktui"
    master_port: int = 29501  # mp: torch.distributed / SGLang --dist-init-addr port on the head
    ray_port: int = 6379
    ipc: str = "host"  # "private" gives each container its own /dev/shm of shm_size
    shm_size: str = "64g"
    join_timeout: float = 60.0  # seconds for every node to join (Ray) / rendezvous before a finding
    ready_timeout: float = 1800.0  # seconds from start to the API answering
    # the API as the operator's machine reaches it (a tunnel, a proxy); default: the head's serve port
    api_base: str | None = None
    # the fabric check (sparktui fabric): the link's line rate and the MTU every node's fabric port
    # should carry; a DGX Spark pair's ConnectX-7 link is 200 Gb/s with jumbo frames
    line_rate_gbps: float = 200.0
    fabric_mtu: int = 9000


@dataclass(frozen=True)
class Config:
    path: str
    cluster: ClusterConfig
    nodes: tuple[NodeConfig, ...]
    api_key_env: str = "OPENAI_API_KEY"
    session_dir: str | None = None
    session_log_cap_mib: int = 1024  # per source's session log file (session.DEFAULT_LOG_CAP)
    extra: dict[str, Any] = field(default_factory=dict)

    def node(self, name: str) -> NodeConfig:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(name)

    def model_path_for(self, node: str) -> str:
        """The model's directory on that node's host: the node's own model_path, else the cluster's."""
        return self.node(node).model_path or self.cluster.model_path

    @property
    def model_mount(self) -> str:
        """Where the model's directory appears inside the containers."""
        return self.cluster.model_mount or "/models/model"

    def api_key(self) -> str | None:
        """The serving API key, read from the environment variable the config names (never stored)."""
        return os.environ.get(self.api_key_env) or None

    @property
    def tp(self) -> int:
        """Tensor parallel size: as configured, else one rank per GPU of every node."""
        return self.cluster.tensor_parallel or sum(max(1, n.gpu_count) for n in self.nodes)

    @property
    def head(self) -> NodeConfig:
        for n in self.nodes:
            if n.role == "head":
                return n
        return self.nodes[0]


_CLUSTER_KEYS = {f for f in ClusterConfig.__dataclass_fields__}
_NODE_KEYS = {f for f in NodeConfig.__dataclass_fields__}
_TOP_KEYS = {"cluster", "node", "nodes", "api_key_env", "session_dir", "session_log_cap_mib"}


def _expect(path: str, text: str, key: str, value: Any, typ: type | tuple[type, ...], what: str) -> Any:
    if isinstance(value, bool) and typ in (int, float, (int, float)):
        raise ConfigError(path, f"expected {what}, got a boolean", key=key, line=line_of(text, key.split(".")[-1]))
    if not isinstance(value, typ):
        raise ConfigError(path, f"expected {what}, got {type(value).__name__} {value!r}", key=key,
                          line=line_of(text, key.split(".")[-1]))
    return value


def _int_in(path: str, text: str, key: str, value: Any, lo: int, hi: int) -> int:
    """An integer (TOML floats such as 1e17 refused) within [lo, hi]."""
    v = _expect(path, text, key, value, int, "an integer")
    if not lo <= v <= hi:
        raise ConfigError(path, f"{v} is out of range", key=key, line=line_of(text, key.split(".")[-1]),
                          hint=f"between {lo} and {hi}")
    return v


def _check_ip(path: str, text: str, key: str, value: str) -> str:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        raise ConfigError(path, f"{value!r} is not an IP address", key=key,
                          line=line_of(text, key.split(".")[-1]), hint="write it like 192.168.200.12") from None
    return value


def _check_host(path: str, text: str, key: str, value: str) -> str:
    try:
        ipaddress.ip_address(value)
        return value
    except ValueError:
        pass
    # a dotted-quad that failed above is a bad IPv4, not a host name
    if re.fullmatch(r"[0-9.]+", value) or not _HOST_RE.match(value):
        raise ConfigError(path, f"{value!r} is not a valid host name or address", key=key,
                          line=line_of(text, key.split(".")[-1]),
                          hint="an IP, a DNS name, or a Host alias from ~/.ssh/config")
    return value


def _str_list(path: str, text: str, key: str, value: Any) -> tuple[str, ...]:
    _expect(path, text, key, value, list, "a list of strings")
    for v in value:
        if not isinstance(v, str):
            raise ConfigError(path, f"expected a list of strings, found {v!r}", key=key,
                              line=line_of(text, key.split(".")[-1]))
    return tuple(value)


def _env_table(path: str, text: str, key: str, raw: Any) -> tuple[tuple[str, str], ...]:
    env = _expect(path, text, key, raw, dict, 'a table of NAME = "value"')
    for k, v in env.items():
        if not isinstance(v, str):
            raise ConfigError(path, f"env {k} must be a string", key=f"{key}.{k}", line=line_of(text, k))
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k):
            raise ConfigError(path, f"{k!r} is not an environment variable name", key=f"{key}.{k}",
                              line=line_of(text, k))
    return tuple(env.items())


def _parse_node(path: str, text: str, idx: int, raw: Any) -> NodeConfig:
    prefix = f"node[{idx}]"
    if not isinstance(raw, dict):
        raise ConfigError(path, "each [[node]] must be a table", key=prefix)
    unknown = sorted(set(raw) - _NODE_KEYS)
    if unknown:
        k = unknown[0]
        raise ConfigError(path, f"unknown key {k!r}", key=f"{prefix}.{k}", line=line_of(text, k),
                          hint="known keys: " + ", ".join(sorted(_NODE_KEYS)))
    if "name" not in raw:
        raise ConfigError(path, "missing required key 'name'", key=prefix, hint='add name = "spark1"')
    name = _expect(path, text, f"{prefix}.name", raw["name"], str, "a string")
    if not _NAME_RE.match(name):
        raise ConfigError(path, f"node name {name!r} must be letters, digits, '.', '_' or '-'",
                          key=f"{prefix}.name", line=line_of(text, "name"))
    kw: dict[str, Any] = {"name": name}
    backend = raw.get("backend", "ssh")
    _expect(path, text, f"{prefix}.backend", backend, str, "a string")
    if backend not in BACKENDS:
        raise ConfigError(path, f"unknown backend {backend!r}", key=f"{prefix}.backend",
                          line=line_of(text, "backend"), hint="one of " + ", ".join(BACKENDS))
    kw["backend"] = backend
    for key in ("user", "identity_file", "known_hosts", "ssh_config", "docker_socket", "fabric_if", "model_path",
                "meminfo_path"):
        if key in raw:
            kw[key] = _expect(path, text, f"{prefix}.{key}", raw[key], str, "a string")
    if "known_hosts" in kw and kw["known_hosts"].strip().lower() in ("", "none", "/dev/null"):
        raise ConfigError(path, f"{kw['known_hosts']!r} would turn SSH host-key checking off", key=f"{prefix}.known_hosts",
                          line=line_of(text, "known_hosts"), hint="name a known_hosts file, or remove the key")
    if "host" in raw:
        kw["host"] = _check_host(path, text, f"{prefix}.host", _expect(path, text, f"{prefix}.host", raw["host"], str, "a string"))
    elif backend == "ssh":
        raise ConfigError(path, "an ssh node needs 'host'", key=f"{prefix}.host",
                          hint='host = "10.1.230.180" or a Host alias from ~/.ssh/config')
    if "port" in raw:
        port = _expect(path, text, f"{prefix}.port", raw["port"], int, "an integer port")
        if not 0 < port < 65536:
            raise ConfigError(path, f"port {port} out of range", key=f"{prefix}.port", line=line_of(text, "port"))
        kw["port"] = port
    if "fabric_ip" in raw:
        kw["fabric_ip"] = _check_ip(path, text, f"{prefix}.fabric_ip",
                                    _expect(path, text, f"{prefix}.fabric_ip", raw["fabric_ip"], str, "a string"))
    if "ib_hcas" in raw:
        kw["ib_hcas"] = _str_list(path, text, f"{prefix}.ib_hcas", raw["ib_hcas"])
    if "role" in raw:
        role = _expect(path, text, f"{prefix}.role", raw["role"], str, "a string")
        if role not in ROLES:
            raise ConfigError(path, f"unknown role {role!r}", key=f"{prefix}.role", line=line_of(text, "role"),
                              hint="head or worker")
        kw["role"] = role
    if "gpu_count" in raw:
        kw["gpu_count"] = _int_in(path, text, f"{prefix}.gpu_count", raw["gpu_count"], 0, MAX_GPUS_PER_NODE)
    if "env" in raw:
        kw["env"] = _env_table(path, text, f"{prefix}.env", raw["env"])
    if kw.get("identity_file"):
        p = Path(os.path.expanduser(kw["identity_file"]))
        if not p.is_file() or not os.access(p, os.R_OK):
            raise ConfigError(path, f"key file {str(p)!r} is missing or unreadable", key=f"{prefix}.identity_file",
                              line=line_of(text, "identity_file"), hint="check the path and its permissions")
    return NodeConfig(**kw)


def _parse_cluster(path: str, text: str, raw: Any) -> ClusterConfig:
    if not isinstance(raw, dict):
        raise ConfigError(path, "[cluster] must be a table", key="cluster")
    unknown = sorted(set(raw) - _CLUSTER_KEYS)
    if unknown:
        k = unknown[0]
        raise ConfigError(path, f"unknown key {k!r}", key=f"cluster.{k}", line=line_of(text, k),
                          hint="known keys: " + ", ".join(sorted(_CLUSTER_KEYS)))
    kw: dict[str, Any] = {}
    for key in ("name", "image", "model_path", "model_mount", "served_model", "serve_host", "launcher_dir",
                "nccl_debug", "base_image", "hybrid_image", "api_base"):
        if key in raw:
            kw[key] = _expect(path, text, f"cluster.{key}", raw[key], str, "a string")
    for key in ("image", "base_image", "hybrid_image"):
        if key in kw:
            check_image(path, text, f"cluster.{key}", kw[key])
    if "api_base" in kw and not re.match(r"https?://[^\s/]+", kw["api_base"]):
        raise ConfigError(path, f"{kw['api_base']!r} is not an http(s) URL", key="cluster.api_base",
                          line=line_of(text, "api_base"), hint='e.g. "http://127.0.0.1:8000"')
    for key, lo, hi in (("tensor_parallel", 1, MAX_TP), ("serve_port", 1, 65535), ("max_model_len", 1, MAX_MODEL_LEN)):
        if key in raw:
            kw[key] = _int_in(path, text, f"cluster.{key}", raw[key], lo, hi)
    if "mount_readonly" in raw:
        kw["mount_readonly"] = _expect(path, text, "cluster.mount_readonly", raw["mount_readonly"], bool, "true or false")
    if "gpu_memory_utilization" in raw:
        v = _expect(path, text, "cluster.gpu_memory_utilization", raw["gpu_memory_utilization"], (int, float), "a number")
        if not 0 < v <= 1:  # also refuses nan
            raise ConfigError(path, f"{v} is not in (0, 1]", key="cluster.gpu_memory_utilization",
                              line=line_of(text, "gpu_memory_utilization"), hint="vLLM takes a fraction, e.g. 0.90")
        kw["gpu_memory_utilization"] = float(v)
    if "serve_args" in raw:
        kw["serve_args"] = _str_list(path, text, "cluster.serve_args", raw["serve_args"])
    if "peer_ssh_args" in raw:
        kw["peer_ssh_args"] = _str_list(path, text, "cluster.peer_ssh_args", raw["peer_ssh_args"])
    if "env" in raw:
        kw["env"] = _env_table(path, text, "cluster.env", raw["env"])
    for key, allowed in (("executor", EXECUTORS), ("engine", ENGINES), ("launcher", LAUNCHERS), ("ipc", IPC_MODES)):
        if key in raw:
            v = _expect(path, text, f"cluster.{key}", raw[key], str, "a string")
            if v not in allowed:
                raise ConfigError(path, f"unknown {key} {v!r}", key=f"cluster.{key}", line=line_of(text, key),
                                  hint="one of " + ", ".join(allowed))
            kw[key] = v
    if "shm_size" in raw:
        v = _expect(path, text, "cluster.shm_size", raw["shm_size"], str, "a string like \"64g\"")
        if not re.fullmatch(r"[0-9]+[bkmgBKMG]?", v):
            raise ConfigError(path, f"{v!r} is not a size", key="cluster.shm_size", line=line_of(text, "shm_size"),
                              hint='write it like "64g" or "512m"')
        kw["shm_size"] = v
    for key in ("master_port", "ray_port"):
        if key in raw:
            v = _expect(path, text, f"cluster.{key}", raw[key], int, "an integer")
            if not 0 < v < 65536:
                raise ConfigError(path, f"port {v} out of range", key=f"cluster.{key}", line=line_of(text, key))
            kw[key] = v
    if "line_rate_gbps" in raw:
        v = _expect(path, text, "cluster.line_rate_gbps", raw["line_rate_gbps"], (int, float), "a number of Gb/s")
        if not (v > 0 and math.isfinite(v)):
            raise ConfigError(path, "must be a finite number > 0", key="cluster.line_rate_gbps",
                              line=line_of(text, "line_rate_gbps"), hint="e.g. 200 for a DGX Spark pair's CX-7 link")
        kw["line_rate_gbps"] = float(v)
    if "fabric_mtu" in raw:
        kw["fabric_mtu"] = _int_in(path, text, "cluster.fabric_mtu", raw["fabric_mtu"], 576, 65536)
    for key in ("join_timeout", "ready_timeout"):
        if key in raw:
            v = _expect(path, text, f"cluster.{key}", raw[key], (int, float), "a number of seconds")
            if not (v > 0 and math.isfinite(v)):  # TOML allows nan and inf
                raise ConfigError(path, "must be a finite number > 0", key=f"cluster.{key}", line=line_of(text, key))
            kw[key] = float(v)
    if "add_architectures" in raw:
        arches = _expect(path, text, "cluster.add_architectures", raw["add_architectures"], dict,
                         'a table of Arch = ["module", "Class"]')
        out = []
        for arch, val in arches.items():
            if not (isinstance(val, list) and len(val) == 2 and all(isinstance(x, str) for x in val)):
                raise ConfigError(path, f"{arch} must be [\"module\", \"Class\"]",
                                  key=f"cluster.add_architectures.{arch}", line=line_of(text, arch))
            out.append((arch, val[0], val[1]))
        kw["add_architectures"] = tuple(out)
    return ClusterConfig(**kw)


def parse_config(text: str, path: str = "<config>") -> Config:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"line (\d+)", str(exc))
        raise ConfigError(path, f"not valid TOML: {exc}", line=int(m.group(1)) if m else None,
                          hint="check quotes and brackets") from None
    unknown = sorted(set(data) - _TOP_KEYS)
    if unknown:
        k = unknown[0]
        raise ConfigError(path, f"unknown key {k!r}", key=k, line=line_of(text, k),
                          hint="top level holds [cluster] and [[node]] tables")
    cluster = _parse_cluster(path, text, data.get("cluster", {}))
    if "node" in data and "nodes" in data:
        raise ConfigError(path, "both [[node]] and [[nodes]] tables", key="nodes", line=line_of(text, "nodes"),
                          hint="write every node as [[node]]")
    raw_nodes = data.get("node", data.get("nodes", []))
    if not isinstance(raw_nodes, list) or not raw_nodes:
        raise ConfigError(path, "no nodes configured", key="node", hint="add one [[node]] table per machine")
    nodes = []
    seen: dict[str, int] = {}
    for i, raw in enumerate(raw_nodes):
        n = _parse_node(path, text, i, raw)
        if n.name in seen:
            # find the second occurrence's line
            first = line_of(text, "name")
            second = line_of(text, "name", (text.find("\n", text.find(f'"{n.name}"')) + 1) or 0)
            raise ConfigError(path, f"duplicate node name {n.name!r}", key=f"node[{i}].name",
                              line=second or first, hint="node names must be unique")
        seen[n.name] = i
        nodes.append(n)
    check_distinct(path, text, nodes)
    if not any(n.role == "head" for n in nodes):
        nodes[0] = NodeConfig(**{**nodes[0].__dict__, "role": "head"})
    kw: dict[str, Any] = {}
    if "api_key_env" in data:
        kw["api_key_env"] = _expect(path, text, "api_key_env", data["api_key_env"], str, "a string")
    if "session_dir" in data:
        sd = _expect(path, text, "session_dir", data["session_dir"], str, "a string")
        if not sd.strip() or "\0" in sd:
            raise ConfigError(path, "must name a directory", key="session_dir", line=line_of(text, "session_dir"))
        kw["session_dir"] = os.path.expanduser(sd)  # sessions are written there (session.sessions_dir)
    if "session_log_cap_mib" in data:
        kw["session_log_cap_mib"] = _int_in(path, text, "session_log_cap_mib", data["session_log_cap_mib"], 1, 1 << 20)
    return Config(path=path, cluster=cluster, nodes=tuple(nodes), **kw)


def default_config_path() -> Path:
    env = os.environ.get("SPARKTUI_CONFIG")
    if env:
        return Path(env)
    base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return base / "sparktui" / "cluster.toml"


def load_config(path: str | os.PathLike | None = None) -> Config:
    p = Path(path) if path else default_config_path()
    try:
        text = p.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise ConfigError(p, "file not found", hint="run `sparktui init` to write it from your ~/.ssh/config hosts, "
                          "or `sparktui demo` to try sparktui without a cluster; or pass --config PATH") from None
    except IsADirectoryError:
        raise ConfigError(p, "is a directory, not a file", hint="pass the path of a .toml file") from None
    except PermissionError:
        raise ConfigError(p, "permission denied", hint="check the file's permissions") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(p, f"not UTF-8 text ({exc.reason} at byte {exc.start})", hint="save it as UTF-8") from None
    return parse_config(text, str(p))


def demo_config() -> Config:
    """The embedded two-node demo cluster (the story's shape, sim backend)."""
    nodes = (
        NodeConfig(name="spark1", backend="sim", host="spark1", fabric_ip="192.168.200.12",
                   fabric_if="enp1s0f1np1", ib_hcas=("rocep1s0f1", "roceP2p1s0f1"), role="head"),
        NodeConfig(name="spark2", backend="sim", host="spark2", fabric_ip="192.168.200.13",
                   fabric_if="enp1s0f1np1", ib_hcas=("rocep1s0f1", "roceP2p1s0f1"), role="worker"),
    )
    cluster = ClusterConfig(
        name="vllm_qwen35", image="vllm-node-qwen35",
        model_path="/home/aurora/models/Qwen3.5-122B-A10B-FP8",
        model_mount="/root/.cache/huggingface/hub/Qwen3.5-122B-A10B-FP8",
        served_model="/root/.cache/huggingface/hub/Qwen3.5-122B-A10B-FP8",
        tensor_parallel=2, serve_port=8001, gpu_memory_utilization=0.90, max_model_len=32768,
    )
    return Config(path="<demo>", cluster=cluster, nodes=nodes)
