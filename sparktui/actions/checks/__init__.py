"""Doctor checks: each returns ``CheckResult``s (ok / warn / fail / skip) with evidence and the fix.

Pure decisions (memory fit, entrypoint contract, version comparison) are plain functions over
data, so they are tested without IO; the ``check_*`` coroutines gather that data through the
node handles.  A failed or warned check carries the finding id (docs/findings.md) it stands for.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...model import Finding

STATUS_RANK = {"fail": 0, "warn": 1, "ok": 2, "skip": 3}


@dataclass
class CheckResult:
    check: str  # "ssh", "docker", "image_id", "model_path", "architecture", ...
    status: str  # ok / warn / fail / skip
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
        if self.status not in ("fail", "warn") or not self.finding:
            return None
        return Finding(id=self.finding, severity="error" if self.status == "fail" else "warning",
                       title=self.title, source=f"{self.node}/doctor" if self.node else "doctor",
                       evidence=self.evidence, advice=self.fix, node=self.node)


def worst(results: list[CheckResult]) -> str:
    if not results:
        return "skip"
    return min((r.status for r in results), key=lambda s: STATUS_RANK[s])


def ok(check: str, title: str, node: str = "", evidence=(), **kw) -> CheckResult:
    return CheckResult(check, "ok", title, node, tuple(evidence), **kw)


def warn(check: str, title: str, node: str = "", evidence=(), fix: str = "", finding: str = "", **kw) -> CheckResult:
    return CheckResult(check, "warn", title, node, tuple(evidence), fix, finding, **kw)


def fail(check: str, title: str, node: str = "", evidence=(), fix: str = "", finding: str = "", **kw) -> CheckResult:
    return CheckResult(check, "fail", title, node, tuple(evidence), fix, finding, **kw)


def skip(check: str, title: str, node: str = "", evidence=()) -> CheckResult:
    return CheckResult(check, "skip", title, node, tuple(evidence))
