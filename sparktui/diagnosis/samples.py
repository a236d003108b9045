"""Small raw samples as data: nvidia-smi CSV rows and /proc thread listings.  Pure parsing."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class GpuRow:
    index: int
    util: float | None
    power_w: float | None
    mem_mib: float | None = None
    sm_mhz: float | None = None


def _num(text: str) -> float | None:
    m = re.search(r"-?\d+(?:\.\d+)?", text)
    if not m or "N/A" in text or "Not Supported" in text:
        return None
    return float(m.group(0))


def parse_gpu_csv(text: str) -> list[GpuRow]:
    """``nvidia-smi --query-gpu=index,utilization.gpu,power.draw,memory.used,clocks.sm --format=csv``.

    Header lines may repeat (several samples in one file); columns are found by header name so the
    ``noheader`` form with the same order also works.
    """
    if "NVSMI LOG" in text:
        return parse_smi_query(text)
    if "NVIDIA-SMI" in text:
        return parse_smi_table(text)
    cols = ["index", "utilization.gpu", "power.draw", "memory.used", "clocks.sm"]
    rows: list[GpuRow] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        if line.startswith("index") or "[%]" in line:
            cols = [c.strip().split(" [")[0] for c in line.split(",")]
            continue
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != len(cols):
            continue
        d = dict(zip(cols, parts))
        try:
            idx = int(d.get("index", ""))
        except ValueError:
            continue
        rows.append(GpuRow(index=idx, util=_num(d.get("utilization.gpu", "")), power_w=_num(d.get("power.draw", "")),
                           mem_mib=_num(d.get("memory.used", "")),
                           sm_mhz=_num(d.get("clocks.sm", d.get("clocks.current.sm", "")))))
    return rows


_SMI_GPU = re.compile(r"^\|\s+(\d{1,3})\s+[A-Za-z].*\|.*\|")
_SMI_POWER = re.compile(r"(\d+(?:\.\d+)?)W\s*/\s*\S+")
_SMI_MEM = re.compile(r"(\d+)MiB\s*/\s*\d+MiB")
_SMI_UTIL = re.compile(r"\|\s*(\d{1,3})%\s+\S+")


def parse_smi_table(text: str) -> list[GpuRow]:
    """Plain ``nvidia-smi`` output (the boxed table): one row per GPU from its two table lines.
    GB10 prints "N/A" for power or memory on some drivers: those stay None."""
    rows: list[GpuRow] = []
    lines = text.splitlines()
    for i, line in enumerate(lines[:-1]):
        if "Processes:" in line:
            break  # the process table's rows also start with a GPU index
        m = _SMI_GPU.match(line)
        if not m:
            continue
        nxt = lines[i + 1]
        power, mem, util = _SMI_POWER.search(nxt), _SMI_MEM.search(nxt), _SMI_UTIL.search(nxt)
        rows.append(GpuRow(index=int(m.group(1)), util=float(util.group(1)) if util else None,
                           power_w=float(power.group(1)) if power else None,
                           mem_mib=float(mem.group(1)) if mem else None))
    return rows


_Q_FIELD = re.compile(r"^(\s*)([A-Za-z][\w ./()-]*?)\s*:\s*(.*)$")


def parse_smi_query(text: str) -> list[GpuRow]:
    """``nvidia-smi -q``: one row per ``GPU <bus id>`` section (index = its Minor Number, else its
    order); utilisation from its Utilization block, power from the first Instantaneous (else Average,
    else plain) Power Draw, memory from the first "Used" in MiB (FB memory)."""
    rows: list[GpuRow] = []
    cur: dict | None = None
    block = ""

    def close() -> None:
        if cur is not None:
            power = next((cur[k] for k in ("inst", "avg", "plain") if k in cur), None)
            rows.append(GpuRow(index=cur.get("index", len(rows)), util=cur.get("util"), power_w=power,
                               mem_mib=cur.get("mem")))

    for line in text.splitlines()[:100_000]:
        if line.startswith("GPU ") and " : " not in line:  # a section: "GPU 00000000:00:06.0"
            close()
            cur, block = {}, ""
            continue
        if cur is None:
            continue
        m = _Q_FIELD.match(line)
        if not m:
            block = line.strip()  # a heading: "Utilization", "GPU Power Readings", ...
            continue
        key, val = m.group(2).strip(), m.group(3).strip()
        num = _num(val)
        if key == "Minor Number" and val.isdecimal() and len(val) < 4:
            cur["index"] = int(val)
        elif num is None:
            continue
        elif block == "Utilization" and key == "GPU":
            cur.setdefault("util", num)
        elif key == "Instantaneous Power Draw":
            cur.setdefault("inst", num)
        elif key == "Average Power Draw":
            cur.setdefault("avg", num)
        elif key == "Power Draw":
            cur.setdefault("plain", num)
        elif key == "Used" and "MiB" in val:
            cur.setdefault("mem", num)
    close()
    return rows


@dataclass(frozen=True)
class ThreadRow:
    comm: str
    state: str  # R/S/D/... or "?" when the listing could not tell
    wchan: str
    tid: int | None = None
    ticks: int | None = None  # utime+stime
    cpu: float | None = None  # percent of one core between two reads, when the probe measured it


@dataclass(frozen=True)
class ThreadGroup:
    rank: int | None
    pid: int | None
    threads: tuple[ThreadRow, ...]


_HDR = re.compile(r"^## rank (\S+) pid (\d+)")
_STATES = set("RSDZTtXIWPK")


def parse_threads(text: str) -> list[ThreadGroup]:
    """Per-process thread listings.

    Two forms: sparktui's own (a ``## rank R pid P`` header, then tab-separated
    ``tid comm state wchan ticks [cpu%]`` lines) and the capture tool's ``comm state wchan`` lines
    with the headers written after the lines (its state column is wrong for names with spaces,
    so state is "?" unless it is a one-letter state).
    """
    groups: list[ThreadGroup] = []
    cur_hdr: tuple[int | None, int | None] | None = None
    cur: list[ThreadRow] = []
    loose: list[ThreadRow] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        if m := _HDR.match(line):
            if cur_hdr is not None and cur:
                groups.append(ThreadGroup(cur_hdr[0], cur_hdr[1], tuple(cur)))
            rank = int(m.group(1)) if m.group(1).isdecimal() else None
            cur_hdr, cur = (rank, int(m.group(2))), []
            continue
        if "\t" in line:
            parts = line.split("\t")
            try:
                tid = int(parts[0])
            except ValueError:
                tid = None
            row = ThreadRow(comm=parts[1] if len(parts) > 1 else "", state=(parts[2] if len(parts) > 2 else "?") or "?",
                            wchan=parts[3] if len(parts) > 3 else "", tid=tid,
                            ticks=int(parts[4]) if len(parts) > 4 and parts[4].isdecimal() else None,
                            cpu=float(parts[5]) if len(parts) > 5 and re.fullmatch(r"\d+(\.\d+)?", parts[5]) else None)
        else:
            toks = line.split()
            wchan = toks[-1] if toks else ""
            state = toks[-2] if len(toks) >= 3 and toks[-2] in _STATES else "?"
            if state != "?":
                comm = " ".join(toks[:-2])
            elif len(toks) >= 4 and toks[-2].rstrip(")") == toks[1]:
                # awk's $3 of "(NCCL RAS) S ..." is the name's second word, not the state
                comm = " ".join(toks[:-2])
            else:
                comm = " ".join(toks[:-1])
            row = ThreadRow(comm=comm, state=state, wchan="" if wchan == "0" else wchan)
        if cur_hdr is None:
            loose.append(row)
        else:
            cur.append(row)
    if cur_hdr is not None and cur:
        groups.append(ThreadGroup(cur_hdr[0], cur_hdr[1], tuple(cur)))
    if loose:
        # capture-tool form: headers came after the lines, so ranks cannot be told apart
        groups.append(ThreadGroup(None, None, tuple(loose)))
    return groups


def summarize(threads: tuple[ThreadRow, ...]) -> dict[str, int]:
    """Counts by state plus how many threads spin (R) and how many wait in futex/poll (S)."""
    out: dict[str, int] = {}
    for t in threads:
        out[t.state] = out.get(t.state, 0) + 1
    out["busy"] = sum(1 for t in threads if t.state == "R" or (t.cpu or 0) >= 50)
    return out
