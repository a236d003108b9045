#!/usr/bin/env python3
"""A stand-in for `vllm serve MODEL ...`: standard library only.

Where it is still used, and why (everything else runs the REAL vLLM, `--scenario real-vllm`):
- the embedded demo (`sparktui demo`, through the sim backend): needs nothing installed;
- the lean `--scenario seed` images of tests/e2e/test_actions.py: the story's 119 GiB GB10-sized model
  and its memory prediction, the community image's env-driven ENTRYPOINT, hostile paths, a full
  target disk and cancel mid-build/push: paths that must stay fast, or that a tiny CPU model cannot
  show;
- fault modes the CPU build cannot produce (NCCL init hang, collective desync, worker death under
  Ray), for the investigation tests.

Install it as three files side by side: standin_vllm.py, standin_http.py, scripts/blocks.toml
(e.g. /opt/standin/{standin_vllm.py,standin_http.py,scripts/blocks.toml}).

It reads the model directory (config.json, model.safetensors.index.json), checks the model's
`architectures` against a registry file shaped like vLLM's `vllm/model_executor/models/registry.py`
and its `model_type` against a `transformers/models/auto/configuration_auto.py`-shaped
`CONFIG_MAPPING_NAMES`, prints vLLM's real startup lines in their real order (templates in
scripts/blocks.toml, shared with the demo cluster), then serves an OpenAI-compatible API with
http.server: /health, /v1/models, /v1/chat/completions (plain and SSE streaming, with `reasoning`
and/or `reasoning_content`), /metrics (Prometheus text).

Environment:
  SPARKTUI_STANDIN_FAULT       unsupported-arch | oom | free-memory | nccl-hang | desync | worker-death
  SPARKTUI_STANDIN_REGISTRY    registry.py path   (default /opt/standin/vllm/model_executor/models/registry.py)
  SPARKTUI_STANDIN_CONFIGMAP   configuration_auto.py path (default /opt/standin/transformers/models/auto/configuration_auto.py)
  SPARKTUI_STANDIN_MEM_BYTES   memory one rank may use (default 128e9 x --gpu-memory-utilization)
  SPARKTUI_STANDIN_FREE_BYTES  free memory at start-up (default: 121.63 GiB less 8 GB)
  SPARKTUI_STANDIN_LOAD_SECONDS  time the weight load takes (default 4)
  SPARKTUI_STANDIN_REASONING_FIELDS  both | reasoning | reasoning_content (default both)
  SPARKTUI_STANDIN_SCRIPTS     directory holding blocks.toml (else scripts/ beside this file,
                               else /opt/standin/scripts/)
  SPARKTUI_STANDIN_STEP_SECONDS / _LOG_EVERY  pause between start-up phases (0.02) / stats line period (10)
  SPARKTUI_STANDIN_PEERS       "host:ip,..." of the other ranks (log text only; Ray-placed ranks use the
                               nodes Ray reports instead)
  SPARKTUI_STANDIN_FAULT_AFTER requests served before desync / worker-death strike (default 1)
  SPARKTUI_STANDIN_PG_WAIT_SECONDS / _PG_TIMEOUT  with --distributed-executor-backend ray: how often
                               "Waiting for creating a placement group" repeats while Ray cannot
                               place -tp GPUs, and when it gives up (default 10 / 1800).  With Ray's
                               Python API (`import ray` works) it connects (address="auto"), asks
                               for a STRICT_SPREAD placement group of one GPU per rank and starts
                               one actor per bundle, whose node IPs and pids the rank lines show;
                               without it, it counts the GPUs in `ray status`
  SPARKTUI_STANDIN_RPC_TIMEOUT  desync: seconds until "RPC call to sample_tokens timed out" (default: never)

Run: python3 standin_vllm.py serve MODEL_PATH [--port N] [...].  Importing it has no side effects.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import signal
import socket
import string
import sys
import threading
import time
import tomllib
from http.server import ThreadingHTTPServer
from pathlib import Path

try:  # imported as sparktui.sim.standin_vllm
    from .standin_http import Engine, make_handler, stats_loop
except ImportError:  # run as a script: its own directory is sys.path[0]
    try:
        from standin_http import Engine, make_handler, stats_loop  # type: ignore[no-redef]
    except ModuleNotFoundError:
        print("standin_vllm: standin_http.py is missing beside this script: install the stand-in as "
              "standin_vllm.py + standin_http.py + scripts/blocks.toml (e.g. in /opt/standin/)", file=sys.stderr)
        sys.exit(2)

VERSION = "0.17.1rc1.dev25+g1a629ce0d"
VLLM_TOTAL_GIB = 121.63
GIB = 1024 ** 3
DEFAULT_REGISTRY = "/opt/standin/vllm/model_executor/models/registry.py"
DEFAULT_CONFIGMAP = "/opt/standin/transformers/models/auto/configuration_auto.py"
FAULTS = ("unsupported-arch", "oom", "free-memory", "nccl-hang", "desync", "worker-death")


class StandinError(Exception):
    """A start-up problem of the stand-in itself (not a simulated vLLM failure)."""


# ---------------------------------------------------------------------------- reading files

def read_registry(path: str) -> list[str]:
    """Architecture names of every `_..._MODELS = {"Arch": ("module", "Class"), ...}` dict."""
    tree = ast.parse(Path(path).read_text(), filename=path)
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict):
            targets = [t.id for t in node.targets if isinstance(t, ast.Name)]
            if not any(t.startswith("_") and t.endswith("_MODELS") for t in targets):
                continue
            for k, v in zip(node.value.keys, node.value.values):
                if isinstance(k, ast.Constant) and isinstance(k.value, str) and isinstance(v, ast.Tuple):
                    if k.value not in names:
                        names.append(k.value)
    return names


def read_config_map(path: str) -> dict[str, str]:
    """`CONFIG_MAPPING_NAMES` of a configuration_auto.py: OrderedDict([("type", "Config"), ...])."""
    tree = ast.parse(Path(path).read_text(), filename=path)
    out: dict[str, str] = {}

    def pairs(node: ast.AST) -> None:
        if isinstance(node, ast.Tuple) and len(node.elts) == 2 and all(
                isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
            out[node.elts[0].value] = node.elts[1].value
        elif isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values):
                if isinstance(k, ast.Constant) and isinstance(v, ast.Constant):
                    out[str(k.value)] = str(v.value)
        elif isinstance(node, (ast.List, ast.Tuple)):
            for e in node.elts:
                pairs(e)
        elif isinstance(node, ast.Call):
            for a in node.args:
                pairs(a)
            for kw in node.keywords:
                if kw.arg and isinstance(kw.value, ast.Constant):
                    out[kw.arg] = str(kw.value.value)
                else:
                    pairs(kw.value)

    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "CONFIG_MAPPING_NAMES"
                                                for t in node.targets):
            pairs(node.value)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "update"
              and isinstance(node.func.value, ast.Name) and node.func.value.id == "CONFIG_MAPPING_NAMES"):
            for a in node.args:
                pairs(a)
    return out


def model_total_bytes(model_dir: Path) -> int | None:
    idx = model_dir / "model.safetensors.index.json"
    try:
        return int(json.loads(idx.read_text())["metadata"]["total_size"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def installed_version(registry: str) -> str:
    """The image's vLLM version (vllm/_version.py beside the registry's package), else ours."""
    try:
        tree = ast.parse((Path(registry).parents[2] / "_version.py").read_text())
    except (OSError, SyntaxError, IndexError):
        return VERSION
    for node in ast.walk(tree):
        if (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__version__" for t in node.targets)
                and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)):
            return node.value.value
    return VERSION


def load_blocks() -> dict:
    cands = []
    if os.environ.get("SPARKTUI_STANDIN_SCRIPTS"):
        cands.append(Path(os.environ["SPARKTUI_STANDIN_SCRIPTS"]) / "blocks.toml")
    cands += [Path(__file__).resolve().parent / "scripts" / "blocks.toml", Path("/opt/standin/scripts/blocks.toml")]
    for c in cands:
        if c.is_file():
            with open(c, "rb") as fh:
                return tomllib.load(fh)
    raise StandinError("line templates not found: install the stand-in as standin_vllm.py + standin_http.py + "
                       "scripts/blocks.toml (e.g. in /opt/standin/), or set SPARKTUI_STANDIN_SCRIPTS; looked in "
                       + ", ".join(map(str, cands)))


# ---------------------------------------------------------------------------- args

def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="vllm")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve")
    s.add_argument("model_tag")
    s.add_argument("--host", default="0.0.0.0")
    s.add_argument("--port", type=int, default=8000)
    s.add_argument("--tensor-parallel-size", "-tp", type=int, default=1)
    s.add_argument("--pipeline-parallel-size", "-pp", type=int, default=1)
    s.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    s.add_argument("--max-model-len", type=int, default=None)
    s.add_argument("--served-model-name", nargs="+", default=None)
    s.add_argument("--api-key", default=None)
    s.add_argument("--distributed-executor-backend", default=None)
    s.add_argument("--reasoning-parser", default=None)
    s.add_argument("--tool-call-parser", default=None)
    s.add_argument("--chat-template", default=None)
    s.add_argument("--load-format", default="auto")
    s.add_argument("--kv-cache-dtype", default="auto")
    s.add_argument("--dtype", default="auto")
    s.add_argument("--quantization", "-q", default=None)
    s.add_argument("--max-num-seqs", type=int, default=None)
    s.add_argument("--max-num-batched-tokens", type=int, default=None)
    s.add_argument("--swap-space", type=float, default=None)
    s.add_argument("--speculative-config", default=None)
    s.add_argument("--default-chat-template-kwargs", default=None)
    for flag in ("--trust-remote-code", "--enable-auto-tool-choice", "--enable-prefix-caching", "--enforce-eager",
                 "--enable-expert-parallel", "--language-model-only", "--disable-log-requests"):
        s.add_argument(flag, action="store_true")
    return p


# ---------------------------------------------------------------------------- log output

class Log:
    def __init__(self, blocks: dict, vars_: dict, out=None) -> None:
        self.blocks = blocks
        self.vars = vars_
        self.out = out or sys.stdout
        self.lock = threading.Lock()
        self.pid = os.getpid()

    def line(self, text: str) -> None:
        with self.lock:
            self.out.write(text + "\n")
            self.out.flush()

    def render(self, tmpl: str, **extra) -> str:
        vts = time.strftime("%m-%d %H:%M:%S", time.localtime())
        return string.Template(tmpl).safe_substitute(self.vars, vts=vts, **extra)

    def block(self, name: str, section: str = "blocks", prefix: str = "", pause: float = 0.0, **extra) -> None:
        text = self.blocks[section][name]
        lines = text.split("\n")[1:] if text.startswith("\n") else text.split("\n")
        for tmpl in lines:
            self.line(prefix + self.render(tmpl, **extra))
            if pause:
                time.sleep(pause)


# ---------------------------------------------------------------------------- start-up


def _pause(base: float) -> None:
    if base > 0:
        time.sleep(base)


def startup(args, log: Log, fault: str, model_dir: Path) -> int | None:
    """Print the startup in vLLM's order.  Returns an exit code when start-up fails, else None."""
    step = float(os.environ.get("SPARKTUI_STANDIN_STEP_SECONDS", "0.02"))
    load_s = float(os.environ.get("SPARKTUI_STANDIN_LOAD_SECONDS", "4"))
    tp = args.tensor_parallel_size
    log.block("api_args")
    cfg_path = model_dir / "config.json"
    try:
        cfg = json.loads(cfg_path.read_text())
    except (OSError, ValueError):
        log.block("model_missing", "standin")
        return 1
    arch = (cfg.get("architectures") or ["?"])[0]
    model_type = str(cfg.get("model_type", ""))
    log.vars.update(arch=arch, model_type=model_type)
    cmap_path = os.environ.get("SPARKTUI_STANDIN_CONFIGMAP", DEFAULT_CONFIGMAP)
    if Path(cmap_path).is_file() and model_type not in read_config_map(cmap_path):
        log.block("transformers_unknown", "standin")
        return 1
    reg_path = os.environ.get("SPARKTUI_STANDIN_REGISTRY", DEFAULT_REGISTRY)
    supported = read_registry(reg_path) if Path(reg_path).is_file() else []
    if fault == "unsupported-arch" or (Path(reg_path).is_file() and arch not in supported):
        log.vars["supported"] = ", ".join(repr(a) for a in supported if a != arch)
        log.block("unsupported_arch")
        return 1
    _pause(step)
    log.block("arch_resolved")
    log.block("engine_init")
    placed: list[tuple[str, str, int]] = []
    if args.distributed_executor_backend == "ray" and tp > 1:
        log.block("engine_ray")
        rc, placed = ray_placement(log, tp)
        if rc is not None:
            return rc
    util = args.gpu_memory_utilization
    want = util * VLLM_TOTAL_GIB
    free = float(os.environ.get("SPARKTUI_STANDIN_FREE_BYTES", (VLLM_TOTAL_GIB * GIB - 8e9))) / GIB
    if fault == "free-memory" or free < want:
        log.block("free_memory", "standin", free_gib=f"{min(free, want - 0.01):.2f}", want_gib=f"{want:.2f}",
                  util=f"{util}")
        return 1
    ranks = placed or _ranks(tp)
    for rank, (host, ip, pid) in enumerate(ranks):
        pre = _prefix(args, rank, ip, pid)
        log.block("rank_dist_init", prefix=pre, rank=rank, nranks=tp)
    if tp > 1 and os.environ.get("NCCL_DEBUG", "").upper() in ("INFO", "TRACE"):
        hang = fault == "nccl-hang"
        for rank, (host, ip, pid) in enumerate(ranks):
            v = dict(host=host, ip=ip, pid=pid, tid=pid + 100, rank=rank, nranks=tp, next=(rank + 1) % tp,
                     prev=(rank - 1) % tp, ring=" ".join(map(str, range(tp))), comm=f"0x{abs(hash((pid, rank))) % 16**8:x}")
            pre = _prefix(args, rank, ip, pid)
            log.block("nccl_init_a", prefix=pre, **v)
            if not (hang and rank == tp - 1):
                log.block("nccl_init_b", prefix=pre, **v)
    if fault == "nccl-hang":
        return -1  # stay alive, silent
    total = model_total_bytes(model_dir)
    budget = float(os.environ.get("SPARKTUI_STANDIN_MEM_BYTES", 128_000_000_000 * util))
    per_rank = (total / tp) if total else 0.0
    oom_at = None  # fraction of the load at which memory runs out
    if per_rank and per_rank > budget:
        oom_at = max(0.0, min(0.97, budget / per_rank))
    elif fault == "oom":
        oom_at = 0.95
    pre0 = _prefix(args, 0, ranks[0][1], ranks[0][2])
    if tp > 1:
        for rank, (host, ip, pid) in enumerate(ranks):
            log.block("custom_ar_off", prefix=_prefix(args, rank, ip, pid))
    log.block("rank_after_nccl", prefix=pre0, rank=0, nranks=tp)
    n = 40
    prog = log.blocks["progress"]["shards"]["template"]
    t0 = time.monotonic()
    for i in range(n + 1):
        if oom_at is not None and i / n > oom_at:
            log.block("oom_load")
            return 1
        el = time.monotonic() - t0
        rate = "?it/s" if i == 0 else f"{el / i:.2f}s/it"
        rem = "?" if i == 0 else f"{int((n - i) * el / i) // 60:02d}:{int((n - i) * el / i) % 60:02d}"
        log.line(pre0 + log.render(prog, pct=f"{100 * i / n:3.0f}", i=i, n=n, rate=rate, remaining=rem,
                                   elapsed=f"{int(el) // 60:02d}:{int(el) % 60:02d}"))
        if i < n:
            time.sleep(load_s / n)
    gib = (total or 0) / tp / GIB
    log.block("rank_weights_done", prefix=pre0, rank=0, load_s=f"{load_s:.2f}", load_total_s=f"{load_s + 0.4:.2f}",
              weights_gib=f"{gib:.2f}", compile_s="0.41", kv_gib=f"{max(0.5, want - gib - 3):.2f}")
    log.block("kv_cache", kv_tokens="469,024", concurrency="14.31x", max_model_len_c=f"{args.max_model_len or 32768:,}")
    log.block("rank_graphs_done", prefix=pre0, graphs_s="1")
    log.block("engine_ready", init_s="1.20")
    return None


def ray_gpus() -> float | None:
    """GPUs the running Ray cluster offers (`ray status`), None when no Ray answers."""
    import re
    import shutil
    import subprocess

    if shutil.which("ray") is None:
        return None
    try:
        res = subprocess.run(["ray", "status"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r"^\s*[\d.]+/([\d.]+) GPU\b", res.stdout, re.M)
    if res.returncode != 0:
        return None
    return float(m.group(1)) if m else 0.0


def ray_placement(log: Log, tp: int) -> tuple[int | None, list[tuple[str, str, int]]]:
    """With `--distributed-executor-backend ray`: Ray must place one GPU per rank, as vLLM needs.

    Returns (exit code or None, the ranks' (host, ip, pid) in rank order; empty without Ray's Python
    API, then the log uses VLLM_HOST_IP / SPARKTUI_STANDIN_PEERS)."""
    every = float(os.environ.get("SPARKTUI_STANDIN_PG_WAIT_SECONDS", "10"))
    limit = float(os.environ.get("SPARKTUI_STANDIN_PG_TIMEOUT", "1800"))
    try:
        import ray  # only where the real Ray is installed (the real-vllm image); never at import time
    except ImportError:
        return _ray_status_placement(log, tp, every, limit), []
    return _ray_pg_placement(ray, log, tp, every, limit)


# the placement group and its actors live as long as the server, as vLLM's workers do: `ray status`
# then shows the GPUs in use while it serves
_HELD: list = []


def _ray_pg_placement(ray, log: Log, tp: int, every: float, limit: float) -> tuple[int | None, list]:
    """A real placement group of one GPU per node, and one actor per bundle that reports its node."""
    from ray.util.placement_group import placement_group, remove_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    try:
        ray.init(address="auto")
    except ConnectionError:
        log.block("ray_not_running", "standin")
        return 1, []
    # STRICT_SPREAD: one rank per node, which is what a Spark pair (one GB10 each) gives anyway
    pg = placement_group([{"GPU": 1.0}] * tp, strategy="STRICT_SPREAD")
    specs = repr(pg.bundle_specs)
    ready_ref = pg.ready()
    waited = 0.0
    # vLLM's _wait_until_pg_ready: wait, print the line, repeat; give up after the timeout
    while waited < limit:
        step = min(every, limit - waited)
        done, _ = ray.wait([ready_ref], timeout=step)
        if done:
            break
        waited += step
        log.block("pg_waiting", "standin", waited=f"{int(waited)}", specs=specs)
    else:
        done, _ = ray.wait([ready_ref], timeout=0)
        if not done:
            log.block("pg_timeout", "standin", specs=specs, timeout=f"{int(limit)}")
            remove_placement_group(pg)
            return 1, []

    @ray.remote(num_cpus=0, num_gpus=1)
    class RankProbe:
        def where(self) -> tuple[str, str, int]:
            import os as _os
            import socket as _socket

            import ray as _ray
            return _socket.gethostname().split(".")[0], _ray.util.get_node_ip_address(), _os.getpid()

    actors = [RankProbe.options(scheduling_strategy=PlacementGroupSchedulingStrategy(
        placement_group=pg, placement_group_bundle_index=i)).remote() for i in range(tp)]
    try:
        where = ray.get([a.where.remote() for a in actors], timeout=max(60.0, every))
    except Exception as exc:  # an actor that cannot start on its node (the stand-in's own message)
        print(f"standin_vllm: Ray actors did not start: {exc}", file=sys.stderr)
        remove_placement_group(pg)
        return 1, []
    _HELD.extend([pg, *actors])
    # rank 0 on the driver's node, as vLLM sorts the bundles (get_bundles_sorted_by_node)
    here = ray.util.get_node_ip_address()
    where.sort(key=lambda w: w[1] != here)
    return None, where


def _ray_status_placement(log: Log, tp: int, every: float, limit: float) -> int | None:
    """No Ray Python API here: count the GPUs `ray status` shows instead."""
    gpus = ray_gpus()
    if gpus is None:
        log.block("ray_not_running", "standin")
        return 1
    if gpus >= tp:
        return None
    specs = repr([{"node:" + log.vars["head_ip"]: 0.001, "GPU": 1.0}] + [{"GPU": 1.0}] * (tp - 1))
    waited = 0.0
    while waited < limit:
        time.sleep(min(every, limit - waited))
        waited += min(every, limit - waited)
        if (ray_gpus() or 0.0) >= tp:
            return None
        log.block("pg_waiting", "standin", waited=f"{int(waited)}", specs=specs)
    log.block("pg_timeout", "standin", specs=specs, timeout=f"{int(limit)}")
    return 1


def _prefix(args, rank: int, ip: str, pid: int) -> str:
    """Whose output a worker line is: a Ray actor, a multiprocessing worker, or the engine itself."""
    if args.tensor_parallel_size == 1:
        return f"(EngineCore_DP0 pid={os.getpid()}) "
    if args.distributed_executor_backend == "ray":
        return f"(RayWorkerWrapper pid={pid}, ip={ip}) "
    return f"(Worker_TP{rank} pid={pid}) "


def _ranks(tp: int) -> list[tuple[str, str, int]]:
    host = socket.gethostname().split(".")[0]
    ip = os.environ.get("VLLM_HOST_IP", "127.0.0.1")
    out = [(host, ip, os.getpid())]
    peers = [p for p in os.environ.get("SPARKTUI_STANDIN_PEERS", "").split(",") if p]
    for r in range(1, tp):
        h, _, pip = (peers[r - 1] if r - 1 < len(peers) else f"{host}:{ip}").partition(":")
        out.append((h, pip or ip, os.getpid() + r))
    return out


def non_default_args(args) -> str:
    """vLLM's `non-default args: {...}` line: every option that differs from its default."""
    defaults = vars(build_parser().parse_args(["serve", args.model_tag]))
    out = {"model_tag": args.model_tag}
    for k, v in vars(args).items():
        if k not in ("cmd", "model_tag") and v != defaults.get(k):
            out[k] = v
    out["model"] = args.model_tag
    return repr(out)


def serve(argv: list[str] | None = None, out=None) -> int:
    args = build_parser().parse_args(argv)
    fault = os.environ.get("SPARKTUI_STANDIN_FAULT", "")
    if fault and fault not in FAULTS:
        print(f"standin_vllm: unknown SPARKTUI_STANDIN_FAULT {fault!r} (one of {', '.join(FAULTS)})", file=sys.stderr)
        return 2
    try:
        blocks = load_blocks()
    except StandinError as exc:
        print(f"standin_vllm: {exc}", file=sys.stderr)
        return 2
    model_dir = Path(args.model_tag)
    version = installed_version(os.environ.get("SPARKTUI_STANDIN_REGISTRY", DEFAULT_REGISTRY))
    vars_ = {"model": args.model_tag, "serve_host": args.host, "port": args.port, "tp": args.tensor_parallel_size,
             "util": args.gpu_memory_utilization, "max_model_len": args.max_model_len or 32768,
             "vllm_version": version, "vllm_version_v": "v" + version, "head_ip": os.environ.get("VLLM_HOST_IP", "127.0.0.1"),
             "ifname": os.environ.get("NCCL_SOCKET_IFNAME", "lo").split(",")[0].lstrip("=^"),
             "hca0": (os.environ.get("NCCL_IB_HCA", "rocep1s0f1,roceP2p1s0f1").split(",") + ["roceP2p1s0f1"])[0].lstrip("="),
             "hca1": (os.environ.get("NCCL_IB_HCA", "rocep1s0f1,roceP2p1s0f1").split(",") + ["roceP2p1s0f1"])[1],
             "apipid": os.getpid(), "enginepid": os.getpid(), "nondefault": non_default_args(args), "max_model_len_c": f"{args.max_model_len or 32768:,}"}
    log = Log(blocks, vars_, out)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    engine = Engine(args, log, fault)
    # like vLLM, bind the API socket before the engine starts: clients queue until it serves
    try:
        httpd = ThreadingHTTPServer((args.host, args.port), make_handler(engine))
    except OSError as exc:
        log.block("api_args")
        log.block("port_in_use", "standin", errno=exc.errno, strerror=exc.strerror or str(exc))
        return 1
    rc = startup(args, log, fault, model_dir)
    if rc == -1:
        threading.Event().wait()  # nccl-hang: alive and silent until killed
    if rc is not None:
        httpd.server_close()
        return rc
    httpd.daemon_threads = True
    threading.Thread(target=stats_loop, args=(engine,), daemon=True).start()
    try:
        httpd.serve_forever(poll_interval=0.2)
    finally:
        httpd.server_close()
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--version"]:
        print(installed_version(os.environ.get("SPARKTUI_STANDIN_REGISTRY", DEFAULT_REGISTRY)))
        return 0
    return serve(argv)


if __name__ == "__main__":
    sys.exit(main())
