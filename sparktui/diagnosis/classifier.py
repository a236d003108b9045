"""Streaming classifier: one per log source (node/container or file), fed batches of lines.

Hot path (every line): the batch is joined once and searched with ``str.find`` for the prefilter
literals of the catalogue, the milestone rules and the NCCL tracker (a few C-speed scans per
batch); only the lines holding a literal are cleaned, split and matched against regexes.  A
line is cut at ``MAX_LINE`` characters first, so a 10 MB line costs no more than any other.
Logs repeat themselves (an NCCL flood of 183k lines holds 4.8k distinct ones; access-log lines
carry no timestamp): each scanner remembers, within ``SEEN_CHARS``, the lines it has seen and the
literals they hold, so a repeat costs a dict lookup instead of a scan, and a repeat that cannot
change anything (its finding already raised, no milestone, NCCL or traceback state) is not
classified again.

Python tracebacks (and the C++ ``frame #N`` blocks torch appends) are followed line by line by a
``TracebackTracker`` and give ONE finding, anchored on the final exception line, with the key lines
as evidence; nothing inside a traceback is classified on its own.
"""

from __future__ import annotations

import time
from collections import deque
from itertools import compress, repeat
from operator import is_not
from dataclasses import dataclass, replace
from typing import Sequence

from ..logs.sanitize import clean_line
from ..model import Finding, Milestone
from . import lineprefix
from .catalogue import Catalogue, Entry, default_catalogue, rank
from .end_phase import LogEnd, default_end_phases, log_end
from .exc_shapes import default_shapes, parse as parse_exception
from .last_words import IGNORED_HEAD, WINDOW
from .milestones import MilestoneTracker, Rules, default_rules
from .nccl_lines import parse_nccl_line, parse_watchdog_line
from .nccl_ranks import RankTracker
from .tracebacks import END, FOREIGN, RECENT_FRAMES, TB_START, TracebackTracker

MAX_LINE = 16_384  # characters of a line that are scanned (bounded work on a 10 MB line)
MAX_EVIDENCE_CHARS = 400
SEEN_CHARS = 2 << 20  # characters of seen lines (and what they hold) that a scanner remembers
TAIL_LINES = 6

# literals the NCCL tracker needs beyond the catalogue's
_NCCL_LITERALS = (
    "NCCL version", " Init START", " Init COMPLETE", "Destroy COMPLETE", " via ", "Connected all rings",
    "Using network", "Bootstrap", "NET/IB", "opCount", "Watchdog caught", "last enqueued",
    "Last enqueued", "ACTIVE OPS", "lugin",
)


# Scanning costs one pass over the batch per literal, so a few short "umbrella" literals stand in
# for the longer ones that contain them (a superset filter: the regexes decide).  Kept only where
# one umbrella pass costs less than the passes it replaces (measured on the 7 MB flood log; short
# needles skip less) and the umbrella is rare in healthy vLLM/NCCL/Ray output: e.g. "onnect"
# covers "Connection refused", "connect to ", "Connected all rings".  Not "KV cache": every vLLM stats
# line ("GPU KV cache usage: ...") holds it, which sent each one down the slow per-line path.
_UMBRELLAS = ("onnect", " GCS", "mory", "rror", "fail", "ddress", "enqueued", " wei", "available",
              "Init ", "Ray ", "ibv_", "which is of c", "died", "out after", "ailed", "ncclInvalid",
              # issue 12's entries: each of these stands for three or more of their literals
              "xit", "rchitecture", "nterface", "dead", "driver", "alloc")


# Literals of lines that can flood (SUBSYS=COLL logs every collective, tqdm redraws progress)
# where only the latest few of a batch matter: the highest opCount, the current shard count.
_LATEST_ONLY = {"opCount": 16, "% Completed |": 4}

# frames of a cut-off traceback tried for what they were doing (nearest first)
_CUT_FRAMES_LOOKED_AT = 4

# markers of SourceScanner._seen / _verdict
# (memo values are tuples and these plain objects: nothing the garbage collector has to walk)
_QUIET = object()  # a line that holds no literal
_UNKNOWN = object()  # verdict not worked out yet
_PLACED = object()  # the line holds a latest-only literal: scanned for those each time, never skipped
_BUSY = object()  # classifying the line can move state
# the levels a logger prints advice, facts and notices at: an error entry matched on such a line is
# raised as a warning (catalogue ``info_lines`` / ``warning_lines`` opt out), under its own key
_LOW_LEVELS = {"INFO": "info_lines", "DEBUG": "info_lines", "WARNING": "warning_lines", "WARN": "warning_lines"}
_LOW_KEY = "low-level line"
# an info entry (a fact, e.g. NVML cannot report GB10 memory) matched on the exception a program
# raised is what that program died of: an error, under its own key
_EXC_KEY = "raised exception"


def _stopped(end: LogEnd | None) -> list[str]:
    """The evidence line for a stop that was asked for after the log's last line, if any."""
    if end is None or end.stop is None:
        return []
    return [f"then a stop was asked for, line {end.stop[0]}: {end.stop[1][:200]}"]


def _frame_line(body: str) -> str | None:
    """The 'File "...", line N, in f' part of a line, after any prefix lineprefix does not know
    ("[vllm]: [rank0]:"), or None."""
    at = body.find('File "')
    return body[at:].strip() if at >= 0 and ", line " in body else None


def _ev(text: str) -> str:
    text = clean_line(text).strip()
    return text if len(text) <= MAX_EVIDENCE_CHARS else text[: MAX_EVIDENCE_CHARS - 1] + "…"


def _merge(a: Sequence[str] | None, b: Sequence[str] | None, order: dict[str, int]) -> Sequence[str]:
    """Two lists of literals of one line as one, in scan order (the order routing sees them)."""
    if not a or not b:
        return a or b or ()
    return sorted([*a, *b], key=order.__getitem__)


def _hits(text: str, pos: int, lits: tuple[str, ...]) -> tuple[list[tuple[int, list[str]]], list[int]]:
    """The lines of ``text`` (from offset ``pos``, a line start) holding literals, as (line index
    counted from ``pos``, the literals in ``lits`` order), in order; and the lines holding a
    latest-only literal that are left out this time (they may be candidates another time)."""
    find, rfind = text.find, text.rfind
    starts: dict[int, list[str]] = {}
    noisy: list[int] = []
    for lit in lits:
        keep = _LATEST_ONLY.get(lit)
        if keep:  # scan backwards, stop after the last few
            p = rfind(lit, pos)
            while p != -1:
                s = rfind("\n", 0, p) + 1
                if keep:
                    starts.setdefault(s, []).append(lit)
                    keep -= 1
                else:
                    noisy.append(s)
                p = rfind(lit, pos, s) if s > pos else -1
            continue
        p = find(lit, pos)
        while p != -1:
            s = rfind("\n", 0, p) + 1
            hit = starts.get(s)
            if hit is None:
                starts[s] = [lit]
            else:
                hit.append(lit)
            e = find("\n", p)
            if e == -1:
                break
            p = find(lit, e)
    if not starts and not noisy:
        return [], []
    count = text.count
    out: list[tuple[int, list[str]]] = []
    idx, at = 0, pos
    for s in sorted(starts):
        idx += count("\n", at, s)
        at = s
        out.append((idx, starts[s]))
    left: list[int] = []
    idx, at = 0, pos
    for s in sorted(set(noisy)):
        idx += count("\n", at, s)
        at = s
        left.append(idx)
    return out, left


@dataclass(frozen=True)
class _Compiled:
    catalogue: Catalogue
    rules: Rules
    literals: tuple[str, ...]  # what the batch is scanned for
    # scan literal -> the catalogue (literal, entries) pairs and milestone rule indexes it stands for
    cat_routes: dict[str, tuple[tuple[str, tuple[Entry, ...]], ...]]
    rule_routes: dict[str, tuple[int, ...]]
    order: dict[str, int]  # scan literal -> its place in ``literals``


_compiled_cache: dict[tuple[int, int], _Compiled] = {}


def compile_scanner(catalogue: Catalogue | None = None, rules: Rules | None = None) -> _Compiled:
    cat = catalogue or default_catalogue()
    rul = rules or default_rules()
    key = (id(cat), id(rul))
    c = _compiled_cache.get(key)
    if c is None:
        lits = set(cat.literals) | set(rul.literals) | set(_NCCL_LITERALS) | {TB_START}
        lits |= {u for u in _UMBRELLAS if any(u in lit for lit in lits)}
        # a literal containing another is redundant: the shorter one finds the same lines
        minimal: list[str] = []
        # (ties in length in a fixed order: a set's order changes with the hash seed, and so would
        # which of two entries of equal priority a line names)
        for lit in sorted(lits, key=lambda s: (len(s), s)):
            if not any(m in lit for m in minimal):
                minimal.append(lit)
        cat_routes = {
            s: tuple((lit, ents) for lit, ents in cat.by_literal.items() if s in lit) for s in minimal
        }
        rule_routes = {
            s: tuple(i for i, r in enumerate(rul.rules) if any(s in lit for lit in r.prefilter)) for s in minimal
        }
        c = _Compiled(cat, rul, tuple(minimal), cat_routes, rule_routes, {lit: i for i, lit in enumerate(minimal)})
        _compiled_cache[key] = c
    return c


class SourceScanner:
    """Incremental classification of one source.  ``feed`` returns new Findings / Milestones."""

    def __init__(
        self,
        source: str,
        node: str = "",
        *,
        catalogue: Catalogue | None = None,
        rules: Rules | None = None,
    ) -> None:
        self.source = source
        self.node = node
        self.c = compile_scanner(catalogue, rules)
        self.cat = self.c.catalogue
        self.lineno = 0  # lines consumed so far (the next line is lineno + 1)
        self.findings: list[Finding] = []
        self._raised: set[tuple[str, str]] = set()
        self._low: dict[str, Entry] = {}  # finding id -> its entry as an INFO-level line raises it
        self._exc: dict[str, Entry] = {}  # info finding id -> its entry as a raised exception raises it
        self.milestones = MilestoneTracker(node, source, self.c.rules)
        self.nccl = RankTracker(source, node)  # the first NCCL process of this source
        self.procs: dict[str, RankTracker] = {}  # "host:pid" -> tracker (a Ray head log holds several)
        self._last_proc: RankTracker = self.nccl
        self.tail: deque[tuple[int, str]] = deque(maxlen=TAIL_LINES)
        self.window: deque[tuple[int, str]] = deque(maxlen=WINDOW)  # last words (last_words.py)
        self._tb_warned = False  # the open traceback was printed under a WARNING logger line
        self._tb_ignored = False  # ... or under Python's "Exception ignored in" notice
        self._tb: TracebackTracker | None = None
        self._active_ops_at: int | None = None  # "ACTIVE OPS" was the last line of a batch
        self.last_feed = time.monotonic()
        self.finished = False
        self._lits = self.c.literals  # shrinks when one-shot milestones are reached
        self._lits_gen = 0
        # last exception line outside a traceback: (line, text, body, continuation, code lines above it)
        self._bare_exc: tuple[int, str, str, str, str, str] | None = None
        # literal set -> line text seen -> _QUIET (holds none of it) or (its hits, _verdict or _UNKNOWN)
        self._seen: dict[tuple[str, ...], dict[str, object]] = {}
        self._seen_chars = 0
        self.seen_budget = SEEN_CHARS  # 0: remember nothing (every batch scanned and classified in full)
        self._lit_split: dict[tuple[str, ...], tuple[tuple[str, ...], tuple[str, ...]]] = {}

    # ------------------------------------------------------------------ input
    def feed(self, lines: list[str] | list[bytes], first_lineno: int | None = None) -> list[Finding | Milestone]:
        """Feed consecutive lines (no newlines inside).  ``first_lineno`` (1-based) pins the line
        number of ``lines[0]`` when the caller knows it."""
        self.last_feed = time.monotonic()
        if not lines:
            return []
        if first_lineno is not None and first_lineno > 0:
            self.lineno = first_lineno - 1
        try:
            if max(map(len, lines)) > MAX_LINE:
                lines = [x[:MAX_LINE] if len(x) > MAX_LINE else x for x in lines]
            text = "\n".join(lines)  # type: ignore[arg-type]
        except TypeError:  # bytes (or a mix) in: decode, never fail on invalid UTF-8
            lines = [x.decode("utf-8", "replace") if isinstance(x, (bytes, bytearray)) else str(x) for x in lines]
            lines = [x[:MAX_LINE] if len(x) > MAX_LINE else x for x in lines]
            text = "\n".join(lines)
        if text.count("\n") != len(lines) - 1:  # a caller passed embedded newlines: keep numbering
            lines = [x.replace("\n", " ") for x in lines]
            text = "\n".join(lines)
        out: list[Finding | Milestone] = []
        base = self.lineno
        n = len(lines)
        start = 0
        if self._active_ops_at is not None:
            self._last_proc.feed_active_ops(lines[0], self._active_ops_at)
            self._active_ops_at = None
        if self._tb is not None:
            start = self._run_tb(lines, 0, base, out)
            if start < n:
                start = self._line(lines, start, base, out) + 1
        if start < n:
            self._scan(lines, text, start, base, out)
        self._last_nccl(lines, text, base)
        self.lineno = base + n
        for i in range(max(0, n - TAIL_LINES), n):
            self.tail.append((base + i + 1, lines[i]))
        self.window.extend((base + i + 1, lines[i]) for i in range(max(0, n - WINDOW), n))
        return out

    def _last_nccl(self, lines: list[str], text: str, base: int) -> None:
        """The last NCCL line of the batch (what a rank was doing when its log stopped)."""
        p = text.rfind(" NCCL ")
        for _ in range(16):  # bounded: a batch ending in many non-envelope "NCCL" mentions
            if p == -1:
                return
            idx = text.count("\n", 0, p)
            line = lineprefix.clean(lines[idx])
            parsed = parse_nccl_line(line)
            if parsed is not None:
                t = self._tracker(parsed.host, parsed.pid)
                t.host = t.host or parsed.host
                t.pids.add(parsed.pid)
                t.last_line = (base + idx + 1, line)
                return
            p = text.rfind(" NCCL ", 0, text.rfind("\n", 0, p) + 1) if idx else -1

    def _scan(self, lines: list[str], text: str, start: int, base: int, out: list) -> None:
        """Classify the lines of the batch (from ``start``) that hold a scan literal.  Lines seen
        before (floods and serving logs repeat the same lines) are not scanned again: what they
        hold is remembered, and a repeat that can change nothing (``_verdict``) is not classified."""
        lits = self._lits
        seen = self._seen.get(lits)
        if seen is None:
            # a line that holds none of the full set holds none of a part of it
            full = self._seen.get(self.c.literals) if lits != self.c.literals else None
            seen = self._seen[lits] = dict.fromkeys((t for t, v in full.items() if v is _QUIET), _QUIET) \
                if full else {}
        rows: range | list[int] = range(start, len(lines))
        known: list[tuple[int, tuple]] = []
        placed: list[int] = []  # lines known to hold a latest-only literal
        if seen:
            got = list(map(seen.get, lines[start:] if start else lines))
            # the lines not known to be quiet, at C speed (the others are most lines)
            busy = list(compress(range(len(got)), map(is_not, got, repeat(_QUIET))))
            left = [start + k for k in busy if got[k] is None]
            known = [(start + k, got[k]) for k in busy if got[k] is not None]
            if len(left) < len(rows):
                rows = left
            placed = [i for i, v in known if v[1] is _PLACED]
        if isinstance(rows, range):
            body, pos = text, (len("\n".join(lines[:start])) + 1 if start else 0)
        else:
            body, pos = "\n".join([lines[i] for i in rows]), 0
        lits_any, lits_latest = self._split_lits(lits)
        held = self._held(lines, rows, body, pos, lits_any)  # line -> the literals it holds (not latest-only)
        # latest-only literals: which lines count depends on the lines after them in the batch, so
        # they are looked for in every line that may hold one, remembered or not
        lrows = sorted([*rows, *placed]) if placed else rows
        lbody = body if not placed else "\n".join([lines[i] for i in lrows])
        lfound, lnoisy = _hits(lbody, pos if not placed else 0, lits_latest) if lits_latest and lrows else ([], [])
        latest = {lrows[k]: hit for k, hit in lfound}
        placed_now = {*latest, *(lrows[k] for k in lnoisy)}
        if placed:  # only the lines scanned in full are noted anew
            placed_now.difference_update(placed)
        self._remember(seen, lines, rows, held, placed_now, len(body) - pos)
        for i, v in known:
            if v[1] is _PLACED and v[0]:
                held[i] = v[0]
        cands = [(i, _merge(held.get(i), latest.get(i), self.c.order), None) for i in sorted({*held, *latest})]
        known = [(i, v) for i, v in known if v[1] is not _PLACED]
        if known:
            cands = sorted(cands + [(i, v[0], v) for i, v in known], key=lambda c: c[0])
        skip_to = start
        raised, ms = self._raised, self.milestones
        for i, hit, memo in cands:
            if i < skip_to:
                continue
            if memo is not None:
                verdict = memo[1]
                if verdict is _UNKNOWN:
                    verdict = self._verdict(lines[i], hit)
                    seen[lines[i]] = (hit, verdict)
                if verdict is not _BUSY and self.milestones.generation == self._lits_gen:
                    entry, effects = verdict if isinstance(verdict, tuple) else (verdict, None)
                    if (entry is None or (entry.id, self._key(entry)) in raised) \
                            and not (effects and ms.changes(effects)):
                        if not effects:  # inert for good (what is raised stays raised): quiet from now on
                            seen[lines[i]] = _QUIET
                        continue  # a repeat that would raise nothing new and move nothing
            skip_to = self._line(lines, i, base, out, hit) + 1

    @staticmethod
    def _held(lines: list[str], rows: range | list[int], body: str, pos: int,
              lits: tuple[str, ...]) -> dict[int, list[str]]:
        """The rows that hold any of ``lits`` (none latest-only), with the ones each holds.  A batch
        made mostly of repeats (a flood) is scanned one distinct line at a time."""
        if not rows:
            return {}
        texts = lines[rows.start:] if isinstance(rows, range) else [lines[i] for i in rows]
        distinct = list(dict.fromkeys(texts))
        if len(distinct) * 2 > len(texts):
            return {rows[k]: hit for k, hit in _hits(body, pos, lits)[0]}
        holds = {distinct[k]: hit for k, hit in _hits("\n".join(distinct), 0, lits)[0]}
        return {i: holds[t] for i, t in zip(rows, texts) if t in holds} if holds else {}

    def _remember(self, seen: dict[str, object], lines: list[str], rows: range | list[int],
                  held: dict[int, list[str]], placed: set[int], chars: int) -> None:
        """Note what the scanned lines hold (within a bound on the characters kept): nothing, the
        literals (``held``), or (``placed``) that it holds a latest-only literal, whose lines are
        looked at again each time: whether they count depends on where they are."""
        before = len(seen)
        seen.update(dict.fromkeys(lines[rows.start:] if isinstance(rows, range) else map(lines.__getitem__, rows),
                                  _QUIET))
        for i, hit in held.items():
            seen[lines[i]] = (tuple(hit), _PLACED if i in placed else _UNKNOWN)
        for i in placed:
            if i not in held:
                seen[lines[i]] = ((), _PLACED)
        self._seen_chars += (len(seen) - before) * (chars // max(1, len(rows)) + 1)
        if self._seen_chars > self.seen_budget:
            self._seen.clear()
            self._seen_chars = 0

    def _split_lits(self, lits: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(the literals any line holding counts, the latest-only ones), cached per literal set."""
        got = self._lit_split.get(lits)
        if got is None:
            got = self._lit_split[lits] = (tuple(x for x in lits if x not in _LATEST_ONLY),
                                           tuple(x for x in lits if x in _LATEST_ONLY))
        return got

    def _verdict(self, raw: str, hits: list[str]) -> Entry | None | tuple | object:
        """What classifying this line can do: ``_BUSY`` when it can move state other than
        milestones (a traceback, an exception line, NCCL or watchdog lines, ACTIVE OPS), else the
        catalogue entry it would raise (None: nothing), paired with the milestone rules it matches
        (``MilestoneTracker.effects``) when there are any.  Mirrors ``_line`` and ``_classify``;
        only ever asked for lines that are repeats."""
        line = lineprefix.clean(raw)
        body = lineprefix.split(line)[1]
        if TB_START in body:
            return _BUSY
        if body.startswith(("frame #", "Exception raised from ")):
            return None
        entry = self._match(line, hits)
        if entry is not None:
            entry = self._at_level(entry, line)
        if entry is None and ("rror" in body or "Exception" in body or "what():" in body) \
                and parse_exception(body) is not None:
            return _BUSY
        if ("NCCL" in line and parse_nccl_line(line) is not None) or body.strip() == "ACTIVE OPS" \
                or ("ork" in line and parse_watchdog_line(line) is not None):
            return _BUSY
        routes = self.c.rule_routes
        idxs = routes[hits[0]] if len(hits) == 1 else sorted({i for h in hits for i in routes[h]})
        effects = self.milestones.effects(line, idxs) if idxs else []
        return (entry, effects) if effects else entry

    # ------------------------------------------------------------------ one candidate line
    def _line(self, lines: list[str], idx: int, base: int, out: list, hits: list[str] | None = None) -> int:
        """Classify lines[idx] (``hits``: the scan literals found in it, None = unknown); returns
        the index of the last line consumed."""
        n = len(lines)
        while True:
            lineno = base + idx + 1
            line = lineprefix.clean(lines[idx])
            sig, body = lineprefix.split(line)
            if TB_START not in body:
                self._classify(line, body, lineno, out, lines, idx, hits)
                return idx
            hits = None
            self._tb = TracebackTracker(lineno, sig, line, locked=body.startswith(TB_START))
            # the line just above the traceback's head is the logger line that printed it
            # (``logger.warning(..., exc_info=True)``): at WARNING the exception was caught
            prev = lines[idx - 1] if idx > 0 else (self.tail[-1][1] if self.tail else "")
            self._tb_warned = lineprefix.split(lineprefix.clean(prev))[0].split("|")[1:2] in (["WARNING"], ["WARN"])
            # ... or Python's own notice of an exception it ignored (in a destructor, an atexit
            # handler, while the interpreter shut down): teardown, not what ended the process
            self._tb_ignored = IGNORED_HEAD.match(lineprefix.split(lineprefix.clean(prev))[1].strip()) is not None
            end = self._run_tb(lines, idx + 1, base, out)
            if end >= n:
                return n - 1
            idx = end  # the line that ended the traceback is classified on its own

    def _key(self, entry: Entry) -> str:
        """The sub-key a variant of an entry (_at_level) is raised under."""
        if entry is self._low.get(entry.id):
            return _LOW_KEY
        return _EXC_KEY if entry is self._exc.get(entry.id) else ""

    def _at_level(self, entry: Entry, line: str) -> Entry:
        """The entry as this line raises it: an error entry on a line its logger printed at INFO, DEBUG
        or WARNING (vLLM's, Python logging's, Ray's, glog's level) is a warning unless the catalogue
        says that level reports this failure; an info entry on a raised exception is an error.
        Cold path (matches only)."""
        if entry.severity == "info":
            if parse_exception(lineprefix.split(line)[1]) is None:
                return entry
            return self._variant(self._exc, entry, "error", "the exception a program raised")
        if entry.severity != "error" or (entry.info_lines and entry.warning_lines):
            return entry
        sig = lineprefix.split(line)[0].split("|", 2)  # actor|level|where, or "" (no prefix)
        opt = _LOW_LEVELS.get(sig[1]) if len(sig) > 1 else None
        if opt is None or getattr(entry, opt):
            return entry
        return self._variant(self._low, entry, "warning", "from a line logged below error level")

    @staticmethod
    def _variant(made: dict[str, Entry], entry: Entry, severity: str, why: str) -> Entry:
        """The entry at another severity, made once per id: _key tells the variants apart by identity."""
        v = made.get(entry.id)
        if v is None:
            v = made[entry.id] = replace(entry, severity=severity, title=f"{entry.title} ({why})")
        return v

    def _match(self, line: str, hits: list[str] | None) -> Entry | None:
        if hits is None:
            return self.cat.match(line)
        best: Entry | None = None
        routes = self.c.cat_routes
        for h in hits:
            for lit, entries in routes[h]:
                if lit not in line:
                    continue
                for e in entries:  # highest rank first (catalogue.rank)
                    if best is not None and rank(e) <= rank(best):
                        break
                    if e.search(line):
                        best = e
                        break
        return best

    def _classify(self, line: str, body: str, lineno: int, out: list, lines: list[str] | None = None,
                  idx: int = 0, hits: list[str] | None = None) -> None:
        if body.startswith(("frame #", "Exception raised from ")):
            return
        entry = self._match(line, hits)
        if entry is not None:
            entry = self._at_level(entry, line)
            self._raise(entry, lineno, [line], out, key=self._key(entry))
        elif ("rror" in body or "Exception" in body or "what():" in body or "ERROR]" in body or "[E]" in body
              or "panic" in body) and parse_exception(body) is not None:
            # its traceback header may have been cut off; the message may go on for a few lines (up
            # to a blank line, as in a traceback)
            more: list[str] = []
            for x in (lines[idx + 1:idx + 4] if lines is not None else ()):
                b = lineprefix.body(lineprefix.clean(x[:MAX_LINE])).strip()
                if not b or b.startswith((TB_START, "The above exception", "During handling")):
                    break
                more.append(b)
            self._bare_exc = (lineno, line, body, " ".join(more), *self._frames_above(lines, idx))
        if "NCCL" in line:
            p = parse_nccl_line(line)
            if p is not None:
                t = self._tracker(p.host, p.pid)
                before = t.comms.get(p.data.get("comm", ""))
                was_complete = bool(before and before.init_complete)
                t.feed(p, lineno, line)
                self._last_proc = t
                if p.kind == "comm" and p.data.get("phase") == "COMPLETE" and p.data.get("what") == "Init" \
                        and not was_complete:
                    self._nccl_ready(t, lineno, out)
                elif p.kind == "channel" and "nccl_ready" in self.milestones.reached:
                    self._nccl_ready(t, lineno, out)
        if "ork" in line:
            w = parse_watchdog_line(line)
            if w is not None:
                t = next((x for x in self.trackers if w.rank is not None and x.rank == w.rank), self._last_proc)
                t.feed_watchdog(w, lineno, line)
        if body.strip() == "ACTIVE OPS":
            if lines is not None and idx + 1 < len(lines):
                self._last_proc.feed_active_ops(lines[idx + 1], lineno + 1)
            else:
                self._active_ops_at = lineno + 1
        if hits is None:
            out.extend(self.milestones.match(line, lineno))
        else:
            routes = self.c.rule_routes
            idxs = routes[hits[0]] if len(hits) == 1 else sorted({i for h in hits for i in routes[h]})
            if idxs:
                got = self.milestones.match(line, lineno, idxs)
                out.extend(got)
                if got or self.milestones.generation != self._lits_gen:
                    self._prune_literals()

    @staticmethod
    def _frames_above(lines: list[str] | None, idx: int) -> tuple[str, str]:
        """The traceback frames just above a bare exception line (its header cut off): their code
        lines, oldest first (what the raising code was checking), and the nearest ``File "...", line
        N, in f`` line (the frame that raised it), or "".  Cold path (exception lines only)."""
        if not lines:
            return "", ""
        code: list[str] = []
        frame = ""
        for x in lines[max(0, idx - 2 * RECENT_FRAMES):idx]:
            b = lineprefix.body(lineprefix.clean(x[:MAX_LINE])).strip()
            frame = _frame_line(b) or frame
            if b and not b.startswith("File ") and not set(b) <= {"^", "~"}:
                code.append(b)
        return " | ".join(code[-RECENT_FRAMES:]), frame

    def _tracker(self, host: str, pid: int) -> RankTracker:
        key = f"{host}:{pid}"
        t = self.procs.get(key)
        if t is None:
            t = self.nccl if not self.procs else RankTracker(self.source, self.node)
            self.procs[key] = t
        return t

    @property
    def trackers(self) -> list[RankTracker]:
        return list(dict.fromkeys(self.procs.values())) or [self.nccl]

    def _prune_literals(self) -> None:
        """Stop scanning for literals that can only advance one-shot milestones already reached
        (every served request logs "POST /v1/..."); a restart of the process brings them back."""
        ms = self.milestones
        self._lits_gen = ms.generation
        rules = self.c.rules.rules
        done = {i for i, r in enumerate(rules) if r.one_shot and r.id in ms.reached}
        if not done:
            self._lits = self.c.literals
            return
        self._lits = tuple(
            lit for lit in self.c.literals
            if self.c.cat_routes[lit] or not self.c.rule_routes[lit] or not set(self.c.rule_routes[lit]) <= done
            or lit in _NCCL_LITERALS or lit == TB_START
        )

    def _nccl_ready(self, t: RankTracker, lineno: int, out: list) -> None:
        st = t._current()
        transport = t.transport
        detail = {"transport": transport} if transport else {}
        part = ""
        if st is not None:
            part = f"rank {st.rank}/{st.nranks}"
            detail["rank"] = str(st.rank)
        if transport:
            part = f"{part}, {transport}" if part else transport
        ms = self.milestones.note("nccl_ready", part, detail, lineno)
        if ms is not None:
            out.append(ms)

    # ------------------------------------------------------------------ tracebacks
    def _run_tb(self, lines: list[str], i: int, base: int, out: list) -> int:
        """Feed lines[i:] to the open traceback; returns the index of the first line NOT consumed
        by it (len(lines) while it is still open)."""
        tb = self._tb
        assert tb is not None
        n = len(lines)
        while i < n:
            line = lineprefix.clean(lines[i])
            sig, body = lineprefix.split(line)
            verdict = tb.step(base + i + 1, sig, body, line)
            if verdict == END:
                self._close_tb(out)
                return i
            if verdict == FOREIGN:
                self._classify(line, body, base + i + 1, out, lines, i)
            i += 1
        return n

    def _close_tb(self, out: list) -> None:
        tb, self._tb = self._tb, None
        if tb is None:
            return
        lineno, exc = tb.exception_line or (tb.start_line, tb.first_text)
        # every line of the exception message may name the cause ("Last error: Bootstrap : no socket
        # interface found" under an "internal error"): the most specific (priority) entry wins,
        # earlier lines on ties; one already raised from this source (its NCCL WARN line) yields
        # to the next, so the traceback still gets its own finding.
        matches: list[Entry] = []
        for cand in tb.candidates():
            e = self.cat.match(cand[:MAX_LINE])
            if e is not None and e not in matches:
                matches.append(e)
        fresh = [e for e in matches if (e.id, "") not in self._raised]
        pool = fresh or matches
        entry: Entry | None = max(pool, key=lambda e: e.priority) if pool else None
        shape = self._shape_of(tb)
        if entry is None:
            if shape is not None:
                # (an info fact the exception's shape names is what the program died of: an error)
                entry = self._at_level(self.cat[shape], exc)
            elif tb.exception_line is None:
                return  # a traceback cut off before its exception: nothing to name
            else:
                entry = self.cat["unhandled_exception"]
                if self._tb_warned:  # caught and logged as a warning: reported, not what failed
                    entry = replace(entry, severity="warning", title=f"{entry.title} (logged as a warning)")
                elif self._tb_ignored:  # Python ignored it while tearing the process down
                    entry = replace(entry, severity="info", title=f"{entry.title} (ignored during teardown)")
        # the root of the chain (by its shape, or an earlier link the catalogue knows) that the
        # chosen entry lists as a cause is raised too: ranking then puts it first
        roots = [m for m in matches if m.id in entry.caused_by]
        if shape is not None and shape != entry.id and (shape in entry.caused_by or entry.priority < 0):
            roots.insert(0, self.cat[shape])
        for r in roots:
            self._raise(r, lineno, tb.evidence(), out)
        self._raise(entry, lineno, tb.evidence(), out, key=exc.split(":")[0][-80:])
        # raised inside the frames doing a job, it names that job's failure too (exc_shapes.toml
        # [[during]]: an NCCL error of any class while a communicator is being created), unless
        # what it raised is a cause the catalogue lists for that failure (it explains it already)
        if tb.files and tb.exc:
            for fid in default_shapes().during(" ".join(t for _, t in tb.exc), tb.files):
                if entry.id not in self.cat[fid].caused_by:
                    self._raise(self.cat[fid], lineno, tb.evidence(), out)

    def _shape_of(self, tb: TracebackTracker) -> str | None:
        """The id the exception shapes give, the chain's root (first raised) tried first."""
        shapes = default_shapes()
        chain = [lineprefix.body(t) for t in tb.chained]
        more = " ".join(lineprefix.body(t) for _, t in tb.exc[1:])
        if tb.exc:
            chain.append(lineprefix.body(tb.exc[0][1]))
        last = len(chain) - 1
        for i, text in enumerate(chain):
            # only the final exception's raising frame is known (the tracker keeps the last one)
            got = shapes.classify_line(text, more if i == last else "", tb.last_file[0] if i == last else "",
                                       tb.context() if i == last else "")
            if got is not None:
                return got
        if not tb.exc:  # cut off before its exception: the frame that was raising may still say
            return shapes.classify_frame(tb.last_file[0])
        return None

    def flush(self) -> list[Finding | Milestone]:
        """Close an open traceback (no more lines are coming soon)."""
        out: list = []
        if self._tb is not None:
            self._close_tb(out)
        return out

    # ------------------------------------------------------------------ findings
    def _raise(self, entry: Entry, lineno: int | None, evidence: list[str], out: list, key: str = "") -> None:
        # a quiet (INFO-level) sighting is kept apart, so a later error line of the same id is raised too
        sub = key if entry.id == "unhandled_exception" or key in (_LOW_KEY, _EXC_KEY) else ""
        if entry.single_host_ok and evidence and any(rx.search(evidence[0]) for rx in entry.single_host_ok):
            # an interface choice that only one-host jobs excuse (diagnoser.py) is kept apart from
            # the same id's unconditional lines, so excusing it never hides one of those
            if (entry.id, "") in self._raised:
                return
            sub = "one_host"
        k = (entry.id, sub)
        if k in self._raised:
            return
        self._raised.add(k)
        severity, title = entry.severity, entry.title
        after = next((f for f in self.findings if f.id in entry.benign_after), None) if entry.benign_after else None
        if after is not None:  # expected here (e.g. the engine stopping after a requested shutdown)
            severity, title = "info", f"{entry.title} (after: {after.title.lower()}, line {after.line})"
        f = self.cat.finding(entry.id, severity=severity, title=title, source=self.source, line=lineno,
                             evidence=(_ev(e) for e in evidence if e.strip()), node=self.node)
        self.findings.append(f)
        out.append(f)

    def raise_derived(self, fid: str, lineno: int | None, evidence: list[str], title: str | None = None,
                      severity: str | None = None) -> Finding | None:
        out: list = []
        entry = self.cat[fid]
        if title or severity:
            entry = replace(entry, title=title or entry.title, severity=severity or entry.severity)
        self._raise(entry, lineno, evidence, out)
        return out[0] if out else None

    def hang_cause(self, end: LogEnd | None = None) -> list[Finding]:
        """The cause named by a hang marker (milestones.toml ``hang_after``) when this log stopped
        RIGHT AFTER it inside its open phase: only blank lines follow it, no error came after it.
        Called at end of input (``finish``, with the log's end: a stop asked for after it is set
        aside) and, live, when the stall detector raises its alarm."""
        mark = self.milestones.hang_mark()
        last = end.lines[-TAIL_LINES:] if end is not None else list(self.tail)
        if mark is None or not last:
            return []
        line, fid, text, phase = mark
        if line < last[0][0]:
            return []  # more lines followed than the tail holds: not right after it
        if any(n > line and lineprefix.body(lineprefix.clean(t)).strip() for n, t in last):
            return []  # something else was printed after it: the process went on
        before = end.stop[0] if end is not None and end.stop else None
        if any(f.severity == "error" and (f.line or 0) > line and (before is None or (f.line or 0) < before)
               for f in self.findings):
            return []
        tail = [f"{n}: {t}" for n, t in last] + _stopped(end)
        f = self.raise_derived(fid, line, [text, f"the log stops right after it, during {phase}"] + tail)
        return [f] if f else []

    def finish(self) -> list[Finding | Milestone]:
        """End of input: close a traceback and report a log that stopped inside a phase."""
        out = self.flush()
        if self.finished:
            return out
        self.finished = True
        out.extend(self._promote())
        end = log_end(list(self.window), default_end_phases())
        # errors printed while a requested stop tore the process down are not what it stopped in
        last_error = max((f.line or 0 for f in self.findings if f.severity == "error"
                          and (end.stop is None or (f.line or 0) < end.stop[0])), default=0)
        tail = [f"{n}: {t}" for n, t in self.tail]
        done_ids = {s.comm_id for t in self.trackers for s in t.comms.values() if s.init_complete and s.comm_id}
        for st in (s for t in self.trackers for s in t.open_inits()):
            if (st.init_start or 0) > last_error:
                # a peer of the same communicator got through init and this rank did not: a hang.
                # Alone, a log that stops after Init START is also how a hand-cut excerpt ends: a
                # suspicion (a warning), as end_phases.toml rules for every phase a log ends in
                stuck = st.comm_id is not None and st.comm_id in done_ids
                f = self.raise_derived(
                    "nccl_init_hang", st.init_start,
                    [f"Init START comm {st.comm_id or st.comm} rank {st.rank}/{st.nranks} at line {st.init_start}, "
                     "no Init COMPLETE" + ("" if not stuck else "; another rank of it completed")] + tail,
                    severity=None if stuck else "warning",
                )
                if f:
                    out.append(f)
                break
        out.extend(self.hang_cause(end))  # the specific cause first, then the hang it explains
        phase = self.milestones.open_phase()
        # the last line inside a phase of end_phases.toml that names its own finding (the rendezvous
        # of distributed init) says more than the open milestone phase around it: that one alone
        ends = default_end_phases().ends_in(end.lines[-TAIL_LINES:])
        named_end = ends is not None and ends[1].finding != "suspected_hang" and ends[0] > last_error
        if phase is not None and (phase[0] or 0) > last_error and not (named_end and ends[0] >= (phase[0] or 0)):
            f = self.raise_derived(
                "suspected_hang", phase[0], [f"log ends during {phase[1]}"] + _stopped(end) + tail,
                title=f"Log ends during {phase[1]} (suspected hang)",
            )
            if f:
                out.append(f)
        out.extend(self._end_phase(last_error, end))
        out.extend(self._bare_exception())
        out.extend(self._together())
        out.extend(self._cut_frames(end))
        out.extend(self._tail_during())
        return out

    def _promote(self) -> list[Finding]:
        """catalogue ``promote_to``: a weak finding (NCCL's return-code trace) raises the id it stands
        for when nothing in this source named that id by end of input, at the weak finding's line."""
        out: list[Finding] = []
        cat = self.cat.entries
        for f in list(self.findings):
            to = cat[f.id].promote_to if f.id in cat else ""
            if to and not any(g.id == to for g in self.findings):
                g = self.raise_derived(to, f.line, list(f.evidence))
                if g:
                    out.append(g)
        return out

    def _together(self) -> list[Finding]:
        """end_phases.toml [[together]]: a fact this source noted (a milestone's detail) and a finding
        it raised that together name a cause; raised at the fact's line (it came first)."""
        out: list[Finding] = []
        for t in default_end_phases().together:
            ms = self.milestones.reached.get(t.milestone)
            if ms is None or t.detail not in dict(ms.detail):
                continue
            hit = next((f for f in self.findings if f.id == t.finding), None)
            if hit is None:
                continue
            f = self.raise_derived(t.id, ms.line, [t.why, f"{ms.line}: {ms.text}",
                                                   f"{hit.line}: {hit.title}", *hit.evidence[:2]])
            if f:
                out.append(f)
        return out

    def _cut_frames(self, end: LogEnd) -> list[Finding]:
        """A log that ends inside traceback frames whose header and exception were both cut off
        (or a person's Ctrl+C came there): the last frame's function may still say what it was
        raising (exc_shapes.toml frames)."""
        if (self._tb is not None and end.stop is None) or self._cause_named():
            return []
        # the nearest frames first: the raising one may be a generic helper (an error-check wrapper)
        # called from the frame that says what was being done
        seen = 0
        for lineno, text in reversed(end.lines[-TAIL_LINES:]):
            body = lineprefix.body(lineprefix.clean(text)).strip()
            if body.startswith("Traceback (most recent call last)"):
                break
            frame = _frame_line(body)
            if frame is not None:
                fid = default_shapes().classify_frame(frame)
                if fid:
                    f = self.raise_derived(fid, lineno, [text.strip()])
                    return [f] if f else []
                seen += 1
                if seen >= _CUT_FRAMES_LOOKED_AT:
                    break
        return []

    def _tail_during(self) -> list[Finding]:
        """A stack whose traceback header was cut off (no tracker saw it) still shows in the tail
        what it was doing: an error found after its frames names the [[during]] ids too."""
        files: list[tuple[int, str]] = []
        for lineno, text in self.tail:
            frame = _frame_line(lineprefix.body(lineprefix.clean(text)))
            if frame is not None:
                files.append((lineno, frame))
        if not files:
            return []
        shapes, out = default_shapes(), []
        for f in list(self.findings):
            if f.severity != "error" or f.line is None or f.line < files[0][0]:
                continue
            for fid in shapes.during(" ".join(f.evidence), [t for n, t in files if n < f.line]):
                if f.id in self.cat[fid].caused_by:
                    continue  # its cause is named: the catalogue says it explains this failure
                if not any(g.id == fid for g in self.findings):
                    g = self.raise_derived(fid, f.line, list(f.evidence))
                    if g:
                        out.append(g)
        return out

    def _cause_named(self) -> bool:
        """An error finding that names a cause (not merely a consequence such as a dead engine)."""
        cat = self.cat.entries
        return any(f.severity == "error" and f.id in cat
                   and not (cat[f.id].consequence or f.id == "unhandled_exception") for f in self.findings)

    def _end_phase(self, last_error: int, end: LogEnd) -> list[Finding]:
        """A log whose last line is inside a start-up phase (end_phases.toml) stopped there.  A
        warning: a hand-cut excerpt ends the same way, so it is a suspicion, not a proven fault.
        The last line is the log's own (``end``): a shell prompt pasted after it, or a stop asked
        for while it waited (Ctrl+C, SIGTERM) and the teardown it printed, are set aside."""
        eps = default_end_phases()
        last = end.lines[-TAIL_LINES:]
        tail = [f"{n}: {t}" for n, t in last]
        ended = None if end.stop else eps.last_line(last, explained=self._cause_named())
        if ended is not None and ended[0] > last_error:  # the last line says how it ended
            text = next(t for n, t in last if n == ended[0])
            f = self.raise_derived(ended[1], ended[0], [f"the log's last line: {text.strip()}"] + tail)
            return [f] if f else []
        got = eps.ends_in(last)
        if got is None or got[0] <= last_error:
            return []
        lineno, ph = got
        # the marker is the last non-blank line: the last five lines show it and what led to it
        f = self.raise_derived(ph.finding, lineno, [f"the log ends during {ph.text}"] + _stopped(end) + tail[-5:],
                               title=f"Log ends during {ph.text} (suspected hang)", severity="warning")
        return [f] if f else []

    def _bare_exception(self) -> list[Finding]:
        """An exception line whose traceback header was cut off (or never printed), in a source
        that raised no error otherwise: its shape names the cause."""
        if self._bare_exc is None:
            return []
        if self._cause_named():
            return []  # a cause is named already; only consequences (an engine that died) leave room
        lineno, line, body, more, code, frame = self._bare_exc
        if lineprefix.split(line)[0].split("|")[1:2] in (["WARNING"], ["INFO"], ["DEBUG"]):
            return []  # logged as a warning: something was handled
        fid = default_shapes().classify_line(body, more, frame=frame, context=code)
        if fid is None:
            return []
        f = self.raise_derived(fid, lineno, [line])
        return [f] if f else []
