"""`sparktui report [SESSION]`: a Markdown incident report of a recorded session.

SESSION is a session directory or its name under the sessions dir; default: the latest.
The report is built from what the session kept (events.jsonl, logs/), never from live nodes,
so it can be written after the cluster is gone.  Secrets were redacted when recorded.
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections import Counter
from pathlib import Path

from ..session import Session, latest_session, sessions_dir

TAIL_LINES = 15


def _resolve(arg: str | None) -> Path | None:
    if not arg:
        return latest_session()
    p = Path(arg)
    if p.is_dir():
        return p
    cand = sessions_dir() / arg
    return cand if cand.is_dir() else None


def _when(ts: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts)) if ts else "?"


def _fence(lines: list[str]) -> list[str]:
    # a log line may itself hold backticks: the fence must be longer than any run of them
    runs = [len(r) for ln in lines for r in re.findall(r"`+", ln)]
    fence = "`" * max(3, max(runs, default=0) + 1)
    return [fence, *lines, fence]


def build_report(path: Path) -> str:
    session = Session.open(path)
    meta = {}
    try:
        meta = json.loads((path / "meta.json").read_text())
    except (OSError, ValueError):
        pass
    events = session.read_events()
    findings = [e["finding"] for e in events if e.get("type") == "FindingRaised"]
    actions = [e for e in events if e.get("type") == "ActionEvent"]
    notes = [e for e in events if e.get("type") == "Note"]
    reach = [e for e in events if e.get("type") == "NodeReachability"]
    milestones = [e["milestone"] for e in events if e.get("type") == "MilestoneReached"]

    out: list[str] = [f"# Incident report: {path.name}", ""]
    out.append(f"- started: {_when(meta.get('started'))}")
    out.append(f"- kind: {meta.get('kind', '?')}" + (f" (scenario {meta['scenario']})" if meta.get("scenario") else ""))
    out.append(f"- config: {meta.get('config', '?')}")
    out.append(f"- nodes: {', '.join(meta.get('nodes', [])) or '?'}")
    sev = Counter(f.get("severity") for f in findings)
    out.append(f"- findings: {sev.get('error', 0)} error, {sev.get('warning', 0)} warning, {sev.get('info', 0)} info")
    out.append("")

    out += ["## Findings", ""]
    if not findings:
        out += ["None recorded.", ""]
    order = {"error": 0, "warning": 1, "info": 2}
    for f in sorted(findings, key=lambda f: (order.get(f.get("severity"), 9), f.get("ts") or 0)):
        where = f.get("source") or f.get("node") or ""
        if f.get("line"):
            where += f":{f['line']}"
        out.append(f"### [{f.get('severity', '?')}] {f.get('title', '')} (`{f.get('id', '')}`)")
        out.append("")
        out.append(f"- where: {where or '?'} at {_when(f.get('ts'))}")
        if f.get("advice"):
            out.append(f"- advice: {f['advice']}")
        if f.get("evidence"):
            out += ["", *_fence(list(f["evidence"]))]
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
        if e.get("status") in ("started", "ok", "warn", "failed", "cancelled"):
            timeline.append((e.get("ts") or 0, f"action {e.get('action')}/{e.get('step')}: {e.get('status')} {e.get('message', '')}".rstrip()))
    for e in notes:
        timeline.append((e.get("ts") or 0, f"note ({e.get('author') or 'operator'}): {e.get('text')}"))
    for f in findings:
        timeline.append((f.get("ts") or 0, f"finding {f.get('id')}: {f.get('title')}"))
    if not timeline:
        out += ["Nothing recorded.", ""]
    for ts, text in sorted(timeline, key=lambda x: x[0])[-200:]:
        out.append(f"- {_when(ts)} {text}")
    out.append("")

    out += ["## Last log lines", ""]
    logs_dir = path / "logs"
    files = sorted(logs_dir.glob("*/*.log")) if logs_dir.is_dir() else []
    if not files:
        out += ["No logs recorded.", ""]
    for f in files:
        try:
            data = f.read_bytes()
        except OSError:
            continue
        lines = data.decode("utf-8", "replace").splitlines()
        out.append(f"### {f.parent.name}/{f.stem} ({len(lines)} lines, `{f}`)")
        out += ["", *_fence(lines[-TAIL_LINES:]), ""]
    return "\n".join(out).rstrip() + "\n"


def run(args) -> int:
    path = _resolve(getattr(args, "session", None))
    if path is None:
        what = getattr(args, "session", None) or "no sessions recorded yet"
        print(f"sparktui: report: session not found: {what} (sessions live in {sessions_dir()})", file=sys.stderr)
        return 2
    sys.stdout.write(build_report(path))
    return 0
