"""Hostile OpenAI-compatible servers for the tests: real HTTP on 127.0.0.1 (ephemeral ports, threads).

``serve(get=..., post=...)`` runs one; a route is a function of the request handler that writes the
answer, made by the builders below (a JSON body, an SSE stream, an endless body, a drip).  Endless
writers stop when the client goes away or the server stops.  ``run_measured`` runs ``python -m MODULE``
and reads that one program's peak RSS (see ``PEAK_WRAPPER``).
Shared by tests/security/test_api_server_hostile.py, its property and tmux tests,
tests/unit/test_load_test_tokens.py (its hostile /tokenize) and every peak-memory test (run_measured);
tests/ is on sys.path.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Iterable, Iterator

Route = Callable[[BaseHTTPRequestHandler], None]

OSC52 = "\x1b]52;c;cHduZWQ=\x07"  # would put "pwned" in the clipboard
OSC0 = "\x1b]0;PWNED-TITLE\x07"  # would retitle the window
CLEAR = "\x1b[2J"
C1 = "\x9b2J"  # the 8-bit CSI
HOSTILE = f"{OSC52}{OSC0}{CLEAR}{C1}\x07\x08"


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    stop: threading.Event
    routes: dict[str, Route | None]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, *a) -> None:
        pass

    def _route(self, method: str) -> None:
        if method == "POST":
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
        route = self.server.routes.get(method)
        try:
            (route or (models("m") if method == "GET" else sse(chunk("hi", finish="stop"))))(self)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client refused to read on: what the bounds are for

    def do_GET(self) -> None:
        self._route("GET")

    def do_POST(self) -> None:
        self._route("POST")


def local_config(directory: os.PathLike | str) -> str:
    """A cluster.toml of one local node, written in ``directory``: enough for `prompt` and `load-test`
    pointed at a server by $SPARKTUI_API_BASE."""
    p = os.path.join(directory, "c.toml")
    with open(p, "w", encoding="utf-8") as f:
        f.write('[cluster]\nname = "t"\n\n[[node]]\nname = "a"\nbackend = "local"\n')
    return p


@contextmanager
def serve(get: Route | None = None, post: Route | None = None) -> Iterator[str]:
    """``http://127.0.0.1:PORT`` answering every GET with ``get`` (default: one model "m") and every
    POST with ``post`` (default: a short streamed answer)."""
    httpd = _Server(("127.0.0.1", 0), _Handler)
    httpd.stop = threading.Event()
    httpd.routes = {"GET": get, "POST": post}
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.stop.set()
        httpd.shutdown()
        httpd.server_close()


def _head(h: BaseHTTPRequestHandler, status: int, ctype: str, length: int | None = None,
          extra: dict[str, str] | None = None) -> None:
    h.send_response(status)
    h.send_header("Content-Type", ctype)
    h.send_header("Connection", "close")
    if length is not None:
        h.send_header("Content-Length", str(length))
    for k, v in (extra or {}).items():
        h.send_header(k, v)
    h.end_headers()


# ------------------------------------------------------------------ routes

def raw(body: bytes, status: int = 200, ctype: str = "application/json", headers: dict | None = None) -> Route:
    def route(h):
        _head(h, status, ctype, len(body), headers)
        h.wfile.write(body)
    return route


def json_reply(obj: object, status: int = 200) -> Route:
    return raw(json.dumps(obj).encode(), status)


def models(*ids: str) -> Route:
    return json_reply({"object": "list", "data": [{"id": i, "object": "model"} for i in ids]})


def chunk(content: str | None = None, *, reasoning: str | None = None, finish: str | None = None,
          model: str = "m", usage: dict | None = None) -> dict:
    """One chat.completion.chunk as vLLM streams it."""
    delta = {k: v for k, v in (("content", content), ("reasoning", reasoning)) if v is not None}
    return {"id": "x", "object": "chat.completion.chunk", "created": 0, "model": model, "usage": usage,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def _sse_bytes(event: dict | bytes) -> bytes:
    return event if isinstance(event, bytes) else f"data: {json.dumps(event)}\n\n".encode()


def sse(*events: dict | bytes, done: bool = True) -> Route:
    """A stream of ``events`` (a dict: one ``data:`` event; bytes: written as they are), then [DONE]."""
    def route(h):
        _head(h, 200, "text/event-stream")
        for e in events:
            h.wfile.write(_sse_bytes(e))
        if done:
            h.wfile.write(b"data: [DONE]\n\n")
    return route


def endless(head: bytes, piece: bytes, ctype: str = "application/json", status: int = 200) -> Route:
    """``head``, then ``piece`` for ever, as fast as the client reads (or until the server stops)."""
    def route(h):
        _head(h, status, ctype)
        h.wfile.write(head)
        while not h.server.stop.is_set():
            h.wfile.write(piece)
    return route


def drip(first: Iterable[dict | bytes], piece: dict | bytes, every: float) -> Route:
    """An SSE stream: ``first``, then ``piece`` every ``every`` seconds, never ending."""
    def route(h):
        _head(h, 200, "text/event-stream")
        for e in first:
            h.wfile.write(_sse_bytes(e))
        h.wfile.flush()
        while not h.server.stop.wait(every):  # the server's pace, not the test's: the client must end it
            h.wfile.write(_sse_bytes(piece))
            h.wfile.flush()
    return route


# ------------------------------------------------------------------ a measured child

@dataclass
class Measured:
    rc: int
    out: str
    err: str
    peak_mb: float  # that child's own peak RSS
    wall_s: float


# ru_maxrss is no measure here: Linux carries the forking parent's peak across exec, so every child
# of a pytest grown to 200 MB "peaks" at 200 MB.  VmHWM belongs to the exec'd program's memory alone.
PEAK_WRAPPER = (
    "import atexit, os, runpy, sys\n"
    "def _peak():\n"
    "    with open('/proc/self/status') as f:\n"
    "        kb = next(ln.split()[1] for ln in f if ln.startswith('VmHWM:'))\n"
    "    with open(os.environ['PEAK_RSS_FILE'], 'w') as f:\n"
    "        f.write(kb)\n"
    "atexit.register(_peak)\n"
    "mod, sys.argv = sys.argv[1], sys.argv[1:]\n"
    "runpy.run_module(mod, run_name='__main__', alter_sys=True)\n")


def run_measured(argv: list[str], env: dict[str, str], cwd: str, timeout: float = 60.0) -> Measured:
    """``argv`` is ``[python, "-m", MODULE, *args]``; peak_mb is the program's own VmHWM (inf when it
    was killed before it could tell)."""
    python, dash_m, module, *rest = argv
    assert dash_m == "-m", argv
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.NamedTemporaryFile("r") as peak:
        t0 = time.monotonic()
        p = subprocess.Popen([python, "-c", PEAK_WRAPPER, module, *rest], stdout=out, stderr=err,
                             stdin=subprocess.DEVNULL, env={**env, "PEAK_RSS_FILE": peak.name}, cwd=cwd)
        killer = threading.Timer(timeout, lambda: os.kill(p.pid, signal.SIGKILL))
        killer.start()
        try:
            p.wait()
        finally:
            killer.cancel()
        wall = time.monotonic() - t0
        out.seek(0)
        err.seek(0)
        kb = peak.read().strip()
        return Measured(p.returncode, out.read().decode(errors="replace"), err.read().decode(errors="replace"),
                        int(kb) / 1024 if kb else float("inf"), wall)
