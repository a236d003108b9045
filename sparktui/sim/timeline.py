"""Turn a compiled Scene into the event stream of one node, advanced in fixed time quanta.

Live sources and ``SimCluster.events_until`` both advance in the same quanta, so the events a
demo shows and the events a snapshot test gets are the same sequence.
"""

from __future__ import annotations

import hashlib
import string
from ..model import (
    ContainerChanged,
    ContainerInfo,
    ContainersSnapshot,
    ContainerState,
    Event,
    GpuSample,
    LinkInfo,
    LinkSample,
    LogBatch,
    LogLine,
    MemorySample,
    NodeReachability,
)
from ..timefmt import format_ns as rfc3339_ns
from . import physics
from .script import Scene, ScriptLine, SimNodeSpec, block_lines, vts

QUANTUM = 0.25  # simulated seconds per step
# sampling periods in wall seconds (like the real collectors); scaled by speed into simulated time
SAMPLE_EVERY = 1.0  # memory + GPU
CONTAINERS_EVERY = 5.0
LINKS_EVERY = 10.0


def human_duration(sec: float) -> str:
    """Docker's units.HumanDuration (the words `docker ps` shows)."""
    s = int(sec)
    if s < 1:
        return "Less than a second"
    if s == 1:
        return "1 second"
    if s < 60:
        return f"{s} seconds"
    m = s // 60
    if m == 1:
        return "About a minute"
    if m < 60:
        return f"{m} minutes"
    h = round(s / 3600)
    if h == 1:
        return "About an hour"
    if h < 48:
        return f"{h} hours"
    if h < 24 * 7 * 2:
        return f"{h // 24} days"
    if h < 24 * 30 * 2:
        return f"{h // 24 // 7} weeks"
    if h < 24 * 365 * 2:
        return f"{h // 24 // 30} months"
    return f"{h // 24 // 365} years"


def _id(seed: str) -> str:
    return hashlib.sha256(seed.encode()).hexdigest()


class NodeTimeline:
    """Stateful generator of one node's events; ``advance(t1)`` returns those in (t, t1]."""

    def __init__(self, scene: Scene, spec: SimNodeSpec, image: str):
        self.scene = scene
        self.spec = spec
        self.image = image
        self.start = scene.start
        self.speed = scene.speed
        self.t = -1.0  # last time covered
        self._li = 0  # next script line
        self._lines = scene.lines.get(spec.name, [])
        self._seq: dict[str, int] = {}
        self._serve_k = 0  # next serving line index
        self._exit = scene.exits.get(spec.name)
        self._exited = False

    # ------------------------------------------------------------------ facts at a time
    def gpu_proc(self) -> tuple[int, str]:
        if self.scene.world == 1:
            return self.spec.pid, "VLLM::EngineCore"
        return self.spec.pid, "ray::RayWorkerWrapper"

    def snapshot(self, t: float) -> physics.NodeSnapshot:
        pid, name = self.gpu_proc()
        return physics.snapshot(self.scene, self.spec.name, t, pid, name)

    def containers(self, t: float) -> tuple[ContainerInfo, ...]:
        spec, start, sp = self.spec, self.start, self.speed
        ex = self._exit
        if spec.head:
            cmd = (f"./run-cluster-node.sh --role head --host-ip {spec.ip} --eth-if {spec.ifname} "
                   f"--ib-if {spec.hca0},{spec.hca1}")
        else:
            head = self.scene.specs[0]
            cmd = (f"./run-cluster-node.sh --role node --host-ip {spec.ip} --eth-if {spec.ifname} "
                   f"--ib-if {spec.hca0},{spec.hca1} --head-ip {head.ip}")
        if ex is not None and t >= ex[0]:
            main = ContainerInfo(
                id=_id(f"{spec.name}/{spec.container}"), name=spec.container, image=self.image,
                image_id="sha256:" + _id("image:" + self.image), state=ContainerState.EXITED,
                status=f"Exited ({ex[1]}) {human_duration((t - ex[0]) / sp)} ago", started_at=start,
                finished_at=start + ex[0] / sp, exit_code=ex[1], command=cmd)
        else:
            main = ContainerInfo(
                id=_id(f"{spec.name}/{spec.container}"), name=spec.container, image=self.image,
                image_id="sha256:" + _id("image:" + self.image), state=ContainerState.RUNNING,
                status=f"Up {human_duration(max(0.0, t / sp))}", started_at=start, command=cmd)
        if spec.head:
            other = ContainerInfo(
                id=_id(f"{spec.name}/open-webui"), name="open-webui", image="ghcr.io/open-webui/open-webui:main",
                image_id="sha256:" + _id("image:open-webui"), state=ContainerState.RUNNING,
                status=f"Up {human_duration(3 * 86400 + 4000 + t / sp)}", started_at=start - 3 * 86400 - 4000,
                command="bash start.sh")
        else:
            other = ContainerInfo(
                id=_id(f"{spec.name}/qwen35-gb10-test"), name="qwen35-gb10-test",
                image="hellohal2064/vllm-qwen3.5-gb10:latest", image_id="sha256:" + _id("image:hellohal"),
                state=ContainerState.EXITED, status=f"Exited (1) {human_duration(5 * 3600 + t / sp)} ago",
                started_at=start - 5 * 3600 - 700, finished_at=start - 5 * 3600, exit_code=1,
                command="/entrypoint.sh vllm serve /models/model")
        return (main, other)

    def links(self) -> tuple[LinkInfo, ...]:
        spec = self.spec
        last = spec.ip.rsplit(".", 1)[-1]
        twin = spec.ip.rsplit(".", 2)
        twin_ip = f"{twin[0]}.{int(twin[1]) + 1}.{last}" if len(twin) == 3 and twin[1].isdigit() else spec.ip
        return (
            LinkInfo(spec.ifname, (f"{spec.ip}/24",), 9000, "UP", spec.hca0),
            LinkInfo("enP2p1s0f1np1", (f"{twin_ip}/24",), 9000, "UP", spec.hca1),
            LinkInfo("enP7s7", (f"10.1.230.{180 + spec.index}/24",), 1500, "UP", None),
        )

    # ------------------------------------------------------------------ stream
    def _line(self, ln: ScriptLine) -> LogLine:
        seq = self._seq.get(ln.source, 0) + 1
        self._seq[ln.source] = seq
        ts = self.scene.epoch(ln.t)
        return LogLine(node=self.spec.name, source=ln.source, text=ln.text, ts=ts, seq=seq, raw_ts=rfc3339_ns(ts))

    def played_batch(self, lines: list[tuple[float, str]]) -> LogBatch:
        """Lines the node's API server wrote at times ``lines[i][0]`` (sim/serving.py), as the cluster
        container's log: numbered after the scripted lines emitted so far."""
        out = tuple(self._line(ScriptLine(t, self.spec.container, text)) for t, text in lines)
        return LogBatch(node=self.spec.name, source=self.spec.container, lines=out, ts=out[-1].ts)

    def _serve_lines(self, t1: float) -> list[ScriptLine]:
        sched = serve_schedule(self.scene, self.spec.name)
        if sched is None:
            return []
        at, acc, per = sched
        out = []
        while True:
            k = self._serve_k
            t = at + k * acc
            if t > t1:
                break
            self._serve_k += 1
            r = physics._rng(self.spec.name, t, "serve")
            vals = {"apipid": 1, "vts": vts(self.scene.epoch(t)), "client_port": 40000 + r.randrange(20000)}
            if not is_access(k, per):
                ld = physics.serving_load(self.spec.name, t)
                running, kv_pct = serving_gauges(ld)
                vals.update(prompt_tps=f"{ld * 1850 * r.uniform(0.8, 1.2):.1f}",
                            gen_tps=f"{ld * 62 * r.uniform(0.9, 1.1):.1f}", running=running,
                            kv_usage=f"{kv_pct:.1f}", prefix_hit=f"{30 + 40 * r.random():.1f}")
                text = string.Template(block_lines("serve_metrics")[0]).substitute(vals)
            else:
                text = string.Template(block_lines("serve_access")[0]).substitute(vals)
            out.append(ScriptLine(t, self.spec.container, text))
        return out

    def advance(self, t1: float) -> list[Event]:
        """Events with time in (self.t, t1], in time order."""
        t0 = self.t
        if t1 <= t0:
            return []
        items: list[tuple[float, int, Event]] = []
        st = self.start
        ep = self.scene.epoch
        name = self.spec.name
        if t0 < 0 <= t1:
            items.append((0.0, 0, NodeReachability(node=name, reachable=True, ts=st, backend="sim")))
            items.append((0.0, 1, ContainersSnapshot(node=name, containers=self.containers(0.0), ts=st)))
            items.append((0.0, 2, LinkSample(node=name, links=self.links(), ts=st)))
            # docker's `start` event of the cluster container
            items.append((0.0, 2, ContainerChanged(node=name, container=self.containers(0.0)[0], ts=st)))
        for k in _multiples(t0, t1, CONTAINERS_EVERY * self.speed, skip_zero=True):
            items.append((k, 1, ContainersSnapshot(node=name, containers=self.containers(k), ts=ep(k))))
        for k in _multiples(t0, t1, LINKS_EVERY * self.speed, skip_zero=True):
            items.append((k, 2, LinkSample(node=name, links=self.links(), ts=ep(k))))
        if self._exit is not None and t0 < self._exit[0] <= t1:
            ex = self._exit[0]
            main = self.containers(ex)[0]
            items.append((ex, 1, ContainerChanged(node=name, container=main, ts=ep(ex))))
        for k in _multiples(t0, t1, SAMPLE_EVERY * self.speed):
            snap = self.snapshot(k)
            items.append((k, 3, MemorySample(node=name, memory=snap.memory, ts=ep(k))))
            items.append((k, 4, GpuSample(node=name, gpus=(snap.gpu,), ts=ep(k))))
        # log lines: batch consecutive lines of one source
        lines: list[ScriptLine] = []
        while self._li < len(self._lines) and self._lines[self._li].t <= t1:
            lines.append(self._lines[self._li])
            self._li += 1
        lines.extend(self._serve_lines(t1))
        if self._exit is not None:
            lines = [ln for ln in lines if ln.source != self.spec.container or ln.t <= self._exit[0]]
        batch: list[LogLine] = []
        batch_t = 0.0
        for ln in lines:
            if batch and batch[-1].source != ln.source:
                items.append((batch_t, 5, LogBatch(node=name, source=batch[0].source, lines=tuple(batch),
                                                   ts=batch[-1].ts)))
                batch = []
            if not batch:
                batch_t = ln.t
            batch.append(self._line(ln))
        if batch:
            items.append((batch_t, 5, LogBatch(node=name, source=batch[0].source, lines=tuple(batch),
                                               ts=batch[-1].ts)))
        self.t = t1
        items.sort(key=lambda it: (it[0], it[1]))
        return [ev for _, _, ev in items]


def serve_schedule(scene: Scene, node: str) -> tuple[float, float, int] | None:
    """(first line's time, seconds between lines, lines per metrics line) of ``node``'s scripted serving
    log, None when it does not serve.  Index k walks a merged schedule: line k is at ``at + k * acc``, a
    metrics line every ``per`` lines (one per `serve_every`), access lines between."""
    sv = scene.serve
    if sv is None or sv[0] != node:
        return None
    every = float(scene.params.get("serve_every", 10.0))
    acc = float(scene.params.get("access_every", 2.5))
    return sv[1], acc, max(1, int(every / acc))


def is_access(k: int, per: int) -> bool:
    """Line k of the serving schedule is a request's access line (else the periodic metrics line)."""
    return k % per != 0


def serving_gauges(load: float) -> tuple[int, float]:
    """(requests running, KV cache usage in percent) a scripted metrics line prints at ``load``."""
    return max(1, round(load * 4)), load * 9.5


def scripted_gauges(scene: Scene, node: str, t: float) -> tuple[int, float] | None:
    """The gauges of the last metrics line ``node``'s scripted log printed by ``t`` (None before the
    first): what the stand-in API's /metrics reports beside the requests it answers itself."""
    sched = serve_schedule(scene, node)
    ex = scene.exits.get(node)
    if sched is None or (ex is not None and t >= ex[0]):
        return None
    at, acc, per = sched
    if t < at:
        return None
    k = int((t - at) / acc)
    while k > 0 and at + k * acc > t:  # the comparison _serve_lines makes
        k -= 1
    k -= k % per  # metrics lines are the multiples of per
    return serving_gauges(physics.serving_load(node, at + k * acc))


def served_requests(scene: Scene, node: str, t: float) -> list[float]:
    """The times of the requests ``node``'s scripted log has shown served ("POST ... 200 OK") by simulated
    time ``t``: the same schedule as NodeTimeline._serve_lines, so the stand-in API's counters
    (sim/serving.py) and the log agree (the SERVE line reads the former)."""
    sched = serve_schedule(scene, node)
    if sched is None:
        return []
    at, acc, per = sched
    ex = scene.exits.get(node)
    if ex is not None:
        t = min(t, ex[0])  # the log stops at the exit (advance drops later lines)
    out = []
    k = 0
    while at + k * acc <= t:  # the comparison _serve_lines makes, so both agree at the boundary
        if is_access(k, per):
            out.append(at + k * acc)
        k += 1
    return out


def _multiples(t0: float, t1: float, step: float, skip_zero: bool = False) -> list[float]:
    import math

    k = math.floor(t0 / step + 1e-9) + 1 if t0 >= 0 else 0
    out = []
    while k * step <= t1 + 1e-9:
        if not (skip_zero and k == 0):
            out.append(round(k * step, 6))
        k += 1
    return out
