"""Issue 30 item 11: hostile or torn evidence in `investigate --offline` still yields a verdict."""

import shutil
from pathlib import Path

from sparktui.cli import main

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "nccl-2gpu"


def test_huge_sequence_number_is_no_traceback(tmp_path, capsys):
    for f in FIX.glob("watchdog.*"):
        shutil.copy(f, tmp_path / f.name)
    log = tmp_path / "watchdog.rank0.log"
    log.write_text(log.read_text().replace("SeqNum=2,", "SeqNum=" + "9" * 5000 + ",")
                   .replace("Last enqueued NCCL work: 2,", "Last enqueued NCCL work: " + "7" * 5000 + ","))
    rc = main(["investigate", "--offline", str(tmp_path)])
    assert rc in (0, 1), capsys.readouterr()
    assert "Traceback" not in capsys.readouterr().err


def test_one_torn_dump_keeps_the_verdict(tmp_path, capsys):
    for f in FIX.glob("watchdog.*"):
        shutil.copy(f, tmp_path / f.name)
    torn = tmp_path / "watchdog.fr_trace_1"
    torn.write_bytes(torn.read_bytes()[:300])  # a rank killed mid-write
    rc = main(["investigate", "--offline", str(tmp_path), "--json"])
    out = capsys.readouterr()
    assert rc in (0, 1), out.err
    assert "watchdog.fr_trace_1" in out.out + out.err and "skipped" in out.out + out.err
