"""What is read from a model directory on a node: config.json and the on-disk size.

The size comes from the safetensors index (``metadata.total_size``, what the shards hold) when
there is one, else from the sizes of the weight files.  Everything goes through the node handle,
so a path with spaces or quotes stays one argument.
"""

from __future__ import annotations

import json
import posixpath
from dataclasses import dataclass, field

from ..nodes.base import Node, NodeError

INDEX_NAMES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")


class ModelProbeError(Exception):
    """The model directory or its config.json is missing or unreadable (one line, for a finding)."""


@dataclass(frozen=True)
class ModelInfo:
    path: str
    architectures: tuple[str, ...] = ()
    model_type: str = ""
    total_bytes: int | None = None
    size_source: str = ""  # "safetensors index" / "file sizes" / ""
    shard_count: int = 0
    config: dict = field(default_factory=dict, compare=False, repr=False)


def _parse_index(raw: bytes) -> tuple[int | None, int]:
    data = json.loads(raw.decode("utf-8"))
    total = (data.get("metadata") or {}).get("total_size")
    shards = len(set((data.get("weight_map") or {}).values()))
    return (int(total) if isinstance(total, (int, float)) and total > 0 else None), shards


async def probe_model(node: Node, path: str) -> ModelInfo:
    cfg_path = posixpath.join(path, "config.json")
    try:
        raw = await node.read_file(cfg_path)
    except NodeError as exc:
        res = await node.run(["test", "-d", path], timeout=15)
        if not res.ok:
            raise ModelProbeError(f"model directory {path!r} does not exist on {node.name}") from None
        raise ModelProbeError(f"{cfg_path!r} is missing or unreadable on {node.name}: {exc}") from None
    try:
        config = json.loads(raw.decode("utf-8"))
        if not isinstance(config, dict):
            raise ValueError("not a JSON object")
    except (ValueError, UnicodeDecodeError) as exc:
        raise ModelProbeError(f"{cfg_path!r} on {node.name} is not valid JSON: {exc}") from None
    arches = config.get("architectures") or []
    arches = tuple(a for a in arches if isinstance(a, str)) if isinstance(arches, list) else ()
    model_type = config.get("model_type") if isinstance(config.get("model_type"), str) else ""
    total, source, shards = None, "", 0
    for name in INDEX_NAMES:
        try:
            idx_raw = await node.read_file(posixpath.join(path, name))
        except NodeError:
            continue
        try:
            total, shards = _parse_index(idx_raw)
        except (ValueError, UnicodeDecodeError, AttributeError):
            continue
        if total:
            source = "safetensors index" if "safetensors" in name else "bin index"
            break
    if not total:
        # no usable index: add up the weight files (follows HF cache symlinks with -L)
        res = await node.run(["find", "-L", path, "-maxdepth", "2", "-type", "f", "(",
                              "-name", "*.safetensors", "-o", "-name", "*.bin", ")", "-printf", "%s\n"], timeout=60)
        sizes = [int(x) for x in res.text.split() if x.isdigit()]
        if sizes:
            total, source, shards = sum(sizes), "file sizes", len(sizes)
    return ModelInfo(path=path, architectures=arches, model_type=model_type, total_bytes=total,
                     size_source=source, shard_count=shards, config=config)
