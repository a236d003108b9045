"""Bundle and capture folders handed to `investigate --offline` (and written by `--bundle`) are
read and written without following links planted in them, without opening anything but regular
files, and with bounded memory however large a log is."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hostile_http import run_measured
from sparktui.cli import main
from sparktui.diagnosis.evidence import BundleError, read_bundle, write_bundle
from sparktui.diagnosis.verdict import decide

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures"
CAP = FIX / "nccl-2gpu"
DEV_BUNDLE = FIX / "device-runs" / "desync" / "bundle"


def _watchdog(tmp_path: Path) -> Path:
    """A copy of the real two-GPU watchdog capture (logs, py-spy, Flight Recorder dumps)."""
    d = tmp_path / "cap"
    d.mkdir()
    for f in CAP.glob("watchdog.*"):
        shutil.copy(f, d / f.name)
    return d


def _bundle(tmp_path: Path) -> Path:
    d = tmp_path / "bundle"
    shutil.copytree(DEV_BUNDLE, d)
    return d


def _offline(path: Path, *extra: str, env: dict | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sparktui", "investigate", "--offline", str(path), *extra],
                          capture_output=True, text=True, cwd=ROOT, timeout=timeout, env=env)


def _one_line_exit_2(res: subprocess.CompletedProcess, *words: str) -> None:
    assert res.returncode == 2, (res.returncode, res.stdout[-500:], res.stderr[-2000:])
    assert "Traceback" not in res.stderr
    assert res.stderr.count("\n") == 1, res.stderr
    for w in words:
        assert w in res.stderr, res.stderr


def test_symlink_to_a_file_outside_is_not_followed(tmp_path):
    secret = tmp_path / "shadow"
    secret.write_text("root:$6$not-for-you:19000:0:99999:7:::\n")
    d = _watchdog(tmp_path)
    (d / "watchdog.rank1.log").unlink()
    (d / "watchdog.rank1.log").symlink_to(secret)
    res = _offline(d)
    _one_line_exit_2(res, "watchdog.rank1.log", "symbolic link")
    assert "not-for-you" not in res.stdout + res.stderr


def test_link_to_proc_environ_does_not_print_the_operators_tokens(tmp_path):
    d = _watchdog(tmp_path)
    (d / "watchdog.rank0.log").unlink()
    (d / "watchdog.rank0.log").symlink_to("/proc/self/environ")
    env = dict(os.environ, HF_TOKEN="hf_operatorsOwnTokenValue123456789", PYTHONPATH=str(ROOT))
    res = _offline(d, env=env)
    _one_line_exit_2(res, "watchdog.rank0.log", "symbolic link")
    assert "operatorsOwnToken" not in res.stdout + res.stderr


def test_fifo_is_refused_without_blocking(tmp_path):
    d = _watchdog(tmp_path)
    (d / "watchdog.rank1.log").unlink()
    os.mkfifo(d / "watchdog.rank1.log")
    res = _offline(d, timeout=30)  # opening a FIFO for reading would block forever without O_NONBLOCK
    _one_line_exit_2(res, "watchdog.rank1.log", "FIFO")


def test_directory_named_like_a_log_is_refused(tmp_path):
    d = _watchdog(tmp_path)
    (d / "watchdog.rank1.log").unlink()
    (d / "watchdog.rank1.log").mkdir()
    _one_line_exit_2(_offline(d), "watchdog.rank1.log", "a directory")


def test_flight_recorder_dump_as_link_is_refused(tmp_path, capsys):
    d = _watchdog(tmp_path)
    (d / "watchdog.fr_trace_1").unlink()
    (d / "watchdog.fr_trace_1").symlink_to(CAP / "watchdog.fr_trace_1")  # even a link to a real dump
    assert main(["investigate", "--offline", str(d)]) == 2
    assert "fr_trace_1: a symbolic link" in capsys.readouterr().err


@pytest.mark.parametrize("planted", ["meta.json", "gpuhost", "gpuhost/node.json", "gpuhost/ev.rank1.log",
                                     "gpuhost/ev.t20.pyspy.rank1.json"])
def test_links_planted_in_a_bundle_are_refused(tmp_path, capsys, planted):
    b = _bundle(tmp_path)
    outside = tmp_path / "outside"
    shutil.move(str(b / planted), outside)  # the real content, now behind a link
    (b / planted).symlink_to(outside)
    assert main(["investigate", "--offline", str(b)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "symbolic link" in err and planted.rsplit("/", 1)[-1] in err


def test_the_folder_the_user_names_may_itself_be_a_link(tmp_path, capsys):
    b = _bundle(tmp_path)
    (tmp_path / "via-link").symlink_to(b)
    assert main(["investigate", "--offline", str(tmp_path / "via-link")]) == 1
    assert capsys.readouterr().out.startswith("R4: Collective desync")


def test_oversized_structured_file_is_refused(tmp_path, capsys):
    b = _bundle(tmp_path)
    with open(b / "gpuhost" / "node.json", "r+b") as fh:
        fh.truncate(17 << 20)  # sparse: a 17 MiB node.json costs nothing to make
    assert main(["investigate", "--offline", str(b)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "node.json: 17.0 MiB, over the 16.0 MiB limit" in err


def _huge_log(path: Path, body: bytes, size: int) -> None:
    """``size`` bytes: the real log at the start and at the end, a hole of NULs between (sparse, instant)."""
    with open(path, "wb") as fh:
        fh.write(body * (2 * (1 << 20) // len(body) + 1))
        fh.seek(size - len(body) * 200)
        fh.write(b"\n" + body * 200)
        fh.truncate(size)


def test_one_gigabyte_log_is_read_as_head_and_tail_in_bounded_memory(tmp_path):
    d = _watchdog(tmp_path)
    body = (CAP / "watchdog.rank0.log").read_bytes()
    _huge_log(d / "watchdog.rank0.log", body, 1 << 30)
    # the program's own peak (VmHWM), as every peak-memory test here measures it
    res = run_measured([sys.executable, "-m", "sparktui", "investigate", "--offline", str(d)],
                       {**os.environ, "PYTHONPATH": str(ROOT)}, str(ROOT), timeout=120)
    assert res.rc == 1, res.err[-2000:]
    # the tail still holds the watchdog timeout: the verdict is the one the small capture gives
    assert res.out.startswith("R4: Collective desync"), res.out[:500]
    assert "watchdog.rank0.log: 1024.0 MiB: read the first 1.0 MiB and the last 7.0 MiB only" in res.err
    rss_mb = res.peak_mb
    print(f"peak RSS of investigate --offline over a 1 GiB log: {rss_mb:.0f} MB")
    assert rss_mb < 300, rss_mb


def test_head_and_tail_keep_init_and_end_lines(tmp_path):
    d = _watchdog(tmp_path)
    body = (CAP / "watchdog.rank0.log").read_bytes()
    _huge_log(d / "watchdog.rank0.log", body, 64 << 20)
    ((_, ev),) = read_bundle(d / "watchdog")
    lines = ev.nodes[0].logs["rank 0"]
    assert any("skipped" in ln for ln in lines)
    assert any("Watchdog caught collective operation timeout" in ln for ln in lines[-400:])
    assert ev.read_notes and "64.0 MiB" in ev.read_notes[0]
    assert decide(ev).rule == "R4"


# --------------------------------------------------------------------------- writing a bundle


def _evidence():
    ((_, ev),) = read_bundle(DEV_BUNDLE)
    return ev


def test_write_replaces_planted_links_instead_of_writing_through_them(tmp_path):
    out = tmp_path / "out"
    (out / "gpuhost").mkdir(parents=True)
    targets = {}
    for rel in ("meta.json", "verdict.json", "gpuhost/node.json", "gpuhost/ev.rank1.log", "gpuhost/ev.fr_trace_0"):
        t = tmp_path / f"target-{rel.replace('/', '_')}"
        t.write_text("precious\n")
        (out / rel).symlink_to(t)
        targets[rel] = t
    ev = _evidence()
    ev.nodes[0].fr_traces["rank 0"] = (CAP / "watchdog.fr_trace_0").read_bytes()
    write_bundle(ev, out, verdict=decide(ev).to_json())
    for rel, t in targets.items():
        assert t.read_text() == "precious\n", rel  # the link's target was not overwritten
        assert (out / rel).is_file() and not (out / rel).is_symlink(), rel
    assert json.loads((out / "meta.json").read_text())["nodes"] == ["gpuhost"]
    ((_, again),) = read_bundle(out)
    assert decide(again).rule == "R4"


def test_write_refuses_a_node_folder_planted_as_a_link(tmp_path):
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    (out / "gpuhost").symlink_to(elsewhere)
    with pytest.raises(BundleError, match="gpuhost: a symbolic link"):
        write_bundle(_evidence(), out)
    assert list(elsewhere.iterdir()) == []


def test_live_investigate_bundle_with_planted_links(tmp_path):
    """The real CLI (local backend, nothing running): meta.json planted as a link is replaced, a node
    folder planted as a link is refused with exit 2 and one line, and neither target is touched."""
    cfg = tmp_path / "c.toml"
    cfg.write_text('[cluster]\nname = "nothing_here"\n[[node]]\nname = "me"\nbackend = "local"\n')
    out, elsewhere, target = tmp_path / "out", tmp_path / "elsewhere", tmp_path / "precious"
    out.mkdir()
    elsewhere.mkdir()
    target.write_text("precious\n")
    (out / "meta.json").symlink_to(target)
    (out / "me").symlink_to(elsewhere)
    res = subprocess.run([sys.executable, "-m", "sparktui", "investigate", "--config", str(cfg), "--bundle", str(out),
                          "--interval", "1"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert res.returncode == 2, res.stderr[-2000:]
    assert "Traceback" not in res.stderr
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith("sparktui: investigate: bundle not written:") and "me: a symbolic link" in last
    assert target.read_text() == "precious\n"
    assert list(elsewhere.iterdir()) == []
    assert not (out / "meta.json").is_symlink()


def test_report_reads_the_tail_of_a_large_session_log(tmp_path, capsys):
    from sparktui.model import LogBatch, LogLine
    from sparktui.session import Session

    s = Session.create("t", meta={"nodes": ["spark1"]})
    s.record(LogBatch("spark1", "vllm", (LogLine("spark1", "vllm", "first", seq=1),)))
    s.close()
    log = s.path / "logs" / "spark1" / "vllm.log"
    with open(log, "ab") as fh:
        fh.write(b"filler line\n" * ((3 << 20) // 12))  # 3 MiB: over the 1 MiB the report reads
        fh.write(b"the very last line\n")
    n = log.read_bytes().count(b"\n")
    assert log.stat().st_size > 2 << 20
    assert main(["report", str(s.path)]) == 0
    out = capsys.readouterr().out
    assert f"### spark1/vllm ({n} lines," in out  # counted in full, read only in its tail
    assert "the very last line" in out
