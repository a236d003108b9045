"""`sparktui launch [--replace] [--timeout S] [--yes] [--json]`."""

from __future__ import annotations


def _text(result) -> str:
    d = result.data
    lines = []
    for node, info in (d.get("nodes") or {}).items():
        lines.append(f"{node:12} {info.get('role', ''):7} rank {info.get('rank')}  "
                     f"{' > '.join(info.get('milestones') or []) or '-'}")
    for node, tail in (d.get("last_lines") or {}).items():
        for line in tail[-5:]:
            lines.append(f"  {node} | {line}")
    if d.get("base_url"):
        lines.append(f"serving: {d['base_url']}  model {d.get('served_model')!r}  vLLM {d.get('vllm_version') or '?'}")
    return "\n".join(lines)


def run(args) -> int:
    from ..actions.cli_runner import run_action
    from .small_engine import engine_tap
    from ..actions.launch import LaunchAction

    return run_action(args, lambda _c: LaunchAction(replace=args.replace, timeout=args.timeout), extra_text=_text,
                      tap=engine_tap)
