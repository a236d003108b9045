"""``launcher = "spark-vllm-docker"``: drive a ``launch-cluster.sh`` checkout on the head node instead of
starting the containers ourselves, without its traps:

- every option goes before ``exec`` (an unknown word ends the script's option parsing and becomes the
  command), and each word of the serve command is shell-quoted, because ``exec`` joins the words and
  hands them to ``bash -c``: pre-quoted words survive that, JSON arguments included;
- ``VLLM_SPARK_EXTRA_DOCKER_ARGS`` is word-split by the script (and again on the worker over ssh), so
  a mount or env value with whitespace cannot pass: refused with the reason, never mangled;
- it runs detached (``setsid nohup``, output to a file on the head) so the script's
  ``trap cleanup EXIT INT TERM HUP`` cannot fire when this terminal or the SSH session goes;
- the script only checks the head's ``ray status``: Ray must list every node before it counts, and the
  serve output (which the script sends to its terminal, not ``docker logs``) is followed from the file.
"""

from __future__ import annotations

import asyncio
import re
import shlex
import time
import uuid
from typing import TYPE_CHECKING

from ..model import FAIL
from ..probes.cluster import catalogued_finding
from .base import ActionContext, ActionFailed, ActionResult
from .cluster_plan import PlanError, node_ip, plan_cluster, strip_owned
from .prearm import run_dir

if TYPE_CHECKING:
    from .launch import LaunchAction

SCRIPT = "./launch-cluster.sh"
_SPACE = re.compile(r"\s")


def script_argv(ctx: ActionContext, launch_id: str) -> tuple[list[str], str]:
    """The command run on the head node (an argument list), and the file its output goes to."""
    config = ctx.config
    c = config.cluster
    head = config.head
    ordered = [head] + [n for n in config.nodes if n.name != head.name]
    ips = [node_ip(n) for n in ordered]
    mount = config.model_mount
    path = config.model_path_for(head.name)
    docker_args: list[str] = []
    if path:
        docker_args += ["-v", f"{path}:{mount}" + (":ro" if c.mount_readonly else "")]
    for k, v in c.env:
        docker_args += ["-e", f"{k}={v}"]
    bad = [a for a in docker_args if _SPACE.search(a) or not a]
    if bad:
        raise PlanError(f"launch-cluster.sh word-splits VLLM_SPARK_EXTRA_DOCKER_ARGS, so {bad[0]!r} cannot pass "
                        "(whitespace); use a path / value without spaces, or launcher = \"sparktui\"")
    if not head.fabric_if:
        raise PlanError(f"node {head.name} needs fabric_if: launch-cluster.sh --eth-if takes the head's address from it")
    model = c.served_model or mount
    extra, _ = strip_owned(tuple(c.serve_args))
    serve = ["vllm", "serve", model, "--host", c.serve_host, "--port", str(c.serve_port), "--tensor-parallel-size",
             str(config.tp), "--gpu-memory-utilization", f"{c.gpu_memory_utilization}"]
    if c.max_model_len:
        serve += ["--max-model-len", str(c.max_model_len)]
    serve += ["--distributed-executor-backend", "ray", *extra]
    opts = ["-n", ",".join(ips), "-t", c.image, "--name", c.name, "--eth-if", head.fabric_if]
    if head.ib_hcas:
        opts += ["--ib-if", ",".join(head.ib_hcas)]
    if c.nccl_debug:
        opts += ["--nccl-debug", c.nccl_debug]
    log = f"{run_dir(config)}/launcher-{launch_id}.log"
    inner = ["env", f"VLLM_SPARK_EXTRA_DOCKER_ARGS={' '.join(docker_args)}", SCRIPT, *opts, "exec",
             *(shlex.quote(w) for w in serve)]
    argv = ["sh", "-c", 'cd "$1" || exit 97; log=$2; shift 2; mkdir -p "${log%/*}"; '
            'setsid nohup "$@" >"$log" 2>&1 </dev/null & echo $!', "sparktui-launch", c.launcher_dir or "", log, *inner]
    return argv, log


class _FileTail:
    """Follows a file on a node (``tail -F``) into the engine, through the launch's watch: the
    launcher's output is a source of its own (node, file path), analysed and numbered like a log."""

    def __init__(self, node, path: str, key: str, watch) -> None:
        self.node, self.path, self.key, self.watch = node, path, key, watch
        self.task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        try:
            async for line in self.node.stream(["tail", "-n", "+1", "-F", self.path]):
                self.watch.feed(self.key, self.path, [line.decode("utf-8", "replace")])
        except Exception:  # the connection went: the watch ends on the container states or its timeout
            pass

    def stop(self) -> None:
        self.task.cancel()


async def launch_with_script(action: "LaunchAction", ctx: ActionContext) -> ActionResult:
    c = ctx.config.cluster
    if not c.launcher_dir:
        raise ActionFailed('launcher = "spark-vllm-docker" needs cluster.launcher_dir (the checkout on the head node)')
    launch_id = uuid.uuid4().hex[:12]
    try:
        plan = plan_cluster(ctx.config, launch_id=launch_id)  # the same preflight checks apply
        argv, log = script_argv(ctx, launch_id)
    except PlanError as exc:
        raise ActionFailed(f"cannot launch: {exc}") from None
    if plan.executor != "ray":
        ctx.emit("preflight", "info", "launch-cluster.sh (this version) always starts Ray: executor ray is used")
    findings: list = []
    async with ctx.step("preflight", f"{len(plan.nodes)} nodes through {c.launcher_dir}/launch-cluster.sh") as rec:
        verdict = await action._preflight(ctx, plan, findings)
        if isinstance(verdict, ActionResult):
            rec.status, rec.message = FAIL, verdict.summary
            return verdict
        _, removals = verdict
        head = ctx.nodes[plan.head.node]
        res = await head.run(["test", "-x", f"{c.launcher_dir}/launch-cluster.sh"], timeout=20)
        if not res.ok:
            rec.status, rec.message = FAIL, f"{c.launcher_dir}/launch-cluster.sh is not there (or not executable)"
            return ActionResult(action.name, False, rec.message, findings=findings)
    shown = shlex.join(argv[5:])
    detail = (f"on {plan.head.node}, detached (setsid nohup; output to {log}):\n  cd {shlex.quote(c.launcher_dir)} && "
              f"{shown}")
    title = f"Launch {plan.name} with launch-cluster.sh on {', '.join(n.node for n in plan.nodes)}?"
    if not await action._confirm_and_replace(ctx, title, detail, removals):
        return ActionResult(action.name, False, "not confirmed")
    started = time.monotonic()
    # before the script starts them: the engine's events of the containers, from their first line
    watch = ctx.watch([(np.node, np.container) for np in plan.nodes])
    try:
        return await _run_script(action, ctx, plan, argv, log, head, findings, started, watch)
    finally:
        watch.close()


async def _run_script(action: "LaunchAction", ctx: ActionContext, plan, argv: list[str], log: str, head,
                      findings: list, started: float, watch) -> ActionResult:
    c = ctx.config.cluster
    async with ctx.step("script", "launch-cluster.sh started detached", node=plan.head.node) as rec:
        res = await head.run(argv, timeout=30)
        if not res.ok:
            rec.status, rec.message = FAIL, (res.err_text or res.text).strip()[-300:]
            return ActionResult(action.name, False, f"launch-cluster.sh did not start: {rec.message}")
        rec.message = f"pid {res.text.strip()} on {plan.head.node}; output in {log}"
        rec.data = {"argv": argv, "log": log, "pid": res.text.strip()}
    # the script starts the containers; they count once docker shows them on every node
    action._started = list(plan.nodes)
    action._remove_on_exit = True
    deadline = time.monotonic() + c.join_timeout
    async with ctx.step("start", "containers on every node") as rec:
        pending = {np.node for np in plan.nodes}
        while pending and time.monotonic() < deadline:
            for np in plan.nodes:
                if np.node in pending and not (await action._exited_one(np)):
                    pending.discard(np.node)
                    ctx.emit("milestone", "progress", "container started", node=np.node, key="container_started")
            if pending:
                await asyncio.sleep(1)
        if pending:
            tail = await head.run(["tail", "-n", "15", log], timeout=10)
            rec.status, rec.message = FAIL, f"no container on {', '.join(sorted(pending))}"
            findings.append(catalogued_finding("ray_worker_missing", f"launch-cluster.sh started no container on "
                                     f"{', '.join(sorted(pending))} within {c.join_timeout:.0f} s",
                                     evidence=tail.text.splitlines()[-10:]))
            return await action._fail(ctx, plan, findings, rec.message)
    if not await action._ray_gate(ctx, plan, findings):
        return await action._fail(ctx, plan, findings, "Ray did not list every node and GPU")
    action._remove_on_exit = False
    result = await action._watch(ctx, plan, findings, started, attached=False, watch=watch,
                                 extra=[_FileTail(head, log, plan.head.node, watch)])
    result.data["launcher_log"] = log
    return result
