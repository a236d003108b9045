"""Compile a scenario script (scripts/<scenario>.toml + scripts/blocks.toml) into per-node timelines.

The TOML files hold every log line template and the timing; this module only places them in time
and fills the `$placeholders` for each node/rank.  Everything here is a pure function of
(config, scenario): the same inputs always give the same lines.
"""

from __future__ import annotations

import hashlib
import string
import time
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..config import Config

SCRIPTS = Path(__file__).with_name("scripts")
VLLM_VERSION = "0.17.1rc1.dev25+g1a629ce0d"
MODEL_GIB = 110.8  # 119 GB of FP8 safetensors on disk (Qwen3.5-122B-A10B-FP8, the README's example model)


@dataclass(frozen=True)
class SimNodeSpec:
    name: str
    index: int
    head: bool
    ip: str
    ifname: str
    hca0: str
    hca1: str
    rank: int | None  # None: the node runs no vLLM worker in this scenario
    pid: int  # Ray worker (or EngineCore) pid
    container: str
    worker_log: str | None  # Ray worker's log file on this node


@dataclass(frozen=True)
class ScriptLine:
    t: float
    source: str
    text: str


@dataclass(frozen=True)
class Phase:
    name: str
    at: float
    until: float | None


@dataclass
class Scene:
    scenario: str
    params: dict
    specs: list[SimNodeSpec]
    lines: dict[str, list[ScriptLine]] = field(default_factory=dict)
    phases: dict[str, list[Phase]] = field(default_factory=dict)
    exits: dict[str, tuple[float, int]] = field(default_factory=dict)
    serve: tuple[str, float] | None = None  # (node, at)
    start: float = 0.0  # wall epoch of t = 0
    speed: float = 1.0  # simulated seconds per wall second

    def epoch(self, t: float) -> float:
        """Wall time of simulated time t: timestamps follow the clock the user sees."""
        return self.start + t / self.speed

    @property
    def world(self) -> int:
        return sum(1 for s in self.specs if s.rank is not None)


def _hex(seed: str, n: int) -> str:
    out = ""
    i = 0
    while len(out) < n:
        out += hashlib.sha256(f"{seed}:{i}".encode()).hexdigest()
        i += 1
    return out[:n]


@lru_cache(maxsize=None)
def load_blocks() -> dict:
    with open(SCRIPTS / "blocks.toml", "rb") as fh:
        return tomllib.load(fh)


@lru_cache(maxsize=None)
def load_scenario(scenario: str) -> dict:
    path = SCRIPTS / f"{scenario}.toml"
    if not path.is_file():
        known = sorted(p.stem for p in SCRIPTS.glob("*.toml") if p.stem != "blocks")
        raise ValueError(f"unknown sim scenario {scenario!r} (known: {', '.join(known)})")
    with open(path, "rb") as fh:
        return tomllib.load(fh)


def scenarios() -> list[str]:
    return sorted(p.stem for p in SCRIPTS.glob("*.toml") if p.stem != "blocks")


def block_lines(name: str) -> list[str]:
    text = load_blocks()["blocks"][name]
    return text.split("\n")[1:] if text.startswith("\n") else text.split("\n")


def vts(epoch: float) -> str:
    """vLLM's log time stamp: `MM-DD HH:MM:SS` (UTC here)."""
    return time.strftime("%m-%d %H:%M:%S", time.gmtime(epoch))


def _mmss(sec: float) -> str:
    sec = int(sec)
    return f"{sec // 60:02d}:{sec % 60:02d}"


def make_specs(config: "Config", scenario_data: dict) -> list[SimNodeSpec]:
    nodes = list(config.nodes)
    head_idx = next((i for i, n in enumerate(nodes) if n.role == "head"), 0)
    order = [head_idx] + [i for i in range(len(nodes)) if i != head_idx]
    world_p = scenario_data.get("params", {}).get("world", "nodes")
    world = len(nodes) if world_p == "nodes" else int(world_p)
    specs = []
    for pos, i in enumerate(order):
        n = nodes[i]
        rank = pos if pos < world else None
        pid = 581 + 97 * pos
        ip = n.fabric_ip or f"192.168.200.{12 + i}"
        hcas = tuple(n.ib_hcas) + ("rocep1s0f1", "roceP2p1s0f1")
        worker_log = None
        if rank is not None and world > 1:
            worker_log = f"/tmp/ray/session_latest/logs/worker-{_hex(n.name + ':worker', 56)}-01000000-{pid}.out"
        specs.append(SimNodeSpec(
            name=n.name, index=i, head=(pos == 0), ip=ip, ifname=n.fabric_if or "enp1s0f1np1",
            hca0=hcas[0], hca1=hcas[1], rank=rank, pid=96 if world == 1 and pos == 0 else pid,
            container=config.cluster.name, worker_log=worker_log))
    return specs


def _select(sel: str, specs: list[SimNodeSpec]) -> list[SimNodeSpec]:
    ranked = [s for s in specs if s.rank is not None]
    if sel == "head":
        return [specs[0]]
    if sel == "workers":
        return specs[1:]
    if sel == "all":
        return ranked if ranked else specs
    if sel == "last":
        return ranked[-1:]
    if sel == "not_last":
        return ranked[:-1]
    raise ValueError(f"sim script: unknown nodes selector {sel!r}")


def _node_vars(config: "Config", spec: SimNodeSpec, scene: Scene, params: dict) -> dict:
    cl = config.cluster
    world = scene.world or 1
    ranks = [s for s in scene.specs if s.rank is not None]
    rank = spec.rank or 0
    head = scene.specs[0]
    tp = params.get("tp", config.tp)
    max_len = cl.max_model_len or 32768
    return {
        "host": spec.name.split(".")[0], "pid": spec.pid, "tid": spec.pid + 100, "ip": spec.ip,
        "head_ip": head.ip, "ifname": spec.ifname, "hca0": spec.hca0, "hca1": spec.hca1,
        "rank": rank, "nranks": world, "ring": " ".join(str(s.rank) for s in ranks),
        "next": (rank + 1) % world, "prev": (rank - 1) % world,
        "comm": "0x" + _hex(f"comm:{spec.name}", 8).lstrip("0"),
        "model": cl.served_model or cl.model_mount or cl.model_path or "/models/model",
        "serve_host": cl.serve_host, "port": cl.serve_port, "tp": tp, "util": cl.gpu_memory_utilization,
        "max_model_len": max_len, "max_model_len_c": f"{max_len:,}",
        "arch": "Qwen3_5MoeForConditionalGeneration",
        "vllm_version": params.get("vllm_version", VLLM_VERSION),
        "vllm_version_v": "v" + params.get("vllm_version", VLLM_VERSION),
        "kv_gib": params.get("kv_gib", 21.47), "kv_tokens": params.get("kv_tokens", "469,024"),
        "concurrency": params.get("concurrency", "14.31x"), "supported": params.get("supported", ""),
        "apipid": 1, "enginepid": 96, "nondefault": _nondefault(config, tp, max_len),
        "weights_gib": f"{MODEL_GIB / world:.2f}", "load_s": params.get("load_s", "30.00"),
        "load_total_s": params.get("load_total_s", "32.10"), "compile_s": "4.83", "graphs_s": "10",
        "init_s": "22.47",
    }


def _nondefault(config: "Config", tp: int, max_len: int) -> str:
    """vLLM's `non-default args: {...}` (a Python dict repr) for the configured serve command."""
    cl = config.cluster
    model = cl.served_model or cl.model_mount or cl.model_path or "/models/model"
    args = {"model_tag": model, "host": cl.serve_host, "port": cl.serve_port, "enable_auto_tool_choice": True,
            "tool_call_parser": "qwen3_coder", "model": model, "trust_remote_code": True,
            "max_model_len": max_len, "reasoning_parser": "qwen3", "tensor_parallel_size": tp,
            "gpu_memory_utilization": cl.gpu_memory_utilization}
    if tp > 1:
        args["distributed_executor_backend"] = "ray"
    return repr(args)


def _emit(scene: Scene, spec: SimNodeSpec, stream: str, t: float, text: str) -> None:
    if stream == "container":
        scene.lines[spec.name].append(ScriptLine(t, spec.container, text))
    elif stream == "engine":
        scene.lines[spec.name].append(ScriptLine(t, spec.container, f"(EngineCore_DP0 pid={spec.pid}) {text}"))
    elif stream == "rank":
        if spec.worker_log:
            scene.lines[spec.name].append(ScriptLine(t, spec.worker_log, text))
        head = scene.specs[0]
        scene.lines[head.name].append(
            ScriptLine(t, head.container, f"(RayWorkerWrapper pid={spec.pid}, ip={spec.ip}) {text}"))
    else:
        raise ValueError(f"sim script: unknown stream {stream!r}")


def compile_scene(config: "Config", scenario: str, start: float, speed: float = 1.0) -> Scene:
    """Place every line of ``scenario`` in time (seconds since the containers started)."""
    data = load_scenario(scenario)
    params = dict(data.get("params", {}))
    # durations quoted by the logs ("Loading weights took N seconds") match the simulated ones
    w = next((p for p in data.get("phase", []) if p["name"] == "weights" and "until" in p), None)
    load = float(w["until"]) - float(w["at"]) if w else 30.0
    params.setdefault("load_s", f"{load:.2f}")
    params.setdefault("load_total_s", f"{load + 2.1:.2f}")
    scene = Scene(scenario=scenario, params=params, specs=make_specs(config, data), start=start, speed=speed)
    for s in scene.specs:
        scene.lines[s.name] = []
        scene.phases[s.name] = []
    for step in data.get("step", []):
        at, dur = float(step["at"]), float(step.get("dur", 0.0))
        stream = step.get("stream", "container")
        for spec in _select(step["nodes"], scene.specs):
            base = _node_vars(config, spec, scene, params)
            if "progress" in step:
                _progress(scene, spec, stream, step, base)
                continue
            lines = block_lines(step["block"])
            n = len(lines)
            for k, tmpl in enumerate(lines):
                t = round(at + (dur * k / n if n else 0.0), 4)
                text = string.Template(tmpl).substitute(base, vts=vts(scene.epoch(t)))
                _emit(scene, spec, stream, t, text)
    for ph in data.get("phase", []):
        for spec in _select(ph["nodes"], scene.specs):
            scene.phases[spec.name].append(Phase(ph["name"], float(ph["at"]), ph.get("until")))
    for ex in data.get("exit", []):
        for spec in _select(ex["nodes"], scene.specs):
            scene.exits[spec.name] = (float(ex["at"]), int(ex["code"]))
    if "serve" in data:
        sv = data["serve"]
        scene.serve = (_select(sv["nodes"], scene.specs)[0].name, float(sv["at"]))
    for name in scene.lines:
        scene.lines[name].sort(key=lambda ln: ln.t)  # stable: same-time lines keep script order
        scene.phases[name].sort(key=lambda p: p.at)
    return scene


def _progress(scene: Scene, spec: SimNodeSpec, stream: str, step: dict, base: dict) -> None:
    prog = load_blocks()["progress"][step["progress"]]
    n = int(prog["n"])
    stop = int(step.get("stop_at", n))
    at, dur = float(step["at"]), float(step["dur"])
    per = dur / n
    for i in range(0, stop + 1):
        t = round(at + i * per, 4)
        elapsed = i * per
        if i == 0:
            remaining, rate = "?", "?it/s"
        else:
            remaining = _mmss((n - i) * per)
            rate = f"{per:.2f}s/it" if per >= 1 else f"{1 / per:5.2f}it/s"
        filled = int(10 * i / n)
        text = string.Template(prog["template"]).substitute(
            base, pct=f"{100 * i / n:3.0f}", i=i, n=n, elapsed=_mmss(elapsed), remaining=remaining,
            rate=rate, bar="█" * filled + " " * (10 - filled), vts=vts(scene.epoch(t)))
        _emit(scene, spec, stream, t, text)
