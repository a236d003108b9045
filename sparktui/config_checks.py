"""Config checks across keys and tables (one machine per node, one head) and image references:
each failure a one-line ``ConfigError`` with the key and its line, raised at load."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from .config_error import ConfigError, line_of
from .imageref import problem

if TYPE_CHECKING:
    from .config import NodeConfig


def check_image(path: str, text: str, key: str, value: str) -> str:
    why = problem(value)
    if why:
        raise ConfigError(path, f"{value!r} is not a Docker image reference: {why}", key=key,
                          line=line_of(text, key.split(".")[-1]), hint='e.g. "vllm-node" or "nvcr.io/nvidia/vllm:25.09-py3"')
    return value


def check_distinct(path: str, text: str, nodes: "list[NodeConfig]") -> None:
    """One machine per ssh node, one head."""
    where: dict[tuple[str, int], str] = {}
    for i, n in enumerate(nodes):
        if n.backend != "ssh":
            continue
        k = (n.host.lower(), n.port or 22)
        if k in where:
            raise ConfigError(path, f"nodes {where[k]!r} and {n.name!r} are both {n.host}:{k[1]}",
                              key=f"node[{i}].host", line=nth_line(text, "host", i),
                              hint="each node is its own machine: give each its own host (or port)")
        where[k] = n.name
    heads = [i for i, n in enumerate(nodes) if n.role == "head"]
    if len(heads) > 1:
        raise ConfigError(path, f"{len(heads)} nodes have role = \"head\" ({', '.join(nodes[i].name for i in heads)})",
                          key=f"node[{heads[1]}].role", line=nth_line(text, "role", heads[1]),
                          hint="exactly one head; the others are workers")


def nth_line(text: str, key: str, idx: int) -> int | None:
    """The line of ``key`` inside the idx-th [[node]] table (best effort: None when not found)."""
    starts = [m.end() for m in re.finditer(r"^[ \t]*\[\[[ \t]*nodes?[ \t]*\]\]", text, re.M)]
    if idx >= len(starts):
        return None
    line = line_of(text, key, starts[idx])
    end = starts[idx + 1] if idx + 1 < len(starts) else len(text)
    return line if line and line <= text.count("\n", 0, end) + 1 else None
