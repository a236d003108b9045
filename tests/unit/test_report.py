"""`sparktui report`: Markdown from a recorded session (findings, timeline, last lines)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from sparktui.commands.report import build_report
from sparktui.config import demo_config
from sparktui.engine import Engine
from sparktui.model import Finding, FindingRaised, LogBatch, LogLine, NodeReachability, Note
from sparktui.session import Session

ROOT = Path(__file__).resolve().parents[2]


def _session() -> Session:
    s = Session.create("vllm_qwen35", meta={"kind": "demo", "nodes": ["spark1", "spark2"]})
    eng = Engine(demo_config(), session=s)
    eng.process([
        NodeReachability("spark2", False, error="connection refused", ts=100.0),
        LogBatch("spark1", "vllm_qwen35", tuple(LogLine("spark1", "vllm_qwen35", f"line {i} ```x```", seq=i + 1)
                                               for i in range(40))),
        FindingRaised(Finding("cuda_oom", "error", "CUDA out of memory", source="spark1/vllm_qwen35", line=40,
                              evidence=("torch.OutOfMemoryError: CUDA out of memory",),
                              advice="lower --gpu-memory-utilization", node="spark1")),
        Note("HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz12 restarted both ranks", author="ana"),
    ])
    s.close()
    return s


def test_report_has_findings_timeline_and_tail():
    s = _session()
    md = build_report(s.path)
    assert md.startswith("# Incident report:")
    assert "[error] CUDA out of memory (`cuda_oom`)" in md
    assert "spark1/vllm_qwen35:40" in md and "lower --gpu-memory-utilization" in md
    assert "spark2: UNREACHABLE (connection refused)" in md
    assert "line 39" in md and "line 10 " not in md  # only the tail
    assert "````" in md  # fence longer than the backticks inside the log text
    assert "hf_abc" not in md


def test_cli_report_latest_and_missing():
    s = _session()
    proc = subprocess.run([sys.executable, "-m", "sparktui", "report"], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0 and s.path.name in proc.stdout
    proc = subprocess.run([sys.executable, "-m", "sparktui", "report", "nope"], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 2 and "session not found" in proc.stderr and "Traceback" not in proc.stderr
