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


def test_a_big_batch_dropped_to_the_tail_still_shows_its_newest_lines(tmp_path):
    """While a source is behind, each batch's newest SHOW_TAIL lines still reach the screen (and
    the diagnoser): the view follows the source instead of freezing on the last line it took."""
    session = Session.create("t", root=tmp_path)
    eng = Engine(demo_config(), session=session)
    eng.SKIP_ABOVE = 1000
    for b in _batches(5, 1000):  # 5000 queued: the first four batches are over the bound when drained
        eng.emit(b)
    while eng._pending:
        eng.drain()
    s = eng.logs.find(NODE, SRC)
    tail = eng.SHOW_TAIL
    assert s.skipped == 4 * (1000 - tail) and s.total == 4 * tail + 1000 and s.lost == 0
    for k in range(4):  # each skipped batch: its newest lines are held, with their own numbers
        newest = (k + 1) * 1000
        assert s.get(s.position_of(newest)) == f"INFO step {newest}"
        assert s.position_of(newest - tail + 1) is not None and s.position_of(newest - tail) is None
    session.flush()
    assert _file_lines(session) == [f"INFO step {i}" for i in range(1, 5001)]  # once each, in order
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


# --- a follower behind its source: the bulk goes on as one block, the screen gets the tail ---

def _stamped(first: int, last: int, at: float, text: str = "INFO step {}") -> bytes:
    """Lines ``first..last`` as the Engine sends them (its timestamp, a space, the text), stamped
    ``at`` (epoch seconds) plus a microsecond a line."""
    import datetime as dt

    out = []
    for i in range(first, last + 1):
        t = dt.datetime.fromtimestamp(at + i * 1e-6, dt.timezone.utc)
        out.append(t.strftime("%Y-%m-%dT%H:%M:%S.%f") + "000Z " + text.format(i))
    return "\n".join(out).encode()


def test_a_follower_behind_its_source_hands_on_a_block_and_parses_only_the_tail(tmp_path):
    import time

    from sparktui.logs import follow
    from sparktui.model import LogBlock

    got: list = []
    cursor = LogCursor()
    f = LogFollower(NODE, SRC, "cid", cursor, got.append)
    now = time.time()
    f._take_block(_stamped(1, 100, now))  # keeping up: every line taken apart
    f.flush()
    assert [type(e) for e in got] == [LogBatch] and len(got[0].lines) == 100
    got.clear()
    behind = now - 10 * follow.BEHIND_S  # the next lines were written well before they were read
    f._take_block(_stamped(101, 5100, behind))
    f.flush()
    block, tail = got
    assert isinstance(block, LogBlock) and isinstance(tail, LogBatch)
    assert len(tail.lines) == follow.TAIL_LINES  # the screen gets the newest lines
    assert block.count + len(tail.lines) == 5000
    # one numbering: the block ends where the tail begins, the tail ends at the newest line
    assert block.last_seq == 5100 - follow.TAIL_LINES and tail.lines[0].seq == block.last_seq + 1
    assert tail.lines[-1].seq == 5100 == cursor.seq and tail.lines[-1].text == "INFO step 5100"
    # the block is the session file's own form: what a parsed batch would have written
    first = block.data.split(b"\n", 1)[0].decode()
    assert first.endswith(" INFO step 101") and block.data.endswith(b"\n") and block.data.count(b"\n") == block.count
    got.clear()
    f._take_block(_stamped(5101, 5200, behind))  # right after a tail: all of it as a block
    assert [type(e) for e in got] == [LogBlock] and got[0].count == 100 and got[0].last_seq == 5200


def test_a_block_reaches_the_session_file_counted_skipped_with_the_numbers_of_its_lines(tmp_path):
    """A follower's block and the lines around it: the file has every line in order (the same
    bytes as parsed lines would give, secrets masked), the pane counts the block skipped, and the
    store's lines keep their numbers."""
    from sparktui.model import LogBlock

    session = Session.create("t", root=tmp_path)
    eng = Engine(demo_config(), session=session)
    eng.emit(LogBatch(NODE, SRC, tuple(LogLine(NODE, SRC, f"INFO step {i}", seq=i) for i in range(1, 11))))
    data = b"".join(f"INFO step {i}\n".encode() for i in range(11, 21)) + b"HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz\n"
    eng.emit(LogBlock(NODE, SRC, data, 11, 21))
    eng.emit(LogBatch(NODE, SRC, (LogLine(NODE, SRC, "INFO step 22", seq=22),)))
    while eng._pending:
        eng.drain()
    s = eng.logs.find(NODE, SRC)
    assert s.skipped == 11 and s.total == 11
    assert s.get(s.position_of(22)) == "INFO step 22" and s.position_of(15) is None
    session.flush()
    lines = _file_lines(session)
    assert lines[:20] == [f"INFO step {i}" for i in range(1, 21)]
    assert lines[20] == "HF_TOKEN=***" and lines[21] == "INFO step 22"  # line 22 is the 22nd line


def test_a_block_at_a_full_session_file_is_counted_not_written(tmp_path):
    from sparktui.model import LogBlock

    session = Session(tmp_path, max_log_bytes=100)
    data = b"".join(f"INFO step {i}\n".encode() for i in range(1, 31))  # ~400 bytes
    assert session.record(LogBlock(NODE, SRC, data, 30, 30)) > 0
    kept = [ln for ln in _file_lines(session) if ln.startswith("INFO")]
    assert 0 < len(kept) < 30 and session.record(LogBlock(NODE, SRC, b"x\n", 1, 31)) == 1


def test_a_source_whose_newest_lines_were_skipped_counts_to_their_number(tmp_path):
    """The pane's count is the newest line's number as in the session file, even when that line
    only reached the file (a block at the end of a burst), and the file is on disk when the
    drain that wrote it returns (a reader of the file sees the whole burst)."""
    from sparktui.model import LogBlock

    session = Session.create("t", root=tmp_path)
    eng = Engine(demo_config(), session=session)
    eng.emit(LogBatch(NODE, SRC, tuple(LogLine(NODE, SRC, f"INFO step {i}", seq=i) for i in range(1, 6))))
    eng.emit(LogBlock(NODE, SRC, b"".join(f"INFO step {i}\n".encode() for i in range(6, 31)), 25, 30))
    while eng._pending:
        eng.drain()
    s = eng.logs.find(NODE, SRC)
    assert s.total == 5 and s.skipped == 25 and s.last_seq == 30
    assert _file_lines(session) == [f"INFO step {i}" for i in range(1, 31)]  # no flush of our own


def test_a_relays_count_of_lines_it_did_not_send_keeps_the_numbering_and_counts_them_lost(tmp_path):
    """A relay in tail mode sends a DROPPED line for what it did not send: the follower numbers on
    past them, hands them on as a block of no bytes, and the engine counts them lost (the session
    file, full, would not have kept them); the lines around keep their own numbers."""
    from sparktui.transport.node_relay import DROPPED
    from sparktui.model import LogBlock

    got: list = []
    cursor = LogCursor()
    f = LogFollower(NODE, SRC, "cid", cursor, got.append)
    import time
    now = time.time()
    block = _stamped(1, 3, now) + b"\n" + DROPPED + b"500\n" + _stamped(504, 505, now) + b"\n" + DROPPED + b"7"
    f._take_block(block)
    f.flush()
    kinds = [(type(e).__name__, getattr(e, "count", None) or len(getattr(e, "lines", ()))) for e in got]
    assert kinds == [("LogBatch", 3), ("LogBlock", 500), ("LogBatch", 2), ("LogBlock", 7)]
    assert got[1].data == b"" and got[1].last_seq == 503 and [ln.seq for ln in got[2].lines] == [504, 505]
    assert got[2].lines[0].text == "INFO step 504" and cursor.seq == 512

    session = Session(tmp_path, max_log_bytes=1 << 20)  # not even full: a block of no bytes saves nothing
    eng = Engine(demo_config(), session=session)
    for ev in got:
        eng.emit(ev)
    while eng._pending:
        eng.drain()
    s = eng.logs.find(NODE, SRC)
    assert s.total == 5 and s.lost == 507 and s.skipped == 0 and s.last_seq == 512
    session.flush()
    assert [ln.split(" ", 1)[1] for ln in _file_lines(session)] == [f"INFO step {i}" for i in (1, 2, 3, 504, 505)]
    assert isinstance(got[1], LogBlock)


def test_a_full_session_file_is_told_to_the_sources_once(tmp_path):
    told: list = []

    class Src:
        node_name = NODE

        def file_full(self, node, source):
            told.append((node, source))

    session = Session(tmp_path, max_log_bytes=200)
    eng = Engine(demo_config(), sources=[Src()], session=session)
    for b in _batches(5, 10):
        eng.emit(b)
    while eng._pending:
        eng.drain()
    assert told == [(NODE, SRC)]
