"""Split a log line into the prefixes that collectors and loggers add, and the message body.

Seen in real logs (reference docs, fixtures, public bug reports):
  journald / syslog       ``Oct 04 15:02:41 llm sd-webui-forge-start[394]: `` (short-iso: ISO time, host, unit[pid])
  docker --timestamps     ``2026-11-29T19:11:29.002992818Z ``
  CRI (containerd, CRI-O) ``2026-11-29T19:11:29.002992818Z stderr F `` (a pod's log file on its node)
  docker compose          ``vllm-1  | ``
  Ray / vLLM actors       ``(RayWorkerWrapper pid=1234, ip=192.168.200.13) ``, ``(EngineCore_DP0 pid=96) ``
  torch per-rank          ``[rank0]:``
  launchers               mpirun ``[1,0]<stderr>:``, srun ``0: ``, pdsh ``node01: ``, kubectl ``[pod/x/c] ``
  other loggers           SGLang ``[2025-06-22 16:13:55 TP0] ``, DeepSpeed ``[...] [INFO] [file.py:1:f] ``,
                          Python logging / Ray ``2025-06-22 16:13:55,123 - name - ERROR - `` (or ``name - ERROR - ``)
  vLLM logger             ``ERROR 03-27 10:29:13 [worker_base.py:620] `` (older: ``ERROR 10-26 11:35:32 registry.py:267] ``)

The traceback tracker uses the prefix *signature* (actor + logger level/location, timestamps left
out) to tell a traceback's own continuation lines from interleaved lines of other processes.
"""

from __future__ import annotations

import re

from ..logs.sanitize import strip_ansi

_LEVELS = r"(?:INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL|FATAL)"
_PREFIX = re.compile(
    # journald / syslog (`journalctl -u vllm`): "Oct 04 15:02:41 host unit[394]: "
    r"(?:[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d [\w.-]{1,64} [\w@.:/-]{1,80}?(?:\[\d+\])?: )?"
    r"(?:\[pod/[^\]\s]{1,200}\] )?"  # kubectl logs --prefix
    # docker timestamp; after it, journalctl -o short-iso's "host unit[pid]: "
    # or the CRI log format of containerd/CRI-O (a pod's files under /var/log/pods): "stderr F "
    r"(?:\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)? (?:[\w.-]{1,64} [\w@.:/-]{1,80}?\[\d+\]: "
    r"|std(?:out|err) [FP] )?)?"
    # docker compose service prefix ("vllm-1  | ", "head  | "), with `logs -t` its timestamp after it
    r"(?:[\w.-]{1,64}\s+\| (?:\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)? )?)?"
    # launchers: mpirun "[1,0]<stderr>:", srun/torchrun "0: ", pdsh "node01: " (a host name with a digit)
    r"(?:\[(?P<mpi>\d{1,5},\d{1,5})\]<std(?:out|err)>: ?|(?P<task>\d{1,4}): "
    r"|(?P<host>(?=[a-z-]{0,62}\d)[a-z][a-z0-9-]{0,62}): )?"
    r"(?:\((?P<actor>[^()\n]{0,160}?\b(?:pid|ip)=[^()\n]{0,160}?)\) )?"  # Ray / vLLM actor
    r"(?:\[rank\d+\]:)?"  # torch elastic / c10d per-rank prefix
    r"(?:(?P<level>" + _LEVELS + r") \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? "
    r"\[?(?P<where>[\w./<>-]+:\d+)\] ?"  # vLLM logger header
    # SGLang "[2025-06-22 16:13:55 TP0] ", DeepSpeed "[2024-01-01 10:00:00,123] [INFO] [file.py:158:func] "
    r"|\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)?(?: (?P<sgl>[A-Z]{2,4}\d+(?: [A-Z]{2,4}\d+){0,3}))?\] ?"
    r"(?:\[(?P<level3>" + _LEVELS + r")\] ?(?:\[(?P<where3>[^\]\s]{1,160})\] ?)?)?"
    # Python logging / Ray: "2025-06-22 16:13:55,123 - name - ERROR - ", "2024-09-21 18:15:28,304\tINFO worker.py:1786 -- "
    r"|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)?(?: - [\w.]{1,80} -)?[ \t]-? ?(?P<level2>" + _LEVELS + r")"
    r"(?: -|:)? (?:(?P<where2>[\w./<>-]{1,120}:\d+) -- )?"
    # loguru / FastChat: "2025-11-29 19:11:29.002 | ERROR    | mod:func:12 - ", "... | ERROR | stderr | "
    r"|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)? \| (?:(?P<level4>" + _LEVELS + r"|SUCCESS|TRACE) *\| "
    r"(?:(?P<where4>[\w.<>-]{1,80}:[\w<>-]{1,80}:\d+) - |std(?:out|err) \| )?)?"
    # Python logging's default "ERROR:root:", and "- name - ERROR - " after an ISO time (taken above)
    # (and "name - ERROR - " with no time before it: a logger configured as "%(name)s - %(levelname)s - ")
    r"|(?P<level5>" + _LEVELS + r"):[\w.]{1,80}:|(?:- )?[\w.]{1,80} - (?P<level6>" + _LEVELS + r") - "
    # glog (Ray, C++ services): "E0617 08:47:15.010046 12345 worker.cc:123] ", Ray's core
    # "[2025-07-23 10:06:19,681 E 51000 51000] core_worker.cc:183: "
    r"|(?P<glog>[IWEF])\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ (?P<where7>[\w./-]{1,120}:\d+)\] "
    r"|\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ (?P<raylog>[IWEFDC]) \d+ \d+\] (?P<where8>[\w./-]{1,120}:\d+): "
    # TensorFlow / XLA / absl C++ logging: "2022-06-29 12:36:12.905032: E external/.../nccl_utils.cc:245] "
    r"|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: (?P<absl>[IWEF]) (?P<where9>[\w./-]{1,200}:\d+)\] "
    # Go's standard logger (device plugins, container toolkits, operators): "2019/09/30 14:46:49 ",
    # with Lshortfile "... main.go:42: "
    r"|\d{4}/\d\d/\d\d \d\d:\d\d:\d\d(?:\.\d+)? (?:(?P<where10>[\w./-]{1,120}\.go:\d+): )?"
    # pytest's failure report marks the exception's lines with "E" and a gutter ("E       ValueError: x")
    r"|E {2,}(?=\S))?"
)
_INNER = ("(", "INFO ", "WARNING ", "ERROR ", "DEBUG ", "CRITICAL ")  # what vLLM's own prefix starts with
# glog's letters; spdlog's (Ray's core) "C" is critical
_GLOG_LEVELS = {"I": "INFO", "W": "WARNING", "E": "ERROR", "F": "CRITICAL", "D": "DEBUG", "C": "CRITICAL"}
# the common case first, cheaply: vLLM's and Ray's own prefixes at the start of the line (optionally
# after a docker timestamp or a compose "name-N | ").  Where it finds an actor or a vLLM header, no
# other prefix can come before them; everything else is read by _PREFIX.
_FAST = re.compile(
    r"(?:\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)? )?"
    r"(?:[\w.-]+-\d+\s+\| )?"
    r"(?:\((?P<actor>[^()\n]{0,160}?\b(?:pid|ip)=[^()\n]{0,160}?)\) )?"
    r"(?:\[rank\d+\]:)?"
    r"(?:(?P<level>INFO|WARNING|ERROR|DEBUG|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? "
    r"\[?(?P<where>[\w./<>-]+:\d+)\] ?)?"
)
_LEVEL_COLON = ("INFO:", "WARNING:", "WARN:", "ERROR:", "DEBUG:", "CRITICAL:", "FATAL:")  # Python logging's default
_MONTHS = frozenset("Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split())


def _may_have_prefix(line: str) -> bool:
    """Whether a line can start with a prefix only _PREFIX reads, by how each of them starts (most
    lines, NCCL's "host:pid:tid [n]", an exception, a frame, prose, are told no by their first
    characters): "[" (kubectl, mpirun, SGLang, DeepSpeed, Ray core), "-" (a logger's "- name -"), a
    digit (timestamps, srun), a month (journald), glog's "E0617", Python logging's "ERROR:", a
    compose "name | ", a pdsh "host: "."""
    c = line[:1]
    if c in "[-" or c.isdigit():
        return c != ""
    if c.isupper():
        return (line[:3] in _MONTHS or line[1:2].isdigit() or line.startswith(_LEVEL_COLON) or "| " in line[:80]
                or line.startswith("E  ") or " - " in line[:84])
    return "| " in line[:80] or (c.islower() and (": " in line[:66] or " - " in line[:84]))
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
    f = _FAST.match(line)
    if f.group("actor") or f.group("level") or not _may_have_prefix(line):
        if f.end() == 0:
            return "", line
        actor, level, where = f.group("actor", "level", "where")
        actor, level, where = actor.split(",")[0] if actor else "", level or "", where or ""
        rest = line[f.end():]
    else:
        m = _PREFIX.match(line)
        if m is None or m.end() == 0:
            return "", line
        actor, level, where = _parts(m)
        rest = line[m.end():]
    # a collector's or wrapper's logger around vLLM's own prefix ("2025-11-29 19:11:29.002 | (EngineCore
    # pid=96) ERROR ..."): the inner prefix is stripped too and names the process (gate: cheap test)
    # ... and a Python logger's header inside a Ray actor ("(RayWorker pid=1) 2023-04-28 13:16:52,511\tWARNING
    # services.py:1780 -- ..."): the header after the actor gives the level
    if rest.startswith(_INNER) or (actor and not level and rest[:1].isdigit()):
        m2 = _PREFIX.match(rest)
        if m2 is not None and m2.end() > 0:
            a2, l2, w2 = _parts(m2)
            actor, level, where = a2 or actor, l2 or level, w2 or where
            rest = rest[m2.end():]
    return f"{actor}|{level}|{where}", rest


# the named groups, read in one call (this runs for every line that holds a scan literal)
_GROUPS = ("actor", "mpi", "task", "host", "sgl",
           "level", "level2", "level3", "level4", "level5", "level6", "glog", "raylog", "absl",
           "where", "where2", "where3", "where4", "where7", "where8", "where9", "where10")


def _parts(m: re.Match[str]) -> tuple[str, str, str]:
    g = m.group(*_GROUPS)
    # the actor's identity without volatile parts would be e.g. "RayWorkerWrapper pid=1234"
    actor = g[0].split(",")[0] if g[0] else (g[1] or g[2] or g[3] or g[4] or "")
    level = g[5] or g[6] or g[7] or g[8] or g[9] or g[10] or _GLOG_LEVELS.get(g[11] or g[12] or g[13] or "", "")
    return actor, level, g[14] or g[15] or g[16] or g[17] or g[18] or g[19] or g[20] or g[21] or ""


def body(line: str) -> str:
    return split(line)[1]


def paste_margin(lines: list[str]) -> str:
    """The margin a whole pasted log carries (a quote's "> ", an indent of a list or a forum post):
    what EVERY non-blank line starts with, "" when any line starts at column 0.  Offline only, on
    the first chunk of a file; a leading block of "#" header lines is not part of the paste."""
    body: list[str] = []
    header = True
    for ln in lines:
        if not ln.strip():
            continue
        if header and ln.startswith("#"):
            continue
        header = False
        if ln[0] not in " \t>":  # a line at column 0: no margin (the common case, told by the first line)
            return ""
        body.append(ln)
    if len(body) < 2:
        return ""
    if all(ln.startswith(">") for ln in body):
        return "> " if all(ln.startswith("> ") or ln.rstrip() == ">" for ln in body) else ">"
    lead = [ln[:len(ln) - len(ln.lstrip(" \t"))] for ln in body]
    margin = lead[0]
    for x in lead[1:]:
        while margin and not x.startswith(margin):
            margin = margin[:-1]
        if not margin:
            return ""
    return margin


def strip_margin(lines: list[str], margin: str) -> list[str]:
    if not margin:
        return lines
    n = len(margin)
    bare = margin.rstrip()  # "> " pasted as ">" on an empty quoted line
    return [ln[n:] if ln.startswith(margin) else (ln[len(bare):] if bare and ln.startswith(bare) else ln)
            for ln in lines]

