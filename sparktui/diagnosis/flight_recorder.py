"""PyTorch Flight Recorder dumps (``TORCH_FR_DUMP_TEMP_FILE`` + rank, ``fr_trace_N``) as data.  Pure.

A dump is a pickle of plain containers (or the same keys as JSON).  The unpickler refuses every
class, so a hostile bundle cannot run code; the values are then checked field by field:

- not decodable, a class in it, or not a mapping at the top: ``FlightRecorderError`` (the file is not
  a Flight Recorder dump; the command says so in one line and exits 2);
- ``pg_status`` (or its first process group, or the two sequence numbers in it) of the wrong type:
  the status is dropped with a note.  It only adds the "last enqueued / last completed" pair to the
  desync rule; the logs, RAS and py-spy still decide, so the rest of the dump stays useful;
- ``entries`` not a list: the pending collective is dropped with a note; single entries that are not
  objects, or have no string ``state``, are skipped (counted in one note).
"""

from __future__ import annotations

import io
import json
import pickle
from dataclasses import dataclass, field
from typing import Any

MAX_DUMP_BYTES = 64 << 20  # TORCH_FR_BUFFER_SIZE=2000 entries pickle to ~2 MB


class FlightRecorderError(ValueError):
    """Not a Flight Recorder dump (one line)."""


@dataclass
class FrDump:
    status: tuple[int, int] | None = None  # (last enqueued, last completed collective)
    pending: str = ""  # "nccl:all_reduce #3 (scheduled)": the first entry not completed
    notes: list[str] = field(default_factory=list)  # fields dropped, and why


class _NoClasses(pickle.Unpickler):
    # Flight Recorder dumps are plain containers; refusing classes keeps a hostile bundle inert
    def find_class(self, module, name):  # noqa: D401
        raise pickle.UnpicklingError(f"refused {module}.{name}")


def _what(v: Any) -> str:
    from .shapes import what

    return what(v)


def _key(k: Any) -> str:
    return repr(k[:40]) if isinstance(k, (str, bytes)) else _what(k) if not isinstance(k, int) else str(k)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def decode(blob: bytes, where: str = "Flight Recorder dump") -> dict:
    if len(blob) > MAX_DUMP_BYTES:
        raise FlightRecorderError(f"{where}: {len(blob) >> 20} MiB, over the {MAX_DUMP_BYTES >> 20} MiB limit")
    try:
        if blob.lstrip()[:1] in (b"{", b"["):  # neither byte is a pickle opcode: the JSON form
            data = json.loads(blob.decode("utf-8", "replace"))
        else:
            data = _NoClasses(io.BytesIO(blob)).load()
    except RecursionError:
        raise FlightRecorderError(f"{where}: nested too deeply") from None
    except Exception as exc:  # noqa: BLE001 - pickle raises a dozen types on bad input; all mean "not a dump"
        reason = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
        raise FlightRecorderError(f"{where}: not a Flight Recorder dump ({reason})") from None
    if not isinstance(data, dict):
        raise FlightRecorderError(f"{where}: not a Flight Recorder dump "
                                  f"(top level is {_what(data)}, expected a mapping)")
    return data


def read(blob: bytes, where: str = "Flight Recorder dump") -> FrDump:
    data = decode(blob, where)
    out = FrDump()
    out.status = _status(data.get("pg_status"), where, out.notes)
    out.pending = _pending(data.get("entries"), where, out.notes)
    return out


def _status(pg: Any, where: str, notes: list[str]) -> tuple[int, int] | None:
    if pg is None:
        return None
    if not isinstance(pg, dict):
        notes.append(f"{where}: pg_status is {_what(pg)}, expected a mapping; status ignored")
        return None
    if not pg:
        return None
    first_key, st = next(iter(pg.items()))
    if not isinstance(st, dict):
        notes.append(f"{where}: pg_status[{_key(first_key)}] is {_what(st)}, expected a mapping; status ignored")
        return None
    pair = []
    for k in ("last_enqueued_collective", "last_completed_collective"):
        v = st.get(k, -1)
        if not _is_int(v):
            notes.append(f"{where}: pg_status[{_key(first_key)}].{k} is {_what(v)}, expected an integer; "
                         "status ignored")
            return None
        pair.append(v)
    return pair[0], pair[1]


def _pending(entries: Any, where: str, notes: list[str]) -> str:
    if entries is None:
        return ""
    if not isinstance(entries, list):
        notes.append(f"{where}: entries is {_what(entries)}, expected a list; pending collective ignored")
        return ""
    skipped = 0
    found = ""
    for e in entries:
        if not isinstance(e, dict) or not isinstance(e.get("state"), str):
            skipped += 1
            continue
        if e["state"] != "completed" and not found:
            name = e.get("profiling_name")
            seq = e.get("collective_seq_id")
            found = (f"{name[:80] if isinstance(name, str) else '?'} #{seq if _is_int(seq) else '?'} "
                     f"({e['state'][:40]})")
    if skipped:
        notes.append(f"{where}: {skipped} entr{'y' if skipped == 1 else 'ies'} without an object with a string "
                     "state skipped")
    return found


# --------------------------------------------------------------------------- entries as collectives


def _numel(sizes: Any) -> int | None:
    # input_sizes is a list of tensor shapes ([[1048576]], [[4, 8], [4, 8]]): the element count of all of them
    if not isinstance(sizes, (list, tuple)) or len(sizes) > 4096:
        return None
    total = 0
    for shape in sizes:
        if not isinstance(shape, (list, tuple)) or len(shape) > 64 or not all(_is_int(d) and d >= 0 for d in shape):
            return None
        n = 1
        for d in shape:
            n *= d
            if n > 1 << 62:
                return None
        total += n
    return total


def _user_frame(frames: Any) -> str:
    """The innermost frame outside torch (the caller that issued the collective)."""
    if not isinstance(frames, list):
        return ""
    for f in frames[:64]:
        if not isinstance(f, dict):
            continue
        fn, name, line = f.get("filename"), f.get("name"), f.get("line")
        if isinstance(fn, str) and "/torch/" not in fn and isinstance(name, str):
            return f"{name} ({fn.rsplit('/', 1)[-1][:80]}:{line if _is_int(line) else '?'})"[:160]
    return ""


def collective_ops(data: dict, rank: int, source: str = "", limit: int = 20000) -> list:
    """Flight Recorder entries as ``collectives.CollOp`` (p2p entries and malformed ones skipped).

    Field names as torch writes them (and as its analyser reads them): ``collective_seq_id``,
    ``profiling_name``, ``input_sizes``/``output_sizes``, ``input_dtypes``, ``process_group``
    (name, desc), ``state``, ``frames``."""
    from .collectives import CollOp

    entries = data.get("entries")
    if not isinstance(entries, list):
        return []
    out = []
    for e in entries[:limit]:
        if not isinstance(e, dict) or e.get("is_p2p") is True:
            continue
        # older dumps (FR version 1.x) number collectives only as "seq_id"
        seq = e.get("collective_seq_id", e.get("seq_id"))
        name = e.get("profiling_name")
        if not _is_int(seq) or not isinstance(name, str) or not name:
            continue
        pg = e.get("process_group")
        pg_name, pg_desc = "", ""
        if isinstance(pg, (list, tuple)) and pg and isinstance(pg[0], str):
            pg_name = pg[0][:60]
            if len(pg) > 1 and isinstance(pg[1], str) and pg[1] != pg[0]:
                pg_desc = pg[1][:60]
        elif _is_int(e.get("pg_id")):
            pg_name = str(e["pg_id"])
        dtypes = e.get("input_dtypes")
        dtype = ",".join(d[:20] for d in dtypes[:8] if isinstance(d, str)) if isinstance(dtypes, list) else ""
        state = e.get("state") if isinstance(e.get("state"), str) else ""
        frame = _user_frame(e.get("frames"))
        op = CollOp(rank=rank, seq=seq, op=name[:80], numel_in=_numel(e.get("input_sizes")),
                    numel_out=_numel(e.get("output_sizes")), dtype=dtype, pg=pg_name, state=state[:20],
                    source=source, frame=frame)
        out.append(CollOp(**{**op.__dict__, "text": f"Flight Recorder #{seq} {op.describe()}"
                                                      f"{f' [{state[:20]}]' if state else ''}"
                                                      f"{f' pg {pg_name}' if pg_name else ''}{f' ({pg_desc})' if pg_desc else ''}"
                                                      f"{f' at {frame}' if frame else ''}"}))
    return out
