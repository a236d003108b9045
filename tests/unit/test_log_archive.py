"""The session log file read back by line number (issue 13, item 3: the view scrolls back past the
store's window into the file).  Files are written by the real ``Session`` from real log lines."""

from __future__ import annotations

from pathlib import Path

from sparktui.logs.archive import LogArchive
from sparktui.logs.sanitize import clean_line
from sparktui.model import LogBatch, LogBlock, LogLine
from sparktui.session import Session
from sparktui.timefmt import format_ns

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SERVE = (FIXTURES / "vllm-cpu" / "serve.log").read_text(encoding="utf-8").splitlines()
NCCL = (FIXTURES / "nccl-2gpu" / "healthy.rank0.log").read_text(encoding="utf-8").splitlines()
NODE, SRC = "spark1", "vllm"
T0 = 1_780_000_000.0


def _line(seq: int, texts: list[str] = SERVE, stamped: bool = True) -> LogLine:
    text = texts[(seq - 1) % len(texts)]
    ts = T0 + seq / 1000
    raw = format_ns(ts) if stamped else None
    return LogLine(NODE, SRC, text, ts if stamped else None, seq, raw)


def _write(session: Session, first: int, last: int, **kw) -> list[LogLine]:
    lines = [_line(s, **kw) for s in range(first, last + 1)]
    for i in range(0, len(lines), 500):
        session.record(LogBatch(NODE, SRC, tuple(lines[i:i + 500])))
    session.flush()
    return lines


def _expect(lines: list[LogLine]) -> list[tuple[int, str]]:
    return [(ln.seq, clean_line(ln.text)) for ln in lines]


def _got(archive: LogArchive, first: int, last: int) -> list[tuple[int, str]]:
    return [(a.seq, a.text) for a in archive.read(first, last)]


def test_ranges_across_index_entries_read_back_the_lines_with_their_numbers_and_stamps(tmp_path):
    session = Session.create("t", root=tmp_path)
    lines = _write(session, 1, 3000)
    archive = LogArchive(session.log_path(NODE, SRC), span=4096)  # small: many entries to cross
    assert archive.refresh() == 3000
    assert archive.entries > 20
    for k in range(1, archive.entries):  # a read starting, ending and straddling at each entry
        at = archive._before[k]  # lines before the entry: line at+1 starts it
        for first, last in ((at + 1, at + 1), (at, at + 2), (at - 5, at), (at + 1, at + 40)):
            assert _got(archive, first, last) == _expect(lines[first - 1:last])
    got = archive.read(1, 3)
    assert [a.ts for a in got] == [ln.ts for ln in lines[:3]]  # the daemon's stamp, as the store keeps it
    assert _got(archive, 2990, 5000) == _expect(lines[2989:])  # past the end: what there is
    assert archive.read(0, 0) == [] and archive.read(3001, 3002) == []


def test_a_growing_file_extends_its_index_and_a_half_written_line_waits(tmp_path):
    session = Session.create("t", root=tmp_path)
    lines = _write(session, 1, 1000, texts=NCCL)
    archive = LogArchive(session.log_path(NODE, SRC), span=2048)
    assert archive.refresh() == 1000
    entries = archive.entries
    lines += _write(session, 1001, 2500, texts=NCCL)
    with open(session.log_path(NODE, SRC), "ab") as fh:  # the writer is half-way through a line
        fh.write(b"2026-12-01T10:00:00.000000000Z NCCL INFO half a li")
    assert archive.refresh() == 2500
    assert archive.entries > entries
    assert _got(archive, 990, 1010) == _expect(lines[989:1010])
    assert archive.read(2501, 2501) == []
    with open(session.log_path(NODE, SRC), "ab") as fh:
        fh.write(b"ne, now whole\n")
    assert archive.refresh() == 2501
    assert _got(archive, 2500, 2501)[1] == (2501, "NCCL INFO half a line, now whole")
    assert _got(archive, 1, 2500) == _expect(lines)


def test_the_cap_note_is_not_a_log_line_and_nothing_after_it_is_counted(tmp_path):
    session = Session.create("t", root=tmp_path, max_log_bytes=20_000)
    _write(session, 1, 2000)
    kept = session.log_path(NODE, SRC).read_bytes().splitlines()
    assert kept[-1].startswith(b"[sparktui: this session log reached its cap")
    archive = LogArchive(session.log_path(NODE, SRC), span=1024)
    assert archive.refresh() == len(kept) - 1
    assert archive.capped
    last = archive.read(len(kept) - 1, len(kept) + 5)
    assert len(last) == 1 and not last[0].text.startswith("[sparktui")
    _write(session, 2001, 2100)  # the full file takes nothing more: the count stays
    assert archive.refresh() == len(kept) - 1


def test_bad_bytes_controls_and_a_very_long_line_read_safely(tmp_path):
    session = Session.create("t", root=tmp_path)
    huge = "x" * (3 * LogArchive.LINE_CAP)
    session.record(LogBatch(NODE, SRC, (
        LogLine(NODE, SRC, "plain", None, 1),
        LogLine(NODE, SRC, "bell \x07 and \x1b[31mred\x1b[0m", None, 2),
        LogLine(NODE, SRC, huge, None, 3),
        LogLine(NODE, SRC, "after the long one", None, 4),
    )))
    # a skipped block goes to the file as the follower read it: invalid UTF-8 included
    session.record(LogBlock(NODE, SRC, b"2026-12-01T10:00:00.5Z caf\xe9 \xff\xfe end\n", 1, 5))
    session.flush()
    archive = LogArchive(session.log_path(NODE, SRC), span=1024)
    archive.READ = archive.BLOCK = 4096  # the long line spans many blocks, indexing and reading
    assert archive.refresh() == 5
    got = archive.read(1, 5)
    assert [a.seq for a in got] == [1, 2, 3, 4, 5]
    assert got[1].text == clean_line("bell \x07 and \x1b[31mred\x1b[0m") and "\x1b" not in got[1].text
    assert got[2].text == "x" * LogArchive.LINE_CAP and got[2].more == 2 * LogArchive.LINE_CAP
    assert got[3].text == "after the long one" and got[3].more == 0
    assert got[4].text == "caf\ufffd \ufffd\ufffd end" and got[4].ts is not None
    assert [a.seq for a in archive.read(4, 5)] == [4, 5]  # from the entry after the long line


def test_a_missing_file_is_a_state_then_reads_once_it_appears(tmp_path):
    session = Session.create("t", root=tmp_path)
    archive = LogArchive(session.log_path(NODE, SRC))
    assert archive.refresh() == 0
    assert archive.error and "No such file" in archive.error
    assert archive.read(1, 10) == []
    lines = _write(session, 1, 10, stamped=False)
    assert archive.refresh() == 10 and archive.error is None
    assert _got(archive, 1, 10) == _expect(lines)
    assert all(a.ts is None for a in archive.read(1, 10))


def test_a_50k_line_file_read_page_by_page_equals_the_file_and_the_index_stays_small(tmp_path):
    session = Session.create("t", root=tmp_path)
    _write(session, 1, 50_000)
    path = session.log_path(NODE, SRC)
    archive = LogArchive(path)
    assert archive.refresh() == 50_000
    pages = []
    for first in range(1, 50_001, 256):
        pages += archive.read(first, first + 255)
    assert [a.seq for a in pages] == list(range(1, 50_001))
    raw = path.read_bytes().decode("utf-8").split("\n")[:-1]
    assert [a.text for a in pages] == [clean_line(r.split(" ", 1)[1]) for r in raw]
    # one entry per 64 KiB of file: a few hundred for 50k lines, not one per line
    assert archive.entries <= path.stat().st_size // LogArchive.SPAN + 1
    assert archive.entries * 16 < 2_000 + path.stat().st_size // 2_000
