#!/usr/bin/env python3
"""A stand-in for `vllm serve MODEL ...` for the test bed: standard library only.

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
  SPARKTUI_STANDIN_SCRIPTS     directory holding blocks.toml
  SPARKTUI_STANDIN_PEERS       "host:ip,..." of the other ranks (log text only)
  SPARKTUI_STANDIN_FAULT_AFTER requests served before desync / worker-death strike (default 1)
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
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

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
    raise StandinError("line templates not found: copy sparktui/sim/scripts/ next to this script "
                       "or set SPARKTUI_STANDIN_SCRIPTS (looked in " + ", ".join(map(str, cands)) + ")")


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


# ---------------------------------------------------------------------------- the engine

class Engine:
    """What the HTTP side needs: counters, model name, the fault that strikes while serving."""

    def __init__(self, args, log: Log, fault: str) -> None:
        self.args = args
        self.log = log
        self.fault = fault
        self.name = (args.served_model_name or [args.model_tag])[0]
        self.max_len = args.max_model_len or 32768
        self.lock = threading.Lock()
        self.running = 0
        self.prompt_tokens = 0
        self.gen_tokens = 0
        self.success = 0
        self.served = 0
        self.dead = False
        self.stuck = threading.Event()  # desync: generation never finishes
        self.fields = os.environ.get("SPARKTUI_STANDIN_REASONING_FIELDS", "both")
        self.fault_after = int(os.environ.get("SPARKTUI_STANDIN_FAULT_AFTER", "1"))
        self.last_log = time.monotonic()

    def answer(self, messages: list, max_tokens: int | None, thinking: bool) -> tuple[str | None, str | None, str, int]:
        """(reasoning, content, finish_reason, prompt_tokens): deterministic from the prompt."""
        last = ""
        for m in messages:
            if isinstance(m, dict) and m.get("role") == "user":
                c = m.get("content")
                last = c if isinstance(c, str) else " ".join(
                    p.get("text", "") for p in c or [] if isinstance(p, dict))
        prompt_tokens = sum(len(str(m.get("content", "")).split()) + 4 for m in messages if isinstance(m, dict))
        words = last.split()
        reasoning = (f"The user wrote {len(words)} words starting with '{' '.join(words[:4])}'. "
                     "I should answer briefly and directly.") if thinking else None
        content = "Stand-in reply: " + (" ".join(words[:12]) if words else "(empty prompt)") + "."
        r_toks = reasoning.split() if reasoning else []
        c_toks = content.split()
        if max_tokens is not None and max_tokens < len(r_toks) + len(c_toks):
            if max_tokens <= len(r_toks):  # thinking ate the budget: content null, finish "length"
                return " ".join(r_toks[:max_tokens]) if reasoning else None, None, "length", prompt_tokens
            return reasoning, " ".join(c_toks[:max_tokens - len(r_toks)]), "length", prompt_tokens
        return reasoning, content, "stop", prompt_tokens

    def count(self, prompt: int, gen: int, finish: str) -> None:
        with self.lock:
            self.prompt_tokens += prompt
            self.gen_tokens += gen
            self.success += 1

    def metrics_text(self) -> str:
        lab = f'engine="0",model_name="{self.name}"'
        rows = [
            ("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.", self.running),
            ("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.", 0),
            ("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.", 0.01 * self.running),
            ("vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.", self.prompt_tokens),
            ("vllm:generation_tokens_total", "counter", "Number of generation tokens processed.", self.gen_tokens),
        ]
        out = []
        for name, kind, help_, val in rows:
            out += [f"# HELP {name} {help_}", f"# TYPE {name} {kind}", f"{name}{{{lab}}} {float(val)}"]
        out += ["# HELP vllm:request_success_total Count of successfully processed requests.",
                "# TYPE vllm:request_success_total counter",
                f'vllm:request_success_total{{engine="0",finished_reason="stop",model_name="{self.name}"}} '
                f"{float(self.success)}"]
        return "\n".join(out) + "\n"


def _chunk(handler: BaseHTTPRequestHandler, data: bytes) -> None:
    handler.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
    handler.wfile.flush()


def make_handler(engine: Engine):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "uvicorn"
        sys_version = ""

        def log_message(self, fmt, *a) -> None:  # uvicorn's access log shape
            pass

        def _access(self, code: int) -> None:
            from http import HTTPStatus
            phrase = HTTPStatus(code).phrase
            engine.log.line(f'(APIServer pid={os.getpid()}) INFO:     {self.client_address[0]}:{self.client_address[1]} - '
                            f'"{self.command} {self.path} HTTP/1.1" {code} {phrase}')

        def _json(self, code: int, obj) -> None:
            body = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            self._access(code)

        def _error(self, code: int, typ: str, msg: str) -> None:
            self._json(code, {"error": {"message": msg, "type": typ, "param": None, "code": code}})

        def _authorized(self) -> bool:
            key = engine.args.api_key
            if key and self.headers.get("Authorization") != f"Bearer {key}":
                self._json(401, {"error": "Unauthorized"})
                return False
            return True

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/health":
                code = 503 if engine.dead else 200
                self.send_response(code)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return self._access(code)
            if path == "/metrics":
                body = engine.metrics_text().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return self._access(200)
            if path == "/version":
                return self._json(200, {"version": engine.log.vars.get("vllm_version", VERSION)})
            if path == "/v1/models":
                if not self._authorized():
                    return
                return self._json(200, {"object": "list", "data": [{
                    "id": engine.name, "object": "model", "created": int(time.time()), "owned_by": "vllm",
                    "root": engine.args.model_tag, "parent": None, "max_model_len": engine.max_len}]})
            self._json(404, {"detail": "Not Found"})

        def do_POST(self) -> None:
            path = self.path.split("?", 1)[0]
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            if path != "/v1/chat/completions":
                return self._json(404, {"detail": "Not Found"})
            if not self._authorized():
                return
            try:
                req = json.loads(raw or b"{}")
                if not isinstance(req, dict) or not isinstance(req.get("messages"), list):
                    raise ValueError("messages must be a list")
            except ValueError as exc:
                return self._error(400, "BadRequestError", f"invalid request: {exc}")
            if req.get("model") not in (engine.name, None):
                return self._error(404, "NotFoundError", f"The model `{req.get('model')}` does not exist.")
            if engine.dead:
                return self._error(500, "InternalServerError", "EngineCore encountered an issue.")
            kw = req.get("chat_template_kwargs") or {}
            thinking = bool(kw.get("enable_thinking", True)) and engine.args.reasoning_parser is not None
            max_tokens = req.get("max_tokens") or req.get("max_completion_tokens")
            reasoning, content, finish, ptoks = engine.answer(req["messages"], max_tokens, thinking)
            with engine.lock:
                engine.running += 1
                engine.served += 1
                strike = engine.served >= engine.fault_after
            try:
                if strike and engine.fault == "desync":
                    # a collective that never completes: the request never returns; with a timeout
                    # set, vLLM's RPC timeout fires and the engine dies
                    limit = os.environ.get("SPARKTUI_STANDIN_RPC_TIMEOUT")
                    if not engine.stuck.wait(float(limit) if limit else None):
                        engine.dead = True
                        engine.log.block("rpc_timeout", "standin")
                        os._exit(1)
                if strike and engine.fault == "worker-death":
                    engine.dead = True
                    self._error(500, "InternalServerError", "EngineCore encountered an issue.")
                    threading.Thread(target=_die, args=(engine,), daemon=True).start()  # after the answer
                    return None
                rid = "chatcmpl-" + uuid.uuid4().hex
                if req.get("stream"):
                    return self._stream(rid, reasoning, content, finish, ptoks, req)
                msg = {"role": "assistant", "content": content, "tool_calls": []}
                if engine.fields in ("both", "reasoning"):
                    msg["reasoning"] = reasoning
                if engine.fields in ("both", "reasoning_content"):
                    msg["reasoning_content"] = reasoning
                gen = len((reasoning or "").split()) + len((content or "").split())
                engine.count(ptoks, gen, finish)
                self._json(200, {
                    "id": rid, "object": "chat.completion", "created": int(time.time()), "model": engine.name,
                    "choices": [{"index": 0, "message": msg, "logprobs": None, "finish_reason": finish,
                                 "stop_reason": None}],
                    "usage": {"prompt_tokens": ptoks, "total_tokens": ptoks + gen, "completion_tokens": gen}})
            finally:
                with engine.lock:
                    engine.running -= 1

        def _stream(self, rid, reasoning, content, finish, ptoks, req) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream; charset=utf-8")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            created = int(time.time())

            def send(delta: dict, fin=None, usage=None) -> None:
                obj = {"id": rid, "object": "chat.completion.chunk", "created": created, "model": engine.name,
                       "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": fin}]}
                if usage is not None:
                    obj["choices"], obj["usage"] = [], usage
                _chunk(self, b"data: " + json.dumps(obj).encode() + b"\n\n")

            send({"role": "assistant", "content": ""})
            gen = 0
            for i, tok in enumerate((reasoning or "").split()):
                piece = tok if i == 0 else " " + tok
                delta = {}
                if engine.fields in ("both", "reasoning"):
                    delta["reasoning"] = piece
                if engine.fields in ("both", "reasoning_content"):
                    delta["reasoning_content"] = piece
                send(delta)
                gen += 1
            for i, tok in enumerate((content or "").split()):
                send({"content": tok if i == 0 else " " + tok})
                gen += 1
            send({}, fin=finish)
            if (req.get("stream_options") or {}).get("include_usage"):
                send({}, usage={"prompt_tokens": ptoks, "total_tokens": ptoks + gen, "completion_tokens": gen})
            _chunk(self, b"data: [DONE]\n\n")
            _chunk(self, b"")
            engine.count(ptoks, gen, finish)
            self._access(200)

    return Handler


def _die(engine: Engine) -> None:
    engine.log.block("worker_death", "standin")
    os._exit(1)


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
    if tp > 1:
        log.block("engine_ray")
    util = args.gpu_memory_utilization
    want = util * VLLM_TOTAL_GIB
    free = float(os.environ.get("SPARKTUI_STANDIN_FREE_BYTES", (VLLM_TOTAL_GIB * GIB - 8e9))) / GIB
    if fault == "free-memory" or free < want:
        log.block("free_memory", "standin", free_gib=f"{min(free, want - 0.01):.2f}", want_gib=f"{want:.2f}",
                  util=f"{util}")
        return 1
    ranks = _ranks(tp)
    for rank, (host, ip, pid) in enumerate(ranks):
        pre = f"(RayWorkerWrapper pid={pid}, ip={ip}) " if tp > 1 else f"(EngineCore_DP0 pid={pid}) "
        log.block("rank_dist_init", prefix=pre, rank=rank, nranks=tp)
    if tp > 1 and os.environ.get("NCCL_DEBUG", "").upper() in ("INFO", "TRACE"):
        hang = fault == "nccl-hang"
        for rank, (host, ip, pid) in enumerate(ranks):
            v = dict(host=host, ip=ip, pid=pid, tid=pid + 100, rank=rank, nranks=tp, next=(rank + 1) % tp,
                     prev=(rank - 1) % tp, ring=" ".join(map(str, range(tp))), comm=f"0x{abs(hash((pid, rank))) % 16**8:x}")
            pre = f"(RayWorkerWrapper pid={pid}, ip={ip}) "
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
    pre0 = f"(RayWorkerWrapper pid={ranks[0][2]}, ip={ranks[0][1]}) " if tp > 1 else f"(EngineCore_DP0 pid={os.getpid()}) "
    if tp > 1:
        for rank, (host, ip, pid) in enumerate(ranks):
            log.block("custom_ar_off", prefix=f"(RayWorkerWrapper pid={pid}, ip={ip}) ")
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
    threading.Thread(target=_stats_loop, args=(engine,), daemon=True).start()
    try:
        httpd.serve_forever(poll_interval=0.2)
    finally:
        httpd.server_close()
    return 0


def _stats_loop(engine: Engine) -> None:
    every = float(os.environ.get("SPARKTUI_STANDIN_LOG_EVERY", "10"))
    tmpl = engine.log.blocks["blocks"]["serve_metrics"].strip("\n")
    last_p = last_g = 0
    while True:
        time.sleep(every)
        p, g = engine.prompt_tokens, engine.gen_tokens
        if p == last_p and g == last_g and not engine.running:
            continue
        engine.log.line(engine.log.render(
            tmpl, prompt_tps=f"{(p - last_p) / every:.1f}", gen_tps=f"{(g - last_g) / every:.1f}",
            running=engine.running, kv_usage=f"{engine.running * 1.0:.1f}", prefix_hit="0.0"))
        last_p, last_g = p, g


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--version"]:
        print(installed_version(os.environ.get("SPARKTUI_STANDIN_REGISTRY", DEFAULT_REGISTRY)))
        return 0
    return serve(argv)


if __name__ == "__main__":
    sys.exit(main())
