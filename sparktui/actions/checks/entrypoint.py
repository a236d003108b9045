"""Is the image's ENTRYPOINT compatible with how the cluster start runs it?

The launcher (spark-vllm-docker) runs ``docker run ... IMAGE ./run-cluster-node.sh --role ...``:
that command becomes the container's Cmd, so an image ENTRYPOINT receives it as arguments.  An
entrypoint that ends in ``exec "$@"`` passes it through; anything else (an env-driven server
like the community Qwen3.5 images) ignores it and starts its own defaults.
"""

from __future__ import annotations

import re

from ...probes.image import ImageInfo
from . import CheckResult, ok, warn

_PASSES_ARGS = re.compile(r'exec\s+"\$@"|exec\s+\$@|"\$@"\s*$', re.M)
_CONFIG_ENV = re.compile(r"^(MODEL|VLLM_|PORT$|HOST$|MAX_MODEL_LEN|GPU_MEM|SERVED_MODEL|ATTENTION|ENABLE_|HF_)")
LAUNCH_CMD = "./run-cluster-node.sh"


def passes_args(script_text: str) -> bool:
    return bool(_PASSES_ARGS.search(script_text))


def entrypoint_result(node_name: str, info: ImageInfo, script_text: str | None, workdir_files: tuple[str, ...] | None,
                      has_ray: bool | None) -> list[CheckResult]:
    ev = [f"Entrypoint {list(info.entrypoint) or None}  Cmd {list(info.cmd) or None}  WorkingDir {info.working_dir or '/'}"]
    cfg_env = sorted(k for k in info.env_map if _CONFIG_ENV.match(k))
    if cfg_env:
        ev.append("configuration env: " + ", ".join(f"{k}={info.env_map[k]}" for k in cfg_env))
    out: list[CheckResult] = []
    if info.entrypoint and not (script_text is not None and passes_args(script_text)):
        why = ("its script does not pass its arguments on (no exec \"$@\")" if script_text is not None
               else "it is not a script that passes its arguments on")
        how = (f"start it as its entrypoint expects: set {', '.join(cfg_env)} with -e (it ignores `vllm serve` "
               "arguments), or override it (--entrypoint python3 ... -m vllm.entrypoints.openai.api_server)"
               if cfg_env else "override it with --entrypoint")
        out.append(warn("entrypoint", f"custom ENTRYPOINT {info.entrypoint[0]} will receive "
                        f"`{LAUNCH_CMD} ...` as arguments and {why}", node_name, ev,
                        f"for the cluster start use `sparktui build-image` (the hybrid clears ENTRYPOINT); "
                        f"alone: {how}", "docker_entrypoint_error", data={"mode": "env", "env": cfg_env}))
    if workdir_files is not None and LAUNCH_CMD[2:] not in workdir_files:
        out.append(warn("entrypoint_launcher", f"no {LAUNCH_CMD[2:]} in WORKDIR {info.working_dir or '/'}: "
                        "the cluster launcher cannot start this image", node_name, ev,
                        "build FROM an image that has it (vllm-node), or COPY it into the WORKDIR",
                        "docker_entrypoint_error"))
    if has_ray is False:
        out.append(warn("entrypoint_ray", "no `ray` in the image: the Ray-based cluster start needs it", node_name, ev,
                        "pip install 'ray[default]' in the image (or launch without Ray)", "broken_install"))
    if not out:
        mode = "passes arguments on" if info.entrypoint else "no ENTRYPOINT"
        out.append(ok("entrypoint", f"{mode}: starts as `{LAUNCH_CMD} ...` / `vllm serve ...`", node_name, ev,
                      data={"mode": "args"}))
    return out
