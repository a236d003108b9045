#!/usr/bin/env python3
"""Real 2-rank NCCL hangs on a 2-GPU machine, each investigated by sparktui (local node).

    python3 scripts/device/nccl_modes.py OUTDIR [MODE ...]

Modes (one torch.distributed process per GPU, NCCL forced onto NET/Socket like two nodes):
  healthy      both ranks loop all_reduce                      -> expect "healthy" (exit 0)
  desync       rank 1 stops issuing collectives after step 15  -> expect R4 nccl_collective_mismatch, rank 1
  never_start  only rank 0 of 2 is started                     -> expect R2 nccl_init_hang, rank 1 missing
  killed       rank 1 is SIGKILLed mid-run                     -> expect R1 peer dead, rank 1
  killed_survivor  the same with TORCH_NCCL_ASYNC_ERROR_HANDLING=0 (no teardown by the watchdog)
  stuck_kernel both ranks launch a long GPU spin, then sync    -> expect R5 (frozen, equal counts)
  optype_mismatch  at step 15 rank 0 runs all_reduce, rank 1 broadcast (first collective of the step)
                                                               -> expect R4 nccl_collective_mismatch naming
                                                                  both ops at collective #151
  size_mismatch    at step 15 rank 1's all_reduce has half the elements
                                                               -> expect R4 nccl_collective_mismatch (size) at #151
                   (seen on 2 x H200, NCCL 2.28.9 over NET/Socket: it does NOT hang, NCCL does not check
                   counts and the job runs on; so the driver investigates once both ranks pass step 16, while
                   the Flight Recorder ring still holds #151 -> expect R4 "the job runs on with wrong results")

The mismatch modes run with the Flight Recorder armed by prearm (TORCH_NCCL_TRACE_BUFFER_SIZE /
TORCH_FR_BUFFER_SIZE=2000, TORCH_NCCL_DUMP_ON_TIMEOUT=1, TORCH_FR_DUMP_TEMP_FILE=<run_dir>/fr_,
TORCH_NCCL_DEBUG_INFO_PIPE_FILE=<run_dir>/frpipe_): the live investigation writes to each rank's
<run_dir>/frpipe_<rank>.pipe and reads <run_dir>/fr_<rank> back.  Their summary also checks that the
verdict names the sequence number MISMATCH_SEQ (151) and both ranks' ops.

On the lent 2-GPU machine (kind nvidia-h200-x2; torch there is /opt/torch/.venv's python3, nothing
to install; py-spy optional: without it the investigation notes so and goes on):

    INVESTIGATE_INTERVAL=20 python3 scripts/device/nccl_modes.py /tmp/runs optype_mismatch size_mismatch
    tar czf $OUT/runs.tgz -C /tmp runs     # $OUT brings back at most 8 files, 2 folders deep

then unpack runs/<mode>/ into tests/fixtures/device-runs/<mode>/ (bundle/, investigate.json,
investigate.err, summary.json; run_dir/ only if small) and test the offline replay of each bundle.

Each worker is launched with sparktui's pre-armed env (sparktui.actions.prearm).  A watcher feeds
the worker logs and RAS counts into sparktui's StallDetector and times "suspected hang"; then
``sparktui investigate --json --bundle`` runs as a subprocess with a local-node config.
Writes OUTDIR/<mode>/{bundle/,investigate.json,investigate.err,summary.json} and OUTDIR/summary.json.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

EXPECT = {"healthy": ("healthy", []), "desync": ("R4", ["nccl_collective_mismatch"]),
          "never_start": ("R2", ["nccl_init_hang"]), "killed": ("R1", []), "stuck_kernel": ("R5", []),
          "killed_survivor": ("R1", []), "optype_mismatch": ("R4", ["nccl_collective_mismatch"]),
          "size_mismatch": ("R4", ["nccl_collective_mismatch"])}
SAFETY = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
NETWORK = {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1", "NCCL_IB_DISABLE": "1"}
STOP_STEP = 15
OPS_PER_STEP = 10
MISMATCH_SEQ = STOP_STEP * OPS_PER_STEP + 1  # torch's SeqNum of the first collective of step 15 (1-based)


def worker(mode: str, rank: int) -> None:
    import datetime

    import torch
    import torch.distributed as dist

    torch.cuda.set_device(rank)
    print(f"rank {rank}: init_process_group (world 2)", flush=True)
    dist.init_process_group("nccl", rank=rank, world_size=2, timeout=datetime.timedelta(seconds=300),
                            device_id=torch.device("cuda", rank))
    x = torch.ones(1 << 20, device="cuda")
    step = 0
    while True:
        if mode == "desync" and rank == 1 and step == STOP_STEP:
            print("rank 1 stops issuing collectives", flush=True)
            time.sleep(900)
        if mode == "stuck_kernel" and step == STOP_STEP:
            print(f"rank {rank}: launching a long GPU spin before the next all_reduce", flush=True)
            torch.cuda._sleep(1 << 40)  # spins on the GPU for far longer than the run
        for i in range(OPS_PER_STEP):
            if step == STOP_STEP and i == 0 and mode == "optype_mismatch":
                if rank == 0:
                    dist.all_reduce(x)
                else:
                    dist.broadcast(x, src=0)  # same size, other collective: the ranks split here
                continue
            if step == STOP_STEP and i == 0 and mode == "size_mismatch":
                dist.all_reduce(x if rank == 0 else x[: x.numel() // 2])  # same op, half the elements on rank 1
                continue
            dist.all_reduce(x)
        torch.cuda.synchronize()
        print(f"step {step}", flush=True)
        step += 1
        time.sleep(0.2)


class Watcher(threading.Thread):
    """Feeds the StallDetector from the worker logs (LogLine) and RAS counts (ProgressSample)."""

    def __init__(self, logs: list[Path], det) -> None:
        super().__init__(daemon=True)
        self.logs, self.det = logs, det
        self.stop = threading.Event()
        self.raised: float | None = None
        self.silence: float | None = None
        self.lock = threading.Lock()

    def run(self) -> None:
        from sparktui.diagnosis import ras as ras_parse
        from sparktui.diagnosis.stall import ProgressSample
        from sparktui.model import LogLine
        from sparktui.probes import ras as ras_client

        pos = {p: 0 for p in self.logs}
        next_ras = 0.0
        while not self.stop.is_set():
            now = time.time()
            for p in self.logs:
                try:
                    with open(p, "rb") as fh:
                        fh.seek(pos[p])
                        data = fh.read()
                except OSError:
                    continue
                cut = data.rfind(b"\n") + 1
                pos[p] += cut
                for line in data[:cut].decode("utf-8", "replace").splitlines():
                    self.det.feed(LogLine(node="gpuhost", source=p.name, text=line))
            if now >= next_ras:
                next_ras = now + 2.0
                st = ras_parse.parse(ras_client.query(timeout=2, fmt="json"))
                for c in st.comms:
                    for r in c.ranks:
                        self.det.feed(ProgressSample(node="gpuhost", source=f"ras rank {r.rank}", value=r.total))
            for ev in self.det.tick(time.time()):
                if self.raised is None:
                    self.raised = ev.ts
                    self.silence = ev.ts - (self.det.last_progress or ev.ts)
            self.stop.wait(0.25)


def launch(mode: str, rank: int, env: dict, run_dir: str) -> subprocess.Popen:
    log = open(os.path.join(run_dir, f"worker_rank{rank}.log"), "w")
    e = dict(env, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2")
    return subprocess.Popen([sys.executable, __file__, "--worker", mode, str(rank)], stdout=log,
                            stderr=subprocess.STDOUT, env=e, start_new_session=False)


def run_mode(mode: str, outdir: Path, port: int, interval: float) -> dict:
    from sparktui.actions.prearm import prearm
    from sparktui.config import parse_config
    from sparktui.diagnosis.stall import StallDetector

    mdir = outdir / mode
    mdir.mkdir(parents=True, exist_ok=True)
    cfg_path = mdir / "cluster.toml"
    cfg_path.write_text(f'[cluster]\nname = "dev_{mode}"\ntensor_parallel = 2\n\n'
                        '[[node]]\nname = "gpuhost"\nbackend = "local"\ngpu_count = 2\n')
    config = parse_config(cfg_path.read_text(), str(cfg_path))
    arm = prearm(config)
    subprocess.run(["rm", "-rf", arm.run_dir])
    os.makedirs(arm.run_dir, exist_ok=True)
    env = dict(os.environ, **arm.env, **NETWORK, **SAFETY, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
               PYTHONUNBUFFERED="1")
    if mode == "killed_survivor":
        env["TORCH_NCCL_ASYNC_ERROR_HANDLING"] = "0"  # the survivor does not tear itself down
    t0 = time.time()
    ranks = [0] if mode == "never_start" else [0, 1]
    procs = {r: launch(mode, r, env, arm.run_dir) for r in ranks}
    logs = [Path(arm.run_dir) / f"worker_rank{r}.log" for r in ranks]
    det = StallDetector()
    w = Watcher(logs, det)
    w.start()
    killed_at = None
    deadline = t0 + (40 if mode == "healthy" else 90)
    while time.time() < deadline:
        for p in procs.values():
            p.poll()  # reap a dead rank at once, as its launcher would
        if mode.startswith("killed") and killed_at is None and f"step {STOP_STEP}" in logs[1].read_text(errors="replace"):
            procs[1].send_signal(signal.SIGKILL)
            killed_at = time.time()
        if mode != "healthy" and w.raised is not None:
            break
        # a size mismatch need not hang (NCCL does not check counts): investigate once both ranks are
        # past the split, while the Flight Recorder's ring buffer still holds it
        if mode == "size_mismatch" and all(f"step {STOP_STEP + 1}\n" in lg.read_text(errors="replace") for lg in logs
                                           if lg.exists()) and all(lg.exists() for lg in logs):
            break
        if mode == "healthy" and time.time() - t0 > 35:
            break
        time.sleep(0.2)
    raised, silence = w.raised, w.silence
    last_progress = det.last_progress
    t_inv = time.time()
    cmd = [sys.executable, "-m", "sparktui", "investigate", "--config", str(cfg_path), "--json",
           "--bundle", str(mdir / "bundle"), "--interval", str(interval)]
    inv = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=str(ROOT))
    # keep reaping the workers while it runs: a real launcher (Ray, torchrun) reaps its dead children,
    # and an unreaped zombie would look alive
    reaper = threading.Thread(target=lambda: [p.wait() for p in procs.values()], daemon=True)
    reaper.start()
    out, err = inv.communicate(timeout=240)
    res = subprocess.CompletedProcess(cmd, inv.returncode, out, err)
    t_done = time.time()
    w.stop.set()
    (mdir / "investigate.json").write_text(res.stdout)
    (mdir / "investigate.err").write_text(res.stderr)
    for p in procs.values():
        if p.poll() is None:
            p.kill()
        p.wait()
    subprocess.run(["cp", "-r", arm.run_dir, str(mdir / "run_dir")])
    # the Flight Recorder's debug-info pipes are FIFOs: no use as fixtures (git cannot hold them)
    subprocess.run(["find", str(mdir / "run_dir"), "-type", "p", "-delete"])
    try:
        verdict = json.loads(res.stdout)["verdict"]
    except (json.JSONDecodeError, KeyError):
        verdict = {"rule": "?", "title": "no JSON", "finding_ids": []}
    want_rule, want_ids = EXPECT[mode]
    ok = verdict.get("rule") == want_rule and all(i in verdict.get("finding_ids", []) for i in want_ids)
    details = verdict.get("details") or {}
    if mode.endswith("_mismatch"):
        # the story must be the split, not a lagging rank: both ops named, at the right collective
        ok = ok and details.get("seq") == MISMATCH_SEQ and bool(details.get("op_a")) and bool(details.get("op_b"))
    hang_at = killed_at or last_progress
    summary = {
        "mode": mode, "expected": want_rule, "rule": verdict.get("rule"), "title": verdict.get("title"),
        "finding_ids": verdict.get("finding_ids"), "confidence": verdict.get("confidence"),
        "next_action": verdict.get("next_action"), "exit_code": res.returncode, "ok": ok,
        "false_alarm": bool(mode == "healthy" and raised is not None),
        "hang_to_suspected_s": round(raised - hang_at, 2) if raised and hang_at and mode != "healthy" else None,
        "silence_at_alarm_s": round(silence, 2) if silence is not None else None,
        "hang_to_verdict_s": round(t_done - hang_at, 2) if hang_at and mode != "healthy" else None,
        "investigate_s": round(t_done - t_inv, 2), "interval_s": interval,
        "details": {k: details.get(k) for k in ("where", "seq", "a", "b", "op_a", "op_b", "what", "source")
                    if k in details},
        "fr_dumps": sorted(p.name for p in Path(arm.run_dir).glob("fr_*")),
    }
    (mdir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary), flush=True)
    return summary


def main(argv: list[str]) -> int:
    if argv and argv[0] == "--worker":
        worker(argv[1], int(argv[2]))
        return 0
    outdir = Path(argv[0])
    modes = argv[1:] or list(EXPECT)
    interval = float(os.environ.get("INVESTIGATE_INTERVAL", "20"))
    outdir.mkdir(parents=True, exist_ok=True)
    results = []
    for i, mode in enumerate(modes):
        t = time.time()
        try:
            results.append(run_mode(mode, outdir, 29400 + i, interval))
        except Exception as exc:  # one broken mode must not lose the others' results
            results.append({"mode": mode, "ok": False, "error": f"{type(exc).__name__}: {exc}"})
            print(f"{mode}: {exc}", flush=True)
        print(f"== {mode} took {time.time() - t:.0f}s", flush=True)
    (outdir / "summary.json").write_text(json.dumps(results, indent=2) + "\n")
    return 0 if all(r.get("ok") for r in results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
