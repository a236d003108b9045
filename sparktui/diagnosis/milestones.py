"""Startup milestones per source (docs/architecture.md "Milestones"), from the rules in milestones.toml.

``MilestoneTracker.match(line, lineno)`` returns a ``model.Milestone`` when a line advances one
(weights 18/40 shards, KV cache sized, ...), merging the facts of several lines of one milestone
(KV cache GiB + tokens + concurrency) into one text and one ``detail``.  ``note()`` lets the NCCL
rank tracker report ``nccl_ready``.  ``open_phase()`` tells the end-of-input check which phase a
log stopped in (weights loading at 45 %, or a [[phase]] of milestones.toml started and not ended);
``hang_mark()`` the line inside an open phase that names a hang's cause when the log stops right
after it (a phase's ``hang_after`` / ``hang_finding``: SGLang's "Custom allreduce is disabled ...").
"""

from __future__ import annotations

import functools
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from ..model import MILESTONE_ORDER, Milestone
from .catalogue import CatalogueError

RULES_PATH = Path(__file__).with_name("milestones.toml")


@dataclass(frozen=True)
class Rule:
    id: str
    pattern: re.Pattern[str]
    prefilter: tuple[str, ...]
    text: str
    progress: tuple[str, ...] = ()
    detail: tuple[str, ...] = ()
    one_shot: bool = False
    kind: str = "milestone"  # milestone | phase_start | phase_end | phase_hang ([[phase]] tables)
    finding: str = ""  # phase_hang: the catalogue id a log stopping right after this line raises


@dataclass(frozen=True)
class Rules:
    rules: tuple[Rule, ...]
    labels: dict[str, str]

    @property
    def literals(self) -> tuple[str, ...]:
        return tuple(sorted({lit for r in self.rules for lit in r.prefilter}))


def parse_rules(text: str, path: str = "milestones.toml") -> Rules:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CatalogueError(f"{path}: not valid TOML: {exc}") from None
    labels = data.get("labels", {})
    rules = []
    for i, raw in enumerate(data.get("milestone", [])):
        mid = raw.get("id")
        where = f"{path}: milestone #{i + 1} ({mid!r})"
        if mid not in MILESTONE_ORDER:
            raise CatalogueError(f"{where}: id is not one of model.MILESTONE_ORDER")
        try:
            rx = re.compile(raw["pattern"])
        except (KeyError, re.error) as exc:
            raise CatalogueError(f"{where}: bad or missing pattern: {exc}") from None
        prefilter = tuple(raw.get("prefilter", ()))
        if not prefilter:
            raise CatalogueError(f"{where}: needs a prefilter literal")
        prog = tuple(str(raw.get("progress", "")).split("/")) if raw.get("progress") else ()
        rule = Rule(mid, rx, prefilter, str(raw.get("text", "")), prog, tuple(raw.get("detail", ())),
                    bool(raw.get("one_shot", False)))
        for name in rule.progress + rule.detail:
            if name not in rx.groupindex:
                raise CatalogueError(f"{where}: group {name!r} is not in the pattern")
        for ex in raw.get("examples", ()):
            if not any(lit in ex for lit in prefilter) or not rx.search(ex):
                raise CatalogueError(f"{where}: example not matched: {ex[:80]!r}")
        rules.append(rule)
    for i, raw in enumerate(data.get("phase", [])):
        pid = raw.get("id")
        where = f"{path}: phase #{i + 1} ({pid!r})"
        for end in ("start", "end"):
            rx, lits = _pattern(raw, end, where)
            rules.append(Rule(str(pid), rx, lits, str(raw.get("text", pid)), kind=f"phase_{end}"))
        for ex in raw.get("examples", ()):
            if not any(r.pattern.search(ex) for r in rules[-2:]):
                raise CatalogueError(f"{where}: example not matched: {ex[:80]!r}")
        if "hang_after" in raw or "hang_finding" in raw:
            fid = raw.get("hang_finding")
            if not isinstance(fid, str) or not fid:
                raise CatalogueError(f"{where}: hang_after needs hang_finding (a catalogue id)")
            rx, lits = _pattern(raw, "hang_after", where)
            for ex in raw.get("hang_examples", ()):
                if not any(lit in ex for lit in lits) or not rx.search(ex):
                    raise CatalogueError(f"{where}: hang example not matched: {ex[:80]!r}")
            rules.append(Rule(str(pid), rx, lits, str(raw.get("text", pid)), kind="phase_hang", finding=fid))
    for mid in MILESTONE_ORDER:
        labels.setdefault(mid, mid.replace("_", " "))
    return Rules(tuple(rules), labels)


def _pattern(raw: dict, key: str, where: str) -> tuple[re.Pattern[str], tuple[str, ...]]:
    """A phase's ``key`` regex and its ``key_prefilter`` literals, both required."""
    try:
        rx = re.compile(raw[key])
    except (KeyError, re.error) as exc:
        raise CatalogueError(f"{where}: bad or missing {key}: {exc}") from None
    lits = tuple(raw.get(f"{key}_prefilter", ()))
    if not lits:
        raise CatalogueError(f"{where}: needs {key}_prefilter")
    return rx, lits


@functools.lru_cache(maxsize=1)
def default_rules() -> Rules:
    return parse_rules(RULES_PATH.read_text(encoding="utf-8"), str(RULES_PATH))


def _fmt(template: str, groups: dict[str, str | None]) -> str:
    return template.format_map({k: (v or "") for k, v in groups.items()}).strip(" ,")


def _values(rule: Rule, groups: dict[str, str | None]) -> tuple[str, dict[str, str], float | None]:
    """(text part, detail, progress) that a match of ``rule`` notes."""
    progress = None
    if len(rule.progress) == 2:
        done, total = (groups.get(n) for n in rule.progress)
        if done and total and int(total) > 0:
            progress = min(1.0, int(done) / int(total))
    elif len(rule.progress) == 1 and groups.get(rule.progress[0]):
        progress = min(1.0, float(groups[rule.progress[0]]) / 100.0)
    detail = {n: groups[n] for n in rule.detail if groups.get(n)}
    return _fmt(rule.text, groups), detail, progress


class MilestoneTracker:
    def __init__(self, node: str = "", source: str = "", rules: Rules | None = None) -> None:
        self.node = node
        self.source = source
        self.rules = rules or default_rules()
        self._parts: dict[str, dict[int, str]] = {}
        self._detail: dict[str, dict[str, str]] = {}
        self._last: dict[str, tuple[str, float | None]] = {}
        self.reached: dict[str, Milestone] = {}
        self.progress: dict[str, float] = {}
        self.generation = 0  # bumps when the process restarts in the same log (a new run)
        self.phases: dict[str, tuple[int, str]] = {}  # open [[phase]]s: id -> (line, text)
        self.hang_marks: dict[str, tuple[int, str, str]] = {}  # phase id -> (line, finding id, line text)

    def reset(self) -> None:
        self._parts.clear()
        self._detail.clear()
        self._last.clear()
        self.reached.clear()
        self.progress.clear()
        self.phases.clear()
        self.hang_marks.clear()
        self.generation += 1

    def match(self, line: str, lineno: int, only: Iterable[int] | None = None) -> list[Milestone]:
        """Milestones advanced by one line; ``only``: the rule indexes worth trying (the caller's
        prefilter already knows which)."""
        return self.apply(self.effects(line, only), line, lineno)

    def effects(self, line: str, only: Iterable[int] | None = None) -> list[tuple[int, Rule, tuple]]:
        """The rules a line matches, each with what its last match (progress bars redraw in place)
        notes: (text part, detail, progress).  Pure: a caller may keep them for a line that comes
        again."""
        out = []
        rules = self.rules.rules
        for idx in (range(len(rules)) if only is None else only):
            rule = rules[idx]
            if not any(lit in line for lit in rule.prefilter):
                continue
            m = None
            for m in rule.pattern.finditer(line):
                pass
            if m is not None:
                out.append((idx, rule, _values(rule, m.groupdict()) if rule.kind == "milestone" else ()))
        return out

    def changes(self, effects: list[tuple[int, Rule, tuple]]) -> bool:
        """Whether ``apply(effects)`` would change anything now (False: every milestone it would
        note says exactly what it already says; phases and restarts always count as a change)."""
        for idx, rule, values in effects:
            if rule.kind != "milestone" or rule.id == "container_started":
                return True
            part, detail, progress = values
            parts = self._parts.get(rule.id)
            if parts is None or (part and parts.get(idx) != part):
                return True
            det = self._detail.get(rule.id, {})
            if any(det.get(k) != v for k, v in detail.items()):
                return True
            if progress is not None and self.progress.get(rule.id) != progress:
                return True
        return False

    def apply(self, effects: list[tuple[int, Rule, tuple]], line: str, lineno: int) -> list[Milestone]:
        out = []
        for idx, rule, values in effects:
            if rule.kind != "milestone":
                if rule.kind == "phase_start":
                    self.phases[rule.id] = (lineno, rule.text)
                elif rule.kind == "phase_hang":
                    if rule.id in self.phases:  # only inside its open phase
                        self.hang_marks[rule.id] = (lineno, rule.finding, line)
                else:
                    self.phases.pop(rule.id, None)
                    self.hang_marks.pop(rule.id, None)
                continue
            if rule.id == "container_started" and self.reached:
                self.reset()  # the process started again in the same log: a new run
            part, detail, progress = values
            ms = self.note(rule.id, part, detail, lineno, progress, part_key=idx)
            if ms is not None:
                out.append(ms)
        return out

    def note(
        self,
        mid: str,
        part: str,
        detail: dict[str, str],
        lineno: int | None,
        progress: float | None = None,
        part_key: int = -1,
    ) -> Milestone | None:
        parts = self._parts.setdefault(mid, {})
        if part:
            parts[part_key] = part
        det = self._detail.setdefault(mid, {})
        det.update(detail)
        if progress is not None:
            self.progress[mid] = progress
        label = self.rules.labels.get(mid, mid)
        text = label + (": " + ", ".join(parts[k] for k in sorted(parts)) if parts else "")
        prog = self.progress.get(mid)
        if self._last.get(mid) == (text, prog):
            return None
        self._last[mid] = (text, prog)
        ms = Milestone(
            id=mid,
            text=text,
            node=self.node,
            source=self.source,
            line=lineno,
            progress=prog,
            detail=tuple(sorted(det.items())),
        )
        self.reached[mid] = ms
        return ms

    def hang_mark(self) -> tuple[int, str, str, str] | None:
        """(line, finding id, line text, phase text) of the latest hang marker inside a phase that
        is still open; whether the log stopped RIGHT AFTER it is the caller's call (it has the tail)."""
        best = None
        for pid, (line, fid, text) in self.hang_marks.items():
            if pid in self.phases and (best is None or line > best[0]):
                best = (line, fid, text, self.phases[pid][1])
        return best

    def open_phase(self) -> tuple[int | None, str] | None:
        """(line, description) of the phase a log stopped inside, if any: weights loading below
        100 % with nothing later, or a [[phase]] started and never ended (the latest one)."""
        if self.phases:
            line, text = max(self.phases.values())
            return line, text
        loading = self.reached.get("weights_loading")
        if loading is None:
            return None
        later = MILESTONE_ORDER[MILESTONE_ORDER.index("weights_loading") + 1:]
        if any(m in self.reached for m in later):
            return None
        if loading.progress is not None and loading.progress >= 1.0:
            return None
        return loading.line, loading.text
