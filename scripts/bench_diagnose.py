"""`sparktui diagnose` throughput on two real logs made big, against `grep -E -c` on the same file.

* serving: the real vLLM serving log (tests/fixtures/vllm-cpu/serve.log, 158 lines: start-up,
  requests, shutdown) repeated to 1,000,000 lines;
* NCCL flood: the real 7 MB flood (tests/fixtures/nccl-2gpu/busy_ras.rank1.log) repeated 5 times.

Timed in-process through ``commands.diagnose.analyse`` (what the CLI calls: open, read, decode,
classify, finish), median of >= 5 runs; the CLI's wall time (`python -m sparktui diagnose --json`)
once; and `grep -E -c -f PATTERNS` (the catalogue and milestone regexes as POSIX ERE) on the same
file in the same run, with the ratio of the two medians.  Budgets: >= 1M lines/s (serving),
>= 1.5M lines/s (flood).
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
FIX = ROOT / "tests" / "fixtures"
SERVE = FIX / "vllm-cpu" / "serve.log"
FLOOD = FIX / "nccl-2gpu" / "busy_ras.rank1.log"
SERVE_LINES = 1_000_000
FLOOD_TIMES = 5
RUNS = 5


def _serving(dst: Path) -> Path:
    lines = SERVE.read_bytes().split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    reps = -(-SERVE_LINES // len(lines))
    dst.write_bytes(b"\n".join((lines * reps)[:SERVE_LINES]) + b"\n")
    return dst


def _flood(dst: Path) -> Path:
    dst.write_bytes(FLOOD.read_bytes() * FLOOD_TIMES)
    return dst


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _lines(path: Path) -> int:
    with path.open("rb") as fh:
        return sum(block.count(b"\n") for block in iter(lambda: fh.read(1 << 20), b""))


def _grep(pattern_file: str, path: Path) -> float | None:
    if not shutil.which("grep"):
        return None
    cmd = ["grep", "-E", "-c", "-f", pattern_file, str(path)]
    if subprocess.run(cmd, capture_output=True, check=False).returncode not in (0, 1):
        return None  # grep refused the translated patterns
    return statistics.median(_timed(lambda: subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                                           check=False))
                             for _ in range(RUNS))


def _cli(path: Path) -> float:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return _timed(lambda: subprocess.run([sys.executable, "-m", "sparktui", "diagnose", "--json", str(path)],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                                         check=False))


def _rows(name: str, path: Path, budget: int, pattern_file: str) -> list[dict]:
    from sparktui.commands.diagnose import analyse

    n = _lines(path)
    analyse([str(path)])  # warm: catalogue load, regex compile
    t = statistics.median(_timed(lambda: analyse([str(path)])) for _ in range(RUNS))
    rate = n / t
    rows = [
        {"what": f"diagnose, {name} ({n} lines, {path.stat().st_size >> 20} MB)", "value": rate,
         "unit": "lines/s", "budget": f">= {budget}", "ok": rate >= budget},
        {"what": f"diagnose, {name}: time (median of {RUNS})", "value": t * 1000, "unit": "ms", "budget": "-",
         "ok": None},
        {"what": f"diagnose --json CLI, {name}: wall time (once)", "value": _cli(path) * 1000, "unit": "ms",
         "budget": "-", "ok": None},
    ]
    t_grep = _grep(pattern_file, path)
    if t_grep is not None:
        rows.append({"what": f"grep -E -c -f PATTERNS, {name} (median of {RUNS})", "value": t_grep * 1000,
                     "unit": "ms", "budget": "-", "ok": None})
        rows.append({"what": f"ratio diagnose time / grep -E -c time, {name}", "value": t / t_grep, "unit": "x",
                     "budget": "report", "ok": None})
    return rows


def main(args=None) -> list[dict]:
    from scripts.bench_classifier import _patterns  # the same ERE translation as the classifier bench

    with tempfile.TemporaryDirectory(prefix="bench-diagnose-") as tmp:
        pattern_file = str(Path(tmp) / "patterns.ere")
        Path(pattern_file).write_text("\n".join(_patterns()) + "\n", encoding="utf-8")
        rows = _rows("vLLM serving log x6330", _serving(Path(tmp) / "serve.log"), 1_000_000, pattern_file)
        rows += _rows(f"NCCL flood x{FLOOD_TIMES}", _flood(Path(tmp) / "flood.log"), 1_500_000, pattern_file)
    return rows


if __name__ == "__main__":
    for r in main():
        print(r)
