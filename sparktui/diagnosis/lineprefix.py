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
                          Python logging / Ray ``2025-06-22 16:13:55,123 - name - ERROR - ``
  vLLM logger             ``ERROR 03-27 10:29:13 [worker_base.py:620] `` (older: ``ERROR 10-26 11:35:32 registry.py:267] ``)

The traceback tracker uses the prefix *signature* (actor + logger level/location, timestamps left
out) to tell a traceback's own continuation lines from interleaved lines of other processes.
"""

from __future__ import annotations

import json
import re
from collections import Counter

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
    r"|(?P<level5>" + _LEVELS + r"):[\w.]{1,80}:|- [\w.]{1,80} - (?P<level6>" + _LEVELS + r") - "
    # glog (Ray, C++ services): "E0617 08:47:15.010046 12345 worker.cc:123] ", Ray's core
    # "[2025-07-23 10:06:19,681 E 51000 51000] core_worker.cc:183: "
    r"|(?P<glog>[IWEF])\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ (?P<where7>[\w./-]{1,120}:\d+)\] "
    r"|\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ (?P<raylog>[IWEFDC]) \d+ \d+\] (?P<where8>[\w./-]{1,120}:\d+): "
    # TensorFlow / XLA / absl C++ logging: "2022-06-29 12:36:12.905032: E external/.../nccl_utils.cc:245] "
    r"|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: (?P<absl>[IWEF]) (?P<where9>[\w./-]{1,200}:\d+)\] "
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
                or line.startswith("E  "))
    return "| " in line[:80] or (c.islower() and ": " in line[:66])
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
    if rest.startswith(_INNER):
        m2 = _PREFIX.match(rest)
        if m2 is not None and m2.end() > 0:
            a2, l2, w2 = _parts(m2)
            actor, level, where = a2 or actor, l2 or level, w2 or where
            rest = rest[m2.end():]
    return f"{actor}|{level}|{where}", rest


# the named groups, read in one call (this runs for every line that holds a scan literal)
_GROUPS = ("actor", "mpi", "task", "host", "sgl",
           "level", "level2", "level3", "level4", "level5", "level6", "glog", "raylog", "absl",
           "where", "where2", "where3", "where4", "where7", "where8", "where9")


def _parts(m: re.Match[str]) -> tuple[str, str, str]:
    g = m.group(*_GROUPS)
    # the actor's identity without volatile parts would be e.g. "RayWorkerWrapper pid=1234"
    actor = g[0].split(",")[0] if g[0] else (g[1] or g[2] or g[3] or g[4] or "")
    level = g[5] or g[6] or g[7] or g[8] or g[9] or g[10] or _GLOG_LEVELS.get(g[11] or g[12] or g[13] or "", "")
    return actor, level, g[14] or g[15] or g[16] or g[17] or g[18] or g[19] or g[20] or ""


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


_DOCKER_JSON = re.compile(r'^\{\s*"log"\s*:\s*"')


def docker_json(lines: list[str]) -> bool:
    """Whether a file is docker's json-file log (``/var/lib/docker/containers/<id>/<id>-json.log``),
    one ``{"log": "...\\n", "stream": ..., "time": ...}`` object per line: most non-blank lines
    of its first chunk are such objects.  Offline only, on the first chunk of a file."""
    body = [ln for ln in lines[:200] if ln.strip()]
    return len(body) >= 1 and sum(1 for ln in body if _DOCKER_JSON.match(ln)) * 10 >= len(body) * 8


def from_docker_json(lines: list[str]) -> list[str]:
    """Each object's ``log`` text (its newline dropped); a line that is not such an object stays."""
    out = []
    for ln in lines:
        if _DOCKER_JSON.match(ln):
            try:
                rec = json.loads(ln)
            except ValueError:
                out.append(ln)
                continue
            text = rec.get("log") if isinstance(rec, dict) else None
            if isinstance(text, str):
                out.append(text[:-1] if text.endswith("\n") else text)
                continue
        out.append(ln)
    return out


# a launcher's or a terminal multiplexer's own stamp before every line that no known format names:
# a time of day ("19:11:29 ", "[19:11:29.120] "), the same short tag on every line ("[worker]: ",
# "node-a> "), or line numbers counting up (`cat -n`'s "     12\t", an editor's "12: ").  Read off a whole paste like its margin: only where nearly every line carries it.
_TIME_OF_DAY = re.compile(r"^\[?\d\d:\d\d:\d\d(?:[.,]\d{1,9})?\]? ")
_TAG_END = re.compile(r"(?:\]:? |: | \| |> )")
_PREFIX_SHARE = 0.9
_LINE_NUMBER = re.compile(r"^\s{0,8}(\d{1,7})(?:\t| \| |: | {2})")


def paste_prefix(lines: list[str]) -> re.Pattern[str] | None:
    """A stamp every line of a paste starts with that the known prefixes do not read (``_PREFIX``),
    as a pattern to strip, or None.  Offline only, on the first chunk of a file (after its margin)."""
    body = [ln for ln in lines[:400] if ln.strip()]
    if len(body) < 2:
        return None
    numbers = [int(m.group(1)) for m in map(_LINE_NUMBER.match, body) if m is not None]
    if len(numbers) >= max(2, int(len(body) * _PREFIX_SHARE + 0.999)):
        # line numbers count up by one (a few blank lines dropped may skip some): `cat -n`, `nl`, an editor
        if sum(1 for a, b in zip(numbers, numbers[1:]) if 0 < b - a <= 3) >= (len(numbers) - 1) * 0.9:
            return _LINE_NUMBER
    if len(body) < 3:
        return None
    need = max(3, int(len(body) * _PREFIX_SHARE + 0.999))
    cands: list[re.Pattern[str]] = [_TIME_OF_DAY]
    head = body[0]
    for m in _TAG_END.finditer(head[:48]):
        tag = head[:m.end()]
        # a stamp is one word ("[worker]: ", "node-a> "), never a phrase a program repeats
        # ("Loading safetensors checkpoint shards: ")
        if tag.strip() and not any(c.isspace() for c in head[:m.start()]):
            cands.append(re.compile(re.escape(tag)))
    for rx in cands:
        if sum(1 for ln in body if rx.match(ln)) < need:
            continue
        sample = next(ln for ln in body if rx.match(ln))
        if rx.match(split(clean(sample))[1]) is None:
            continue  # a known prefix reads it (a compose service, a pdsh host): it stays theirs
        return rx
    return None


def strip_prefix(lines: list[str], rx: re.Pattern[str] | None) -> list[str]:
    if rx is None:
        return lines
    out = []
    for ln in lines:
        m = rx.match(ln)
        out.append(ln[m.end():] if m else ln)
    return out


# terminal colour codes whose ESC byte a copy lost or spelled out: "ESC[33m", "^[[33m", "\\x1b[33m",
# or bare "[33m ... [0m" (a browser or an issue form drops the control byte and keeps the rest)
_SGR_SPELLED = re.compile(r"(?:ESC|\^\[|\\x1[bB]|\\033|\\u001[bB]|\\e)\[[0-9;]{0,20}m")
_SGR_BARE = re.compile(r"(?<!\x1b)\[(?:[0-9]{1,3}(?:;[0-9]{1,3}){0,6})?m")  # (a real escape is clean()'s)
_SGR_RESET = ("[0m", "[m")


def visible_colour(lines: list[str]) -> bool:
    """Whether a paste carries colour codes as text (their ESC lost): a spelled-out ESC, or a bare
    code on a line that also has the reset every coloured span ends with.  Offline, per file."""
    for ln in lines[:2000]:
        if "[" not in ln:
            continue
        if _SGR_SPELLED.search(ln) or (any(r in ln for r in _SGR_RESET) and len(_SGR_BARE.findall(ln)) >= 2):
            return True
    return False


def strip_visible_colour(lines: list[str]) -> list[str]:
    out = []
    for ln in lines:
        if "[" in ln and "m" in ln:
            ln = _SGR_SPELLED.sub("", ln)
            if any(r in ln for r in _SGR_RESET):
                ln = _SGR_BARE.sub("", ln)
        out.append(ln)
    return out


# a terminal's copy that broke long lines at its width: several lines exactly as long as the longest,
# each followed by a line that starts like no other (a word's tail, not the next record)
_WRAP_MIN = 60


def _start_shape(line: str) -> str:
    return "".join("0" if c.isdigit() else "a" if c.islower() else "A" if c.isupper() else c for c in line[:4])


def hard_wrap_width(lines: list[str]) -> int | None:
    """The width a paste was hard-wrapped at, or None.  Offline only, on the first chunk of a file:
    at least 3 lines (and 3 %) exactly as long as the longest (at least ``_WRAP_MIN``), and 60 % of
    them followed by a line whose start is unlike the other lines' (a table's rows, all as long,
    are followed by rows that start alike)."""
    lines = [ln[:-1] if ln.endswith("\r") else ln for ln in lines]  # a CRLF line end is no column
    body = [ln for ln in lines if ln.strip()]
    if len(body) < 4:
        return None
    width = max(len(ln) for ln in body)
    if width < _WRAP_MIN:
        return None
    at = [k for k, ln in enumerate(lines) if len(ln) == width]
    if len(at) < 3 or len(at) < 0.03 * len(body):
        return None
    shapes = Counter(_start_shape(ln) for ln in body)
    cont = sum(1 for k in at if k + 1 < len(lines) and lines[k + 1].strip() and shapes[_start_shape(lines[k + 1])] <= 2)
    return width if cont >= 0.6 * len(at) else None


def unwrap(lines: list[str], width: int, first: int,
           held: tuple[int, str] | None = None) -> tuple[list[tuple[int, str]], tuple[int, str] | None]:
    """(file line number, text) of each line with its pieces of ``width`` characters joined to the
    one after: a joined line keeps the number of its first piece, so findings point at the file.
    ``first`` is the number of ``lines[0]``; ``held`` a piece left over from the previous chunk,
    and the one this chunk ends with is handed back."""
    out: list[tuple[int, str]] = []
    for k, ln in enumerate(lines):
        n = first + k
        if ln.endswith("\r"):
            ln = ln[:-1]  # CRLF: inside a joined line a CR would read as a progress bar's redraw
        if held is not None:
            (n, ln), held = (held[0], held[1] + ln), None
        if ln and len(ln) % width == 0:
            held = (n, ln)
            continue
        out.append((n, ln))
    return out, held


def runs(numbered: list[tuple[int, str]]) -> list[tuple[int, list[str]]]:
    """(first line number, lines) of each run of consecutively numbered lines."""
    out: list[tuple[int, list[str]]] = []
    for n, ln in numbered:
        if out and out[-1][0] + len(out[-1][1]) == n:
            out[-1][1].append(ln)
        else:
            out.append((n, [ln]))
    return out


# IPython's (a notebook's, Colab's) traceback: a rule, "<Class>   Traceback (most recent call last)",
# frames as "File <path>:<n>, in <f>()" with numbered source lines ("----> 5     init()", "      4 x")
_IPY_HEAD = re.compile(r"^(?P<cls>[A-Za-z_][\w.]*)\s{2,}Traceback \(most recent call last\)\s*$")
_IPY_FRAME = re.compile(r"^(?:File |Cell )(?P<path>.+?)(?::|, line )(?P<n>\d+)(?:, in (?P<fn>[^\s(]+)\(.*\))?\s*$")
_IPY_CODE = re.compile(r"^(?P<arrow>-*> )?\s*\d+ (?P<code>.*)$")
_IPY_RULE = re.compile(r"^-{20,}\s*$")


def ipython_tracebacks(lines: list[str]) -> bool:
    """Whether a file holds IPython's tracebacks (its first chunk has one's head).  Offline only."""
    return any("Traceback (most recent call last)" in ln and _IPY_HEAD.match(ln) for ln in lines)


def from_ipython(lines: list[str]) -> list[str]:
    """IPython's tracebacks written as CPython writes them, line for line (numbers stay): the head
    as "Traceback (most recent call last):", each frame as '  File "<path>", line <n>, in <f>', the
    line it ran ("---->") as its indented source line, the context lines and the rule blank."""
    out: list[str] = []
    inside = False
    for ln in lines:
        if _IPY_HEAD.match(ln):
            if out and _IPY_RULE.match(out[-1]):
                out[-1] = ""
            out.append("Traceback (most recent call last):")
            inside = True
            continue
        if inside:
            f = _IPY_FRAME.match(ln)
            if f is not None:
                out.append(f'  File "{f["path"]}", line {f["n"]}, in {f["fn"] or "<module>"}')
                continue
            c = _IPY_CODE.match(ln)
            if c is not None and (c["arrow"] or ln[:1] == " "):
                out.append("    " + c["code"].strip() if c["arrow"] else "")
                continue
            if not ln.strip():
                out.append("")
                continue
            inside = False  # the exception line: CPython's own from here
        out.append(ln)
    return out
