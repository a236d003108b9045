"""Which entry a line names when two match it: priority, then a cause before its consequence, and the
same answer whatever the hash seed (the scanner's literals were ordered by length alone, ties in a
set's order, so a line matching two entries of equal priority named one or the other from run to run).

The line is Ray's real report of a worker its memory monitor killed (ray-project/ray#28778, held in).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from sparktui.diagnosis.catalogue import default_catalogue, rank

from corpus_helpers import diagnose_lines

ROOT = Path(__file__).resolve().parents[2]
RAY_OOM = ("The actor is dead because its worker process has died. Worker exit type: USER_ERROR Worker exit detail: "
           "Task was killed due to the node running low on memory.")


def test_a_cause_outranks_its_consequence_of_equal_priority():
    cat = default_catalogue()
    cause, effect = cat.entries["host_oom_killed"], cat.entries["ray_worker_missing"]
    assert cause.priority == effect.priority and effect.consequence and not cause.consequence
    assert rank(cause) > rank(effect)
    assert cat.match(RAY_OOM).id == "host_oom_killed"
    assert [f.id for f in diagnose_lines([RAY_OOM]) if f.severity == "error"][:1] == ["host_oom_killed"]


def test_a_consequence_alone_is_still_named():
    line = "The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR"
    assert default_catalogue().match(line).id == "ray_worker_missing"


def test_the_named_entry_does_not_depend_on_the_hash_seed():
    code = ("import sys; sys.path.insert(0, 'tests'); from corpus_helpers import diagnose_lines; "
            f"print([f.id for f in diagnose_lines([{RAY_OOM!r}])])")
    seen = set()
    for seed in ("0", "1", "2", "3"):
        r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                           env={**os.environ, "PYTHONHASHSEED": seed})
        assert r.returncode == 0, r.stderr[-2000:]
        seen.add(r.stdout.strip())
    assert len(seen) == 1, seen
