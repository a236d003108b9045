"""`sparktui doctor [--json]`: preflight checks; exit 0 no failures, 1 failures."""

from __future__ import annotations

from ..actions.base import ActionResult

ICON = {"ok": "ok  ", "warn": "WARN", "fail": "FAIL", "skip": "skip"}


def _table(result: ActionResult) -> str:
    from ..logs.redact import redact
    from ..logs.sanitize import safe

    lines = []
    for c in result.data.get("checks", []):
        node = f"[{c['node']}] " if c["node"] else ""
        # titles, evidence and fixes quote node output (names, versions, errors): one safe line each
        lines.append(f"{ICON[c['status']]}  {c['check']:<18} {node}{safe(c['title'])}")
        if c["status"] in ("warn", "fail"):
            lines += [f"      | {redact(safe(e))}" for e in c["evidence"][:4]]
            if c["fix"]:
                lines.append(f"      fix: {safe(c['fix'])}")
    return "\n".join(lines)


def run(args) -> int:
    from ..actions.cli_runner import run_action
    from ..actions.doctor import DoctorAction

    def text(result: ActionResult) -> str:
        return _table(result)

    # the table lists every check with its evidence and fix: findings and progress lines would say it again
    def make(_config):
        return DoctorAction(deep=bool(getattr(args, "deep", False)))

    return run_action(args, make, extra_text=text, show_findings=False, transient_progress=True)
