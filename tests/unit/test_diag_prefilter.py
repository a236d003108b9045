"""The classifier's shortcuts never change what it finds.

``SourceScanner`` scans a batch for literals only in lines it has not seen before and skips
repeats that cannot change anything (``_verdict``).  Property tests on real lines (fixture logs,
catalogue and milestone examples) in random orders and batch sizes: the same findings, milestones
and NCCL state as a scanner that remembers nothing; and no line that the catalogue matches on its
own is ever hidden by the prefilter.  Also: ``diagnose``'s block splitting gives the lines that a
line-by-line split gives.
"""

from __future__ import annotations

import io
import tomllib
from functools import lru_cache
from pathlib import Path

from hypothesis import HealthCheck, given, settings, strategies as st

from sparktui.commands import diagnose
from sparktui.diagnosis import lineprefix
from sparktui.diagnosis.catalogue import CATALOGUE_PATH, default_catalogue
from sparktui.diagnosis.classifier import SourceScanner, compile_scanner
from sparktui.diagnosis.milestones import RULES_PATH
from sparktui.diagnosis.tracebacks import TB_START

FIX = Path(__file__).resolve().parents[1] / "fixtures"
LOGS = [*sorted((FIX / "logs").glob("*.log")), *sorted((FIX / "vllm-cpu").glob("*.log")),
        *sorted((FIX / "sglang-2node").glob("*.log")), FIX / "nccl-2gpu" / "busy_ras.rank0.log",
        FIX / "nccl-2gpu" / "healthy.rank0.log", FIX / "nccl-2gpu" / "watchdog.rank1.log"]


@lru_cache(maxsize=1)
def pool() -> tuple[str, ...]:
    lines: list[str] = []
    for p in LOGS:
        lines += p.read_text(encoding="utf-8", errors="replace").split("\n")
    for path in (CATALOGUE_PATH, RULES_PATH):
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        for table in (*data.get("finding", ()), *data.get("milestone", ()), *data.get("phase", ())):
            lines += [*table.get("examples", ()), *table.get("hang_examples", ())]
    return tuple(dict.fromkeys(lines))


@lru_cache(maxsize=1)
def hot() -> tuple[str, ...]:
    """The lines of the pool that hold a scan literal: the ones the classifier works on."""
    lits = compile_scanner().literals
    return tuple(x for x in pool() if any(lit in x for lit in lits))


def lines_from(draw_ids: list[int]) -> list[str]:
    # even ids: any line; odd ids: a line the classifier works on
    return [(hot() if i % 2 else pool())[(i // 2) % len(hot() if i % 2 else pool())] for i in draw_ids]


def state(sc: SourceScanner) -> tuple:
    fs = [(f.id, f.severity, f.title, f.line, f.evidence) for f in sc.findings]
    ms = sorted((m.id, m.text, m.line, m.progress, m.detail) for m in sc.milestones.reached.values())
    mt = sc.milestones
    return (fs, ms, [t.to_json() for t in sc.trackers], sc.lineno, sc._bare_exc, mt.phases, mt.hang_marks,
            mt.progress, mt.generation, list(sc.tail))


def run(lines: list[str], cuts: list[int], remember: bool) -> tuple:
    sc = SourceScanner("prop")
    if not remember:
        sc.seen_budget = 0
    at = 0
    for n in cuts:
        sc.feed(lines[at:at + n])
        at += n
    sc.feed(lines[at:])
    before = state(sc)  # what the lines did, before the end-of-input checks
    sc.finish()
    return before, state(sc)


ids = st.lists(st.integers(min_value=0, max_value=10**6), min_size=1, max_size=120)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ids, st.integers(min_value=2, max_value=12), st.lists(st.integers(min_value=1, max_value=300), max_size=30))
def test_remembering_repeats_changes_nothing(draw_ids, repeats, cuts):
    # a random piece of real log, repeated (as floods and restarted servers repeat themselves)
    lines = lines_from(draw_ids) * repeats
    assert run(lines, cuts, remember=True) == run(lines, cuts, remember=False)


def benign(line: str) -> bool:
    return TB_START not in line and default_catalogue().match(lineprefix.clean(line)) is None


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ids, st.integers(min_value=0, max_value=10**6), st.integers(min_value=1, max_value=3))
def test_prefilter_never_hides_a_matching_line(draw_ids, pick, repeats):
    cat = default_catalogue()
    matching = [x for x in pool() if TB_START not in x and cat.match(lineprefix.clean(x)) is not None
                and not lineprefix.body(lineprefix.clean(x)).startswith(("frame #", "Exception raised from "))]
    line = matching[pick % len(matching)]
    want = cat.match(lineprefix.clean(line))
    filler = [x for x in lines_from(draw_ids) if benign(x)]
    sc = SourceScanner("prop")
    for _ in range(repeats):  # seen before, then again: the remembered path too
        sc.feed(filler + [line] + filler)
    # the line's own entry, or one its evidence line names with a higher priority
    got = {f.id for f in sc.findings}
    assert want.id in got or any(cat[f].priority > want.priority for f in got), (line, got)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", "\r", "\n", "é", "\r\n", "\n\r", "x" * 9000, ""]), max_size=50),
       st.integers(min_value=1, max_value=2))
def test_block_split_matches_line_by_line(parts, times):
    # one block, framed by newlines: every line of it is a whole line of the block (lines that
    # span blocks take another path, unchanged)
    body = "".join(parts) * times
    data = ("\n" + body + "\n").encode()
    assert len(data) < diagnose.BLOCK
    lines = [ln for chunk in diagnose._chunks(io.BufferedReader(io.BytesIO(data)), "x") for ln in chunk]
    want = [""]
    for p in body.split("\n"):  # the reference: one line at a time, cut first, then split after each "\r"
        diagnose._add(want, p if len(p) <= diagnose.LINE_CAP else diagnose._cut_str(p))
    assert lines == want


def test_latest_only_lines_are_never_remembered():
    # progress redraws: only the last few of a batch count, so the same line is a candidate in
    # one batch and not in the next; remembering it either way would change the progress seen
    bars = [f"Loading safetensors checkpoint shards: {k * 10:3d}% Completed | {k}/10 [00:01<00:02, 3.00it/s]"
            for k in range(1, 11)]
    # some redraws hold another literal too (what the line says beyond the bar still counts)
    mixed = [f"ValueError: redraw {k}: {b}" if k in (0, 3) else b for k, b in enumerate(bars)]
    lines = bars + bars[::-1] + bars + mixed + mixed[::-1] + bars + mixed
    for cuts in ([10, 10], [7, 9, 3], [1] * 29, [13, 17, 5, 20]):
        assert run(lines, cuts, remember=True) == run(lines, cuts, remember=False)
    sc = SourceScanner("bars")
    sc.feed(bars)
    sc.feed(bars[::-1])
    assert sc.milestones.progress["weights_loading"] == 0.1  # the last redraw of the second batch
