"""What a node's Docker already holds of an image's layers, and the plan for a copy that leaves them out.

Docker's layer store names a stack of layers by its chain ID: the bottom layer's diff ID, then
``sha256(<chain below> + " " + <diff ID>)`` for each layer above (the OCI image spec's ChainID).  A
target holds a chain when one of its images has those diff IDs at the bottom of its
``RootFS.Layers``: its store keeps every layer an image uses.  ``docker load`` skips the file of a
layer whose chain it holds, so push-image sends only the layers above the held part
(``sparktui/transport/layer_skip.py`` leaves the rest out of the saved tar on the source).

Only Docker's own layer store (overlay2 & co.) is planned for.  With the containerd image store
(``driver-type io.containerd.snapshotter.v1``) a load imports blobs into containerd's content
store, which must hold every blob the manifest names, so the whole image is sent there.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from dataclasses import dataclass

from ..nodes.base import Node


def chain_ids(diff_ids: list[str] | tuple[str, ...]) -> list[str]:
    """The chain ID of each prefix of ``diff_ids`` (bottom first)."""
    out: list[str] = []
    for d in diff_ids:
        out.append(d if not out else "sha256:" + hashlib.sha256(f"{out[-1]} {d}".encode()).hexdigest())
    return out


@dataclass(frozen=True)
class LayerPlan:
    total: int  # the image's layers
    held: int = 0  # its bottom layers the target already holds
    chains: tuple[str, ...] = ()  # their chain IDs (how Docker <= 24's save names them, indirectly)
    blobs: tuple[str, ...] = ()  # their tar names in Docker >= 25's OCI save (blobs/sha256/<diff ID>)
    held_bytes: int | None = None  # their size, when a target image is exactly those layers
    why: str = ""  # why nothing is left out (held == 0)

    @property
    def argument(self) -> str:
        """The filter program's argument (layer_skip.py's PLAN)."""
        return json.dumps({"blobs": list(self.blobs), "chains": list(self.chains)}, separators=(",", ":"))


def plan_layers(layers: tuple[str, ...], held_images: list[tuple[tuple[str, ...], int]]) -> LayerPlan:
    """The bottom layers of ``layers`` that a target holding ``held_images`` ((diff IDs, size) each)
    already has; pure, so a unit test gives it any store."""
    if not layers:
        return LayerPlan(0, why="the image lists no layers")
    mine = chain_ids(layers)
    held_chains = {c for held, _ in held_images for c in chain_ids(held)}
    k = 0
    while k < len(mine) and mine[k] in held_chains:
        k += 1
    if k == 0:
        return LayerPlan(len(layers), why="the target holds none of its layers")
    # one diff ID can sit at several heights (an empty layer twice); its blob is shared, so it is left
    # out only when every height it sits at is held
    above = set(layers[k:])
    blobs = tuple(dict.fromkeys(f"blobs/sha256/{d.split(':', 1)[-1]}" for d in layers[:k] if d not in above))
    sizes = [size for held, size in held_images if tuple(held) == tuple(layers[:k])]
    return LayerPlan(len(layers), k, tuple(mine[:k]), blobs, sizes[0] if sizes else None)


async def held_images(node: Node) -> tuple[list[tuple[tuple[str, ...], int]], str]:
    """((diff IDs, size) of every image on ``node``, ""), or ([], why) when its store cannot be
    planned for (the containerd image store, an error)."""
    client = await node.docker()
    import docker.errors

    def _read() -> tuple[list[tuple[tuple[str, ...], int]], str]:
        info = client.api.info()
        status = {str(k): str(v) for k, v in (info.get("DriverStatus") or []) if k}
        if "containerd" in status.get("driver-type", ""):
            return [], "its Docker uses the containerd image store"
        out = []
        for summary in client.api.images():
            try:
                attrs = client.api.inspect_image(summary["Id"])
            except docker.errors.NotFound:
                continue  # removed meanwhile
            out.append((tuple((attrs.get("RootFS") or {}).get("Layers") or ()), int(attrs.get("Size") or 0)))
        return out, ""

    try:
        return await asyncio.to_thread(_read)
    except docker.errors.APIError as exc:
        return [], f"docker on {node.name}: {exc.explanation or exc}"
