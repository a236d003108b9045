"""Classifier throughput on the real 7 MB NCCL flood log (busy_ras.rank1.log), and the ratio to
`grep -E -c` run with the same pattern set (catalogue + milestone regexes, translated to POSIX ERE)
on the same file.  Medians over >= 5 runs.  Budget: >= 500k lines/s (docs/architecture.md "Performance budgets").
"""

from __future__ import annotations

import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
LOG = ROOT / "tests" / "fixtures" / "nccl-2gpu" / "busy_ras.rank1.log"
RUNS = 7
BATCH = 5000  # the engine drains up to 5000 events per batch


def _to_ere(rx: str) -> str:
    """Python regex -> GNU ERE (the constructs the catalogue uses)."""
    rx = re.sub(r"\(\?P<\w+>", "(", rx)
    rx = rx.replace("(?:", "(")
    rx = rx.replace(r"\d", "[0-9]").replace(r"\S", "[^[:space:]]").replace(r"\s", "[[:space:]]")
    rx = rx.replace(r"\w", "[[:alnum:]_]")
    rx = re.sub(r"\*\?|\+\?|\?\?", lambda m: m.group(0)[0], rx)  # lazy quantifiers: same matches for -c
    return rx


def _patterns() -> list[str]:
    from sparktui.diagnosis.catalogue import default_catalogue
    from sparktui.diagnosis.milestones import default_rules

    pats = [p.pattern for e in default_catalogue().entries.values() for p in e.patterns]
    pats += [r.pattern.pattern for r in default_rules().rules]
    pats.append(r"Traceback \(most recent call last\)")
    return [_to_ere(p) for p in pats]


def _classify_once(lines: list[str]) -> float:
    from sparktui.diagnosis.classifier import SourceScanner

    t0 = time.perf_counter()
    sc = SourceScanner("bench")
    for i in range(0, len(lines), BATCH):
        sc.feed(lines[i:i + BATCH])
    sc.finish()
    return time.perf_counter() - t0


def _serving_lines() -> list[str]:
    """The demo's vLLM log (real formats): startup once, then the serving phase repeated."""
    from sparktui.config import demo_config
    from sparktui.model import LogBatch, LogLine
    from sparktui.sim.cluster import SimCluster

    main: list[str] = []
    for ev in SimCluster(demo_config(), "healthy").events_until(3000):
        if isinstance(ev, LogBatch) and ev.source == "vllm_qwen35":
            main += [ln.text for ln in ev.lines]
        elif isinstance(ev, LogLine) and ev.source == "vllm_qwen35":
            main.append(ev.text)
    i = next((i for i, t in enumerate(main) if "Application startup complete" in t), len(main) - 1)
    serving = main[i + 1:] or main
    return main[: i + 1] + serving * max(1, 100_000 // len(serving))


def _grep_once(pattern_file: str) -> float:
    t0 = time.perf_counter()
    subprocess.run(["grep", "-E", "-c", "-f", pattern_file, str(LOG)], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - t0


def main(args=None) -> list[dict]:
    lines = LOG.read_text(encoding="utf-8", errors="replace").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    n = len(lines)
    _classify_once(lines)  # warm: regex compile, catalogue load
    t_cls = statistics.median(_classify_once(lines) for _ in range(RUNS))
    rate = n / t_cls
    rows = [
        {"what": f"classifier on busy_ras.rank1.log ({n} lines, 7 MB)", "value": rate, "unit": "lines/s",
         "budget": ">= 500000", "ok": rate >= 500_000},
        {"what": "classifier time per run (median of 7)", "value": t_cls * 1000, "unit": "ms", "budget": "-",
         "ok": None},
    ]
    try:
        serving = _serving_lines()
        t_srv = statistics.median(_classify_once(serving) for _ in range(5))
        rows.append({"what": f"classifier on a vLLM serving log ({len(serving)} lines, demo formats)",
                     "value": len(serving) / t_srv, "unit": "lines/s", "budget": "-", "ok": None})
    except Exception as exc:  # the demo may be absent in a partial build
        rows.append({"what": "classifier on a vLLM serving log", "value": None, "unit": "", "budget": str(exc)[:80],
                     "ok": None})
    if shutil.which("grep"):
        with tempfile.NamedTemporaryFile("w", suffix=".ere", delete=False) as fh:
            fh.write("\n".join(_patterns()) + "\n")
            pf = fh.name
        check = subprocess.run(["grep", "-E", "-c", "-f", pf, str(LOG)], capture_output=True, text=True)
        if check.returncode in (0, 1):
            _grep_once(pf)
            t_grep = statistics.median(_grep_once(pf) for _ in range(RUNS))
            rows.append({"what": "grep -E -c, same patterns, same file (median of 7)", "value": t_grep * 1000,
                         "unit": "ms", "budget": "-", "ok": None})
            rows.append({"what": "ratio classifier time / grep -E -c time", "value": t_cls / t_grep, "unit": "x",
                         "budget": "report", "ok": None})
        else:
            rows.append({"what": "grep -E -c refused the translated patterns", "value": None, "unit": "",
                         "budget": check.stderr.strip()[:120], "ok": None})
        Path(pf).unlink(missing_ok=True)
    return rows


if __name__ == "__main__":
    for r in main():
        print(r)
