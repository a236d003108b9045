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


# config.json is a few KiB and an index a few MiB; past this a file is no model's and is not parsed
MAX_JSON_BYTES = 16 << 20


def _load_json(raw: bytes, what: str) -> object:
    """A node's JSON file, or one ModelProbeError line (too big, not UTF-8, not JSON, too deep)."""
    if len(raw) > MAX_JSON_BYTES:
        raise ModelProbeError(f"{what} is {len(raw)} bytes, more than a model's {MAX_JSON_BYTES >> 20} MiB")
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ModelProbeError(f"{what} is not valid JSON: not UTF-8") from None
    except RecursionError:
        raise ModelProbeError(f"{what} is not valid JSON: nested too deep") from None
    except json.JSONDecodeError as exc:
        raise ModelProbeError(f"{what} is not valid JSON: {exc.msg} (line {exc.lineno})") from None
    except ValueError:  # an integer past the digit limit
        raise ModelProbeError(f"{what} is not valid JSON: a number out of range") from None


def parse_config(raw: bytes, what: str = "config.json") -> tuple[tuple[str, ...], str, dict]:
    """config.json's architectures, model_type and the whole object; ModelProbeError otherwise."""
    config = _load_json(raw, what)
    if not isinstance(config, dict):
        raise ModelProbeError(f"{what} is not valid JSON: a {type(config).__name__}, not an object")
    arches = config.get("architectures") or []
    arches = tuple(a for a in arches if isinstance(a, str)) if isinstance(arches, list) else ()
    model_type = config.get("model_type") if isinstance(config.get("model_type"), str) else ""
    return arches, model_type, config


def parse_index(raw: bytes, what: str = "index") -> tuple[int | None, int]:
    """A weights index's total size (None if it gives none usable) and shard count."""
    data = _load_json(raw, what)
    if not isinstance(data, dict):
        raise ModelProbeError(f"{what} is not a JSON object")
    meta = data.get("metadata")
    total = meta.get("total_size") if isinstance(meta, dict) else None
    wmap = data.get("weight_map")
    shards = len({v for v in wmap.values() if isinstance(v, str)}) if isinstance(wmap, dict) else 0
    # a size in bytes is at least 1 (0.5 would become 0); NaN and infinity fail the range test too
    if isinstance(total, bool) or not isinstance(total, (int, float)) or not 1 <= total < 2**63:
        return None, shards
    return int(total), shards


def parse_sizes(text: str) -> list[int]:
    """`find -printf '%s\\n'` output: the file sizes, skipping any word that is not one (a Unicode
    digit such as '²' passes str.isdigit but not int(); 20 digits is past any file)."""
    return [int(x) for x in text.split() if x.isascii() and x.isdigit() and len(x) <= 20]


async def probe_model(node: Node, path: str) -> ModelInfo:
    cfg_path = posixpath.join(path, "config.json")
    try:
        raw = await node.read_file(cfg_path)
    except NodeError as exc:
        res = await node.run(["test", "-d", path], timeout=15)
        if not res.ok:
            raise ModelProbeError(f"model directory {path!r} does not exist on {node.name}") from None
        raise ModelProbeError(f"{cfg_path!r} is missing or unreadable on {node.name}: {exc}") from None
    arches, model_type, config = parse_config(raw, f"{cfg_path!r} on {node.name}")
    total, source, shards = None, "", 0
    for name in INDEX_NAMES:
        try:
            idx_raw = await node.read_file(posixpath.join(path, name))
        except NodeError:
            continue
        try:
            total, shards = parse_index(idx_raw, name)
        except ModelProbeError:
            continue
        if total:
            source = "safetensors index" if "safetensors" in name else "bin index"
            break
    if not total:
        # no usable index: add up the weight files (follows HF cache symlinks with -L)
        res = await node.run(["find", "-L", path, "-maxdepth", "2", "-type", "f", "(",
                              "-name", "*.safetensors", "-o", "-name", "*.bin", ")", "-printf", "%s\n"], timeout=60)
        sizes = parse_sizes(res.text)
        if sizes:
            total, source, shards = sum(sizes), "file sizes", len(sizes)
    return ModelInfo(path=path, architectures=arches, model_type=model_type, total_bytes=total,
                     size_source=source, shard_count=shards, config=config)
