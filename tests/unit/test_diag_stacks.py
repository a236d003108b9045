"""Ranks whose pasted Python stacks wait in different torch.distributed collectives (issue 31,
cross-rank comparison): py-spy's dump, faulthandler's, a Ctrl+C's traceback.

The py-spy stacks are a held-in corpus case; the tracebacks and faulthandler dumps are what a real
CPython prints for a process waiting in a function of a file laid out as torch's (made by the test:
torch itself is not installed here, the formats are CPython's).
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from sparktui.commands.diagnose import analyse
from sparktui.diagnosis import stacks

from corpus_helpers import held_in

CASE = "a/sglang_sglang_22607_hicache_prefetch_collective_mismatch"


def _ids(paths: list[str]) -> list[str]:
    return [f.id for f in analyse(paths).findings if f.severity != "info"]


def _lines(path: str) -> list[tuple[int, str]]:
    text = Path(path).read_text(encoding="utf-8").splitlines()
    return [(n, t) for n, t in enumerate(text, 1) if not t.startswith("# ")]


def test_py_spy_stacks_of_two_ranks_in_different_collectives_are_a_mismatch():
    # TP0 waits in an all_reduce its peers skipped; TP1 already waits in the next broadcast
    r0, r1 = held_in(CASE)
    assert stacks.blocked(_lines(r0))[1] == "all_reduce"
    assert stacks.blocked(_lines(r1))[1] == "broadcast"
    fs = [f for f in analyse([r0, r1]).findings if f.severity != "info"]
    assert fs[0].id == "nccl_collective_mismatch" and "all_reduce vs broadcast" in fs[0].title


def test_ranks_in_the_same_collective_or_one_rank_alone_are_no_mismatch(tmp_path):
    r0, _ = held_in(CASE)
    twin = tmp_path / "rank1.log"
    twin.write_text(Path(r0).read_text(encoding="utf-8"), encoding="utf-8")
    assert "nccl_collective_mismatch" not in _ids([r0, str(twin)])
    assert "nccl_collective_mismatch" not in _ids([r0])


def test_a_stack_whose_innermost_frames_are_user_code_waits_in_no_collective():
    # a py-spy stack of a loop that calls broadcast_pyobj further out: the innermost frames are the
    # application's own, so the rank is not blocked in a collective
    window = [(1, "  time.sleep (time.py:10)"), (2, "  poll (loop.py:5)"), (3, "  wait (loop.py:9)"),
              (4, "  step (loop.py:20)"), (5, "  broadcast (torch/distributed/distributed_c10d.py:2974)")]
    assert stacks.blocked(window) is None


_DIST = '''import time
def all_reduce(t):
    print("ready", flush=True)  # inside the function: a signal now finds the process in it
    time.sleep(60)
def broadcast(t):
    print("ready", flush=True)
    time.sleep(60)
'''


def _stopped(tmp_path: Path, fn: str, how: str) -> str:
    """What a real CPython prints when a process waiting in torch/distributed/distributed_c10d.py's
    ``fn`` is stopped by Ctrl+C (``how="sigint"``: a traceback) or dumps its stack (``"fault"``:
    faulthandler, as py-spy-less users get it with ``faulthandler.dump_traceback_later``)."""
    pkg = tmp_path / "torch" / "distributed"
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "distributed_c10d.py").write_text(_DIST, encoding="utf-8")
    dump = "import faulthandler, sys; faulthandler.dump_traceback_later(0.5, exit=True)\n" if how == "fault" else ""
    code = (f"import sys; sys.path.insert(0, {str(tmp_path / 'torch' / 'distributed')!r})\n{dump}"
            f"import distributed_c10d as d\nd.{fn}(None)\n")
    p = subprocess.Popen([sys.executable, "-u", "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert p.stdout.readline().strip() == "ready"
    if how == "sigint":
        p.send_signal(signal.SIGINT)
    out, _ = p.communicate(timeout=30)
    path = tmp_path / f"{fn}.{how}.log"
    path.write_text("ready\n" + out, encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("how", ["sigint", "fault"])
def test_real_cpython_stacks_in_different_collectives_are_a_mismatch(tmp_path, how):
    a = _stopped(tmp_path, "all_reduce", how)
    b = _stopped(tmp_path, "broadcast", how)
    assert stacks.blocked(_lines(a))[1] == "all_reduce"
    assert "nccl_collective_mismatch" in _ids([a, b])
    # the same collective on both: no mismatch
    c = _stopped(tmp_path / "again", "all_reduce", how)
    assert "nccl_collective_mismatch" not in _ids([a, c])
