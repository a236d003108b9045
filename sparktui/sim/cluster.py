"""SimCluster: the embedded demo cluster (nodes from the config, scenario from scripts/).

    sim = SimCluster(demo_config(), "healthy", speed=1.0)
    Engine(config, sim.sources(), processors=[...])      # live: events as simulated time passes
    sim.events_until(30.0)                               # deterministic: the first 30 s of events
    await sim.node("spark1").run(["nvidia-smi", ...])    # probes read the same simulated state

Simulated time t runs from 0 when the cluster containers start.  Live sources share one clock
(anchored when the first source starts) and advance in the same quanta as ``events_until``.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import threading
import time
from typing import TYPE_CHECKING

from .script import Scene, compile_scene
from .timeline import QUANTUM, NodeTimeline

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from ..config import Config
    from ..model import Emit, Event
    from .node import SimNode

# Fixed epoch for events_until when no start is given, so snapshot tests see the same clock
# every run (2026-04-08 23:13:20 UTC, the evening of the story).
DEMO_EPOCH = 1775690000.0


class SimCluster:
    def __init__(self, config: "Config", scenario: str = "healthy", speed: float = 1.0,
                 start: float | None = None) -> None:
        if speed <= 0:
            raise ValueError(f"sim speed must be > 0, got {speed}")
        self.config = config
        self.scenario = scenario
        self.speed = float(speed)
        self._fixed_start = start
        self.start = start if start is not None else DEMO_EPOCH
        self.scene: Scene = compile_scene(config, scenario, self.start, self.speed)
        self._live_start: float | None = None  # wall epoch of t=0 for live sources
        self._live_scene: Scene | None = None
        self._mono0: float | None = None
        self._nodes: dict[str, "SimNode"] = {}
        # container log lines the in-process API server wrote (sim/serving.py), per node, until its live
        # source emits them; appended by the server's handler threads
        self._played: dict[str, list[tuple[float, str]]] = {}
        self._played_lock = threading.Lock()

    # ------------------------------------------------------------------ clock
    def _anchor(self) -> None:
        if self._mono0 is None:
            self._mono0 = time.monotonic()
            self._live_start = self._fixed_start if self._fixed_start is not None else time.time()
            self._live_scene = (self.scene if self._live_start == self.start
                                else compile_scene(self.config, self.scenario, self._live_start, self.speed))

    def now_t(self) -> float:
        """Simulated seconds since the containers started (0 before any source ran)."""
        if self._mono0 is None:
            return 0.0
        return (time.monotonic() - self._mono0) * self.speed

    def pin_clock(self, t: float) -> None:
        """Set the live clock so that ``now_t()`` reads ``t`` now (tests, replays of a moment)."""
        self._anchor()
        self._mono0 = time.monotonic() - t / self.speed

    def live_scene(self) -> tuple[Scene, float]:
        self._anchor()
        assert self._live_scene is not None and self._live_start is not None
        return self._live_scene, self._live_start

    @property
    def node_names(self) -> list[str]:
        return [s.name for s in self.scene.specs]

    def timeline(self, name: str, live: bool = False) -> NodeTimeline:
        scene = self.live_scene()[0] if live else self.scene
        spec = next((s for s in scene.specs if s.name == name), None)
        if spec is None:
            raise KeyError(f"no sim node {name!r} (nodes: {', '.join(self.node_names)})")
        return NodeTimeline(scene, spec, self.config.cluster.image)

    def play_line(self, node: str, text: str) -> None:
        """A line the node's cluster container logs now (its API server answered a request)."""
        with self._played_lock:
            self._played.setdefault(node, []).append((self.now_t(), text))

    def take_played(self, node: str) -> list[tuple[float, str]]:
        with self._played_lock:
            return self._played.pop(node, [])

    # ------------------------------------------------------------------ API
    def sources(self) -> list["SimSource"]:
        return [SimSource(self, n) for n in self.node_names]

    def node(self, name: str) -> "SimNode":
        from .commands import COMMANDS
        from .node import SimNode

        if name not in self._nodes:
            self.timeline(name)  # validates the name
            node = SimNode(self, name, COMMANDS)
            _add_evidence(node)
            self._nodes[name] = node
        return self._nodes[name]

    def events_until(self, t: float) -> list["Event"]:
        """All events of the first ``t`` simulated seconds, every node, in time order."""
        lines = [self.timeline(n) for n in self.node_names]
        out: list["Event"] = []
        k = 0
        while True:
            q = min(t, k * QUANTUM)
            for tl in lines:
                out.extend(tl.advance(q))
            if q >= t:
                break
            k += 1
        return out


def _add_evidence(node: "SimNode") -> None:
    """Hang evidence (sim/evidence.py) on top of the node's tools, when this build has that module;
    looked up through the import system so a build (or a test) can swap or drop it."""
    try:
        evidence = importlib.import_module(".evidence", __package__)
        if hasattr(evidence, "register"):
            evidence.register(node)
    except ModuleNotFoundError as exc:
        if exc.name != f"{__package__}.evidence":
            log.exception("sim evidence module failed to import")
    except Exception:  # a broken extension must not take the demo down
        log.exception("sim evidence module failed to register on %s", node.name)


class SimSource:
    """One node's live event source (nodes.base.EventSource)."""

    def __init__(self, cluster: SimCluster, node_name: str, tick: float = 0.1) -> None:
        self.cluster = cluster
        self.node_name = node_name
        self.tick = tick

    async def run(self, emit: "Emit") -> None:
        cl = self.cluster
        cl._anchor()
        tl = cl.timeline(self.node_name, live=True)
        k = 0
        while True:
            now = cl.now_t()
            while k * QUANTUM <= now:
                for ev in tl.advance(k * QUANTUM):
                    emit(ev)
                k += 1
            played = cl.take_played(self.node_name)
            if played:
                emit(tl.played_batch(played))
            await asyncio.sleep(self.tick)

    async def close(self) -> None:
        return None
