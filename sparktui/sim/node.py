"""SimNode: the Node protocol (nodes/base.py) over a SimCluster's simulated state.

``run(argv)`` dispatches on argv[0] through a command table: the module-level ``COMMANDS`` (shared
by every sim node) plus per-node entries added with ``node.register_command``.  Handlers are
``fn(node, argv, stdin) -> CommandResult | (rc, stdout, stderr)``, sync or async.  If
``sparktui/sim/evidence.py`` exists its ``register(node)`` is called for every node (hang
evidence: RAS, py-spy, /proc/PID/task), so other modules extend the sim without editing this one.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json
import logging
import time
from typing import TYPE_CHECKING, AsyncIterator, Awaitable, Callable, Sequence, Union

from ..nodes.base import CommandResult, NotSupported
from . import formats, physics

if TYPE_CHECKING:
    from .cluster import SimCluster

log = logging.getLogger(__name__)

HandlerResult = Union[CommandResult, tuple]
Handler = Callable[["SimNode", list[str], "bytes | None"], "HandlerResult | Awaitable[HandlerResult]"]
FileProvider = Callable[["SimNode"], "bytes | str"]

COMMANDS: dict[str, Handler] = {}
FILES: dict[str, FileProvider] = {}


def register_command(name: str, handler: Handler) -> None:
    """Add a command to every sim node (per-node: ``SimNode.register_command``)."""
    COMMANDS[name] = handler


def register_file(path: str, provider: FileProvider) -> None:
    FILES[path] = provider


class SimNode:
    backend = "sim"

    def __init__(self, cluster: "SimCluster", name: str) -> None:
        self.cluster = cluster
        self.name = name
        self.commands: dict[str, Handler] = {}
        self.files: dict[str, FileProvider] = {}
        self.closed = False
        try:
            evidence = importlib.import_module(".evidence", __package__)
        except ModuleNotFoundError as exc:
            if exc.name != f"{__package__}.evidence":
                raise
            evidence = None
        if evidence is not None and hasattr(evidence, "register"):
            evidence.register(self)

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

    # ------------------------------------------------------------------ Node protocol
    async def connect(self) -> None:
        return None

    async def run(self, argv: Sequence[str], *, timeout: float | None = 30.0, input: bytes | None = None,
                  check: bool = False) -> CommandResult:
        args = [str(a) for a in argv]
        if not args:
            raise ValueError("empty argv")
        prog = args[0].rsplit("/", 1)[-1]
        handler = self.commands.get(prog) or COMMANDS.get(prog)
        if handler is None:
            res = CommandResult(tuple(args), 127, b"", f"bash: {args[0]}: command not found\n".encode())
        else:
            out = handler(self, args, input)
            if inspect.isawaitable(out):
                out = await asyncio.wait_for(out, timeout) if timeout else await out
            res = out if isinstance(out, CommandResult) else _result(args, *out)
        if check and res.returncode != 0:
            from ..nodes.base import NodeError

            raise NodeError(f"{self.name}: {' '.join(args)} exited {res.returncode}: {res.err_text.strip()}")
        return res

    async def stream(self, argv: Sequence[str]) -> AsyncIterator[bytes]:
        res = await self.run(argv)
        for line in res.stdout.splitlines():
            yield line

    async def read_file(self, path: str) -> bytes:
        provider = self.files.get(path) or FILES.get(path)
        if provider is None:
            provider = _dynamic_file(self, path)
        if provider is None:
            raise FileNotFoundError(f"{self.name}:{path}: No such file or directory")
        data = provider(self)
        return data.encode() if isinstance(data, str) else data

    async def docker(self):
        raise NotSupported(f"{self.name}: the sim backend has no Docker Engine (state comes from SimCluster events)")

    async def close(self) -> None:
        self.closed = True


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
    cl = node.cluster.config.cluster
    ncfg = next((n for n in node.cluster.config.nodes if n.name == node.name), None)
    model = (ncfg.model_path if ncfg and ncfg.model_path else None) or cl.model_path
    if model and path == model.rstrip("/") + "/config.json":
        return _model_config
    return None


# ---------------------------------------------------------------------- commands


async def _cat_async(node: SimNode, argv: list[str]):
    out, err, rc = b"", b"", 0
    for path in argv[1:]:
        try:
            out += await node.read_file(path)
        except FileNotFoundError:
            err += f"cat: {path}: No such file or directory\n".encode()
            rc = 1
    return rc, out, err


def _parse_smi(argv: list[str]) -> tuple[str | None, str | None, bool, bool]:
    query = apps = None
    noheader = nounits = False
    for a in argv[1:]:
        if a.startswith("--query-gpu="):
            query = a.split("=", 1)[1]
        elif a.startswith("--query-compute-apps="):
            apps = a.split("=", 1)[1]
        elif a.startswith("--format="):
            opts = a.split("=", 1)[1].split(",")
            noheader = "noheader" in opts
            nounits = "nounits" in opts
    return query, apps, noheader, nounits


def _nvidia_smi(node: SimNode, argv: list[str], stdin: bytes | None):
    query, apps, noheader, nounits = _parse_smi(argv)
    snap = node.snapshot()
    if query:
        fields = [f.strip() for f in query.split(",") if f.strip()]
        vals = []
        for f in fields:
            v = formats.query_gpu_value(f, snap, node.spec.index, nounits)
            if v is None:
                return 2, f'Field "{f}" is not a valid field to query.\n\n', b""
            vals.append(v)
        lines = [] if noheader else [", ".join(formats.header_for(f, nounits) for f in fields)]
        lines.append(", ".join(vals))
        return 0, "\n".join(lines) + "\n", b""
    if apps:
        fields = [f.strip() for f in apps.split(",") if f.strip()]
        cols = []
        for f in fields:
            v = formats.compute_apps_value(f, snap, nounits)
            if v is None:
                return 2, f'Field "{f}" is not a valid field to query.\n\n', b""
            cols.append(v)
        lines = [] if noheader else [", ".join(formats.compute_apps_header(f, nounits) for f in fields)]
        lines.extend(", ".join(row) for row in zip(*cols)) if cols else None
        return 0, "\n".join(lines) + ("\n" if lines else ""), b""
    if len(argv) == 1:
        now = time.strftime("%a %b %d %H:%M:%S %Y", time.localtime()) + "       "
        return 0, formats.smi_table(snap, now), b""
    if argv[1:2] == ["-L"]:
        return 0, f"GPU 0: NVIDIA GB10 (UUID: {formats.GPU_UUID.format(node.spec.index)})\n", b""
    return 0, formats.smi_table(snap, time.strftime("%a %b %d %H:%M:%S %Y")), b""


def _hostname(node: SimNode, argv: list[str], stdin: bytes | None):
    if "-I" in argv[1:]:
        spec = node.spec
        return 0, f"10.1.230.{180 + spec.index} {spec.ip} \n", b""
    return 0, node.name + "\n", b""


def _uname(node: SimNode, argv: list[str], stdin: bytes | None):
    flags = "".join(a.lstrip("-") for a in argv[1:])
    if "r" in flags and len(flags) == 1:
        return 0, "6.11.0-1016-nvidia\n", b""
    if "m" in flags and len(flags) == 1:
        return 0, "aarch64\n", b""
    if "a" in flags:
        return 0, f"Linux {node.name} 6.11.0-1016-nvidia #16-Ubuntu SMP PREEMPT_DYNAMIC aarch64 aarch64 aarch64 GNU/Linux\n", b""
    return 0, "Linux\n", b""


def _ibdev2netdev(node: SimNode, argv: list[str], stdin: bytes | None):
    s = node.spec
    return 0, (f"{s.hca0} port 1 ==> {s.ifname} (Up)\n"
               f"{s.hca1} port 1 ==> enP2p1s0f1np1 (Up)\n"
               "rocep1s0f0 port 1 ==> enp1s0f0np0 (Down)\n"
               "roceP2p1s0f0 port 1 ==> enP2p1s0f0np0 (Down)\n"), b""


COMMANDS.update({
    "cat": lambda n, a, i: _cat_async(n, a),
    "nvidia-smi": _nvidia_smi,
    "hostname": _hostname,
    "uname": _uname,
    "ibdev2netdev": _ibdev2netdev,
    "true": lambda n, a, i: (0, b"", b""),
    "false": lambda n, a, i: (1, b"", b""),
    "nproc": lambda n, a, i: (0, b"20\n", b""),
})
