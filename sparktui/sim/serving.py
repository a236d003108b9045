"""The demo cluster's API server: the stand-in vLLM's HTTP side, in-process, on 127.0.0.1.

``SimNode.local_port(host, port)`` lands here.  While the scripted timeline says the head's API
server listens (from its `serving` phase, the moment `ss` shows the port), a ThreadingHTTPServer
with ``standin_http.Engine`` / ``make_handler`` answers on 127.0.0.1:<ephemeral>, so prompts,
/metrics and load tests reach the demo exactly like a real server behind an SSH port forward.

What the timeline says decides what the server does, checked on every request:
- before the serve point, or once the container exited: nothing listens (NodeError, "refused");
  a server already running is stopped, so later connections are refused like a dead process's port;
- `dead` phase (the engine died, the API process still up): /health 503, chat 500 (stand-in's
  EngineDeadError answers);
- `stall` / `spin` (a collective that never completes): requests hang (stand-in's desync).

The requests the scripted log shows served (its `POST /v1/chat/completions ... 200 OK` lines,
``timeline.served_requests``) are counted by the server as if it had answered them, before every
request it answers, and the gauges (requests running, KV use) of its last metrics line are reported
beside the server's own: /metrics (the SERVE line) and the log tell one story.

The reasoning field names follow the scenario's vLLM version (``reasoning_fields``).
"""

from __future__ import annotations

import logging
import math
import re
import socket
import threading
from http.server import ThreadingHTTPServer
from types import SimpleNamespace
from typing import TYPE_CHECKING

from ..nodes.base import NodeError
from . import physics
from .script import VLLM_VERSION
from .timeline import QUANTUM, scripted_gauges, served_requests, serve_schedule
from .standin_http import Engine, make_handler

if TYPE_CHECKING:
    from .node import SimNode

log = logging.getLogger(__name__)

# vLLM renamed the chat answer's `reasoning_content` to `reasoning`:
# - vllm-project/vllm#27752 (RFC #27755, Oct 2025) added `reasoning` and kept sending
#   `reasoning_content` beside it for compatibility; first released in v0.11.1;
# - from 0.17 only `reasoning` is sent (reasoning_content removed, vllm#33402; reported in
#   vllm#36730 and by clients: langgenius/dify-official-plugins#2740 "0.17.1 ... changed the field").
# The real 0.32 CPU build of the test bed's real-vLLM scenario sends only `reasoning` too.
BOTH_FROM = (0, 11, 1)
REASONING_ONLY_FROM = (0, 17)


def version_tuple(version: str) -> tuple[int, ...]:
    """(0, 17, 1) from '0.17.1rc1.dev25+g1a629ce0d' or 'v0.14.0rc2'."""
    m = re.match(r"v?(\d+(?:\.\d+)*)", version.strip())
    if not m:
        raise ValueError(f"not a vLLM version: {version!r}")
    return tuple(int(p) for p in m.group(1).split("."))


def reasoning_fields(version: str) -> str:
    """The stand-in's SPARKTUI_STANDIN_REASONING_FIELDS value a vLLM of ``version`` behaves as."""
    v = version_tuple(version)
    if v >= REASONING_ONLY_FROM:
        return "reasoning"
    if v >= BOTH_FROM:
        return "both"
    return "reasoning_content"


class _QuietLog:
    """The Engine's log sink: the demo's container log is scripted (timeline.py); of what the server
    logs only the access lines of the requests it answers (a prompt, a load test) join it, through
    ``played`` (the node's live source), with the scripted lines' pid.  Its own /metrics and /health
    GETs (the scrape every few seconds) are left out, as the scripted log leaves them out."""

    def __init__(self, version: str, played=None) -> None:
        self.vars = {"vllm_version": version}
        self.blocks: dict = {"blocks": {}, "standin": {}}
        self.played = played

    def line(self, text: str) -> None:
        log.debug("sim api: %s", text)
        if self.played is not None and '"POST ' in text:
            self.played(re.sub(r"^\(APIServer pid=\d+\)", "(APIServer pid=1)", text))

    def block(self, *a, **kw) -> None:
        return None

    def render(self, tmpl: str, **extra) -> str:
        return tmpl


class _Server(ThreadingHTTPServer):
    """Handler threads are daemons (a forgotten close never blocks the interpreter's exit) but are
    tracked, so ``SimServer.close`` can cut their connections and join them."""

    def __init__(self, addr, handler) -> None:
        self.conns: set[socket.socket] = set()
        self.threads: set[threading.Thread] = set()
        self.conns_lock = threading.Lock()
        super().__init__(addr, handler)

    def process_request(self, request, client_address) -> None:
        t = threading.Thread(target=self.process_request_thread, args=(request, client_address),
                             name="sim-api-request", daemon=True)
        with self.conns_lock:
            self.conns.add(request)
            self.threads = {x for x in self.threads if x.is_alive()}
            self.threads.add(t)
        t.start()

    def shutdown_request(self, request) -> None:
        with self.conns_lock:
            self.conns.discard(request)
        super().shutdown_request(request)

    def drop_connections(self) -> None:
        """Cut open connections (keep-alive, or a request still being answered), as a process exit does."""
        with self.conns_lock:
            conns = list(self.conns)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def join_handlers(self, timeout: float = 5.0) -> None:
        with self.conns_lock:
            threads = list(self.threads)
        me = threading.current_thread()
        for t in threads:
            if t is not me:
                t.join(timeout)

    def handle_error(self, request, client_address) -> None:
        # a client gone mid-answer is normal; never print tracebacks over the TUI
        log.debug("sim api: request from %s failed", client_address, exc_info=True)


class SimServer:
    """One node's in-process API server; started by ``ensure``, stopped by ``close``."""

    def __init__(self, node: "SimNode") -> None:
        self.node = node
        self.httpd: _Server | None = None
        self.thread: threading.Thread | None = None
        self.engine: Engine | None = None
        self.lock = threading.RLock()  # ensure() may stop a server inline
        self.closed = False
        self.scripted = 0  # scripted requests the running engine has counted (play_scripted)
        self._gen_t: float | None = None  # the log time generation tokens were counted up to

    # ------------------------------------------------------------------ what the timeline says
    def state(self) -> str:
        """down (nothing listens) | up | dead (engine died, API up) | stuck (collective hang)."""
        node = self.node
        scene = node.cluster.scene  # times are the same as the live scene's; reading it starts no clock
        if scene.serve is None or scene.serve[0] != node.name:
            return "down"
        t = node.now_t()
        ex = scene.exits.get(node.name)
        if ex is not None and t >= ex[0]:
            return "down"
        phases = scene.phases.get(node.name, [])
        listen = next((p.at for p in phases if p.name == "serving"), scene.serve[1])
        if t < listen:
            return "down"
        phase, _ = physics._phase_at(phases, t)
        if phase == "dead":
            return "dead"
        if phase in ("stall", "spin"):
            return "stuck"
        return "up"

    def sync(self, inline: bool = False) -> str:
        """Bring the engine in line with the timeline; called per request and per local_port."""
        st = self.state()
        eng = self.engine
        if eng is not None:
            if st == "dead":
                eng.dead = True
            elif st == "stuck":
                eng.fault, eng.fault_after = "desync", 0  # the next request never returns
        if st == "down" and self.httpd is not None:
            # the API process is gone: stop listening (off this thread when a handler is the caller)
            if inline:
                self._stop()
            else:
                threading.Thread(target=self._stop, name="sim-api-stop", daemon=True).start()
        return st

    def play_scripted(self) -> int:
        """Count into the engine the requests the scripted log has shown served by now (the log's time:
        the live sources emit whole quanta); the number counted so far."""
        node = self.node
        scene = node.cluster.scene
        with self.lock:
            eng = self.engine
            if eng is None:
                return 0
            t = math.floor(node.now_t() / QUANTUM + 1e-9) * QUANTUM
            times = served_requests(scene, node.name, t)
            sched = serve_schedule(scene, node.name)
            if sched is not None and len(times) > self.scripted:
                _, acc, per = sched
                span = acc * per / max(1, per - 1)  # seconds of traffic each scripted request stands for
                for at in times[self.scripted:]:
                    # prompt tokens at the rate the log's `Avg prompt throughput` prints
                    # (timeline._serve_lines), taken in when the request is
                    eng.count(round(physics.serving_load(node.name, at) * 1850 * span), 0, "stop")
            self.scripted = max(self.scripted, len(times))
            # a hung or dead engine runs nothing of the script's: its gauges are the server's own
            gauges = scripted_gauges(scene, node.name, t) if self.state() == "up" else None
            now = node.now_t()
            with eng.lock:
                eng.scripted_running = gauges[0] if gauges else 0
                eng.scripted_kv = gauges[1] / 100 if gauges else 0.0
                if gauges and gauges[0] and self._gen_t is not None and now > self._gen_t:
                    # while requests run, a real engine generates all the time, not when a request ends:
                    # the counter moves with the running ones (a still counter beside running requests
                    # is what a hang looks like, and `investigate` says so)
                    eng.gen_tokens += round(physics.serving_load(node.name, now) * 62 * (now - self._gen_t))
            self._gen_t = now
            return self.scripted

    # ------------------------------------------------------------------ lifecycle
    def ensure(self) -> int:
        """The port on 127.0.0.1 the API server listens on; NodeError when none listens now."""
        node = self.node
        cfg = node.cluster.config.cluster
        with self.lock:
            if self.closed or node.closed:
                raise NodeError(f"{node.name}: node closed")
            st = self.sync(inline=True)
            if st == "down":
                raise NodeError(f"{node.name}: cannot connect to port {cfg.serve_port}: Connection refused")
            if self.httpd is None:
                self._start()
            assert self.httpd is not None
            return self.httpd.server_address[1]

    def _start(self) -> None:
        node = self.node
        cl = node.cluster.config.cluster
        scene = node.cluster.scene
        version = str(scene.params.get("vllm_version", VLLM_VERSION))
        model = cl.served_model or cl.model_mount or cl.model_path or "/models/model"  # as script.py's serve args
        args = SimpleNamespace(model_tag=model, served_model_name=None, max_model_len=cl.max_model_len or 32768,
                               api_key=None, reasoning_parser=scene.params.get("reasoning_parser", "qwen3"))
        engine = Engine(args, _QuietLog(version, lambda text: node.cluster.play_line(node.name, text)), "", fields=reasoning_fields(version), fault_after=1)
        engine.exit = lambda code: self._engine_exit()
        base = make_handler(engine)
        sim = self

        class Handler(base):  # type: ignore[misc,valid-type]
            timeout = 120  # an idle keep-alive connection does not hold a thread for ever

            def handle_one_request(self) -> None:
                # a request that arrives after the timeline killed the API process gets no answer
                if sim.sync() == "down":
                    self.close_connection = True
                    return
                sim.play_scripted()
                super().handle_one_request()

        httpd = _Server(("127.0.0.1", 0), Handler)
        th = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                              name=f"sim-api-{node.name}", daemon=True)
        self.engine, self.httpd, self.thread = engine, httpd, th
        self.scripted = 0  # a fresh engine counts the scripted requests from the start of the log
        self.sync()
        th.start()

    def _engine_exit(self) -> None:
        # a fatal stand-in fault (worker death, RPC timeout) ends the API process: stop listening
        if self.engine is not None:
            self.engine.dead = True
        threading.Thread(target=self._stop, name="sim-api-stop", daemon=True).start()

    def _stop(self) -> None:
        with self.lock:
            httpd, th, engine = self.httpd, self.thread, self.engine
            self.httpd = self.thread = self.engine = None
        if httpd is None:
            return
        httpd.shutdown()
        httpd.server_close()  # the port is free: new connections are refused
        httpd.drop_connections()  # clients see the connection drop, not an answer
        if engine is not None:
            engine.stuck.set()  # let requests held by a simulated desync end (into the closed socket)
        httpd.join_handlers()
        if th is not None and th is not threading.current_thread():
            th.join()

    def close(self) -> None:
        with self.lock:
            self.closed = True
        self._stop()
