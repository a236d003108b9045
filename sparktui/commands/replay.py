"""`sparktui replay SESSION [--speed X] [--at TIME]`: play a recorded session back in the TUI
(read-only, no live sources), from the start at X times real speed; keys scrub (tui/replay.py).

The session holds the typed events (events.jsonl, derived findings and milestones included) and
every log line (logs/<node>/<source>.log); both are turned back into events and fed through the
engine, so the screen is the one the operator had at the end of the session.
"""

from __future__ import annotations

import sys
from pathlib import Path

from .. import model
from ..timefmt import parse as parse_time


class ReplayError(Exception):
    pass


REPLAY_LOG_TAIL = 64 << 20  # per log file: a replay shows the end of a session, memory stays bounded


def load_session(path: Path) -> tuple[dict, list]:
    """(meta, events) of a session directory; ``ReplayError`` (one line) for a wrong kind or shape."""
    from ..session_read import SessionError, from_jsonable, open_session, read_events, read_logs, read_meta

    if not path.is_dir():
        raise ReplayError(f"{path}: not a session directory")
    try:
        with open_session(path) as sd:
            # checked against the model's annotations, links inside not followed (session_read.py)
            meta = read_meta(sd, required=True)
            raw_events = read_events(sd)
            logs = read_logs(sd, tail_bytes=REPLAY_LOG_TAIL)
    except SessionError as exc:
        raise ReplayError(str(exc)) from None
    events: list = [from_jsonable(e) for e in raw_events]
    for f in logs:
        lines = []
        raw = f.text.split("\n")
        if raw and raw[-1] == "":
            raw.pop()
        first = f.lines - len(raw) + 1 if f.truncated else 1  # line numbers stay those of the whole file
        for i, text in enumerate(raw, first):
            head, _, rest = text.partition(" ")
            ts = parse_time(head)
            lines.append(model.LogLine(f.node, f.stem, rest if ts is not None else text,
                                       ts=ts, seq=i, raw_ts=head if ts is not None else None))
        events.append(model.LogBatch(f.node, f.stem, tuple(lines), ts=(lines[0].ts or 0.0) if lines else 0.0))
    return meta, events


def _config_for(meta: dict, events: list):
    from ..config import ClusterConfig, Config, NodeConfig, demo_config, load_config

    cfg_path = meta.get("config")
    if cfg_path == "<demo>":
        return demo_config()
    if cfg_path:
        try:
            return load_config(cfg_path)
        except Exception:
            pass  # the config moved on since: rebuild the node list from the session
    names = list(meta.get("nodes") or dict.fromkeys(getattr(e, "node", "") for e in events if getattr(e, "node", "")))
    return Config(path=str(cfg_path or "<replay>"), cluster=ClusterConfig(),
                  nodes=tuple(NodeConfig(name=n, backend="sim", host=n) for n in names))


def make_player(path: Path, speed: float = 1.0):
    """(meta, Player) for a session directory; ``ReplayError`` for a wrong kind or shape."""
    from ..engine import Engine
    from ..replay_player import Player, Timeline

    meta, events = load_session(path)
    config = _config_for(meta, events)
    started = meta.get("started") if isinstance(meta.get("started"), (int, float)) else None
    return meta, Player(Timeline(events, started), lambda: Engine(config, []), speed=speed)


def run(args) -> int:
    from ..logs.sanitize import safe
    from ..replay_player import parse_when
    from .sessions import sessions_root

    path = Path(args.session)
    if not path.exists():  # a name: under the sessions dir the session writer uses (config's session_dir)
        named = sessions_root(args) / args.session
        if named.exists():
            path = named
    speed = getattr(args, "speed", 1.0)
    if not (isinstance(speed, (int, float)) and speed > 0 and speed == speed and speed != float("inf")):
        print(f"sparktui replay: --speed must be a number > 0, not {speed!r}", file=sys.stderr)
        return 2
    try:
        meta, player = make_player(path, speed)
    except ReplayError as exc:
        print(f"sparktui: {safe(exc)}", file=sys.stderr)  # it names the path given: echoed inert
        return 2
    at = getattr(args, "at", None) or "start"
    tl = player.timeline
    try:
        player.seek(parse_when(at, tl.start, tl.end, tl.start))
    except ValueError as exc:
        print(f"sparktui replay: --at: {safe(exc)}", file=sys.stderr)
        return 2
    player.paused = player.at_end  # opened at the end: the screen the operator had, nothing to play
    from ..tui.replay import ReplayApp

    app = ReplayApp(player, name=path.name, theme=getattr(args, "theme", None))
    return int(app.run(mouse=not getattr(args, "no_mouse", False)) or 0)
