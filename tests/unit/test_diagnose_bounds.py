"""`diagnose` reads in bounded memory whatever it is given (issue 13, item 5): long lines are cut to
their head and tail, inputs stop at --max-bytes with a note, and lines split as they always did here."""

from __future__ import annotations

import gzip
import io
import os
import subprocess
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from sparktui.commands import diagnose as dmod
from sparktui.commands.diagnose import LINE_HEAD, LINE_TAIL, _chunks, analyse

ROOT = Path(__file__).resolve().parents[2]


def lines_of(data: bytes, **kw) -> list[str]:
    return [ln for chunk in _chunks(io.BytesIO(data), "t", **kw) for ln in chunk]


def test_a_long_line_keeps_its_head_and_tail_and_says_what_was_cut():
    body = b"x" * (5 << 20)
    out = lines_of(b"before\nERROR head " + body + b" tail end\nafter\n")
    assert len(out) == 3 and out[0] == "before" and out[2] == "after"
    assert out[1].startswith("ERROR head xx") and out[1].endswith("xx tail end")
    assert "MiB cut from this line" in out[1] and len(out[1]) < LINE_HEAD + LINE_TAIL + 100


def test_a_cut_line_still_gives_its_finding():
    """The classifier sees the head of a huge line: a CUDA OOM with a 1 MB tensor dump after it."""
    line = b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. " + b"[0.1, " * 200_000
    dg = analyse_bytes(b"INFO loading\n" + line + b"\n")
    assert "cuda_oom" in [f.id for f in dg.findings]


def analyse_bytes(data: bytes, tmp=Path("/tmp")):
    p = tmp / f"sparktui-bounds-{os.getpid()}.log"
    p.write_bytes(data)
    try:
        return analyse([str(p)])
    finally:
        p.unlink()


def test_carriage_returns_split_as_they_always_did():
    assert lines_of(b"a\rb\nc\r\nd\r\re") == ["a\r", "b", "c\r", "d\r", "\r", "e"]


def test_input_stops_at_max_bytes_with_a_note():
    notes: list[str] = []
    with open("/dev/zero", "rb") as fh:
        out = [ln for chunk in _chunks(fh, "/dev/zero", max_bytes=8 << 20, notes=notes) for ln in chunk]
    assert len(out) == 1 and "cut from this line" in out[0]
    assert notes == ["sparktui diagnose: /dev/zero: stopped after 8.0 MiB (--max-bytes); the findings cover what "
                     "was read"]


def test_a_gzip_bomb_is_read_in_bounded_steps(tmp_path):
    bomb = tmp_path / "bomb.log.gz"
    with gzip.open(bomb, "wb", compresslevel=9) as gz:
        chunk = b"\0" * (1 << 20)
        for _ in range(64):
            gz.write(chunk)
    assert bomb.stat().st_size < 200_000
    r = subprocess.run([sys.executable, "-m", "sparktui", "diagnose", "--max-bytes", "16M", str(bomb)],
                       capture_output=True, text=True, cwd=str(ROOT), timeout=120)
    assert r.returncode == 0 and "Traceback" not in r.stderr
    assert r.stderr.strip() == f"sparktui diagnose: {bomb}: stopped after 16.0 MiB (--max-bytes); the findings " \
                               "cover what was read"


def test_a_truncated_gzip_is_one_line(tmp_path):
    p = tmp_path / "cut.log.gz"
    p.write_bytes(gzip.compress(os.urandom(1 << 20).hex().encode())[:5000])  # cut mid-stream
    r = subprocess.run([sys.executable, "-m", "sparktui", "diagnose", str(p)], capture_output=True, text=True,
                       cwd=str(ROOT), timeout=60)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and r.stderr.startswith(f"sparktui diagnose: cannot read {p}:")


@settings(max_examples=150, deadline=None)
@given(st.lists(st.binary(max_size=300).map(lambda b: b.replace(b"\n", b"")), max_size=40),
       st.integers(min_value=1, max_value=64), st.booleans())
def test_blocks_of_any_size_give_the_lines_a_plain_split_gives(parts, block, final_newline):
    """Whatever the block size, lines shorter than the cap come out as the old line reader gave them."""
    data = b"\n".join(parts) + (b"\n" if final_newline and parts else b"")
    old = dmod.BLOCK
    dmod.BLOCK = block
    try:
        got = lines_of(data)
    finally:
        dmod.BLOCK = old
    # the reader this replaced: universal newlines kept untranslated, the final "\n" dropped
    want = [ln[:-1] if ln.endswith("\n") else ln
            for ln in io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors="replace", newline="")]
    assert got == want
