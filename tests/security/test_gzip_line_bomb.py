"""A small .gz of nothing but newlines decompresses to tens of millions of (empty) lines, each costing
the classifier its per-line price: `diagnose` stops such an input after a line budget bound to the
compressed bytes read, with one note line, instead of spending half a minute of CPU (issue 30, low)."""

from __future__ import annotations

import gzip
import subprocess
import sys
import time
from pathlib import Path

from sparktui.commands import diagnose as dmod
from sparktui.commands.diagnose import GZ_LINES_FLOOR, analyse

ROOT = Path(__file__).resolve().parents[2]


def _newline_bomb(path: Path, mib: int) -> Path:
    with gzip.open(path, "wb", compresslevel=6) as gz:
        block = b"\n" * (1 << 20)
        for _ in range(mib):
            gz.write(block)
    return path


def test_a_newline_bomb_is_cut_with_a_note(tmp_path):
    bomb = _newline_bomb(tmp_path / "quiet.log.gz", 48)  # 48M lines from ~50 KB
    assert bomb.stat().st_size < 100_000
    notes: list[str] = []
    t = time.process_time()
    dg = analyse([str(bomb)], notes=notes)
    spent = time.process_time() - t
    assert dg.summary()["lines"] <= GZ_LINES_FLOOR + (1 << 20)  # the floor, plus the block that passed it
    assert len(notes) == 1 and "a decompression bomb?" in notes[0] and str(bomb) in notes[0]
    assert spent < 3, spent


def test_the_cli_says_it_in_one_line_and_still_reports(tmp_path):
    bomb = _newline_bomb(tmp_path / "quiet.log.gz", 24)
    r = subprocess.run([sys.executable, "-m", "sparktui", "diagnose", str(bomb)], capture_output=True, text=True,
                       cwd=ROOT, timeout=60)
    assert r.returncode == 0 and "Traceback" not in r.stderr
    assert r.stderr.count("\n") == 1 and "stopped after" in r.stderr and "compressed" in r.stderr
    assert r.stdout.startswith("1 file(s)")


def test_a_real_shaped_log_past_the_floor_is_read_whole(tmp_path, monkeypatch):
    """Short lines that differ (a counter, a timestamp) compress to well under a line per byte: read whole."""
    monkeypatch.setattr(dmod, "GZ_LINES_FLOOR", 10_000)  # the ratio is what is tested: a floor the test can pass cheaply
    n = 100_000
    p = tmp_path / "steps.log.gz"
    p.write_bytes(gzip.compress(b"".join(b"%d step ok %x\n" % (i, i * 2654435761 % 4294967296)
                                         for i in range(n)), compresslevel=1))
    notes: list[str] = []
    dg = analyse([str(p)], notes=notes)
    assert notes == [] and dg.summary()["lines"] == n
