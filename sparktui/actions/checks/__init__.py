"""Doctor checks: each returns ``CheckResult``s (ok / warn / fail / skip) with evidence and the fix.

Pure decisions (memory fit, entrypoint contract, version comparison) are plain functions over
data, so they are tested without IO; the ``check_*`` coroutines gather that data through the
node handles.  A failed or warned check carries the finding id (docs/findings.md) it stands for.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...diagnosis.catalogue import finding
from ...model import FAIL, OK, SKIP, WARN, CheckStatus, Finding

STATUS_RANK = {FAIL: 0, WARN: 1, OK: 2, SKIP: 3}


@dataclass
class CheckResult:
    check: str  # "ssh", "docker", "image_id", "model_path", "architecture", ...
    status: CheckStatus
    title: str
    node: str = ""
    evidence: tuple[str, ...] = ()
    fix: str = ""
    finding: str = ""  # finding id (docs/findings.md) when not ok
    data: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        d = {"check": self.check, "status": self.status, "title": self.title, "node": self.node,
             "evidence": list(self.evidence), "fix": self.fix}
        if self.finding:
            d["finding"] = self.finding
        if self.data:
            d["data"] = self.data
        return d

    def to_finding(self) -> Finding | None:
        if self.status not in (FAIL, WARN) or not self.finding:
            return None
        return finding(self.finding, severity="error" if self.status == FAIL else "warning",
                       title=self.title, source=f"{self.node}/doctor" if self.node else "doctor",
                       evidence=self.evidence, advice=self.fix or None, node=self.node)


def worst(results: list[CheckResult]) -> str:
    if not results:
        return SKIP
    return min((r.status for r in results), key=lambda s: STATUS_RANK[s])


def ok(check: str, title: str, node: str = "", evidence=(), **kw) -> CheckResult:
    return CheckResult(check, OK, title, node, tuple(evidence), **kw)


def warn(check: str, title: str, node: str = "", evidence=(), fix: str = "", finding: str = "", **kw) -> CheckResult:
    return CheckResult(check, WARN, title, node, tuple(evidence), fix, finding, **kw)


def fail(check: str, title: str, node: str = "", evidence=(), fix: str = "", finding: str = "", **kw) -> CheckResult:
    return CheckResult(check, FAIL, title, node, tuple(evidence), fix, finding, **kw)


def skip(check: str, title: str, node: str = "", evidence=()) -> CheckResult:
    return CheckResult(check, SKIP, title, node, tuple(evidence))
