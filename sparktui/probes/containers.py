"""Docker containers -> ContainerInfo, from the Engine API's inspect/list data (docker SDK attrs).

Times come as RFC 3339 with nanoseconds ("2026-11-29T20:00:25.011869369Z"); Docker writes
"0001-01-01T00:00:00Z" for "never".
"""

from __future__ import annotations

# the probe-container convention lives in model.py (diagnosis reads it too); re-exported for probes
from ..model import PROBE_LABEL, PROBE_PREFIX, ContainerInfo, ContainerState, is_own_probe  # noqa: F401
from ..timefmt import parse as parse_time


# docker events (type container) that change what the pane shows
STATE_ACTIONS = frozenset({"create", "start", "restart", "die", "kill", "stop", "pause", "unpause", "oom",
                           "destroy", "rename", "health_status"})


def from_inspect(attrs: dict) -> ContainerInfo:
    """From `docker inspect` (SDK Container.attrs)."""
    st = attrs.get("State") or {}
    cfg = attrs.get("Config") or {}
    health = (st.get("Health") or {}).get("Status") or None
    state = ContainerState.parse(st.get("Status", "dead"))
    finished = parse_time(st.get("FinishedAt"))
    exit_code = st.get("ExitCode")
    if state in (ContainerState.RUNNING, ContainerState.CREATED, ContainerState.PAUSED):
        exit_code = None if state is not ContainerState.PAUSED else exit_code
        finished = None if state is ContainerState.RUNNING else finished
    cmd = cfg.get("Cmd") or []
    entry = cfg.get("Entrypoint") or []
    labels = cfg.get("Labels") or {}
    return ContainerInfo(
        id=attrs.get("Id", ""),
        name=(attrs.get("Name") or "").lstrip("/"),
        image=cfg.get("Image") or attrs.get("Image", ""),
        image_id=attrs.get("Image", ""),
        state=state,
        status=_status_text(st, state),
        health=health,
        started_at=parse_time(st.get("StartedAt")),
        finished_at=finished,
        exit_code=exit_code,
        command=" ".join([*(entry if isinstance(entry, list) else [entry]), *(cmd if isinstance(cmd, list) else [cmd])]),
        labels=tuple(sorted((str(k), str(v)) for k, v in labels.items())),
    )


_EVENT_STATE = {"create": ContainerState.CREATED, "start": ContainerState.RUNNING, "restart": ContainerState.RUNNING,
                "die": ContainerState.EXITED, "kill": ContainerState.RUNNING, "stop": ContainerState.EXITED,
                "oom": ContainerState.RUNNING, "pause": ContainerState.PAUSED, "unpause": ContainerState.RUNNING}


def from_event(ev: dict, action: str) -> ContainerInfo:
    """What a docker event alone says about its container (when inspect comes too late)."""
    actor = ev.get("Actor") or {}
    attrs = actor.get("Attributes") or {}
    cid = ev.get("id") or actor.get("ID") or ""
    state = _EVENT_STATE.get(action, ContainerState.RUNNING)
    code = attrs.get("exitCode")
    exit_code = int(code) if action == "die" and str(code or "").lstrip("-").isdigit() else None
    when = ev.get("timeNano")
    ts = int(when) / 1e9 if isinstance(when, int) else ev.get("time")
    return ContainerInfo(
        id=cid, name=attrs.get("name", ""), image=attrs.get("image", "") or ev.get("from", ""),
        state=state, status=f"Exited ({exit_code})" if exit_code is not None else state.value.capitalize(),
        exit_code=exit_code, finished_at=ts if state is ContainerState.EXITED else None,
        labels=tuple(sorted((k, str(v)) for k, v in attrs.items() if k not in ("name", "image", "exitCode"))),
    )


def _status_text(st: dict, state: ContainerState) -> str:
    if state is ContainerState.EXITED:
        return f"Exited ({st.get('ExitCode', '?')})" + (" (OOM killed)" if st.get("OOMKilled") else "")
    if st.get("Restarting"):
        return "Restarting"
    return state.value.capitalize()


def removed(info: ContainerInfo) -> ContainerInfo:
    from dataclasses import replace

    return replace(info, state=ContainerState.REMOVED, status="Removed")
