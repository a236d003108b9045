"""The drills as data: what each injects, which findings name it rightly, and its budget.

The code of a drill is only its fault (run.py FAULTS, keyed by ``fault``).  ``expected`` empty means a
healthy drill: nothing may be raised as an error, nothing ranked first as a hang.
``must``: the channels that have to give the right answer for the drill to pass (others are only
reported): ``engine`` (the TUI's headless engine: the first finding ranked first), ``status``
(`sparktui status --json`), ``action`` (the launch / push that met the fault, its --json findings),
``investigate`` (its exit code and verdict: ``investigate`` says which).
"""

from __future__ import annotations

from dataclasses import dataclass, field

CHANNELS = ("engine", "status", "investigate", "action")
BUDGET_S = 60.0  # no drill over this (issue 29)
MEDIAN_BUDGET_S = 30.0  # the median fault-to-verdict


@dataclass(frozen=True)
class Drill:
    name: str
    fault: str  # a key of run.FAULTS
    what: str  # one line: the fault as an operator would describe it
    expected: tuple[str, ...]  # finding ids that name the fault rightly (empty: healthy)
    must: tuple[str, ...] = ("engine", "status")
    investigate: str | None = "problem"  # "healthy" | "problem" | None (not asked: nothing runs)
    budget_s: float = BUDGET_S
    cluster: dict = field(default_factory=dict)  # [cluster] keys for the drill's config
    node_env: dict = field(default_factory=dict)  # node name -> env added to that node's launch env
    minutes: float = 0.0  # healthy drills: how long the mixed load and idle run

    @property
    def healthy(self) -> bool:
        return not self.expected


_DEAD = ("worker_died", "half_cluster")
_ALL = ("engine", "status", "investigate")

DRILLS: tuple[Drill, ...] = (
    Drill("healthy-10min", "mixed_load", "launch, then 10 minutes of load tests, prompts and idle", (),
          must=("engine", "status", "investigate"), investigate="healthy", minutes=10.0),
    # a death is named by every channel that looks: the engine, status, and investigate (which reads the
    # cluster's containers: a rank whose container is gone left no process to find)
    Drill("worker-killed", "kill_worker", "docker kill -s KILL of the rank-1 container while idle", _DEAD,
          must=_ALL),
    Drill("worker-killed-under-load", "kill_worker_under_load",
          "docker kill -s KILL of the rank-1 container during a load test", _DEAD, must=_ALL),
    Drill("head-killed", "kill_head", "docker kill -s KILL of the head (rank-0) container while idle", _DEAD,
          must=_ALL),
    # the bed's nodes share the host's loopback (fabric_if = "lo" on every node), so any interface with
    # an address reaches the peer: the wrong one is an existing interface without an IPv4 address.  The
    # launch's preflight reads each node's addresses and refuses it before any container starts (it used
    # to start, and Gloo's own error came 42-62 s later), so, as port-taken, the launch says it
    Drill("wrong-gloo-interface", "wrong_interface",
          "spark2's GLOO/NCCL socket interface set to an existing one that cannot reach the peer",
          ("wrong_network_interface", "rendezvous_timeout"), must=("action",), investigate=None),
    # refused at the launch's preflight: no container starts, so the engine (which watches containers and
    # their logs) has nothing to see; the launch that refused says it, in the CLI and in the TUI alike
    Drill("port-taken", "port_taken", "the serve port is held by another process before launch", ("port_in_use",),
          must=("action",), investigate=None),
    # refused at the preflight too (the CPU build's KV cache against the node's MemAvailable): vLLM's own
    # error came after its imports and the weights, 45-66 s, at the edge of the 60 s budget
    Drill("kv-too-big", "kv_too_big", "a KV cache larger than the host's memory", ("kv_cache_oom",),
          must=("action",), investigate=None),
    Drill("unknown-architecture", "unknown_arch", "a model whose architecture the image's vLLM does not know",
          ("unsupported_architecture",), must=("action", "engine"), investigate=None),
    Drill("stale-container", "stale_container", "a container with the cluster's name left on spark2",
          ("stale_container",), must=("action", "status"), investigate=None),
    Drill("node-unreachable", "sshd_stopped", "spark2's sshd stopped while the launch starts the containers",
          ("half_cluster", "launcher_ssh_failed", "rendezvous_timeout"), must=("status",),
          cluster={"ready_timeout": 300.0}),
    Drill("dockerd-restart", "restart_dockerd", "spark2's dockerd restarted mid-serve (live-restore: serving goes on)",
          (), must=("engine", "status", "investigate"), investigate="healthy"),
    # the live stall detector's classic hang: every container running, one rank stuck (SIGSTOP) right
    # after it joined the rendezvous, rank 0 waiting for it; the node pressure of the start-up falls
    # once both wait, so the 10 s threshold comes back (diagnosis/stall_phases.toml [pressure])
    Drill("rank-stopped-at-rendezvous", "rank_stopped",
          "spark2's worker SIGSTOPped right after it joined the rendezvous (launch under way)",
          ("suspected_hang", "rendezvous_timeout", "nccl_init_hang"), must=("engine",), investigate=None),
    Drill("disk-full", "disk_full", "push-image to spark2 whose Docker data root is a 64 MB tmpfs",
          ("image_push_failed",), must=("action",), investigate=None),
)


def by_name(name: str) -> Drill:
    for d in DRILLS:
        if d.name == name:
            return d
    raise KeyError(f"no drill {name!r} (have: {', '.join(d.name for d in DRILLS)})")


def select(names: list[str]) -> list[Drill]:
    """The drills named (``all`` or none: every one), in the table's order; an unknown name: KeyError."""
    if not names or names == ["all"]:
        return list(DRILLS)
    wanted = [by_name(n) for n in names]
    return [d for d in DRILLS if d in wanted]
