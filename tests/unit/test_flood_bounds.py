"""Under a flood the engine stays bounded and says what it did not show (issue 13, items 3-4):
a source too far behind drops to its tail (the session file keeps every line), a queue past its
bound refuses and counts, a full session file stops with a note, and one line number (LogLine.seq)
holds from the follower to the finding, the store's row and the session file."""

from __future__ import annotations

from sparktui.config import demo_config
from sparktui.diagnosis import Diagnoser
from sparktui.engine import Engine
from sparktui.logs.follow import LogCursor, LogFollower
from sparktui.model import LogBatch, LogLine
from sparktui.session import Session

NODE, SRC = "spark1", "vllm"
OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"


def _batches(n_batches: int, size: int, start: int = 1, node: str = NODE, source: str = SRC) -> list[LogBatch]:
    out = []
    seq = start
    for _ in range(n_batches):
        out.append(LogBatch(node, source, tuple(LogLine(node, source, f"INFO step {seq + i}", seq=seq + i)
                                                for i in range(size))))
        seq += size
    return out


def _gaps(session: Session) -> list[dict]:
    return [e for e in session.read_events() if e.get("type") == "LogGap"]


def _file_lines(session: Session, node: str = NODE, source: str = SRC) -> list[str]:
    return session.log_path(node, source).read_text().splitlines()


def test_a_source_far_behind_drops_to_its_tail_and_the_session_file_keeps_every_line(tmp_path):
    session = Session.create("t", root=tmp_path)
    eng = Engine(demo_config(), session=session)
    eng.SKIP_ABOVE = 1000
    for b in _batches(30, 100):  # 3000 lines queued before the pump runs: 2000 over the bound
        eng.emit(b)
    while eng._pending:
        eng.drain()
    s = eng.logs.find(NODE, SRC)
    assert s.skipped > 0 and s.lost == 0
    assert s.total + s.skipped == 3000
    assert s.seqs[-1] == 3000 and s.get(s.total - 1) == "INFO step 3000"  # the tail is what is held
    session.flush()
    assert _file_lines(session) == [f"INFO step {i}" for i in range(1, 3001)]  # every line, in order
    eng._report_gaps(final=True)
    session.flush()
    assert _gaps(session)[-1]["skipped"] == s.skipped


def test_a_queue_past_its_bound_refuses_batches_and_counts_them_lost(tmp_path):
    session = Session.create("t", root=tmp_path)
    eng = Engine(demo_config(), session=session)
    eng.SKIP_ABOVE, eng.LOSE_ABOVE = 1000, 2500
    for b in _batches(30, 100):
        eng.emit(b)
    assert eng._queued_total <= 2500
    while eng._pending:
        eng.drain()
    s = eng.logs.find(NODE, SRC)
    assert s.lost == 500 and s.total + s.skipped + s.lost == 3000
    session.flush()
    kept = _file_lines(session)
    assert len(kept) == 2500 and kept[-1] == "INFO step 2500"  # the refused ones are the newest
    eng._report_gaps(final=True)
    session.flush()
    assert _gaps(session)[-1]["lost"] == 500
    # the bound is per queue, not per life: once drained, lines are taken again
    eng.emit(_batches(1, 10, start=3001)[0])
    eng.drain()
    assert s.seqs[-1] == 3010 and s.lost == 500


def test_a_session_file_at_its_cap_stops_with_a_note_and_counts_what_it_did_not_keep(tmp_path):
    session = Session.create("t", root=tmp_path, max_log_bytes=1000)
    eng = Engine(demo_config(), session=session)
    for b in _batches(5, 50):  # ~3.4 KB of lines for a 1000-byte cap
        eng.process([b])
    session.flush()
    lines = _file_lines(session)
    assert "reached its cap of 1000 B" in lines[-1]
    kept = lines[:-1]
    assert kept == [f"INFO step {i}" for i in range(1, len(kept) + 1)]  # whole lines, none cut
    assert sum(len(x) + 1 for x in kept) <= 1000
    s = eng.logs.find(NODE, SRC)
    assert s.unsaved == 250 - len(kept) and s.total == 250  # the screen still has them all


def test_one_line_number_from_follower_to_finding_row_and_session_file_across_a_reconnect(tmp_path):
    """The follower numbers lines; a reconnect replays the last second (dropped as repeats) and
    numbering goes on; a flood in between drops lines to the tail; the finding's line, the store's
    row for it and the session file's line are the same."""
    session = Session.create("t", root=tmp_path)
    eng = Engine(demo_config(), processors=[Diagnoser()], session=session)
    eng.SKIP_ABOVE = 300
    cursor = LogCursor()
    follower = LogFollower(NODE, SRC, "cid", cursor, eng.emit)

    def stamp(i: int) -> bytes:
        return f"2026-12-01T10:00:{i // 1000:02d}.{i % 1000:09d}Z".encode()

    def feed(first: int, last: int, special: dict[int, str] | None = None) -> None:
        raw = [stamp(i) + b" " + (special or {}).get(i, f"INFO step {i}").encode() for i in range(first, last + 1)]
        follower._take(raw)
        follower.flush()

    feed(1, 200)
    while eng._pending:
        eng.drain()
    cursor.begin_resume()  # the stream broke; it is reopened from a little before the last line
    feed(190, 1200)  # 190..200 again: repeats, dropped; 201..1200 queue up past the bound
    feed(1201, 1250, {1230: OOM})
    while eng._pending:
        eng.drain()
    s = eng.logs.find(NODE, SRC)
    assert s.skipped > 0  # the flood part was dropped to the tail
    found = [f for f in eng.state.findings if f.id == "cuda_oom"]
    assert found and found[0].line == 1230
    pos = s.position_of(1230)
    assert pos is not None and s.get(pos) == OOM
    session.flush()
    file_lines = _file_lines(session)
    assert len(file_lines) == 1250  # no repeat from the reconnect, nothing missing
    assert file_lines[1230 - 1].endswith(" " + OOM)
