"""`sparktui report [SESSION]`: a Markdown incident report of a recorded session.

SESSION is a session directory or its name under the sessions dir; default: the latest.
The report is built from what the session kept (events.jsonl, logs/), never from live nodes,
so it can be written after the cluster is gone.  Secrets were redacted when recorded.
"""

from __future__ import annotations

import re
import sys
import time
from collections import Counter
from pathlib import Path

from ..model import TIMELINE_STATUSES, finding_key
from ..session import latest_session
from ..session_read import SessionError, open_session, read_events, read_logs, read_meta

TAIL_LINES = 15
LOG_TAIL_BYTES = 1 << 20  # the last 15 lines are in the last MiB of any sane log


def _resolve(arg: str | None, root: Path) -> Path | None:
    """A session folder by name under ``root``, or the latest there."""
    if not arg:
        return latest_session(root)
    cand = root / arg
    return cand if cand.is_dir() else None


def _when(ts: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts)) if ts else "?"


def _fence(lines: list[str]) -> list[str]:
    # a log line may itself hold backticks: the fence must be longer than any run of them
    runs = [len(r) for ln in lines for r in re.findall(r"`+", ln)]
    fence = "`" * max(3, max(runs, default=0) + 1)
    return [fence, *lines, fence]


def _own_probe(source: str) -> bool:
    """A doctor probe container (``node/sparktui-probe-…``): sparktui's own, not the cluster's."""
    from ..probes.containers import PROBE_PREFIX

    return source.rsplit("/", 1)[-1].startswith(PROBE_PREFIX)


PER_OPERATOR = 200  # action lines per operator: the newest


def _other_text(e: dict) -> str:
    if e.get("kind") == "note":
        return f"note: {e.get('message')}"
    if e.get("kind") == "ack":
        return f"acknowledged finding {e.get('step') or e.get('message')}"
    return f"action {e.get('action')}/{e.get('step')}: {e.get('status')} {e.get('message') or ''}".rstrip()


def _notes_section(notes: list[dict], others: list[dict]) -> list[str]:
    """Every note, this session's and the other operators' (shared timeline), oldest first."""
    rows = [(e.get("ts") or 0, e.get("author") or "operator", e.get("text") or "") for e in notes]
    rows += [(e.get("ts") or 0, e.get("operator") or "?", e.get("message") or "") for e in others
             if e.get("kind") == "note"]
    out = ["## Notes", ""]
    if not rows:
        out.append("None recorded.")
    for ts, who, text in sorted(rows, key=lambda r: r[0]):
        out.append(f"- {_when(ts)} {who}: {text}")
    return out + [""]


def _actions_section(actions: list[dict], others: list[dict], meta: dict) -> list[str]:
    """Each operator's action steps (this session's first), so the report says who did what, where."""
    me = meta.get("operator") if isinstance(meta.get("operator"), str) else "this session"
    by: dict[str, list[tuple[float, str]]] = {}
    for e in actions:
        if e.get("status") in TIMELINE_STATUSES:
            where = f" [{e['node']}]" if e.get("node") else ""
            by.setdefault(f"{me} (this session)", []).append(
                (e.get("ts") or 0, f"{e.get('action')}/{e.get('step')}: {e.get('status')}{where} {e.get('message') or ''}".rstrip()))
    for e in others:
        if e.get("kind") == "action":
            where = f" [{e['node']}]" if e.get("node") else ""
            by.setdefault(f"{e.get('operator') or '?'}", []).append(
                (e.get("ts") or 0, f"{e.get('action')}/{e.get('step')}: {e.get('status')}{where} {e.get('message') or ''}".rstrip()))
    out = ["## Actions by operator", ""]
    if not by:
        out += ["None recorded.", ""]
    for who, rows in by.items():
        out += [f"### {who}", ""]
        rows.sort(key=lambda r: r[0])
        if len(rows) > PER_OPERATOR:
            out.append(f"- … {len(rows) - PER_OPERATOR} earlier steps")
        out += [f"- {_when(ts)} {text}" for ts, text in rows[-PER_OPERATOR:]]
        out.append("")
    return out


def _key(f: dict) -> str:
    return finding_key(f.get("id") or "", f.get("node") or "", f.get("source") or "", f.get("line"))


def finding_states(events: list[dict]) -> dict[str, dict]:
    """Finding key -> its last resolution or acknowledgement, in recorded order, as the engine's
    state does (state.py): a resolution stands, a finding raised again after it is active again."""
    out: dict[str, dict] = {}
    for e in events:
        kind = e.get("type")
        if kind == "FindingRaised":
            k = _key(e["finding"])
            if out.get(k, {}).get("type") == "FindingResolved":
                del out[k]
        elif kind == "FindingResolved":
            if out.get(e.get("key"), {}).get("type") != "FindingResolved":
                out[e.get("key")] = e
        elif kind == "FindingAcknowledged" and e.get("key") not in out:
            out[e.get("key")] = e
    return out


def _state_text(st: dict | None) -> str:
    if st is None:
        return "active"
    if st.get("type") == "FindingResolved":
        return f"resolved at {_when(st.get('ts'))} ({st.get('reason') or '?'})"
    return f"acknowledged at {_when(st.get('ts'))} by {st.get('operator') or '?'}"


def _verdicts(events: list[dict]) -> list[dict]:
    """Every hang investigation's verdict (its "verdict" step), oldest first."""
    return [{"ts": e.get("ts"), "problem": e.get("status") == "warn", "verdict": e.get("message") or ""}
            for e in events if e.get("type") == "ActionEvent" and e.get("action") == "investigate"
            and e.get("step") == "verdict" and e.get("status") in ("ok", "warn")]


def _read(path: Path):
    with open_session(path) as sd:
        # read and checked up front (session_read.py): links are not followed, shapes are validated
        return read_meta(sd, required=False), read_events(sd), read_logs(sd, tail_bytes=LOG_TAIL_BYTES)


def report_data(path: Path) -> dict:
    """What the report says, for ``report --json``: the session, findings, the last milestone of
    each node, investigation verdicts and notes."""
    meta, events, _logs = _read(path)
    last: dict[str, dict] = {}
    for e in events:
        if e.get("type") == "MilestoneReached" and not _own_probe(e["milestone"].get("source") or ""):
            last[e["milestone"].get("node") or "?"] = e["milestone"]
    return {"session": path.name, "meta": meta,
            "findings": [e["finding"] for e in events if e.get("type") == "FindingRaised"],
            "milestones": last, "verdicts": _verdicts(events),
            "notes": [e for e in events if e.get("type") == "Note"]}


def build_report(path: Path) -> str:
    """The report; ``SessionError`` (one line) for a session file of the wrong kind or shape."""
    meta, events, logs = _read(path)
    findings = [e["finding"] for e in events if e.get("type") == "FindingRaised"]
    actions = [e for e in events if e.get("type") == "ActionEvent"]
    notes = [e for e in events if e.get("type") == "Note"]
    # the other operators' actions and notes, as read from the cluster's shared timeline
    others = [e for e in events if e.get("type") == "TimelineEntry"]
    reach = [e for e in events if e.get("type") == "NodeReachability"]
    # sessions recorded before doctor's probes were kept out of the panes still hold theirs
    milestones = [e["milestone"] for e in events if e.get("type") == "MilestoneReached"
                  and not _own_probe(e["milestone"].get("source") or "")]

    out: list[str] = [f"# Incident report: {path.name}", ""]
    out.append(f"- started: {_when(meta.get('started'))}")
    out.append(f"- kind: {meta.get('kind', '?')}" + (f" (scenario {meta['scenario']})" if meta.get("scenario") else ""))
    out.append(f"- config: {meta.get('config', '?')}")
    out.append(f"- nodes: {', '.join(meta.get('nodes', [])) or '?'}")
    # a finding raised again is one finding (as in the engine's state): its first raise
    first: dict[str, dict] = {}
    for f in findings:
        first.setdefault(_key(f), f)
    findings = list(first.values())
    states = finding_states(events)
    sev = Counter(f.get("severity") for f in findings)
    closed = Counter(states[k]["type"] for k in map(_key, findings) if k in states)
    out.append(f"- findings: {sev.get('error', 0)} error, {sev.get('warning', 0)} warning, {sev.get('info', 0)} info"
               f" ({closed.get('FindingResolved', 0)} resolved, {closed.get('FindingAcknowledged', 0)} acknowledged)")
    out.append("")

    out += ["## Findings", ""]
    if not findings:
        out += ["None recorded.", ""]
    order = {"error": 0, "warning": 1, "info": 2}
    # the active findings first: what is still wrong; the resolved and acknowledged after, marked
    for f in sorted(findings, key=lambda f: (_key(f) in states, order.get(f.get("severity"), 9), f.get("ts") or 0)):
        where = f.get("source") or f.get("node") or ""
        if f.get("line"):
            where += f":{f['line']}"
        st = states.get(_key(f))
        mark = "" if st is None else (" — RESOLVED" if st.get("type") == "FindingResolved" else " — ACKNOWLEDGED")
        out.append(f"### [{f.get('severity', '?')}] {f.get('title', '')} (`{f.get('id', '')}`){mark}")
        out.append("")
        out.append(f"- where: {where or '?'} at {_when(f.get('ts'))}")
        out.append(f"- state: {_state_text(st)}")
        if f.get("advice"):
            out.append(f"- advice: {f['advice']}")
        if f.get("evidence"):
            out += ["", *_fence(list(f["evidence"]))]
        out.append("")

    verdicts = _verdicts(events)
    if verdicts:
        out += ["## Investigations", ""]
        for v in verdicts:
            out.append(f"- {_when(v['ts'])} {'problem' if v['problem'] else 'no problem'}: {v['verdict']}")
        out.append("")

    out += ["## Startup progress", ""]
    last: dict[str, dict] = {}
    for m in milestones:
        last[m.get("node") or "?"] = m
    if not last:
        out += ["No milestones recorded.", ""]
    for node, m in sorted(last.items()):
        out.append(f"- {node}: {m.get('id')} — {m.get('text')} ({_when(m.get('ts'))})")
    out.append("")

    out += ["## Timeline", ""]
    timeline = []
    for e in reach:
        state = "reachable" if e.get("reachable") else f"UNREACHABLE ({e.get('error') or 'no answer'})"
        timeline.append((e.get("ts") or 0, f"{e.get('node')}: {state}"))
    for e in actions:
        if e.get("status") in TIMELINE_STATUSES:
            timeline.append((e.get("ts") or 0, f"action {e.get('action')}/{e.get('step')}: {e.get('status')} {e.get('message', '')}".rstrip()))
    for e in notes:
        timeline.append((e.get("ts") or 0, f"note ({e.get('author') or 'operator'}): {e.get('text')}"))
    for e in others:
        if e.get("kind") != "ack":  # applied to its finding: the "acknowledged" row below says it
            timeline.append((e.get("ts") or 0, f"{e.get('operator') or '?'}: " + _other_text(e)))
    titles = {_key(f): f"{f.get('id')}: {f.get('title')}" for f in findings}
    for f in findings:
        timeline.append((f.get("ts") or 0, f"finding {f.get('id')}: {f.get('title')}"))
    for e in events:
        if e.get("type") in ("FindingResolved", "FindingAcknowledged") and e.get("key") in titles:
            what = (f"resolved ({e.get('reason') or '?'})" if e["type"] == "FindingResolved"
                    else f"acknowledged by {e.get('operator') or '?'}")
            timeline.append((e.get("ts") or 0, f"finding {titles[e['key']]} {what}"))
    if not timeline:
        out += ["Nothing recorded.", ""]
    for ts, text in sorted(timeline, key=lambda x: x[0])[-200:]:
        out.append(f"- {_when(ts)} {text}")
    out.append("")

    out += _notes_section(notes, others)
    out += _actions_section(actions, others, meta)

    out += ["## Last log lines", ""]
    if not logs:
        out += ["No logs recorded.", ""]
    for f in logs:
        if _own_probe(f.stem):
            continue
        lines = f.text.splitlines()
        out.append(f"### {f.node}/{f.stem} ({f.lines} lines, `{f.path}`)")
        out += ["", *_fence(lines[-TAIL_LINES:]), ""]
    return "\n".join(out).rstrip() + "\n"


def run(args) -> int:
    from .sessions import sessions_root

    arg = getattr(args, "session", None)
    path = Path(arg) if arg and Path(arg).is_dir() else None  # a folder named outright needs no config
    if path is None:
        root = sessions_root(args)  # the config's session_dir, as the session writer uses it
        path = _resolve(arg, root)
    if path is None:
        from ..logs.sanitize import safe

        what = arg or "no sessions recorded yet"
        print(safe(f"sparktui: report: session not found: {what} (sessions live in {root})"), file=sys.stderr)
        return 2
    from ..logs.redact import redact
    from ..logs.sanitize import clean_text

    # the session's text is data (a line recorded before redaction or escape handling existed,
    # a hand-edited file): the printed report holds no escapes and no secrets whatever it read
    try:
        if getattr(args, "json", False):
            import json

            from ..logs.redact import redact_obj

            # ensure_ascii: every control character leaves as a \u escape
            text = json.dumps(redact_obj(report_data(path)), indent=2, default=str) + "\n"
        else:
            text = redact(clean_text(build_report(path)))
    except SessionError as exc:
        from ..logs.sanitize import safe

        print(f"sparktui: report: {safe(exc)}", file=sys.stderr)
        return 2
    out = getattr(args, "output", None)
    if out:
        from ..logs.safe_files import open_private
        from ..logs.sanitize import safe

        try:  # 0600 like the session it comes from: it names the cluster
            with open_private(out, "w", encoding="utf-8") as fh:
                fh.write(text)
        except OSError as exc:
            print(f"sparktui: report: cannot write {safe(out)}: {exc.strerror or exc}", file=sys.stderr)
            return 2
        print(f"sparktui: report of {path.name} written to {safe(out)}", file=sys.stderr)
        return 0
    sys.stdout.write(text)
    return 0
