"""Image push node->node on the test bed: sparktui's push-image vs the plain
`docker save IMAGE | ssh peer docker load` run on the same source node to the same peer.

Both start from the same state (image absent on the target) and alternate; figures are medians of
>= 5 runs.  Budget: push throughput >= 0.95 x the plain pipeline, measured with ``--full`` (the
same bytes both ways).  Then the default push of a patched image (vllm-node plus a 50 MB layer)
to a target that holds vllm-node, which sends only the new layer, against the plain pipeline.  Brings up its own test bed
(scripts/testbed up --scenario seed) unless SPARKTUI_BENCH_BED / SPARKTUI_BENCH_NET name a seeded one.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTBED = ROOT / "scripts" / "testbed"
IMAGE = "vllm-node"
PATCHED = "bench-patched"
RUNS = 5


def _bed() -> tuple[Path, dict, bool]:
    d = os.environ.get("SPARKTUI_BENCH_BED")
    env = {**os.environ, "SPARKTUI_TESTBED_DIR": d or f"/tmp/tbb-{os.getpid()}",
           "SPARKTUI_TESTBED_NET": os.environ.get("SPARKTUI_BENCH_NET") or f"127.67.{os.getpid() % 250}"}
    own = not d
    if own or not (Path(env["SPARKTUI_TESTBED_DIR"]) / "cluster.toml").exists():
        subprocess.run([str(TESTBED), "up", "--scenario", "seed"], env=env, check=True, capture_output=True, timeout=900)
    return Path(env["SPARKTUI_TESTBED_DIR"]), env, own


async def _alternate(config, nodes, push, image: str, drop) -> tuple[list[float], list[float], list]:
    """RUNS rounds of the plain pipeline and ``push`` in alternating order, ``drop()`` before each;
    returns both sets of times and push's copy steps."""
    from sparktui.actions.base import ActionContext

    src, dst = push.source, push.targets[0]
    ssh_args = push._ssh_args(ActionContext(config, nodes), dst)
    plain, ours, steps = [], [], []
    for i in range(RUNS):
        for kind in (("plain", "ours") if i % 2 == 0 else ("ours", "plain")):
            await drop()
            t0 = time.perf_counter()
            if kind == "plain":
                r = await nodes[src].run(
                    ["bash", "-c", 'set -o pipefail; img=$1; shift; docker save "$img" | ssh "$@"', "bench",
                     image, *ssh_args], timeout=600)
                assert r.ok, r.err_text
                plain.append(time.perf_counter() - t0)
            else:
                res = await push.run(ActionContext(config, nodes, assume_yes=True))
                assert res.ok, res.summary
                ours.append(time.perf_counter() - t0)
                steps.append(next(s for s in res.steps if s.name.startswith("push ")))
    return plain, ours, steps


async def _measure(cfg_path: Path) -> tuple[list[float], list[float], list[float], int]:
    sys.path.insert(0, str(ROOT))
    from sparktui.actions.cli_runner import make_nodes
    from sparktui.actions.push import PushImageAction
    from sparktui.config import load_config
    from sparktui.probes.image import inspect_image

    config = load_config(cfg_path)
    nodes = make_nodes(config)
    src, dst = config.nodes[0], config.nodes[1]
    size = (await inspect_image(nodes[src.name], IMAGE)).size
    dclient = await nodes[dst.name].docker()

    async def drop() -> None:
        await asyncio.to_thread(lambda: dclient.api.remove_image(IMAGE, force=True))

    try:
        push = PushImageAction(image=IMAGE, source=src.name, targets=[dst.name], full=True)
        plain, ours, steps = await _alternate(config, nodes, push, IMAGE, drop)
    finally:
        for n in nodes.values():
            await n.close()
    return plain, ours, [s.finished - s.started for s in steps], size


async def _measure_patched(cfg_path: Path, bed: Path) -> tuple[list[float], list[float], int, int]:
    """The story's push: a patched image whose base the target holds, default push vs plain."""
    from sparktui.actions.base import ActionContext
    from sparktui.actions.cli_runner import make_nodes
    from sparktui.actions.push import PushImageAction
    from sparktui.config import load_config

    config = load_config(cfg_path)
    src, dst = config.nodes[0], config.nodes[1]
    sock = lambda n: f"unix://{bed}/nodes/{n}/docker.sock"  # noqa: E731
    subprocess.run(["docker", "-H", sock(src.name), "build", "-q", "-t", PATCHED, "-"], check=True, capture_output=True,
                   input=f"FROM {IMAGE}\nRUN head -c 50M /dev/urandom > /patch.bin\n", text=True, timeout=600)
    nodes = make_nodes(config)

    async def drop() -> None:
        subprocess.run(["docker", "-H", sock(dst.name), "rmi", "-f", PATCHED], capture_output=True, timeout=120)

    try:
        # the target must hold the base: load it once whole
        assert (await PushImageAction(image=IMAGE, source=src.name, targets=[dst.name]).run(
            ActionContext(config, nodes, assume_yes=True))).ok
        push = PushImageAction(image=PATCHED, source=src.name, targets=[dst.name])
        plain, ours, steps = await _alternate(config, nodes, push, PATCHED, drop)
        size = json.loads(subprocess.run(["docker", "-H", sock(src.name), "image", "inspect", "--format",
                                          "{{json .Size}}", PATCHED], capture_output=True, text=True).stdout)
    finally:
        for n in nodes.values():
            await n.close()
        for n in (src.name, dst.name):
            subprocess.run(["docker", "-H", sock(n), "rmi", "-f", PATCHED], capture_output=True, timeout=120)
    return plain, ours, steps[-1].data["bytes"], size


def main(args) -> list[dict]:
    bed, env, own = _bed()
    try:
        plain, ours, stream, size = asyncio.run(_measure(bed / "cluster.toml"))
        p_plain, p_ours, p_sent, p_size = asyncio.run(_measure_patched(bed / "cluster.toml", bed))
    finally:
        if own:
            subprocess.run([str(TESTBED), "down"], env=env, capture_output=True, timeout=300)
    mb = size / 1e6
    p, o, st = statistics.median(plain), statistics.median(ours), statistics.median(stream)
    ratio = p / st  # same bytes: throughput ratio = inverse ratio of the copy times
    return [
        {"what": f"push-image copy step {IMAGE} ({mb:.0f} MB) node->node, median of {RUNS}", "value": mb / st,
         "unit": "MB/s", "budget": "-", "ok": None},
        {"what": "docker save | ssh peer docker load, same pair", "value": mb / p, "unit": "MB/s", "budget": "-", "ok": None},
        {"what": "push-image copy throughput / plain pipeline", "value": ratio, "unit": "x", "budget": ">= 0.95",
         "ok": ratio >= 0.95},
        {"what": "whole push-image action (inspect + copy + ID proof) / plain", "value": p / o, "unit": "x",
         "budget": "-", "ok": None},
        {"what": f"patched image ({p_size / 1e6:.0f} MB), target holds its base: bytes sent", "value": p_sent / 1e6,
         "unit": "MB", "budget": "-", "ok": None},
        {"what": "patched image: plain pipeline / whole push-image action (speed-up)",
         "value": statistics.median(p_plain) / statistics.median(p_ours), "unit": "x", "budget": "-", "ok": None},
    ]

if __name__ == "__main__":
    for row in main(sys.argv[1:]):
        print(row)
