"""The evidence an investigation gathers, and its bundle on disk.

Evidence holds what the nodes *said* (raw RAS answers, py-spy output, nvidia-smi CSV, /proc thread
lines, log tails) plus the few facts a probe establishes (pids, ranks, env, libnccl, container
settings, fabric checks).  The verdict parses the raw texts itself, so a bundle written by a live
run and read back with ``--offline`` gives the same verdict.

Bundle layout (one folder per node, each laid out like fixtures/nccl-2gpu)::

    DIR/meta.json                       {"sparktui_bundle": 1, nodes, started, interval, ...}
    DIR/verdict.json                    the verdict of the run that wrote it
    DIR/<node>/node.json                workers, containers, fabric checks, dmesg, errors
    DIR/<node>/ev.t<NN>.ras.json|txt    RAS answers, NN = seconds after the start
    DIR/<node>/ev.t<NN>.gpu.csv         nvidia-smi --query-gpu CSV (one or more samples)
    DIR/<node>/ev.t<NN>.threads.txt     "## rank R pid P" then tid<TAB>comm<TAB>state<TAB>wchan<TAB>ticks
    DIR/<node>/ev.t<NN>.pyspy.rank<R>.json
    DIR/<node>/ev.rank<R>.log           the last lines of each rank's logs
    DIR/<node>/ev.<name>.log            other logs read (container logs, NCCL debug files)

``read_bundle`` also reads a capture folder (``*.rankN.log``, ``*.tNN.ras.json|txt``,
``*.pyspy*.json|txt``, ``*.gpu.csv``, ``*.threads.txt``, ``*.fr_trace_N``), one prefix at a time, and
any other files there by their content (plain_dir.py): a user's folder of rank logs, Flight Recorder
dumps (``nccl_trace_rank_N``), py-spy, RAS and nvidia-smi output, named as they please.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict
from pathlib import Path

from ..logs.redact import redact, redact_obj
from ..logs.safe_files import SafeDir, UnsafeFile, describe, private_dir
from . import flight_recorder, plain_dir, shapes
# the data types live below plain_dir.py, which builds them too; imported from here by the rest
from .evidence_types import BundleError, Evidence, NodeEvidence, Sample, Worker, head_tail
from .shapes import MAX_JSON_BYTES

BUNDLE_VERSION = 1


# --------------------------------------------------------------------------- bundle writing


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._")[:80] or "_"


def _key_file(key: str) -> str:
    return key.replace(" ", "")  # "rank 1" -> "rank1", "pid 12" -> "pid12"


def write_bundle(ev: Evidence, path: str | os.PathLike, verdict: dict | None = None) -> Path:
    """Write the bundle into ``path`` (created if missing; a symlink the user named is followed).
    Entries already inside it are replaced, never written through: a link planted as
    ``DIR/meta.json`` or ``DIR/<node>`` does not redirect the write (``BundleError`` for a node
    folder that is not a real folder).

    Like a session, a bundle is shared with others: secrets are masked as sessions mask them (worker
    command lines and env, container settings, log lines, samples, the verdict's quotes), and what is
    written is the operator's alone: files 0600, the folders it makes 0700 (one that was there keeps
    its mode). Flight Recorder dumps are written as read: a pickle cannot be edited as text."""
    root = Path(path)
    meta = {"sparktui_bundle": BUNDLE_VERSION, "nodes": [n.node for n in ev.nodes], "started": ev.started,
            "finished": ev.finished, "interval": ev.interval, "source": ev.source,
            "fabric_ips": ev.fabric_ips, "expected_hcas": ev.expected_hcas, "serving": ev.serving,
            "cluster": ev.cluster}
    try:
        private_dir(root)
        with SafeDir(root) as top:
            top.write("meta.json", json.dumps(redact_obj(meta), indent=2) + "\n")
            for n in ev.nodes:
                with top.mkdir(_safe(n.node)) as d:
                    _write_node(d, n)
            if verdict is not None:
                top.write("verdict.json", json.dumps(redact_obj(verdict), indent=2) + "\n")
    except UnsafeFile as exc:
        raise BundleError(str(exc)) from None
    except OSError as exc:  # the folder cannot be made (no permission, a file in the way)
        raise BundleError(f"{root}: {exc.strerror or exc}") from None
    return root


def _write_node(d: SafeDir, n: NodeEvidence) -> None:
    info = {"node": n.node, "reachable": n.reachable, "error": n.error, "hostname": n.hostname,
            "workers": [asdict(w) for w in n.workers], "containers": n.containers, "fabric": n.fabric,
            "dmesg": n.dmesg, "notes": n.notes, "log_growth": n.log_growth,
            "samples": {"ras": [[s.t, s.key] for s in n.ras], "gpu": [s.t for s in n.gpu]}}
    d.write("node.json", json.dumps(redact_obj(info), indent=2) + "\n")
    for s in n.ras:
        ext = "json" if s.key == "json" else "txt"
        d.write(f"ev.t{int(s.t):02d}.ras.{ext}", redact(s.text))
    for s in n.gpu:
        d.write(f"ev.t{int(s.t):02d}.gpu.csv", redact(s.text))
    for s in n.threads:
        d.write(f"ev.t{int(s.t):02d}.threads.txt", redact(s.text))
    for s in n.pyspy:  # py-spy --locals shows a frame's variables: a key among them
        ext = "json" if s.text.lstrip().startswith(("[", "{")) else "txt"
        d.write(f"ev.t{int(s.t):02d}.pyspy.{_safe(_key_file(s.key))}.{ext}", redact(s.text))
    for key, lines in n.logs.items():
        name = _key_file(key) if key.startswith(("rank ", "pid ")) else _safe(key.removesuffix(".log"))
        d.write(f"ev.{_safe(name)}.log", redact("\n".join(lines) + ("\n" if lines else "")))
    for key, blob in n.fr_traces.items():
        d.write(f"ev.fr_trace_{_safe(key.split()[-1])}", blob)


# --------------------------------------------------------------------------- reading


_T = re.compile(r"\.t(\d+)\.")
_RANK = re.compile(r"\.(rank|pid)(\d+)\.")
_KEYED = re.compile(r"^(rank|pid)(\d+)$")
_FR = re.compile(r"(?:^|\.)fr_trace_(\d+)$")

MAX_READ_BYTES = 256 << 20  # everything one read takes in: a real bundle is a few MB


class _Reader:
    """One read of a bundle or capture folder: the byte budget, and the notes on what was cut or dropped."""

    def __init__(self) -> None:
        self.used = 0
        self.notes: list[str] = []

    def _take(self, n: int, where: str) -> None:
        self.used += n
        if self.used > MAX_READ_BYTES:
            raise BundleError(f"{where}: the folder holds more than {MAX_READ_BYTES >> 20} MiB to read; "
                              "not a bundle sparktui wrote")

    def text(self, d: SafeDir, name: str) -> str:
        t = d.read_text(name, limit=MAX_JSON_BYTES)
        self._take(len(t), d.join(name))
        return t

    def json(self, d: SafeDir, name: str):
        return shapes.loads(self.text(d, name), d.join(name))

    def log(self, d: SafeDir, name: str) -> str:
        r = d.read_log(name)
        self._take(len(r.text), d.join(name))
        if r.truncated:
            self.notes.append(f"{d.join(name)}: {r.note}")
        return r.text

    def blob(self, d: SafeDir, name: str) -> bytes:
        b = d.read_bytes(name, limit=flight_recorder.MAX_DUMP_BYTES)
        self._take(len(b), d.join(name))
        return b


def _is_capture_file(name: str) -> bool:
    return "." in name and not name.endswith(".md") and any(
        tok in name for tok in (".rank", ".ras.", ".pyspy", ".gpu.csv", ".threads.txt", ".fr_trace_"))


def _read_node_dir(rd: _Reader, d: SafeDir, prefix: str, node: str, info: dict | None = None) -> NodeEvidence:
    n = NodeEvidence(node=node)
    if info:
        n.reachable, n.error, n.hostname = info["reachable"], info["error"], info["hostname"]
        n.workers = [Worker(**w) for w in info["workers"]]
        n.containers, n.fabric, n.dmesg = info["containers"], info["fabric"], info["dmesg"]
        n.notes, n.log_growth = info["notes"], info["log_growth"]
    pre = prefix + "."
    for name, kind in sorted(d.entries().items()):
        if not name.startswith(pre):
            continue
        rest = name[len(pre):]
        if kind != "file":
            if prefix == "ev" or _is_capture_file(name):
                # a link, FIFO or folder named like evidence is planted, not written by a capture
                raise BundleError(f"{d.join(name)}: {describe(kind)}; bundle entries are read only as regular files")
            continue
        tm = _T.search("." + rest)
        t = float(tm.group(1)) if tm else 0.0
        rk = _RANK.search("." + rest)
        key = f"{rk.group(1)} {rk.group(2)}" if rk else ""
        if rest.endswith((".ras.json", ".ras.txt")):
            n.ras.append(Sample(t, rd.text(d, name), "json" if rest.endswith(".json") else "text"))
        elif rest.endswith(".gpu.csv"):
            n.gpu.append(Sample(t, rd.text(d, name)))
        elif rest.endswith(".threads.txt"):
            n.threads.append(Sample(t, rd.text(d, name)))
        elif ("pyspy" in rest.split(".")[:3] or "pyspy-native" in rest) and rest.endswith((".json", ".txt")):
            # the native text dump duplicates the plain one; keep it only when nothing else exists
            if "pyspy-native" in rest and any(s.key == key and s.t == t for s in n.pyspy):
                continue
            text = rd.text(d, name)
            if rest.endswith(".json"):
                shapes.pyspy_json(text, d.join(name))
            if "pyspy-native" not in rest:
                n.pyspy = [s for s in n.pyspy if not (s.key == key and s.t == t)]
            n.pyspy.append(Sample(t, text, key))
        elif fm := _FR.search(rest):
            blob = rd.blob(d, name)
            try:  # one torn dump (a rank killed mid-write) must not cost the others their verdict
                rd.notes += flight_recorder.read(blob, d.join(name)).notes
                n.fr_traces[f"rank {int(fm.group(1))}"] = blob
            except flight_recorder.FlightRecorderError as exc:
                rd.notes.append(f"{exc}; skipped")
        elif rest.endswith(".log"):
            stem = rest[:-4]
            km = _KEYED.match(stem)
            lkey = f"{km.group(1)} {km.group(2)}" if km else stem
            n.logs[lkey] = head_tail(rd.log(d, name).splitlines())
    n.ras.sort(key=lambda s: (s.t, s.key))
    n.gpu.sort(key=lambda s: s.t)
    n.threads.sort(key=lambda s: s.t)
    n.pyspy.sort(key=lambda s: (s.t, s.key))
    return n


def _prefixes(entries: dict[str, str]) -> list[str]:
    return sorted({name.split(".", 1)[0] for name in entries if _is_capture_file(name)})


def capture_prefixes(d: Path) -> list[str]:
    """The scenario prefixes of a capture folder (``desync_ras`` from ``desync_ras.t20.ras.json``)."""
    with SafeDir(d) as sd:
        return _prefixes(sd.entries())


def read_bundle(path: str | os.PathLike) -> list[tuple[str, Evidence]]:
    """A sparktui bundle, a capture folder (every prefix), or ``folder/prefix`` (one prefix).

    The folder named is followed if it is a link; nothing inside it is (see logs/safe_files.py).
    Every wrong kind of entry, size or shape is a ``BundleError``; cut logs and dropped Flight
    Recorder fields are listed in ``Evidence.read_notes``."""
    p = Path(path)
    rd = _Reader()
    try:
        if p.is_dir():
            with SafeDir(p) as top:
                entries = top.entries()
                if "meta.json" in entries:
                    return [(p.name, _bundle(rd, top, entries))]
                prefixes = _prefixes(entries)
                loose = plain_dir.loose_files(entries, _is_capture_file)
                if not prefixes and not loose:
                    per_node = plain_dir.read_node_dirs(rd, top, entries, _is_capture_file)
                    if per_node:
                        return per_node
                    raise BundleError(f"{p}: no bundle (meta.json), no capture files (*.rankN.log, *.ras.json, ...) "
                                      "and no rank logs, Flight Recorder dumps, py-spy, RAS or nvidia-smi output")
                groups = [(pre, _capture(rd, top, pre)) for pre in prefixes]
                return plain_dir.with_loose(rd, top, p.name, groups, loose)
        if p.parent.is_dir():
            with SafeDir(p.parent) as top:
                if p.name in _prefixes(top.entries()):
                    return [(p.name, _capture(rd, top, p.name))]
    except UnsafeFile as exc:
        raise BundleError(str(exc)) from None
    except (shapes.ShapeError, flight_recorder.FlightRecorderError) as exc:
        raise BundleError(str(exc)) from None
    except OSError as exc:  # a folder we may not list
        raise BundleError(f"{exc.filename or p}: {exc.strerror or exc}") from None
    if not p.exists():
        raise BundleError(f"{p}: no such folder")
    raise BundleError(f"{p}: not a folder")


def _bundle(rd: _Reader, top: SafeDir, entries: dict[str, str]) -> Evidence:
    if entries["meta.json"] != "file":
        raise BundleError(f"{top.join('meta.json')}: {describe(entries['meta.json'])}; "
                          "bundle entries are read only as regular files")
    raw = shapes.obj(rd.json(top, "meta.json"), top.join("meta.json"))
    if raw.get("sparktui_bundle") != BUNDLE_VERSION:
        got = raw.get("sparktui_bundle")
        got = repr(got) if isinstance(got, int) else shapes.what(got)
        raise BundleError(f"{top.join('meta.json')}: not a sparktui bundle "
                          f"(version {got}, this sparktui reads {BUNDLE_VERSION})")
    meta = shapes.meta(raw, top.join("meta.json"))
    nodes = []
    for name in meta["nodes"]:
        sub = _safe(name)
        kind = top.lkind(sub)
        if kind is None:
            nodes.append(NodeEvidence(node=name, reachable=False, error="missing from bundle"))
            continue
        if kind != "dir":
            raise BundleError(f"{top.join(sub)}: {describe(kind)}; a node's evidence is read only from a real folder")
        with top.sub(sub) as d:
            info = None
            if d.lkind("node.json") is not None:
                info = shapes.node_info(rd.json(d, "node.json"), d.join("node.json"))
            nodes.append(_read_node_dir(rd, d, "ev", name, info))
    return Evidence(nodes=nodes, started=meta["started"], finished=meta["finished"], interval=meta["interval"],
                    source="offline", fabric_ips=meta["fabric_ips"], expected_hcas=meta["expected_hcas"],
                    serving=meta["serving"], cluster=meta["cluster"], read_notes=rd.notes)


def _capture(rd: _Reader, d: SafeDir, prefix: str) -> Evidence:
    before = len(rd.notes)
    node = _read_node_dir(rd, d, prefix, "local")
    if not (node.logs or node.pyspy or node.ras or node.gpu or node.threads or node.fr_traces):
        # every file was skipped: "nothing running" would be a verdict on evidence we never read
        why = "; ".join(rd.notes[before:]) or f"{d.join(prefix)}.*: nothing readable"
        raise BundleError(f"no readable evidence: {why}")
    # a capture folder has no node.json: ranks come from the files themselves
    ranks = sorted({int(k.split()[1]) for k in list(node.logs) + [s.key for s in node.pyspy] if k.startswith("rank ")})
    node.workers = [Worker(pid=0, rank=r, alive=None) for r in ranks]
    times = sorted({s.t for s in node.ras} | {s.t for s in node.pyspy})
    interval = (times[-1] - times[0]) if len(times) > 1 else 0.0
    return Evidence(nodes=[node], started=0.0, interval=interval, source="offline", read_notes=rd.notes[before:])
