"""diagnosis: the finding catalogue, streaming classifier, milestones and the per-rank NCCL view.

Pure (no IO beyond reading the package's own data files, no Textual, no docker).
``Diagnoser`` is the engine processor; ``parse_nccl_line`` the public NCCL line parser.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["Diagnoser", "parse_nccl_line", "NcclLine"]

if TYPE_CHECKING:  # pragma: no cover
    from .diagnoser import Diagnoser
    from .nccl_lines import NcclLine, parse_nccl_line


def __getattr__(name: str) -> Any:  # lazy: `import sparktui.diagnosis.nccl_lines` stays cheap
    if name == "Diagnoser":
        from .diagnoser import Diagnoser

        return Diagnoser
    if name in ("parse_nccl_line", "NcclLine"):
        from . import nccl_lines

        return getattr(nccl_lines, name)
    raise AttributeError(name)
