"""Load and validate the finding catalogue (catalogue.toml) and match single lines against it.

The catalogue is data: one entry per finding id with its severity, patterns, prefilter literals,
explanation, advice and causal relations.  ``load_catalogue()`` refuses a broken file with one
clear line (``CatalogueError``): unknown ids in relations, bad regexes, examples that their own
patterns do not match, a relation cycle.

Every finding is raised by one of three things (``raised_by``): a log line its patterns match
(``"line"``), the analysis of whole logs or of investigate's evidence (``"analysis"``: rank
comparison, end of input, a verdict rule; written ``derived = true``), or code that reads the nodes
and containers (``"state"``: a half cluster, a stale container, a doctor check, an action's step).
Only ``"line"`` entries have patterns; the others are data for the code that raises them.

``finding(id, ...)`` (``Catalogue.finding``) is the one factory of ``model.Finding``: every finding,
whoever raises it, is made there from its catalogue entry, so an id that is not in the catalogue
cannot become a finding (tests/unit/test_finding_vocabulary.py walks the code's ids against it).
"""

from __future__ import annotations

import functools
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

__all__ = ["CatalogueError", "Entry", "Catalogue", "load_catalogue", "default_catalogue", "entry", "finding",
           "CATALOGUE_PATH", "RAISED_BY"]

CATALOGUE_PATH = Path(__file__).with_name("catalogue.toml")
SEVERITIES = ("error", "warning", "info")
RAISED_BY = ("line", "analysis", "state")  # what raises a finding (see the module docstring)


class CatalogueError(ValueError):
    """The catalogue file is unusable; the message is one line naming the file, id and problem."""


@dataclass(frozen=True)
class Entry:
    id: str
    severity: str
    title: str
    explanation: str
    advice: str
    patterns: tuple[re.Pattern[str], ...] = ()
    prefilter: tuple[str, ...] = ()
    examples: tuple[str, ...] = ()
    caused_by: tuple[str, ...] = ()
    consequence_of: tuple[str, ...] = ()
    # ids of findings that, seen EARLIER in the same source, make this one expected, not a fault
    # (an engine that dies after a requested shutdown): it is then reported as info
    benign_after: tuple[str, ...] = ()
    # what a failure looks like from outside (the engine or a worker died, the group was aborted):
    # any other error of the same source before it is its cause (ranking.py)
    consequence: bool = False
    priority: int = 0
    derived: bool = False  # not raised by a line pattern (raised_by "analysis" or "state")
    raised_by: str = "line"
    # the id this (weak, info) finding stands for when nothing else in its source names that id by
    # end of input: NCCL's return-code trace stands for a failed communicator init, but a traceback
    # naming the failure itself is the better anchor (classifier.SourceScanner._promote)
    promote_to: str = ""
    # patterns of this entry's that name a choice only wrong across hosts (loopback or a bridge
    # carries traffic between the processes of one machine): a finding whose line matches one is
    # reported as info when every NCCL process of the input sits on one host (diagnoser.py)
    single_host_ok: tuple[re.Pattern[str], ...] = ()
    # lines that match a pattern but say something else: a notice of an attempt the library retries
    # by itself (its failure is a different line).  Checked only after a pattern matched (cold path)
    unless: tuple[re.Pattern[str], ...] = ()
    # an error entry matched on a line its logger printed at INFO/DEBUG (or WARNING) level is raised
    # as a warning (advice, a fact, a notice: the logger itself did not call it an error), unless
    # these are set: the entry names a failure its source reports at INFO (no KV blocks, a placement
    # group pending) or at WARNING (Ray's lost GCS or raylet, vLLM's failed import of its own ops)
    info_lines: bool = False
    warning_lines: bool = False
    # this report comes before the output that says why (vLLM names the architecture it could not
    # inspect, then prints the inspecting subprocess's traceback): its caused_by ids printed up to
    # ranking.CRASH_SPAN lines after it in the same source explain it
    cause_follows: bool = False

    def search(self, line: str) -> re.Match[str] | None:
        for rx in self.patterns:
            m = rx.search(line)
            if m:
                if self.unless and any(u.search(line) for u in self.unless):
                    return None
                return m
        return None


@dataclass
class Catalogue:
    entries: dict[str, Entry]
    path: str = ""
    # literal -> entries whose prefilter holds it (highest priority first)
    by_literal: dict[str, tuple[Entry, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        lits: dict[str, list[Entry]] = {}
        for e in self.entries.values():
            for lit in e.prefilter:
                lits.setdefault(lit, []).append(e)
        self.by_literal = {
            k: tuple(sorted(v, key=lambda e: (-e.priority, e.consequence))) for k, v in sorted(lits.items())
        }

    def __getitem__(self, fid: str) -> Entry:
        return self.entries[fid]

    def entry(self, fid: str) -> Entry:
        """The entry of one id (title, severity, explanation, advice, relations); KeyError names it."""
        try:
            return self.entries[fid]
        except KeyError:
            raise KeyError(f"no finding {fid!r} in {self.path or 'the catalogue'}") from None

    def finding(self, fid: str, *, source: str = "", node: str = "", line: int | None = None,
                evidence: Iterable[str] = (), title: str | None = None, severity: str | None = None,
                advice: str | None = None, explanation: str | None = None):
        """The ``model.Finding`` for ``fid``: the one factory (a KeyError names an unknown id).

        The id and its meaning are the catalogue's; a call site may say more about this occurrence:
        its own ``title`` (what it saw: "port 8000 on spark1 is already taken"), a ``severity`` (a
        doctor check that only warns, a quiet line), ``advice`` / ``explanation`` fitted to what it
        measured.  What it leaves out is the entry's."""
        from ..model import Finding  # the catalogue is data: it needs the model only here

        e = self.entry(fid)
        if severity is not None and severity not in SEVERITIES:
            raise ValueError(f"finding {fid!r}: severity {severity!r} is not one of {', '.join(SEVERITIES)}")
        return Finding(
            id=e.id, severity=(severity or e.severity), title=title or e.title,  # type: ignore[arg-type]
            source=source, line=line, evidence=tuple(evidence), advice=advice or e.advice,
            explanation=explanation or e.explanation, node=node,
        )

    def __contains__(self, fid: object) -> bool:
        return fid in self.entries

    @property
    def literals(self) -> tuple[str, ...]:
        return tuple(self.by_literal)

    def match(self, line: str) -> Entry | None:
        """The best entry for one (already cleaned) line, or None.  Cold path: only called for
        lines that passed the literal prefilter."""
        best: Entry | None = None
        tried: set[str] = set()
        for lit, entries in self.by_literal.items():
            if lit not in line:
                continue
            for e in entries:
                if e.id in tried or (best is not None and rank(e) <= rank(best)):
                    continue
                tried.add(e.id)
                if e.search(line):
                    best = e
        return best


def rank(e: Entry) -> tuple[int, bool]:
    """How two entries that both match one line compare: priority first, then a cause before a
    consequence ("The actor is dead ...: Task was killed due to the node running low on memory" is
    the OOM kill, not the dead worker it caused)."""
    return e.priority, not e.consequence


def _fail(path: str, fid: str, what: str) -> CatalogueError:
    where = f"{path}: finding {fid!r}" if fid else path
    return CatalogueError(f"{where}: {what}")


def _strs(path: str, fid: str, raw: dict, key: str) -> tuple[str, ...]:
    val = raw.get(key, [])
    if isinstance(val, str):
        val = [val]
    if not isinstance(val, list) or not all(isinstance(v, str) for v in val):
        raise _fail(path, fid, f"{key} must be a list of strings")
    return tuple(val)


def _regexes(path: str, fid: str, raw: dict, key: str) -> tuple[re.Pattern[str], ...]:
    out = []
    for p in _strs(path, fid, raw, key):
        try:
            out.append(re.compile(p))
        except re.error as exc:
            raise _fail(path, fid, f"bad regex {p!r}: {exc}") from None
    return tuple(out)


def _entry(path: str, raw: object) -> Entry:
    if not isinstance(raw, dict):
        raise _fail(path, "", "each [[finding]] must be a table")
    fid = raw.get("id")
    if not isinstance(fid, str) or not re.fullmatch(r"[a-z][a-z0-9_]*", fid):
        raise _fail(path, str(fid), "id must be a lower_snake_case string")
    for key in ("severity", "title", "explanation", "advice"):
        if not isinstance(raw.get(key), str) or not raw[key].strip():
            raise _fail(path, fid, f"missing or empty {key!r}")
    if raw["severity"] not in SEVERITIES:
        raise _fail(path, fid, f"severity {raw['severity']!r} is not one of {', '.join(SEVERITIES)}")
    unknown = set(raw) - {
        "id", "severity", "title", "explanation", "advice", "patterns", "prefilter", "examples",
        "caused_by", "consequence_of", "benign_after", "priority", "derived", "raised_by", "consequence",
        "promote_to", "single_host_ok", "unless", "info_lines", "warning_lines", "cause_follows",
    }
    if unknown:
        raise _fail(path, fid, f"unknown key(s) {', '.join(sorted(unknown))}")
    derived = bool(raw.get("derived", False))
    raised_by = raw.get("raised_by", "analysis" if derived else "line")
    if raised_by not in RAISED_BY:
        raise _fail(path, fid, f"raised_by {raised_by!r} is not one of {', '.join(RAISED_BY)}")
    if derived and raised_by == "line":
        raise _fail(path, fid, 'derived = true contradicts raised_by = "line"')
    derived = raised_by != "line"
    pats = _strs(path, fid, raw, "patterns")
    compiled = []
    for p in pats:
        try:
            compiled.append(re.compile(p))
        except re.error as exc:
            raise _fail(path, fid, f"bad regex {p!r}: {exc}") from None
    prefilter = _strs(path, fid, raw, "prefilter")
    local_ok, unless = _regexes(path, fid, raw, "single_host_ok"), _regexes(path, fid, raw, "unless")
    if (local_ok or unless) and not pats:
        raise _fail(path, fid, "single_host_ok and unless need line patterns to qualify")
    if derived and (pats or "prefilter" in raw or "examples" in raw):
        raise _fail(path, fid, f"a finding raised by {raised_by} has no patterns, prefilter or examples")
    if not derived and not pats:
        raise _fail(path, fid, 'needs patterns (or derived = true, or raised_by = "state")')
    if pats and not prefilter:
        raise _fail(path, fid, "patterns need at least one prefilter literal")
    if any(not lit for lit in prefilter):
        raise _fail(path, fid, "empty prefilter literal")
    prio = raw.get("priority", 0)
    if not isinstance(prio, int):
        raise _fail(path, fid, "priority must be an integer")
    for key in ("info_lines", "warning_lines", "cause_follows"):
        if not isinstance(raw.get(key, False), bool):
            raise _fail(path, fid, f"{key} must be true or false")
    promote_to = raw.get("promote_to", "")
    if not isinstance(promote_to, str):
        raise _fail(path, fid, "promote_to must be a finding id")
    entry = Entry(
        id=fid,
        severity=raw["severity"],
        title=raw["title"].strip(),
        explanation=" ".join(raw["explanation"].split()),
        advice=" ".join(raw["advice"].split()),
        patterns=tuple(compiled),
        prefilter=prefilter,
        examples=_strs(path, fid, raw, "examples"),
        caused_by=_strs(path, fid, raw, "caused_by"),
        consequence_of=_strs(path, fid, raw, "consequence_of"),
        benign_after=_strs(path, fid, raw, "benign_after"),
        consequence=bool(raw.get("consequence", False)),
        priority=prio,
        derived=derived,
        raised_by=raised_by,
        promote_to=promote_to,
        single_host_ok=local_ok,
        unless=unless,
        info_lines=raw.get("info_lines", False),
        warning_lines=raw.get("warning_lines", False),
        cause_follows=raw.get("cause_follows", False),
    )
    for ex in entry.examples:
        if not any(lit in ex for lit in entry.prefilter):
            raise _fail(path, fid, f"example holds none of its prefilter literals: {ex[:80]!r}")
        if not entry.search(ex):
            raise _fail(path, fid, f"example not matched by its patterns: {ex[:80]!r}")
    return entry


def _check_cycles(path: str, entries: dict[str, Entry]) -> None:
    state: dict[str, int] = {}

    def visit(fid: str, trail: list[str]) -> None:
        if state.get(fid) == 2:
            return
        if state.get(fid) == 1:
            raise _fail(path, fid, "caused_by cycle: " + " -> ".join(trail + [fid]))
        state[fid] = 1
        for c in entries[fid].caused_by:
            visit(c, trail + [fid])
        state[fid] = 2

    for fid in entries:
        visit(fid, [])


def parse_catalogue(text: str, path: str = "catalogue.toml") -> Catalogue:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CatalogueError(f"{path}: not valid TOML: {exc}") from None
    raws = data.get("finding")
    if not isinstance(raws, list) or not raws:
        raise CatalogueError(f"{path}: no [[finding]] entries")
    entries: dict[str, Entry] = {}
    for raw in raws:
        e = _entry(path, raw)
        if e.id in entries:
            raise _fail(path, e.id, "defined twice")
        entries[e.id] = e
    for e in entries.values():
        for key, ids in (("caused_by", e.caused_by), ("consequence_of", e.consequence_of),
                         ("benign_after", e.benign_after)):
            for c in ids:
                if c not in entries:
                    raise _fail(path, e.id, f"{key} names unknown id {c!r}")
                if c == e.id:
                    raise _fail(path, e.id, f"{key} names itself")
        if e.promote_to and (e.promote_to not in entries or e.promote_to == e.id):
            raise _fail(path, e.id, f"promote_to names unknown id {e.promote_to!r}")
    _check_cycles(path, entries)
    return Catalogue(entries=entries, path=path)


def load_catalogue(path: str | Path | None = None) -> Catalogue:
    p = Path(path) if path is not None else CATALOGUE_PATH
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CatalogueError(f"{p}: cannot read: {exc}") from None
    return parse_catalogue(text, str(p))


@functools.lru_cache(maxsize=1)
def default_catalogue() -> Catalogue:
    return load_catalogue()


def entry(fid: str) -> Entry:
    """The default catalogue's entry for ``fid``."""
    return default_catalogue().entry(fid)


def finding(fid: str, **kw):
    """A ``model.Finding`` for ``fid`` from the default catalogue (see ``Catalogue.finding``)."""
    return default_catalogue().finding(fid, **kw)
