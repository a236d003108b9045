"""Single commands seen from the command line: a refusal printed once, diagnose DIR, report
--output/--json, sessions of a demo scenario, a push's progress total, completion's candidates."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from cli_helpers import sparktui_cli

ROOT = Path(__file__).resolve().parents[2]


def test_a_refusal_is_printed_once():
    # read-only refuses before any node is contacted
    r = sparktui_cli("--read-only", "stop", "--yes", "--config", str(ROOT / "cluster.example.toml"))
    assert r.returncode == 1
    both = r.stdout + r.stderr
    assert both.count("forbids changing the cluster") == 1, both
    assert r.stdout.startswith("FAILED  stop refused")


def test_diagnose_a_folder_reads_every_log_file_in_it(tmp_path):
    import gzip
    import json
    import shutil

    logs = ROOT / "tests" / "fixtures" / "logs"
    a, b = logs / "dotsocr_196_oom.log", logs / "nccl_1612_peer_closed.log"
    (tmp_path / "sub").mkdir()
    shutil.copy(a, tmp_path / "rank0.log")
    (tmp_path / "sub" / "rank1.log.gz").write_bytes(gzip.compress(b.read_bytes()))
    (tmp_path / "dump.pkl").write_bytes(b"\x80\x04binary flight recorder")  # not a log: left out
    by_folder = sparktui_cli("diagnose", "--json", str(tmp_path))
    by_files = sparktui_cli("diagnose", "--json", str(a), str(b))
    assert by_folder.returncode == by_files.returncode != 2, by_folder.stderr

    def ids(r):
        return sorted(f["id"] for f in json.loads(r.stdout)["findings"])

    assert ids(by_folder) == ids(by_files) and ids(by_folder)


def _session_with_verdict(tmp_path: Path) -> Path:
    from sparktui.engine import Engine
    from sparktui.model import ActionEvent
    from sparktui.session import Session
    from sparktui.config import demo_config

    session = Session.create("vllm_qwen35", {"nodes": ["spark1", "spark2"]}, root=tmp_path)
    engine = Engine(demo_config(), [], session=session)
    engine.process([ActionEvent("investigate", "verdict", "warn",
                                "R2: rank 1 never entered the collective (confidence 0.90)")])
    session.close()
    return session.path


def test_report_output_and_json_carry_the_investigation_verdict(tmp_path):
    import json

    path = _session_with_verdict(tmp_path / "s")
    md = tmp_path / "incident.md"
    r = sparktui_cli("report", str(path), "--output", str(md))
    assert r.returncode == 0 and r.stdout == "", r.stderr
    text = md.read_text()
    assert md.stat().st_mode & 0o777 == 0o600  # it names the cluster, like the session it comes from
    assert "## Investigations" in text and "problem: R2: rank 1 never entered the collective" in text
    j = sparktui_cli("report", str(path), "--json")
    assert j.returncode == 0, j.stderr
    doc = json.loads(j.stdout)
    assert doc["session"] == path.name
    assert [v["verdict"] for v in doc["verdicts"]] == ["R2: rank 1 never entered the collective (confidence 0.90)"]
    assert doc["verdicts"][0]["problem"] is True


def test_sessions_shows_a_demo_scenario(tmp_path):
    import json

    from sparktui.session import Session

    s = Session.create("vllm_qwen35", {"kind": "demo", "cluster": "vllm_qwen35", "scenario": "nccl-hang"},
                       root=tmp_path)
    s.close()
    cfg = tmp_path / "cluster.toml"
    cfg.write_text(f'session_dir = "{tmp_path}"\n' + (ROOT / "cluster.example.toml").read_text())
    r = sparktui_cli("sessions", "--config", str(cfg))
    assert r.returncode == 0, r.stderr
    assert "demo (nccl-hang)" in r.stdout
    j = json.loads(sparktui_cli("sessions", "--json", "--config", str(cfg)).stdout)
    assert [x["scenario"] for x in j["sessions"]] == ["nccl-hang"]


def test_a_push_ends_with_its_total_never_past_it():
    import re

    from sparktui.actions.push import push_done, push_progress

    mb = 1_000_000
    assert push_progress(0, 263 * mb, 1.0).startswith("0 / ~263 MB")
    end = push_done(269 * mb, 263 * mb, 2.0)
    done, total = map(int, re.match(r"(\d+) / (\d+) MB", end).groups())
    assert done == total == 269 and "~263" in end and "MB/s" in end
    assert push_done(263 * mb, 263 * mb, 1.0).startswith("263 / 263 MB in 1.0 s")


def test_completion_offers_canned_prompts_nodes_and_sessions(tmp_path):
    import shutil

    import pytest

    if shutil.which("bash") is None:
        pytest.skip("no bash")
    script = tmp_path / "sparktui.bash"
    script.write_text(sparktui_cli("completion", "bash").stdout)
    bindir = tmp_path / "bin"  # the script asks `sparktui` itself: this checkout's, on PATH
    bindir.mkdir()
    shim = bindir / "sparktui"
    shim.write_text(f'#!/bin/sh\nexec {sys.executable} -m sparktui "$@"\n')
    shim.chmod(0o755)
    from sparktui.session import Session

    Session.create("vllm_qwen35", {"kind": "demo"}, root=tmp_path / "sessions").close()
    cfg = tmp_path / "cluster.toml"
    cfg.write_text(f'session_dir = "{tmp_path / "sessions"}"\n' + (ROOT / "cluster.example.toml").read_text())
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}", "SPARKTUI_CONFIG": str(cfg)}

    def complete(*words: str) -> list[str]:
        arr = " ".join(f"'{w}'" for w in words)
        cmd = f"source {script}; COMP_WORDS=({arr}); COMP_CWORD={len(words) - 1}; _sparktui; printf '%s\\n' \"${{COMPREPLY[@]}}\""
        r = subprocess.run(["bash", "--norc", "--noprofile", "-c", cmd], capture_output=True, text=True, env=env,
                           cwd=ROOT, timeout=60)
        return [w for w in r.stdout.splitlines() if w]

    assert complete("sparktui", "prompt", "--canned", "ar") == ["arithmetic"]
    nodes = [line.split('"')[1] for line in cfg.read_text().splitlines() if line.startswith("name = ")]
    assert sorted(complete("sparktui", "validate", "--node", "")) == sorted(nodes[1:]) and nodes[1:]
    assert [w for w in complete("sparktui", "report", "") if not w.startswith("-")][0].endswith("-vllm_qwen35")
