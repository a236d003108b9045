"""`sparktui investigate --offline`: the same rules over saved bundles and capture folders."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from sparktui.cli import main

FIX = Path(__file__).parents[1] / "fixtures"


def test_offline_desync_json_exit_1(capsys):
    rc = main(["investigate", "--offline", str(FIX / "nccl-2gpu" / "desync_ras"), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 1
    assert out["verdict"]["rule"] == "R4" and out["verdict"]["finding_ids"] == ["nccl_collective_mismatch"]
    assert out["verdict"]["evidence"]["local"] and out["verdict"]["next_action"]


def test_offline_healthy_exit_0(capsys):
    rc = main(["investigate", "--offline", str(FIX / "device-runs" / "healthy" / "bundle")])
    text = capsys.readouterr().out
    assert rc == 0 and text.startswith("healthy: Healthy")


def test_offline_capture_folder_reports_every_scenario(capsys):
    rc = main(["investigate", "--offline", str(FIX / "nccl-2gpu"), "--json"])
    out = json.loads(capsys.readouterr().out)
    rules = {b["name"]: b["verdict"]["rule"] for b in out["bundles"]}
    assert rules["desync_ras"] == "R4" and rules["watchdog"] == "R4" and rules["busy_ras"] == "healthy"
    assert rules["init_hang"] == "R2"
    assert rc == 1


def test_offline_bad_input_is_one_line_exit_2(tmp_path, capsys):
    assert main(["investigate", "--offline", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no such folder" in err
    (tmp_path / "empty").mkdir()
    assert main(["investigate", "--offline", str(tmp_path / "empty")]) == 2
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "meta.json").write_text("{not json")
    assert main(["investigate", "--offline", str(bad)]) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_offline_path_needs_no_textual():
    code = ("import sys; sys.modules['textual'] = None\n"
            "from sparktui.cli import main\n"
            f"sys.exit(main(['investigate', '--offline', {str(FIX / 'nccl-2gpu' / 'watchdog')!r}]))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert res.returncode == 1 and "R4: Collective desync" in res.stdout, res.stderr


def test_live_local_path_needs_no_textual(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('[cluster]\nname = "nothing_here"\n[[node]]\nname = "me"\nbackend = "local"\n')
    code = ("import sys; sys.modules['textual'] = None\n"
            "from sparktui.cli import main\n"
            f"sys.exit(main(['investigate', '--config', {str(cfg)!r}, '--json', '--interval', '1']))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode in (0, 1), res.stderr[-2000:]
    out = json.loads(res.stdout)
    assert out["action"] == "investigate" and out["verdict"]["rule"]
    assert "round 1" in res.stderr
