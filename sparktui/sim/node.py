"""SimNode: a Node (nodes/base.py) over a SimCluster's simulated state.

``run(argv)`` dispatches on argv[0] through the node's command table, which its SimCluster hands it
(sim/commands.py's tools, then sim/evidence.py's hang evidence: RAS, py-spy, /proc/PID/task), plus
entries added with ``node.register_command``.  Handlers are
``fn(node, argv, stdin) -> CommandResult | (rc, stdout, stderr)``, sync or async.  This module imports
none of them, so they import what they need from here.
What a handler can read: ``node.cluster.scenario``, ``node.spec`` (rank, worker pid, fabric ip,
container), ``node.now_t()`` (simulated seconds) and ``node.snapshot()`` (memory, GPU and the
phase: idle, ctx, weights, profile, kv, graphs, serving, spin, stall, dead).
"""

from __future__ import annotations

import asyncio
import inspect
import json
from typing import TYPE_CHECKING, AsyncIterator, Awaitable, Callable, Mapping, Sequence, Union

from ..nodes.base import CommandResult, Node, NodeError, NotSupported
from ..units import GIB
from . import formats, physics
from .script import MODEL_GIB

MODEL_BYTES = int(MODEL_GIB * GIB)

if TYPE_CHECKING:
    from .cluster import SimCluster

HandlerResult = Union[CommandResult, tuple]
Handler = Callable[["SimNode", list[str], "bytes | None"], "HandlerResult | Awaitable[HandlerResult]"]
FileProvider = Callable[["SimNode"], "bytes | str"]

FILES: dict[str, FileProvider] = {}


def register_file(path: str, provider: FileProvider) -> None:
    FILES[path] = provider


class SimFileNotFound(NodeError, FileNotFoundError):
    """What the ssh/local nodes raise for a missing file (NodeError), also a FileNotFoundError."""


class SimNode(Node):
    backend = "sim"  # no TCP channels, no log relay, no connection to lose: the defaults of Node

    def __init__(self, cluster: "SimCluster", name: str, commands: Mapping[str, Handler] | None = None) -> None:
        self.cluster = cluster
        self.name = name
        self.commands: dict[str, Handler] = dict(commands or {})  # a copy: register_command stays per node
        self.files: dict[str, FileProvider] = {}
        self.closed = False
        self._api = None  # sim/serving.SimServer, made on the first local_port

    # ------------------------------------------------------------------ extension
    def register_command(self, name: str, handler: Handler) -> None:
        self.commands[name] = handler

    def register_file(self, path: str, provider: FileProvider) -> None:
        self.files[path] = provider

    # ------------------------------------------------------------------ simulated state
    @property
    def spec(self):
        scene, _ = self.cluster.live_scene()
        return next(s for s in scene.specs if s.name == self.name)

    def now_t(self) -> float:
        return self.cluster.now_t()

    def snapshot(self, t: float | None = None) -> physics.NodeSnapshot:
        return self.cluster.timeline(self.name, live=True).snapshot(self.now_t() if t is None else t)

    def containers(self, t: float | None = None):
        return self.cluster.timeline(self.name, live=True).containers(self.now_t() if t is None else t)

    # ------------------------------------------------------------------ Node
    async def connect(self) -> None:
        return None

    async def run(self, argv: Sequence[str], *, timeout: float | None = 30.0, input: bytes | None = None,
                  check: bool = False) -> CommandResult:
        args = [str(a) for a in argv]
        if not args:
            raise ValueError("empty argv")
        prog = args[0].rsplit("/", 1)[-1]
        handler = self.commands.get(prog)
        if handler is None:
            res = CommandResult(tuple(args), 127, b"", f"bash: {args[0]}: command not found\n".encode())
        else:
            out = handler(self, args, input)
            if inspect.isawaitable(out):
                out = await asyncio.wait_for(out, timeout) if timeout else await out
            res = out if isinstance(out, CommandResult) else _result(args, *out)
        if check and res.returncode != 0:
            raise NodeError(f"{self.name}: {' '.join(args)} exited {res.returncode}: {res.err_text.strip()}")
        return res

    async def stream(self, argv: Sequence[str]) -> AsyncIterator[bytes]:
        """Output lines of ``argv``; `docker logs -f NAME` keeps following as simulated time passes."""
        args = [str(a) for a in argv]
        follow = args[:2] == ["docker", "logs"] and any(a in ("-f", "--follow") for a in args)
        if not follow:
            res = await self.run(args)
            for line in res.stdout.splitlines():
                yield line
            return
        name = next((a for a in reversed(args[2:]) if not a.startswith("-")), "")
        stamps = any(a in ("-t", "--timestamps") for a in args)
        tl = self.cluster.timeline(self.name, live=True)
        from ..timefmt import format_ns as rfc3339_ns

        while True:
            for ev in tl.advance(self.now_t()):
                for ln in getattr(ev, "lines", ()):
                    if ln.source == name:
                        yield ((rfc3339_ns(ln.ts) + " " if stamps else "") + ln.text).encode()
            await asyncio.sleep(0.1)

    async def read_file(self, path: str) -> bytes:
        provider = self.files.get(path) or FILES.get(path)
        if provider is None:
            provider = _dynamic_file(self, path)
        if provider is None:
            raise SimFileNotFound(f"{self.name}: cannot read {path}: No such file or directory")
        data = provider(self)
        return data.encode() if isinstance(data, str) else data

    async def local_port(self, host: str, port: int) -> tuple[str, int]:
        """Where the operator's machine reaches host:port as this node sees it (nodes/base.py): the
        demo's in-process API server (sim/serving.py) while the timeline says it listens; NodeError
        (connection refused) before that, after the container exited, or for another address."""
        from .serving import SimServer

        cl = self.cluster.config.cluster
        mine = {"127.0.0.1", "localhost", "0.0.0.0", "::1", "::", "", self.name,
                *(s.ip for s in self.cluster.scene.specs if s.name == self.name)}  # not .spec: no clock start
        if host not in mine or port != cl.serve_port:
            raise NodeError(f"{self.name}: cannot connect to {host}:{port}: Connection refused")
        if self.closed:
            raise NodeError(f"{self.name}: node closed")
        if self._api is None:
            self._api = SimServer(self)
        return "127.0.0.1", await asyncio.to_thread(self._api.ensure)

    async def docker(self):
        raise NotSupported(f"{self.name}: the sim backend has no Docker Engine (state comes from SimCluster events)")

    async def close(self) -> None:
        self.closed = True
        if self._api is not None:  # stop the API server's threads and free its port
            api, self._api = self._api, None
            await asyncio.to_thread(api.close)


def _result(argv: list[str], rc: int, out: "bytes | str" = b"", err: "bytes | str" = b"") -> CommandResult:
    return CommandResult(tuple(argv), rc, out.encode() if isinstance(out, str) else out,
                         err.encode() if isinstance(err, str) else err)


# ---------------------------------------------------------------------- files


def _meminfo(node: SimNode) -> str:
    return formats.meminfo(node.snapshot())


def _pressure(node: SimNode) -> str:
    t = node.now_t()

    def some(at: float) -> float:
        return node.snapshot(max(0.0, at)).memory.psi_some_avg10 or 0.0

    s10 = some(t)
    s60 = sum(some(t - d) for d in (0, 15, 30, 45)) / 4
    s300 = sum(some(t - d) for d in range(0, 300, 30)) / 10
    total = int(sum(some(x) for x in range(0, int(t) + 1, 5)) * 50_000)
    return formats.pressure(s10, s10 * 0.45, s60, s60 * 0.45, s300, s300 * 0.45, total, int(total * 0.45))


def _loadavg(node: SimNode) -> str:
    snap = node.snapshot()
    return formats.loadavg(snap.load, node.now_t(), 4000 + int(node.now_t()))


def _model_index(node: SimNode) -> str:
    shards = [f"model-{i:05d}-of-00040.safetensors" for i in range(1, 41)]
    wm = {f"model.language_model.layers.{k}.mlp.experts.gate_up_proj": shards[k * 40 // 48] for k in range(48)}
    return json.dumps({"metadata": {"total_size": MODEL_BYTES}, "weight_map": wm}, indent=2) + "\n"


def _model_config(node: SimNode) -> str:
    arch = "Qwen3_5MoeForConditionalGeneration"
    return json.dumps({"architectures": [arch], "model_type": "qwen3_5_moe", "torch_dtype": "bfloat16",
                       "quantization_config": {"quant_method": "fp8", "fmt": "e4m3",
                                               "weight_block_size": [128, 128]}}, indent=2) + "\n"


FILES.update({
    "/proc/meminfo": _meminfo,
    "/proc/pressure/memory": _pressure,
    "/proc/loadavg": _loadavg,
    "/etc/hostname": lambda n: n.name + "\n",
    "/proc/sys/kernel/hostname": lambda n: n.name + "\n",
    "/proc/sys/kernel/osrelease": lambda n: "6.11.0-1016-nvidia\n",
    "/proc/uptime": lambda n: f"{412_345.67 + n.now_t():.2f} {3_200_000.12 + 20 * n.now_t():.2f}\n",
})


def _dynamic_file(node: SimNode, path: str) -> FileProvider | None:
    model = model_dir(node)
    if model and path == model.rstrip("/") + "/config.json":
        return _model_config
    if model and path == model.rstrip("/") + "/model.safetensors.index.json":
        return _model_index
    return None


def model_dir(node: SimNode) -> str | None:
    cl = node.cluster.config.cluster
    ncfg = next((n for n in node.cluster.config.nodes if n.name == node.name), None)
    model = (ncfg.model_path if ncfg and ncfg.model_path else None) or cl.model_path
    return model.rstrip("/") if model else None

