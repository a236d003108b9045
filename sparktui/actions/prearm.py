"""Pre-armed launches: the env and container options every cluster launch gets, so that a hang
can be investigated live without a restart: NCCL and torch read these settings only when a rank starts,
so they must be in place before the hang, not added once it is seen.

``prearm(config)`` is the one place these are decided; the launcher adds ``env`` to every rank's
environment and ``docker_args`` to every ``docker run``.  NCCL's debug files and Flight Recorder
dumps go to ``run_dir(config)`` on each node, which the investigation reads even after a rank died.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..config import Config

RUNS_ROOT = "/tmp/sparktui-runs"


def run_dir(config: Config) -> str:
    """Where a cluster's NCCL debug files and FR dumps live on every node (and in its containers)."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", config.cluster.name) or "cluster"
    return f"{RUNS_ROOT}/{name}"


@dataclass(frozen=True)
class Prearm:
    env: dict[str, str]
    docker_args: list[str] = field(default_factory=list)
    run_dir: str = ""


def prearm(config: Config, *, directory: str | None = None, fr_buffer: int = 2000) -> Prearm:
    d = directory or run_dir(config)
    env = {
        # logging: enough to see bootstrap/transport decisions, with timestamps to merge nodes
        "NCCL_DEBUG": config.cluster.nccl_debug or "INFO",
        "NCCL_DEBUG_SUBSYS": "INIT,BOOTSTRAP,NET,ENV",
        "NCCL_DEBUG_FILE": f"{d}/nccl_%h_%p.log",
        "NCCL_DEBUG_TIMESTAMP_LEVELS": "WARN,INFO",
        "NCCL_DEBUG_TIMESTAMP_FORMAT": "[%F %T.%3f] ",
        # live hooks: RAS on :28028, ACTIVE OPS on SIGUSR1, named threads for /proc
        "NCCL_RAS_ENABLE": "1",
        "NCCL_PROXY_DUMP_SIGNAL": "10",
        "NCCL_SET_THREAD_NAME": "1",
        # Flight Recorder, old and new names (the buffer must exist before the PG is made)
        "TORCH_FR_BUFFER_SIZE": str(fr_buffer),
        "TORCH_NCCL_TRACE_BUFFER_SIZE": str(fr_buffer),
        "TORCH_NCCL_DUMP_ON_TIMEOUT": "1",
        "TORCH_NCCL_ENABLE_MONITORING": "1",
        "TORCH_FR_DUMP_TEMP_FILE": f"{d}/fr_",
        "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": f"{d}/fr_",
        "TORCH_NCCL_DEBUG_INFO_PIPE_FILE": f"{d}/frpipe_",
    }
    docker_args = [
        "--network", "host", "--ipc", "host",
        "--cap-add", "IPC_LOCK", "--cap-add", "SYS_PTRACE",  # py-spy inside the container needs ptrace
        "--ulimit", "memlock=-1", "--ulimit", "stack=67108864",
        "-v", f"{d}:{d}",  # debug files land on the host: readable after the container is gone
    ]
    if any(n.ib_hcas for n in config.nodes):
        docker_args += ["--device", "/dev/infiniband"]  # RoCE inside the container, else NET/Socket
    return Prearm(env=env, docker_args=docker_args, run_dir=d)


def docker_env_args(p: Prearm) -> list[str]:
    """``-e NAME=value`` pairs for ``docker run`` (argument list; never a shell string)."""
    out: list[str] = []
    for k, v in p.env.items():
        out += ["-e", f"{k}={v}"]
    return out
