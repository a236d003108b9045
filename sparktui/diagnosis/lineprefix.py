"""Split a log line into the prefixes that collectors and loggers add, and the message body.

Seen in real logs (reference docs, fixtures, public bug reports):
  journald / syslog       ``Oct 04 15:02:41 llm sd-webui-forge-start[394]: `` (short-iso: ISO time, host, unit[pid])
  docker --timestamps     ``2026-11-29T19:11:29.002992818Z ``
  docker compose          ``vllm-1  | ``
  Ray / vLLM actors       ``(RayWorkerWrapper pid=1234, ip=192.168.200.13) ``, ``(EngineCore_DP0 pid=96) ``
  torch per-rank          ``[rank0]:``
  vLLM logger             ``ERROR 03-27 10:29:13 [worker_base.py:620] `` (older: ``ERROR 10-26 11:35:32 registry.py:267] ``)

The traceback tracker uses the prefix *signature* (actor + logger level/location, timestamps left
out) to tell a traceback's own continuation lines from interleaved lines of other processes.
"""

from __future__ import annotations

import re

from ..logs.sanitize import strip_ansi

_PREFIX = re.compile(
    # journald / syslog (`journalctl -u vllm`): "Oct 04 15:02:41 host unit[394]: "
    r"(?:[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d [\w.-]{1,64} [\w@.:/-]{1,80}?(?:\[\d+\])?: )?"
    # docker timestamp; after it, journalctl -o short-iso's "host unit[pid]: "
    r"(?:\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)? (?:[\w.-]{1,64} [\w@.:/-]{1,80}?\[\d+\]: )?)?"
    r"(?:[\w.-]+-\d+\s+\| )?"  # docker compose service prefix
    r"(?:\((?P<actor>[^()\n]{0,160}?\b(?:pid|ip)=[^()\n]{0,160}?)\) )?"  # Ray / vLLM actor
    r"(?:\[rank\d+\]:)?"  # torch elastic / c10d per-rank prefix
    r"(?:(?P<level>INFO|WARNING|ERROR|DEBUG|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? "
    r"\[?(?P<where>[\w./<>-]+:\d+)\] ?)?"  # vLLM logger header
)
_ACTOR_PID = re.compile(r"\bpid=\d+")


def clean(line: str) -> str:
    """Neutralise what breaks matching: ANSI colour, NUL bytes, carriage returns."""
    if "\x1b" in line:  # tested here: the hot path skips the call for the common clean line
        line = strip_ansi(line)
    if "\x00" in line:
        line = line.replace("\x00", "")
    if "\r" in line:
        # a progress bar redrawn with CR: the last non-empty segment is what a terminal shows
        parts = [p for p in line.split("\r") if p.strip()]
        line = parts[-1] if parts else ""
    return line


def split(line: str) -> tuple[str, str]:
    """(signature, body) of an already cleaned line.  Never raises."""
    m = _PREFIX.match(line)
    if m is None or m.end() == 0:
        return "", line
    actor = m.group("actor") or ""
    if actor:
        # the actor's identity without volatile parts would be e.g. "RayWorkerWrapper pid=1234"
        actor = actor.split(",")[0]
    sig = f"{actor}|{m.group('level') or ''}|{m.group('where') or ''}"
    return sig, line[m.end():]


def body(line: str) -> str:
    return split(line)[1]
