"""Which image the cluster runs: the hybrid image when the head has it, else the configured one
(doctor's checks and the fabric check both need it; here, below both)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...nodes.base import Node
from ...probes.image import ImageProbeError, inspect_image

if TYPE_CHECKING:
    from ..base import ActionContext


async def resolve_image(ctx: ActionContext, head: Node) -> str:
    c = ctx.config.cluster
    if c.hybrid_image:
        try:
            await inspect_image(head, c.hybrid_image)
            return c.hybrid_image
        except ImageProbeError:
            pass
    return c.image
