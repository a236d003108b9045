"""`scripts/bench drill`: the incident drills (scripts/drill) as bench rows, one per drill (seconds
from the fault to the right finding ranked first) and the budgets over them (issue 29).

Runs only when named (`scripts/bench drill`); needs root and the real-vLLM test bed.  SPARKTUI_DRILL_BED (and _NET) reuse one bed; SPARKTUI_DRILLS
names the drills (default: all); SPARKTUI_DRILL_MINUTES shortens the healthy drill (default 10).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from drill_lib.measure import bench_rows  # noqa: E402
from drill_lib.table import BUDGET_S, MEDIAN_BUDGET_S  # noqa: E402


def main(args: list[str]) -> list[dict]:
    if "drill" not in args:  # a bed per drill, an hour in all: only when named (`scripts/bench drill`)
        return [{"what": "drills: skipped (run `scripts/bench drill`)", "value": None, "unit": "", "budget": "-",
                 "ok": None}]
    if os.geteuid() != 0:
        return [{"what": "drills: need root (the real-vLLM test bed)", "value": None, "unit": "", "budget": "-",
                 "ok": None}]
    from drill_lib.run import run_all

    minutes = os.environ.get("SPARKTUI_DRILL_MINUTES")
    results = run_all(os.environ.get("SPARKTUI_DRILLS", "all").split(), float(minutes) if minutes else None,
                      os.environ.get("SPARKTUI_DRILL_BED"), os.environ.get("SPARKTUI_DRILL_NET"))
    return bench_rows(results, MEDIAN_BUDGET_S, BUDGET_S)
