"""The live hang investigation: evidence from every node at once, twice, then the verdict.

Round 1 (all nodes in parallel): workers and their env/threads/libnccl (one /proc probe), RAS,
GPU CSV x3, py-spy per worker, log heads/tails, container settings, fabric checks, kernel log.
Round 2, ``interval`` seconds after round 1 began: workers (alive? threads), RAS, GPU, py-spy,
logs again.  Then the pure rules (diagnosis/verdict.py) decide.  Each item is emitted as an
ActionEvent the moment it arrives, so the screen and ``--json`` show progress.
"""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

from ..diagnosis.evidence import BundleError, Evidence, NodeEvidence, Sample, Worker, write_bundle
from ..diagnosis.facts import patterns
from ..diagnosis.verdict import Verdict, decide
from ..diagnosis.catalogue import finding
from ..model import FAIL, Finding
from ..probes import pyspy as pyspy_probe
from ..probes import ras as ras_client
from ..probes import workers as probe
from .base import Action, ActionContext, ActionResult
from .prearm import run_dir as default_run_dir

DEFAULT_INTERVAL = 25.0
# the env that says where a rank's Flight Recorder dump goes (and its on-demand pipe)
_FR_ENV = ("TORCH_NCCL_DEBUG_INFO_PIPE_FILE", "TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE")


class InvestigateAction(Action):
    def __init__(self, *, interval: float = DEFAULT_INTERVAL, bundle: str | None = None, gpu_samples: int = 3,
                 use_pyspy: bool = True, run_dir: str | None = None, ras_port: int | None = None,
                 pids: dict[str, list[int]] | None = None, fr_wait: float = 8.0) -> None:
        self.interval = interval
        self.fr_wait = fr_wait  # seconds the on-demand Flight Recorder dump may take
        self.bundle = bundle
        self.gpu_samples = gpu_samples
        self.use_pyspy = use_pyspy
        self.run_dir = run_dir
        self.ras_port = ras_port
        self.pids = pids or {}  # node -> worker pids, when the caller knows them (else: discovered)
        self.evidence: Evidence | None = None
        self.verdict: Verdict | None = None

    # ------------------------------------------------------------------ one node, one round
    async def _round(self, ctx: ActionContext, ev: Evidence, n: NodeEvidence, rnd: int) -> None:
        node = ctx.nodes.get(n.node)
        if node is None:
            n.reachable, n.error = False, "no handle for this node"
            return
        t = round(time.time() - ev.started)
        step = f"round {rnd + 1}"
        emit = lambda status, msg: ctx.emit(step, status, msg, node=n.node)  # noqa: E731
        try:
            pids = [w.pid for w in n.workers] if rnd and n.workers else self.pids.get(n.node)
            data = await probe.scan(node, run_dir=self.run_dir or "", pids=pids)
        except probe.ProbeError as exc:
            if rnd == 0:
                n.reachable, n.error = False, str(exc)
            n.notes.append(f"round {rnd + 1}: {exc}")
            emit("warn", f"workers: {exc}")
            return
        n.hostname = data.get("hostname", n.hostname)
        found = probe.workers_from_scan(data)
        if rnd == 0:
            found = await _own_containers_only(node, found)
            n.workers = found
            for log in data.get("run_dir_logs", []):
                if log.get("pid") and not any(w.pid == log["pid"] for w in n.workers):
                    # a rank that left only its NCCL debug file: known to have existed, now gone
                    n.workers.append(Worker(pid=log["pid"], alive=bool(log.get("alive")), log_files=[log["path"]]))
                elif log.get("pid"):
                    w = next(w for w in n.workers if w.pid == log["pid"])
                    if log["path"] not in w.log_files:
                        w.log_files.append(log["path"])
            if data.get("env_denied") and not any(w.env for w in n.workers):
                n.notes.append(f"{data['env_denied']} processes' environ unreadable (run as the workers' user or root)")
        else:
            alive = {w.pid: w.alive for w in found}
            for w in n.workers:
                if w.pid in alive:
                    w.alive = alive[w.pid]
        emit("progress", "workers: " + (", ".join(_describe(w) for w in n.workers) or "none found"))
        n.threads.append(Sample(t, probe.threads_text(data, {w.pid for w in n.workers})))
        live = [w for w in n.workers if w.alive]
        jobs = [self._ras(n, node, t, emit), self._gpu(n, node, t, emit), self._logs(ctx, n, node, rnd, emit)]
        if self.use_pyspy:
            jobs += [self._pyspy(n, node, w, t, emit) for w in live]
        if rnd == 0:
            jobs += [self._containers(n, node, emit), self._fabric(ctx, ev, n, node, emit), self._dmesg(n, node)]
            if not ctx.read_only:
                caught = probe.usr1_caught(data)
                for w in live:
                    # armed AND handled: an unhandled SIGUSR1 terminates the process (seen on a real rank
                    # still waiting in rendezvous, before NCCL installed its handler)
                    if w.env.get("NCCL_PROXY_DUMP_SIGNAL") == "10" and w.pid in caught:
                        jobs.append(probe.proxy_dump(node, w.pid))
            # Flight Recorder: a dump taken now through the debug-info pipe (not in read-only mode: it
            # makes the rank write a file), else the one torch wrote on a timeout, if any
            fr = [w for w in live if w.rank is not None and any(w.env.get(k) for k in _FR_ENV)]
            if fr or self.run_dir:
                jobs.append(self._fr_dumps(n, node, fr, emit, trigger=not ctx.read_only))
        await asyncio.gather(*jobs)

    async def _serving(self, ctx: ActionContext, ev: Evidence) -> None:
        """The head's /metrics: whether its work progresses is the first liveness fact of a server."""
        from ..probes import metrics
        from ..probes.serving import endpoint

        head = ctx.config.head.name
        node = ctx.nodes.get(head)
        if node is None:
            return
        c = ctx.config.cluster
        t = round(time.time() - ev.started)
        try:
            snap = await metrics.scrape(await endpoint(node, c.serve_host, c.serve_port), 5.0, api_key=ctx.config.api_key())
        except Exception as exc:  # not serving: the other evidence decides
            ev.serving.append({"t": t, "node": head, "up": False, "error": str(exc).splitlines()[0][:200] if str(exc) else ""})
            ctx.emit("serving", "info", f"/metrics: no answer ({str(exc)[:120]})", node=head)
            return
        s = metrics.serving_sample(head, snap, None)
        ev.serving.append({"t": t, "node": head, "up": True, "running": s.running, "waiting": s.waiting,
                           "finished": s.requests_total, "tokens": s.generation_tokens_total})
        ctx.emit("serving", "progress", f"/metrics: running {s.running}, waiting {s.waiting}, finished "
                 f"{s.requests_total}, generated tokens {s.generation_tokens_total}", node=head)

    async def _cluster(self, ctx: ActionContext, ev: Evidence) -> None:
        """The cluster's containers on every node (what `status` reads): a rank whose container exited
        left no process to find, so only this says it is gone."""
        from ..probes.cluster import find_cluster

        name = ctx.config.cluster.name
        try:
            view = await find_cluster(ctx.nodes, name)
        except Exception as exc:  # the verdict stands on the other evidence
            ctx.emit("cluster", "info", f"containers of {name}: not listed ({str(exc)[:120]})")
            return
        ev.cluster = {"name": name, "containers": [c.to_json() for c in view.all()]}
        for c in view.all():
            ctx.emit("cluster", "progress" if c.running else "warn", f"container {c.name}: {c.status or c.state}",
                     node=c.node)

    async def _ras(self, n, node, t, emit) -> None:
        port = self.ras_port or ras_client.DEFAULT_PORT
        raw = await probe.ras_status(node, fmt="json", port=port)
        from ..diagnosis import ras as ras_parse

        st = ras_parse.parse(raw)
        if st.ok and st.format == "json" or not st.ok and "refused JSON" not in raw:
            n.ras.append(Sample(t, raw, "json" if st.format == "json" else "text"))
        if st.ok or "refused JSON" in raw:
            # the text form too: older servers only speak it, and it names outliers in words
            raw_txt = await probe.ras_status(node, fmt="text", port=port)
            st_txt = ras_parse.parse(raw_txt)
            n.ras.append(Sample(t, raw_txt, "text"))
            if not (st.ok and st.format == "json"):
                st = st_txt
        if st.ok:
            counts = "; ".join(", ".join(f"rank {r.rank}: {r.total}" for r in c.ranks) for c in st.comms if c.ranks)
            emit("progress", f"RAS: {len(st.comms)} communicator(s) {counts}".strip())
        else:
            emit("info", f"RAS: no answer ({st.error[:120]})")

    async def _fr_dumps(self, n, node, armed: list[Worker], emit, trigger: bool = True) -> None:
        """Take a Flight Recorder dump from every armed rank through its debug-info pipe, so the
        verdict can compare the collectives by sequence number (op, sizes, process group per rank)."""
        try:
            dumps = await probe.fr_dumps(node, {w.pid: w.rank for w in armed}, wait=self.fr_wait, trigger=trigger,
                                         run_dir=self.run_dir or "")
        except probe.ProbeError as exc:
            n.notes.append(f"Flight Recorder: {exc}")
            emit("info", f"Flight Recorder: {exc}")
            return
        got = []
        for d in dumps:
            if isinstance(d.get("data"), bytes) and d["data"]:
                n.fr_traces[f"rank {d['rank']}"] = d["data"]
                got.append(f"rank {d['rank']}")
            else:
                n.notes.append(f"Flight Recorder rank {d['rank']}: {str(d.get('error') or 'no dump')[:200]}")
        if got or dumps:
            emit("progress" if got else "info", f"Flight Recorder: dumps from {', '.join(got)}" if got
                 else "Flight Recorder: no dump came back (" + "; ".join(str(d.get("error", "?"))[:80] for d in dumps) + ")")

    async def _gpu(self, n, node, t, emit) -> None:
        texts = []
        for i in range(self.gpu_samples):
            texts.append(await probe.gpu_csv(node))
            if i + 1 < self.gpu_samples:
                await asyncio.sleep(1.0)
        text = "".join(texts)
        n.gpu.append(Sample(t, text))
        if text.startswith("###"):
            emit("info", "GPU: " + texts[-1].strip("# \n")[:120])
        else:
            rows = [l for l in texts[-1].splitlines()[1:] if l.strip()]
            emit("progress", "GPU: " + " | ".join(rows)[:200])

    async def _pyspy(self, n, node, w: Worker, t, emit) -> None:
        out, err = await pyspy_probe.dump(node, w.pid)
        key = f"rank {w.rank}" if w.rank is not None else f"pid {w.pid}"
        if out:
            n.pyspy.append(Sample(t, out, key))
            from ..diagnosis import pyspy as pp

            d = pp.parse(out)
            emit("progress", f"py-spy {key}: {pp.where(d)} in {pp.top_frame(d) or '?'}")
        else:
            n.notes.append(f"py-spy {key}: {err}")
            emit("info", f"py-spy {key}: {err}")

    async def _logs(self, ctx, n, node, rnd, emit) -> None:
        paths: dict[str, str] = {}
        for w in n.workers:
            for i, p in enumerate(w.log_files):
                key = (f"rank {w.rank}" if w.rank is not None else f"pid {w.pid}") + ("" if i == 0 else f" {i}")
                if i:
                    key = p.rsplit("/", 1)[-1]
                paths[p] = key
        try:
            files = await probe.tail(node, list(paths))
        except probe.ProbeError as exc:
            n.notes.append(f"logs: {exc}")
            files = {}
        logs: dict[str, list[str]] = {}
        for path, info in files.items():
            if "lines" in info:
                logs.setdefault(paths[path], []).extend(info["lines"])
        for cid in sorted({w.container for w in n.workers if w.container}):
            lines = await probe.container_logs(node, cid)
            if lines:
                logs[f"container {cid[:12]}"] = lines
        if rnd:
            prog = patterns()["progress"]
            for key, lines in logs.items():
                before = [l for l in n.logs.get(key, []) if prog.search(l)]
                after = [l for l in lines if prog.search(l)]
                grew = len(after) - (after.index(before[-1]) + 1) if before and before[-1] in after else len(after) if (
                    after and (not before or before[-1] != after[-1])) else 0
                n.log_growth[key] = max(0, grew)
        n.logs.update(logs)
        _ranks_from_logs(n)
        emit("progress", f"logs: {len(logs)} source(s), last lines read")

    async def _containers(self, n, node, emit) -> None:
        for cid in sorted({w.container for w in n.workers if w.container}):
            s = await probe.container_settings(node, cid)
            n.containers[cid] = s
            emit("progress", f"container {s.get('Name') or cid[:12]}: network {s.get('NetworkMode')}, ipc "
                 f"{s.get('IpcMode')}, shm {s.get('ShmSize')}")

    async def _fabric(self, ctx, ev, n, node, emit) -> None:
        peers = [c for c in ctx.config.nodes if c.name != n.node and c.fabric_ip]
        checks = await asyncio.gather(*(probe.ping_mtu(node, c.fabric_ip) for c in peers))
        targets = sorted({f"{w.env['MASTER_ADDR']}:{w.env['MASTER_PORT']}" for w in n.workers
                          if w.env.get("MASTER_ADDR") and w.env.get("MASTER_PORT") and w.alive})
        try:
            conns = await probe.connect(node, targets)
        except probe.ProbeError as exc:
            conns = [{"target": t, "ok": None, "detail": str(exc)} for t in targets]
        n.fabric = list(checks) + [{"check": "tcp_connect", **c} for c in conns]
        for c in n.fabric:
            emit("progress" if c.get("ok") else "warn",
                 f"{c['check']} {c['target']}: {'ok' if c.get('ok') else 'FAILED'} {c.get('detail', '')}".strip()[:200])

    async def _dmesg(self, n, node) -> None:
        n.dmesg = await probe.kernel_log(node)

    # ------------------------------------------------------------------ the workflow
    async def execute(self, ctx: ActionContext) -> ActionResult:
        cfg = ctx.config
        self.run_dir = self.run_dir or default_run_dir(cfg)
        ev = Evidence(nodes=[NodeEvidence(node=c.name) for c in cfg.nodes if c.name in ctx.nodes],
                      interval=self.interval, source="live",
                      fabric_ips={c.name: c.fabric_ip for c in cfg.nodes if c.fabric_ip},
                      expected_hcas={c.name: list(c.ib_hcas) for c in cfg.nodes if c.ib_hcas})
        self.evidence = ev
        timings: dict[str, float] = {}
        async with ctx.step("round 1", f"evidence from {len(ev.nodes)} node(s) at once"):
            await asyncio.gather(*(self._round(ctx, ev, n, 0) for n in ev.nodes), self._serving(ctx, ev),
                                 self._cluster(ctx, ev))
        timings["round1_s"] = round(time.time() - ev.started, 2)
        if any(w.alive for n in ev.nodes for w in n.workers):
            wait = max(0.0, ev.started + self.interval - time.time())
            async with ctx.step("round 2", f"again {self.interval:.0f} s after the first (frozen or moving?)"):
                if wait:
                    ctx.emit("round 2", "progress", f"waiting {wait:.0f} s", progress=0.0)
                    await asyncio.sleep(wait)
                await asyncio.gather(*(self._round(ctx, ev, n, 1) for n in ev.nodes if n.reachable), self._serving(ctx, ev))
        else:
            ctx.emit("round 2", "info", "skipped: no live worker to watch twice")
        ev.finished = time.time()
        timings["gather_s"] = round(ev.finished - ev.started, 2)
        async with ctx.step("verdict") as rec:
            verdict = decide(ev)
            self.verdict = verdict
            rec.message = f"{verdict.rule}: {verdict.title} (confidence {verdict.confidence:.2f})"
            rec.status = "warn" if verdict.problem else "ok"
        timings["total_s"] = round(time.time() - ev.started, 2)
        data: dict[str, Any] = {"verdict": verdict.to_json(), "timings": timings,
                                "nodes": {n.node: {"reachable": n.reachable, "error": n.error, "notes": n.notes,
                                                   "workers": [{"pid": w.pid, "rank": w.rank, "alive": w.alive, "container": w.container}
                                                               for w in n.workers]} for n in ev.nodes}}
        if self.bundle:
            async with ctx.step("bundle", self.bundle) as rec:
                try:
                    write_bundle(ev, self.bundle, verdict={**verdict.to_json(), "timings": timings})
                    data["bundle"] = self.bundle
                except BundleError as exc:  # e.g. a link planted in the folder: refused, the verdict stands
                    rec.status, rec.message = FAIL, str(exc)
                    data["bundle_error"] = str(exc)
        return ActionResult(self.name, ok=not verdict.problem, summary=f"{verdict.title}: {verdict.next_action}",
                            findings=verdict_findings(verdict), data=data)


def verdict_findings(v: Verdict) -> list[Finding]:
    """The verdict in the shared Finding vocabulary (first the cause, then R7 items)."""
    out = []
    ev_lines = tuple(f"{node}: {line}" for node, lines in v.evidence.items() for line in lines)
    for i, fid in enumerate(v.finding_ids):
        out.append(finding(fid, severity="error", title=v.title, source="investigate",
                           evidence=ev_lines if i == 0 else (), advice=v.next_action))
    for item in v.latent:
        out.append(finding(item["id"], severity=item.get("severity", "warning"), title=item["title"],
                           source="investigate", evidence=item.get("evidence", []), advice=item.get("advice") or None))
    return out


_COMM_RANK = re.compile(r"\bcomm 0x[0-9a-f]+ rank (\d+) nranks (\d+)")


async def _own_containers_only(node, found: list[Worker]) -> list[Worker]:
    """Keep workers in this node's own containers.  On real nodes that is all of them; where several
    "nodes" share one kernel (the test bed) /proc shows every node's containers, and the node's
    Docker daemon says which are its own.  Without a daemon answer nothing is dropped."""
    if not any(w.container for w in found):
        return found
    try:
        res = await node.run(["docker", "ps", "-q", "--no-trunc"], timeout=20)
    except Exception:
        return found
    if not res.ok:
        return found
    mine = set(res.text.split())
    return [w for w in found if not w.container or w.container in mine]


def _describe(w: Worker) -> str:
    who = f"rank {w.rank} pid {w.pid}" if w.rank is not None else f"pid {w.pid}"
    return who + ("" if w.alive else " (gone)")


def _ranks_from_logs(n: NodeEvidence) -> None:
    """A worker known only by pid (e.g. from its NCCL debug file) gets its rank from a comm-init line."""
    for w in n.workers:
        key = f"pid {w.pid}"
        if w.rank is not None or key not in n.logs:
            continue
        for line in n.logs[key][:400]:
            m = _COMM_RANK.search(line)
            if m:
                w.rank, w.world_size = int(m.group(1)), w.world_size or int(m.group(2))
                n.logs[f"rank {w.rank}"] = n.logs.pop(key)
                break
