#!/usr/bin/env python3
"""Record what the REAL vLLM prints when it fails, as diagnosis fixtures (tests/fixtures/vllm-cpu/).

    record_vllm_failures.py BED_DIR [OUT_DIR]

Needs a bed made with `scripts/testbed up --scenario real-vllm`.  Each case starts the real server in
a container on spark1 the way `sparktui validate` does, waits for it to exit, and keeps its log with
the bed's paths rewritten to neutral ones (/models/...).  Cases:

    unsupported_architecture  the tiny model whose config names an architecture vLLM lacks
    kv_cache_oom              VLLM_CPU_KVCACHE_SPACE larger than this machine's memory
    port_in_use               the serve port already held by another listener
    broken_install            the image with a torchvision built for another torch
    shm_too_small             docker's default 64 MiB /dev/shm (no --ipc host)

and two healthy start-ups stopped on purpose (what a stop asked for during start-up prints: the
counterpart of reading a hang that a person ended with Ctrl+C):

    stopped_startup_sigint    SIGINT (Ctrl+C) once the weights are loaded, before the server is up
    stopped_startup_docker_stop  `docker stop` at the same point: SIGTERM, which the server (PID 1 of
                              its container, no handler for it yet) ignores; it came up, and the
                              SIGKILL 10 s later left no line (exit 137)
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    bed = Path(argv[0])
    out = Path(argv[1]) if len(argv) > 1 else ROOT / "tests" / "fixtures" / "vllm-cpu"
    info = json.loads((bed / "real-vllm.json").read_text())
    sock = bed / "nodes" / "spark1" / "docker.sock"
    models = Path(info["models"])
    total_gib = int(Path("/proc/meminfo").read_text().split()[1]) // (1 << 20)

    def docker(*args: str, **kw) -> subprocess.CompletedProcess:
        return subprocess.run(["docker", "-H", f"unix://{sock}", *args], capture_output=True, text=True, **kw)

    def free_port() -> int:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]

    cases = {
        "unsupported_architecture": dict(model="tiny-newarch"),
        "kv_cache_oom": dict(env={"VLLM_CPU_KVCACHE_SPACE": str(total_gib * 4)}),
        "port_in_use": dict(hold_port=True),
        "broken_install": dict(image=info["broken_image"]),
        "shm_too_small": dict(ipc_host=False),
        "stopped_startup_sigint": dict(stop_at="Loading weights took", signal="INT"),
        "stopped_startup_docker_stop": dict(stop_at="Loading weights took", signal="stop"),
    }
    only = set(argv[2:])
    out.mkdir(parents=True, exist_ok=True)
    for name, case in cases.items():
        if only and name not in only:
            continue
        port = free_port()
        holder = None
        if case.get("hold_port"):
            holder = socket.socket()
            holder.bind(("127.0.0.1", port))
            holder.listen()
        cname = f"record-{name}"
        docker("rm", "-f", cname)
        env = {"VLLM_CPU_KVCACHE_SPACE": "1", **case.get("env", {})}
        args = ["run", "-d", "--name", cname, "--network", "host"]
        if case.get("ipc_host", True):
            args += ["--ipc", "host"]
        for k, v in env.items():
            args += ["-e", f"{k}={v}"]
        args += ["-v", f"{models / case.get('model', 'tiny-reason')}:/models/tiny:ro", case.get("image", info["image"]),
                 "vllm", "serve", "/models/tiny", "--host", "127.0.0.1", "--port", str(port), "--max-model-len", "512",
                 "--enforce-eager", "--served-model-name", "tiny"]
        t0 = time.monotonic()
        r = docker(*args)
        if r.returncode != 0:
            raise SystemExit(f"record: {name}: {r.stderr.strip()}")
        if case.get("stop_at"):
            while case["stop_at"] not in (lambda r: r.stdout + r.stderr)(docker("logs", cname)):
                if time.monotonic() - t0 > 600:
                    raise SystemExit(f"record: {name}: {case['stop_at']!r} never printed")
                time.sleep(0.2)
            if case["signal"] == "stop":
                docker("stop", "--time", "10", cname)
            else:
                docker("kill", "--signal", case["signal"], cname)
        code = docker("wait", cname, timeout=600).stdout.strip()
        logs = docker("logs", "--timestamps", cname)
        # stdout and stderr merged back into one stream by the daemon's timestamps, then dropped
        stamped = sorted((logs.stdout + logs.stderr).splitlines(), key=lambda l: l.split(" ", 1)[0])
        log = "".join(l.split(" ", 1)[1] + "\n" if " " in l else "\n" for l in stamped)
        docker("rm", "-f", cname)
        if holder is not None:
            holder.close()
        log = log.replace(str(bed), "/bed").replace(str(models), "/models")
        log = re.sub(rf"\b{port}\b", "8000", log)  # the random port, as the default one
        path = out / f"{name}.log"
        path.write_text(log)
        print(f"record: {name}: exit {code} after {time.monotonic() - t0:.0f} s, {len(log.splitlines())} lines -> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
