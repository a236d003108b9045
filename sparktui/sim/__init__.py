"""The embedded demo cluster (``sparktui demo``) and the stand-in vLLM of the test bed.

Imports are lazy-light: ``sparktui.sim.standin_vllm`` is a standalone stdlib script.
"""

from .cluster import DEMO_EPOCH, SimCluster, SimSource

__all__ = ["DEMO_EPOCH", "SimCluster", "SimSource", "SimNode"]


def __getattr__(name: str):
    if name == "SimNode":
        from .node import SimNode

        return SimNode
    raise AttributeError(name)
