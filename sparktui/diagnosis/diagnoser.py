"""The engine processor: log events in, ``FindingRaised`` / ``MilestoneReached`` events out.

One ``SourceScanner`` per source key ``f"{node}/{source}"`` (or the file name offline).  ``feed``
is what the engine calls for every event; ``tick`` closes tracebacks whose stream went quiet;
``finish`` is end-of-input for offline files (suspected hangs, cross-rank comparison); the live
stall detector's alarm (a ``suspected_hang`` FindingRaised fed back to us) runs the same hang check.
"""

from __future__ import annotations

import re
import time
from dataclasses import replace
from typing import Iterable

from ..model import (
    ContainerChanged,
    ContainersSnapshot,
    ContainerState,
    Event,
    Finding,
    FindingRaised,
    InputEnded,
    LogBatch,
    LogLine,
    Milestone,
    MilestoneReached,
    is_own_probe,
)
from .catalogue import Catalogue, default_catalogue
from .classifier import SourceScanner
from .end_phase import default_end_phases
from .exc_shapes import default_shapes
from .last_words import (ENGINES, INIT_FACT_IDS, NOT_PYTHON, WINDOW, component, earlier_failure, facts, failure,
                         failures_above, inferred_fact, quiet_cause, shutdown_before, silent_facts,
                         stopped_on_request, traceback_after)
from .milestones import Rules
from .nccl_ranks import (Behind, absent_ranks, bootstrap_subnets_differ, collective_mismatches, compare_ranks, one_host,
                         plugins_differ, versions_differ)
from .ranking import GENERIC_IDS, rank_findings
from .stacks import blocked

# findings that say a job stopped (where), not why
HANG_IDS = frozenset({"nccl_init_hang", "suspected_hang"})
# milestones that say the service was up and answering
SERVING_MILESTONES = frozenset({"api_ready", "first_prompt"})
# failures a job can go on past, told by what came after them (``_went_past``)
WENT_ON_IDS = frozenset({"launcher_ssh_failed"})
# a rank announcing itself as it enters torch.distributed's rendezvous (vLLM's parallel_state line,
# and "rank=R ... world_size=W" in the other order): world size and rank
_RDZV_RANK = re.compile(r"\bworld_size=(?P<w>\d+),? rank=(?P<r>\d+)\b|\brank=(?P<r2>\d+),? world_size=(?P<w2>\d+)\b")


# the phase name of NCCL's communicator init (end_phases.toml's nccl_init text)
NCCL_SETUP_PHASE = "NCCL communicator setup"


def _wrap(items: Iterable[Finding | Milestone]) -> list[Event]:
    out: list[Event] = []
    for x in items:
        out.append(FindingRaised(x) if isinstance(x, Finding) else MilestoneReached(x))
    return out


class Diagnoser:
    def __init__(self, catalogue: Catalogue | None = None, *, rules: Rules | None = None,
                 flush_after: float = 1.0) -> None:
        self.catalogue = catalogue or default_catalogue()
        self.rules = rules
        self.flush_after = flush_after
        self.scanners: dict[str, SourceScanner] = {}
        self._images: dict[str, dict[str, str]] = {}  # image ref -> node -> image id
        self._image_findings: set[tuple[str, ...]] = set()
        self.extra_findings: list[Finding] = []
        self._runs: dict[str, str] = {}  # source key -> the id of the container that logs under it

    # ------------------------------------------------------------------ sources
    def scanner(self, key: str, node: str = "") -> SourceScanner:
        sc = self.scanners.get(key)
        if sc is None:
            sc = self.scanners[key] = SourceScanner(key, node, catalogue=self.catalogue, rules=self.rules)
        return sc

    def feed_lines(self, key: str, lines: list[str] | list[bytes], node: str = "",
                   first_lineno: int | None = None) -> list[Finding | Milestone]:
        return self.scanner(key, node).feed(lines, first_lineno)

    # ------------------------------------------------------------------ engine protocol
    def feed(self, event: Event) -> list[Event]:
        if isinstance(event, LogBatch):
            if not event.lines:
                return []
            first = event.lines[0].seq or None
            return _wrap(self.feed_lines(f"{event.node}/{event.source}", [ln.text for ln in event.lines],
                                         event.node, first))
        if isinstance(event, LogLine):
            return _wrap(self.feed_lines(f"{event.node}/{event.source}", [event.text], event.node,
                                         event.seq or None))
        if isinstance(event, ContainerChanged):
            c = event.container
            if c.state == ContainerState.RUNNING and not is_own_probe(c):  # a doctor probe is no startup
                key = self._run(event.node, c)
                sc = self.scanner(key, event.node)
                ms = sc.milestones.note("container_started", c.image, {"image": c.image}, None)
                return _wrap([ms] if ms else [])
            return []
        if isinstance(event, ContainersSnapshot):
            for c in event.containers:
                if c.state == ContainerState.RUNNING:
                    self._run(event.node, c)
            return self._check_images(event)
        if isinstance(event, FindingRaised):
            return self._on_alarm(event.finding)
        if isinstance(event, InputEnded) and not event.done:
            return self.end_of_input(event)
        return []

    def end_of_input(self, ask: InputEnded) -> list[Event]:
        """``finish`` over the asked sources only (an action's containers, not every log the engine
        follows): the findings it raised or revised, then the answer carrying all of theirs, ranked."""
        keys = [k for k in ask.sources if k in self.scanners]
        part = Diagnoser(self.catalogue, rules=self.rules, flush_after=self.flush_after)
        part.scanners = {k: self.scanners[k] for k in keys}  # the same scanners: what it revises stays
        before = {id(f) for k in keys for f in self.scanners[k].findings}
        derived = part.finish()
        out: list[Event] = [e for e in derived if isinstance(e, MilestoneReached)]
        # new, and revised (a severity or line changed: a new object under the same id)
        out += [FindingRaised(f) for k in keys for f in self.scanners[k].findings if id(f) not in before]
        ranked = rank_findings([f for k in keys for f in self.scanners[k].findings], self.catalogue,
                               {k: i for i, k in enumerate(keys)})
        return [*out, replace(ask, done=True, findings=tuple(ranked))]

    def _run(self, node: str, c) -> str:
        """The source key of a running container; another container under the name (a relaunch)
        gets a fresh scanner, so the new run raises its own findings even where the old run raised
        the same ones (lifecycle.py resolved those)."""
        key = f"{node}/{c.name}"
        if self._runs.setdefault(key, c.id) != c.id:
            self._runs[key] = c.id
            self.scanners.pop(key, None)
        return key

    def _on_alarm(self, f: Finding) -> list[Event]:
        """Live counterpart of ``finish``'s hang check: when the stall detector reports a suspected
        hang, a source whose log stopped right after a hang marker (SGLang's "Custom allreduce is
        disabled ...") names the cause."""
        if f.id != "suspected_hang" or f.source in self.scanners:
            return []  # ours (end of input) or not an alarm
        out: list = []
        for sc in self.scanners.values():
            out.extend(sc.hang_cause())
        return _wrap(out)

    def tick(self, now: float | None = None) -> list[Event]:
        mono = time.monotonic()
        out: list = []
        for sc in self.scanners.values():
            if sc._tb is not None and mono - sc.last_feed >= self.flush_after:
                out.extend(sc.flush())
        return _wrap(out)

    def finish(self) -> list[Event]:
        """End of input (offline): close tracebacks, report hangs, compare ranks."""
        out: list = []
        for sc in self.scanners.values():
            out.extend(sc.flush())
        out.extend(self._cross_rank())  # first: its findings name the lagging rank
        for sc in self.scanners.values():
            out.extend(sc.finish())
        self._rendezvous_absent()
        self._one_host()  # before the shutdown context: a fact fine for one machine names no cause there
        self._shutdown_context()
        self._went_past()
        out.extend(self._last_words())
        self._one_host()
        return _wrap(out)

    # ------------------------------------------------------------------ cross-source analysis
    def behind(self) -> list[Behind]:
        return compare_ranks(self.trackers())

    def trackers(self):
        return [t for sc in self.scanners.values() for t in sc.trackers]

    def _cross_rank(self) -> list[Finding]:
        out: list[Finding] = []
        for m in collective_mismatches(self.trackers()):
            # the split itself, named on both ranks (as the Flight Recorder analyser reports it)
            sc = self.scanners.get(m.a.source) or self.scanners.get(m.b.source)
            if sc is None:
                continue
            ev = [f"{o.source}:{o.line}: {o.text}" for o in (m.a, m.b)]
            f = sc.raise_derived("nccl_collective_mismatch", m.a.line,
                                 [f"{m.what} mismatch at SeqNum {m.seq}", *ev],
                                 title=f"Collective mismatch ({m.what}) at {m.title}")
            if f:
                out.append(f)
        for b in self.behind():
            sc = self.scanners.get(b.source)
            if sc is None:
                continue
            fid = "nccl_init_hang" if b.kind == "init" else "nccl_collective_mismatch"
            if b.kind == "init" and any(f.severity == "error" and (f.line or 0) > (b.line or 0) for f in sc.findings):
                continue  # it crashed after starting init (its own finding says why): not a hang
            f = sc.raise_derived(fid, b.line, [b.reason, *b.evidence], title=f"Rank {b.rank} is behind: {b.reason}")
            if f:
                out.append(f)
        gone = absent_ranks(self.trackers())
        if gone is not None and not out:
            t, st, absent = gone
            sc = self.scanners.get(t.source)
            if sc is not None and not any(f.severity == "error" and (f.line or 0) > (st.init_start or 0)
                                          for f in sc.findings):
                names = ", ".join(map(str, absent[:8])) + (", ..." if len(absent) > 8 else "")
                waiting = sorted({s.rank for x in self.trackers() for s in x.comms.values()
                                  if (s.comm_id or f"nranks={s.nranks}") == (st.comm_id or f"nranks={st.nranks}")})
                # the logs of several ranks, all waiting: the absent ones are proven missing; one
                # log alone may simply be one node's share of the job (a suspicion)
                many = len({x.source for x in self.trackers() if x.seen}) >= 2
                f = sc.raise_derived(
                    "nccl_init_hang", st.init_start,
                    [f"comm {st.comm_id or st.comm}: world size {st.nranks}; ranks {', '.join(map(str, waiting))} "
                     f"started init, rank(s) {names} never appear", *( [f"{t.last_line[0]}: {t.last_line[1]}"]
                                                                      if t.last_line else [])],
                    title=f"Rank(s) {names} of {st.nranks} never arrived: NCCL init waits for them",
                    severity=None if many else "warning")
                if f:
                    out.append(f)
        out.extend(self._stacks_apart())
        # settings the ranks' NCCL lines show differing: (id, evidence lines or None, title)
        ts = self.trackers()
        vs = versions_differ(ts)
        for fid, ev, title in (
            ("wrong_network_interface", bootstrap_subnets_differ(ts), "Ranks bootstrap NCCL on different subnets"),
            ("nccl_library_mismatch", plugins_differ(ts), "Ranks load different NCCL network plugins"),
            ("nccl_version_mismatch", [f"{s}: NCCL {v}" for s, v in vs.items()] if vs else None, None),
        ):
            if ev and self.scanners:
                f = next(iter(self.scanners.values())).raise_derived(fid, None, ev, title=title)
                if f:
                    out.append(f)
        return out

    def _stacks_apart(self) -> list[Finding]:
        """Ranks whose pasted stacks (py-spy, faulthandler, a Ctrl+C's traceback) wait in different
        torch.distributed collectives: out of step.  Two or more sources, each ending in such a stack;
        the same collective everywhere names nothing here (a hang, told by what else the logs say)."""
        waits = {k: w for k, sc in self.scanners.items() if (w := blocked(sc.window)) is not None}
        if len(waits) < 2 or len({w[1] for w in waits.values()}) < 2:
            return []
        first = next(iter(waits))
        ev = [f"{k}:{n}: waits in {frame}" for k, (n, _, frame) in waits.items()]
        names = " vs ".join(sorted({w[1] for w in waits.values()}))
        f = self.scanners[first].raise_derived("nccl_collective_mismatch", waits[first][0], ev,
                                               title=f"Ranks wait in different collectives ({names})")
        return [f] if f else []

    def _shutdown_context(self) -> None:
        """A death (a consequence: the engine or a worker gone) printed after a shutdown request in
        the same source's last lines is how a stop looks: info, unless a cause was named there."""
        ents = self.catalogue.entries
        for sc in self.scanners.values():
            if not sc.window:
                continue
            first = sc.window[0][0]
            if any(f.severity == "error" and f.id in ents and not ents[f.id].consequence
                   and f.id not in GENERIC_IDS for f in sc.findings):
                continue
            for k, f in enumerate(sc.findings):
                e = ents.get(f.id)
                if e is None or not e.consequence or f.severity == "info" or (f.line or 0) < first:
                    continue
                req = shutdown_before(list(sc.window), f.line or 0)
                if req is not None:
                    sc.findings[k] = replace(f, severity="info",
                                             title=f"{f.title} (after a shutdown request, line {req[0]})")

    def _rendezvous_absent(self) -> None:
        """Every log of the input stops in torch.distributed's rendezvous (end_phases.toml): the
        world size and ranks they announced there name the ranks that never joined.  Proven (an
        error) when two or more logs say so; one log alone may be one node's share (a warning)."""
        stopped = {k: f for k, sc in self.scanners.items() for f in sc.findings  # the end phase's suspicion
                   if f.id == "rendezvous_timeout" and f.severity == "warning"
                   and f.evidence[:1] and f.evidence[0].startswith("the log ends during")}
        if not stopped or len(stopped) != len(self.scanners):
            return  # a log that went on (or says something else) may hold the ranks not seen here
        worlds: dict[int, set[int]] = {}
        for sc in self.scanners.values():
            for _, t in sc.window:
                m = _RDZV_RANK.search(t)
                if m is not None:
                    worlds.setdefault(int(m["w"] or m["w2"]), set()).add(int(m["r"] or m["r2"]))
        if len(worlds) != 1:
            return  # no world size announced, or several groups: no one count to compare
        (w, ranks), = worlds.items()
        absent = sorted(set(range(w)) - ranks)
        if w < 2 or not absent:
            return
        names = ", ".join(map(str, absent[:8])) + (", ..." if len(absent) > 8 else "")
        for k, f in stopped.items():
            sc = self.scanners[k]
            i = sc.findings.index(f)
            sc.findings[i] = replace(
                f, severity="error" if len(stopped) >= 2 else "warning",
                title=f"Rank(s) {names} of {w} never joined the rendezvous",
                evidence=(f"world size {w}; ranks {', '.join(map(str, sorted(ranks)))} entered the rendezvous, "
                          f"rank(s) {names} never appear", *f.evidence))

    def _went_past(self) -> None:
        """Errors the same source went on past, told by what came after them: an exception nothing
        recognises printed before the source was serving (the API came up, a prompt was answered);
        a launcher's SSH failure before a communicator completed its init (every rank joined) or the
        server came up (a retry got through).  Warnings, not the failure."""
        for sc in self.scanners.values():
            served = max((m.line or 0 for m in sc.milestones.reached.values() if m.id in SERVING_MILESTONES),
                         default=0)
            joined = max([served] + [st.init_complete for t in sc.trackers for st in t.comms.values()
                                     if st.init_complete])
            for k, f in enumerate(sc.findings):
                if f.severity != "error":
                    continue
                if f.id in GENERIC_IDS and (f.line or 0) < served:
                    note = f"serving after it, line {served}"
                elif f.id in WENT_ON_IDS and (f.line or 0) < joined:
                    note = f"the job went on past it, line {joined}"
                else:
                    continue
                sc.findings[k] = replace(f, severity="warning", title=f"{f.title} ({note})")

    def _last_words(self) -> list[Finding]:
        """End of input, when no finding names a cause: a failing source's last lines are read for
        structure (last_words.py).  A fact there (an errno, the driver's OOM status, an undefined
        symbol) names its cause; a failure nothing recognises is still reported
        (``unrecognised_failure``), so a failing log is never silent."""
        ents = self.catalogue.entries
        def names_cause(f: Finding) -> bool:
            e = ents.get(f.id)
            return f.severity == "error" and e is not None and not e.consequence and f.id not in GENERIC_IDS
        every = [f for sc in self.scanners.values() for f in sc.findings]
        causes = [f for f in every if names_cause(f)]
        # a hang inside communicator init is a suspicion about where, not why: the WARN of the NCCL
        # transport that failed while the ranks waited (RDMA, shared memory) is the why
        hang_only = bool(causes) and all(f.id in HANG_IDS for f in causes)
        if causes and not hang_only:
            return []
        out: list[Finding] = []
        # the findings below given as warnings because they rest on structure alone (a weak or quiet
        # last words, a fact of structure alone), and the sources they came from
        weak: set[int] = set()  # (their id())
        spoke: set[int] = set()
        any_error = any(f.severity == "error" for f in every)
        for sc in self.scanners.values():
            window = list(sc.window)
            lw = self._unrecovered(sc, failure(window))
            stuck = any(True for t in sc.trackers for _ in t.open_inits())
            if hang_only and not stuck:
                continue
            if lw is None and not stuck and not any(f.severity == "error" for f in sc.findings):
                continue  # neither failing nor stopped inside NCCL init: its facts explain nothing
            known = INIT_FACT_IDS & set(ents) if hang_only else ents
            fact = facts(window, known)
            if fact is not None and fact[1] == "nccl_ib_error" and any(t.network == "Socket" for t in sc.trackers):
                fact = None  # NCCL fell back to sockets: its verbs warning was the probe, not the failure
            if fact is None:
                continue
            # a fact is an error where more than structure says the source failed: its last words
            # (an exception, an error level, an exit status, a fatal signal), a stop inside NCCL
            # init, an error already found there; the last words of structure alone (a status enum,
            # a death logged below error level) make it a warning
            spoken = lw is not None and not lw.weak and not lw.quiet
            context = spoken or stuck or any(f.severity == "error" for f in sc.findings)
            if inferred_fact(fact[2]) and not (spoken or any_error):
                # a fact of structure alone is an error only beside last words that say more, or in
                # an input that already has an error; else the fact the readings before it give
                # (an error in its context), or this one as a warning
                other = facts(window, known, inferred=False) if context else None
                if other is not None and not (other[1] == "nccl_ib_error"
                                              and any(t.network == "Socket" for t in sc.trackers)):
                    fact, context = other, True
                else:
                    context = False
            line, fid, why, text = fact
            f = sc.raise_derived(fid, line, [why, text], severity=None if context else "warning")
            if f:
                out.append(f)
                spoke.add(id(sc))
                if not context:
                    weak.add(id(f))
        if any(id(f) not in weak for f in out) or hang_only or any_error:
            return out  # a recognised failure (a dead engine, a traceback, a fact) is not silent
        # nothing found, or only facts of structure alone (warnings): the other sources' last words
        out += self._dead_or_unrecognised(skip=spoke)
        if not any(id(f) not in weak for f in out) and not any(f.severity != "info" for f in every):
            out += self._silent_facts(skip=spoke)
        if not any(id(f) not in weak for f in out) and not any(f.severity != "info" for f in every):
            out += self._earlier_failures(skip=spoke)
        if not out and not any(f.severity != "info" or f.id == "shutdown_requested" for f in every):
            out += self._quiet_words()
        if not out and not any(f.severity != "info" or f.id == "shutdown_requested" for f in every):
            out += self._stopped_on_request()
        return out

    def _quiet_words(self) -> list[Finding]:
        """Nothing failed by its shape anywhere: a source's last lines read by the exception table's
        shapes below error level (a warning that a version is incompatible, a plain line that the
        collectives differ; never a status line at INFO).  Said as a warning: the program may have gone
        on; the words name what a user should look at first."""
        shapes = default_shapes()
        out: list[Finding] = []
        for sc in self.scanners.values():
            got = quiet_cause(list(sc.window), shapes.classify)
            if got is None or not self._a_cause(got[1]):
                continue
            n, fid, text = got
            f = sc.raise_derived(fid, n, [f"the last lines name it, below error level: {text}"], severity="warning")
            if f:
                out.append(f)
        return out

    def _stopped_on_request(self) -> list[Finding]:
        """Nothing failed, and a source's last words are a stop someone asked for: said as the info
        fact it is (why the log ends there), in whatever words the request came."""
        if "shutdown_requested" not in self.catalogue.entries:
            return []
        out: list[Finding] = []
        for sc in self.scanners.values():
            got = stopped_on_request(list(sc.window))
            if got is None:
                continue
            f = sc.raise_derived("shutdown_requested", got[0], [f"the log's last words are a stop request: {got[1]}"])
            if f:
                out.append(f)
        return out

    def _earlier_failures(self, skip: set[int] | frozenset[int] = frozenset()) -> list[Finding]:
        """Nothing spoke about any source, and no failure is among its last words, but an earlier
        part of its log failed (an exception, an ERROR line, a death) and the log went on with lines
        that show none: a warning (the program may have recovered; it may also have ended there and
        printed more), named by the exception's shape when it has one."""
        ents = self.catalogue.entries
        out: list[Finding] = []
        for sc in self.scanners.values():
            if id(sc) in skip:
                continue  # a fact of structure alone spoke about it already (a warning)
            if any(m.id in SERVING_MILESTONES for m in sc.milestones.reached.values()):
                continue  # a server that was up and went on past an error (a request's) is no failing run
            window = list(sc.window)
            lw = earlier_failure(window)
            if lw is None:
                continue
            after = sum(1 for n, t in window if n > lw.line and t.strip())
            # an exception by its shape; an error line by the table's message-only shapes
            fid = default_shapes().classify(lw.exc_class, lw.message) if lw.exc_class else \
                default_shapes().classify("", lw.message) if lw.kind == "error line" else None
            if fid is not None and fid in ents:
                f = sc.raise_derived(fid, lw.line, [f"an earlier failure ({lw.kind}), {after} line(s) before the log "
                                                    f"ends: {lw.text}"], severity="warning")
            else:
                what = f"{lw.exc_class}: {lw.message}" if lw.exc_class else lw.message
                comp = component(lw, window)
                python = lw.kind == "exception" and lw.exc_class not in NOT_PYTHON and "unhandled_exception" in ents
                title = (f"An earlier {'exception' if python else 'failure'}{' in ' + comp if comp else ''}, "
                         f"the log went on: {what}")
                if len(title) > 160:
                    title = title[:159] + "…"
                f = sc.raise_derived(
                    "unhandled_exception" if python else "unrecognised_failure", lw.line,
                    [f"earlier failure ({lw.kind}), {after} line(s) before the log ends: {lw.text}",
                     f"exception: {lw.exc_class or 'none'}; phase: {self._phase(sc, lw.line) or 'unknown'}; "
                     f"component: {comp or 'unknown'}"],
                    title=title, severity="warning")
            if f:
                out.append(f)
        return out

    def _silent_facts(self, skip: set[int] | frozenset[int] = frozenset()) -> list[Finding]:
        """Nothing spoke about any source: a fact that is a failure by itself still names its cause
        (last_words.silent_facts)."""
        out: list[Finding] = []
        for sc in self.scanners.values():
            got = silent_facts(list(sc.window), self.catalogue.entries)
            if got is None:
                continue
            line, fid, why, text, sev = got
            if id(sc) in skip and sev != "error":
                continue  # a fact of structure alone spoke about it already (a warning)
            f = sc.raise_derived(fid, line, [why, text], severity=sev if sev != "error" else None)
            if f:
                out.append(f)
        return out

    def _dead_or_unrecognised(self, skip: set[int] | frozenset[int] = frozenset()) -> list[Finding]:
        """A failure nothing recognised: a process death named by the layer that died (an engine, a
        Ray node), an exception's shape, or ``unrecognised_failure``."""
        ents = self.catalogue.entries
        out: list[Finding] = []
        for sc in self.scanners.values():
            if id(sc) in skip:
                continue  # a fact of structure alone spoke about it already (a warning)
            window = list(sc.window)
            lw = self._unrecovered(sc, failure(window))
            if lw is None:
                continue
            # a death its logger reported below error level, or last words of structure alone (a
            # status enum, a failed C call, a death inferred from its words, NCCL's WARN before a
            # paste): a warning, whatever names it
            sev = "warning" if lw.quiet or lw.weak else None
            if lw.exc_class:
                # the exception's shape may name an id this source raised only as a suspicion (the
                # phase the log ended in, a warning): the exception it died of makes it an error
                fid = default_shapes().classify(lw.exc_class, lw.message)
                k = next((k for k, f in enumerate(sc.findings) if f.id == fid and f.severity == "warning"), None)
                if k is not None and sev:
                    continue  # structure alone: the suspicion stays a suspicion
                if k is not None:
                    f = sc.findings[k]
                    sc.findings[k] = replace(f, severity="error", line=lw.line,
                                             title=self.catalogue[fid].title,
                                             evidence=(f"the exception it died of: {lw.text}", *f.evidence))
                    out.append(sc.findings[k])
                    continue
                if fid is not None and fid in ents:
                    # no traceback head around it (a paste that kept only the last words): the
                    # exception's class and message still name the cause
                    f = sc.raise_derived(fid, lw.line, [f"the exception it died of: {lw.text}"], severity=sev)
                    if f:
                        out.append(f)
                    continue
            elif lw.kind == "error line":
                # an error line's message judged by the exception table's message-only shapes (a
                # tool's "ptxas fatal : ... sm_121a" names the same cause as the exception would)
                fid = default_shapes().classify("", lw.message)
                if fid is not None and fid in ents:
                    f = sc.raise_derived(fid, lw.line, [f"the error it ended with: {lw.text}"], severity=sev)
                    if f:
                        out.append(f)
                    continue
            k = self._fact_on(sc, lw.line)
            if k is not None:
                # the failure's own line states a fact the catalogue knows only as info (a GB10's
                # memory "Not Supported"): what the program died of, as an exception saying it would be
                f = sc.findings[k]
                sc.findings[k] = replace(f, severity=sev or "error",
                                         evidence=(f"the error it ended with: {lw.text}", *f.evidence))
                out.append(sc.findings[k])
                continue
            above = self._cause_above(window, lw)
            if above is not None:
                # the last words name nothing, a failure line above them does (by the exception
                # table's shapes): that is what went wrong, the last words its consequence
                n, fid, text = above
                f = sc.raise_derived(fid, n, [f"a failure above the last words: {text}",
                                              f"last words ({lw.kind}), line {lw.line}: {lw.text}"], severity=sev)
                if f:
                    out.append(f)
                continue
            comp = component(lw, window)
            if lw.kind == "process death" and comp in ENGINES and "engine_dead" in ents \
                    and not any(f.severity != "info" for f in sc.findings):
                # an inference engine's process reported dead in words no pattern knows, and nothing
                # before it (a stall, a warning) to explain it: the engine's death
                f = sc.raise_derived("engine_dead", lw.line, [f"{comp}: {lw.text}"],
                                     title=f"{comp} process died", severity=sev)
                if f:
                    out.append(f)
                continue
            if lw.kind == "process death" and comp == "Ray" and "ray_worker_missing" in ents \
                    and not any(f.severity != "info" for f in sc.findings):
                # Ray's own core (raylet, GCS) reporting a node or worker dead: the cluster lost it
                f = sc.raise_derived("ray_worker_missing", lw.line, [f"{comp}: {lw.text}"],
                                     title="Ray reported a node or worker dead", severity=sev)
                if f:
                    out.append(f)
                continue
            phase = self._phase(sc, lw.line)
            what = f"{lw.exc_class}: {lw.message}" if lw.exc_class else lw.message
            if comp == "NCCL" and phase == NCCL_SETUP_PHASE and "nccl_comm_init_failed" in ents:
                # NCCL's own error while the communicator was being set up (the log stops there):
                # whatever its words, creating the communicator is what failed
                f = sc.raise_derived("nccl_comm_init_failed", lw.line,
                                     [f"last words ({lw.kind}), during {phase}: {lw.text}"],
                                     title=f"NCCL communicator setup failed: {what[:120]}", severity=sev)
                if f:
                    out.append(f)
                continue
            if phase == NCCL_SETUP_PHASE and not lw.exc_class and "nccl_comm_init_failed" in ents:
                # another layer's failure that names nothing (a traceback cut at its head, a death, a
                # bare error line) while the communicator was being set up: where it stopped is the
                # lead, a suspicion rather than a fact
                f = sc.raise_derived("nccl_comm_init_failed", lw.line,
                                     [f"last words ({lw.kind}), during {phase}: {lw.text}",
                                      f"component: {comp or 'unknown'}; nothing in the failure names another cause"],
                                     title=f"Failed during NCCL communicator setup: {what[:120]}", severity="warning")
                if f:
                    out.append(f)
                continue
            # a Python exception's own line ("pkg.Class: message", what Python prints last for an
            # uncaught exception; its frames cut from the paste) is an unhandled exception, as its
            # traceback would be; the other failure shapes (an error line, a death, an exit, a C++
            # what(), an engine's [E] line, a panic) are reported as an unrecognised failure; so is a
            # Python traceback cut before its exception line (its class unknown, but Python's all the same)
            python = (lw.kind == "traceback" or lw.kind == "exception" and lw.exc_class not in NOT_PYTHON
                      or lw.kind == "error line" and traceback_after(window, lw.line)) \
                and "unhandled_exception" in ents
            fid = "unhandled_exception" if python else "unrecognised_failure"
            title = f"{'Unhandled exception' if python else 'Unrecognised failure'}{' in ' + comp if comp else ''}: {what}"
            if len(title) > 160:
                title = title[:159] + "…"
            ev = [f"last words ({lw.kind}): {lw.text}",
                  f"exception: {lw.exc_class or 'none'}; phase: {phase or 'unknown'}; component: {comp or 'unknown'}"]
            ev += [f"{n}: {t}" for n, t in window[-5:]]
            f = sc.raise_derived(fid, lw.line, ev, title=title, severity=sev)
            if f:
                out.append(f)
        return out

    def _cause_above(self, window, lw) -> tuple[int, str, str] | None:
        """(line, finding id, text) of the nearest failure line above the last words ``lw`` that the
        exception table names a cause by (its class and message, or an error line's message), or None."""
        shapes = default_shapes()
        for up in failures_above(window, lw.line):
            fid = shapes.classify(up.exc_class, up.message) if up.kind in ("exception", "error line") else None
            if self._a_cause(fid):
                return up.line, fid, up.text
        # no failure line above says more: a line of any other level that names a cause (a kernel
        # printing that it only supports another GPU, a warning that a version is incompatible)
        got = quiet_cause(window, shapes.classify, before=lw.line, span=WINDOW)
        return got if got is not None and self._a_cause(got[1]) else None

    def _a_cause(self, fid: str | None) -> bool:
        """Whether ``fid`` is a catalogue id that names a cause (not a consequence, not a generic one)."""
        e = self.catalogue.entries.get(fid) if fid else None
        return e is not None and not e.consequence and fid not in GENERIC_IDS

    def _fact_on(self, sc, line: int) -> int | None:
        """The index in ``sc.findings`` of an info fact raised on ``line`` that can be what a program
        dies of: not a context fact (one another entry is ``benign_after``, a requested shutdown) and
        not one that stands for another id (``promote_to``, NCCL's return-code trace)."""
        context = {b for e in self.catalogue.entries.values() for b in e.benign_after}
        for k, f in enumerate(sc.findings):
            e = self.catalogue.entries.get(f.id)
            if f.line == line and f.severity == "info" and e is not None and not e.promote_to and f.id not in context:
                return k
        return None

    @staticmethod
    def _unrecovered(sc, lw):
        """``lw`` unless the source was serving after it (the API came up, a prompt was served): a
        failure the program went on past is not how it ended.  An earlier start-up milestone after
        it proves nothing (a restarted process prints those too, then may fail the same way)."""
        if lw is not None and any((m.line or 0) > lw.line for m in sc.milestones.reached.values()
                                  if m.id in SERVING_MILESTONES):
            return None
        return lw

    @staticmethod
    def _phase(sc, line: int) -> str:
        """The phase a source stopped in: an open start-up phase of its milestones, the phase of the
        lines around the failure (end_phases.toml), an NCCL init never completed, or the last
        milestone reached."""
        op = sc.milestones.open_phase()
        if op is not None:
            return op[1]
        eps = default_end_phases()
        window = list(sc.window)
        # the lines nearest the failure first, those after it (how the log ended) next
        for n, t in [*reversed([x for x in window if x[0] <= line]), *(x for x in window if x[0] > line)]:
            ph = eps.of_line(t)
            if ph is not None:
                return ph.text
        if any(True for t in sc.trackers for _ in t.open_inits()):
            return NCCL_SETUP_PHASE
        reached = sorted(sc.milestones.reached.values(), key=lambda m: m.line or 0)
        return f"after {reached[-1].id.replace('_', ' ')}" if reached else ""

    def _one_host(self) -> None:
        """catalogue ``single_host_ok``: loopback (or a bridge) chosen for NCCL's sockets is only wrong
        when a peer is on another machine; when the whole input is one host's job, such a finding
        stays as info."""
        host = one_host(self.trackers())
        if host is None:
            return
        ents = self.catalogue.entries
        for sc in self.scanners.values():
            for k, f in enumerate(sc.findings):
                e = ents.get(f.id)
                if e is None or not e.single_host_ok or f.severity == "info" or not f.evidence:
                    continue
                if any(rx.search(f.evidence[0]) for rx in e.single_host_ok):
                    sc.findings[k] = replace(f, severity="info",
                                             title=f"{f.title} (all ranks on {host}: fine for one machine)")

    def _check_images(self, ev: ContainersSnapshot) -> list[Event]:
        # the snapshot is the node's full set: forget what no longer runs there, record what does
        for ids in self._images.values():
            ids.pop(ev.node, None)
        for c in ev.containers:
            if c.state == ContainerState.RUNNING and c.image_id:
                self._images.setdefault(c.image, {})[ev.node] = c.image_id
        out: list[Finding] = []
        for image, ids in self._images.items():
            if len(set(ids.values())) > 1:
                key = (image, *sorted(f"{n}={i}" for n, i in ids.items()))
                if key in self._image_findings:
                    continue
                self._image_findings.add(key)
                f = self.catalogue.finding(
                    "image_mismatch", title=f"{self.catalogue['image_mismatch'].title}: {image}", source=ev.node,
                    evidence=(f"{n}: {i[:19]}" for n, i in sorted(ids.items())), node=ev.node)
                self.extra_findings.append(f)
                out.append(f)
        return _wrap(out)

    # ------------------------------------------------------------------ results
    @property
    def findings(self) -> list[Finding]:
        fs = [f for sc in self.scanners.values() for f in sc.findings] + self.extra_findings
        order = {k: i for i, k in enumerate(self.scanners)}
        return rank_findings(fs, self.catalogue, order)

    def milestones(self) -> list[Milestone]:
        out = []
        for sc in self.scanners.values():
            out.extend(sorted(sc.milestones.reached.values(), key=lambda m: m.line or 0))
        return out

    def summary(self) -> dict:
        fs = self.findings
        counts = {s: sum(1 for f in fs if f.severity == s) for s in ("error", "warning", "info")}
        ranks = [t.to_json() for t in self.trackers() if t.seen]
        transports = sorted({r["transport"] for r in ranks if r["transport"]})
        behind = self.behind()
        return {
            "counts": counts,
            "files": list(self.scanners),
            "lines": sum(sc.lineno for sc in self.scanners.values()),
            "lines_by_source": {k: sc.lineno for k, sc in self.scanners.items()},
            "transport": transports[0] if len(transports) == 1 else (transports or None),
            "nccl": ranks,
            "behind": [b.to_json() for b in behind],
            "mismatches": [m.to_json() for m in collective_mismatches(self.trackers())],
            "suspected_hang": any(f.id in ("nccl_init_hang", "suspected_hang") for f in fs),
        }
