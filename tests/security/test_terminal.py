"""Every byte from a node or a file is data (issue 14, items 1 and 2).

A GPU, process or container name, a label, an error message or a log file's name that carries
OSC 52 (set the clipboard), OSC 0 (retitle), CSI 2J (clear) or a raw C1 control must reach no
terminal as a control sequence: not the TUI, not `status`/`doctor`/`investigate --offline`/
`report`/`diagnose` text, and `--json` carries controls only as JSON escapes.
(The same over a real test bed, in tmux with set-clipboard on: tests/e2e/test_security_terminal.py.)
"""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sparktui.logs.sanitize import clean_text, json_dumps, safe
from sparktui.model import (ActionEvent, ContainerChanged, ContainerInfo, ContainerState, GpuInfo, GpuProcess,
                            GpuSample)

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures"

OSC52 = "\x1b]52;c;cHduZWQ=\x07"  # would put "pwned" in the clipboard
OSC0 = "\x1b]0;PWNED-TITLE\x07"  # would retitle the window/pane
CLEAR = "\x1b[2J"
C1_CSI = "\x9b2J"  # the 8-bit CSI: a clear screen on terminals that honour C1
HOSTILE = f"GB10{OSC52}{OSC0}{CLEAR}{C1_CSI}\x07\x08\x0d!"
# anything a terminal acts on: C0 (but TAB and LF), DEL, C1
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _no_controls(text: str) -> None:
    bad = CONTROL.findall(text)
    assert not bad, f"control characters reached the output: {bad!r}"


# ------------------------------------------------------------------ the neutralisers

def test_safe_neutralises_every_sequence_and_keeps_the_name_readable():
    out = safe(HOSTILE)
    _no_controls(out)
    assert out.startswith("GB10") and out.endswith("!")
    assert "PWNED" not in out and "cHduZWQ" not in out  # the whole OSC is gone, not just its ESC
    assert safe("a\nb") == "a␊b"  # a name never becomes two lines
    assert safe("NVIDIA GB10") == "NVIDIA GB10" and safe(None) == "" and safe(3) == "3"
    assert clean_text("one\ntwo" + CLEAR) == "one\ntwo"


def test_json_dumps_carries_controls_only_as_escapes():
    obj = {"name": HOSTILE, "c1": "".join(chr(c) for c in range(0x7F, 0xA0)), "ok": "é ü ✓"}
    out = json_dumps(obj)
    _no_controls(out)
    assert "\\u009b" in out and "\\u001b" in out and "é ü ✓" in out
    assert json.loads(out) == obj
    # the bug it fixes: json.dumps(ensure_ascii=False) lets U+0080..U+009F through raw
    assert CONTROL.search(json.dumps(obj, ensure_ascii=False))


# ------------------------------------------------------------------ CLI printers

def _run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sparktui", *args], capture_output=True, cwd=ROOT, timeout=120,
                          input=stdin.encode() if stdin is not None else None)


def test_diagnose_text_and_json_from_a_hostile_file_and_file_name(tmp_path):
    name = tmp_path / f"rank0{CLEAR}{OSC0}.log"
    nccl = f"node1:123:456 [0] NCCL INFO Bootstrap : Using eth0:127.0.0.9<0> {HOSTILE}"
    name.write_text(f"{nccl}\ntorch.OutOfMemoryError: CUDA out of memory. {HOSTILE}\n", encoding="utf-8")
    text = _run("diagnose", str(name))
    assert text.returncode == 1
    out = text.stdout.decode()
    _no_controls(out)
    assert "cuda_oom" in out and "rank0" in out and "last NCCL line" in out
    js = _run("diagnose", "--json", str(name))
    out = js.stdout.decode()
    _no_controls(out)
    data = json.loads(out)
    assert data["summary"]["nccl"][0]["last_nccl_line"].startswith("node1:123:456")
    # JSON keeps the data exact (the file's real name), its controls only as escapes
    assert data["findings"][0]["source"] == str(name) and "\\u001b" in out


def test_investigate_offline_text_is_neutralised(tmp_path):
    for f in FIX.glob("nccl-2gpu/init_hang.*"):
        shutil.copy(f, tmp_path / f.name)
    log = tmp_path / "init_hang.rank0.log"
    data = log.read_text()
    assert "clients joined." in data
    log.write_text(data.replace("clients joined.", f"clients joined. {HOSTILE}", 1))
    r = _run("investigate", "--offline", str(tmp_path))
    out = r.stdout.decode()
    assert r.returncode == 1 and "clients joined" in out
    _no_controls(out)
    _no_controls(r.stderr.decode())


def test_report_stdout_is_neutralised(tmp_path):
    d = tmp_path / "20260101-000000-c1"
    (d / "logs" / "spark1").mkdir(parents=True)
    (d / "meta.json").write_text(json.dumps({"started": 1.0, "cluster": f"c1{OSC52}"}))
    (d / "logs" / "spark1" / "vllm.log").write_text(f"INFO hello {HOSTILE}\n")
    ev = {"type": "FindingRaised", "finding": {"id": "engine_dead", "severity": "error", "title": f"dead {OSC0}",
                                               "source": "spark1/vllm", "line": 1, "evidence": [HOSTILE],
                                               "advice": "", "node": "spark1"}}
    (d / "events.jsonl").write_text(json.dumps(ev) + "\n")
    r = _run("report", str(d))
    out = r.stdout.decode()
    assert r.returncode == 0 and "INFO hello GB10" in out
    _no_controls(out)


def test_status_text_neutralises_every_node_field():
    from sparktui.commands.status import _cluster_text, _text

    gpu = {"index": 0, "name": HOSTILE, "util_percent": 5.0, "mem_total_bytes": None, "mem_used_bytes": None,
           "processes": [{"pid": 7, "name": f"python{OSC52}", "used_memory_bytes": 1 << 30}]}
    nodes = [
        {"name": "spark1", "backend": "ssh", "host": "127.0.0.2", "reachable": True, "error": None,
         "memory": None, "gpu": {"available": True, "error": None, "gpus": [gpu]}, "docker_error": None,
         "containers": [{"name": f"vllm{CLEAR}", "image": f"img{OSC0}", "status": f"Up{C1_CSI}", "health": "x\x1b[5m"}]},
        {"name": "spark2", "backend": "ssh", "host": "127.0.0.3", "reachable": False, "error": f"boom{OSC52}",
         "memory": None, "gpu": None, "docker_error": None, "containers": []},
    ]
    out = _text(nodes)
    _no_controls(out)
    assert "GB10" in out and "python" in out and "UNREACHABLE: boom" in out
    cl = {"name": "c", "state": "running", "containers": [{"node": "spark1", "name": f"v{OSC0}", "rank": 0,
                                                           "status": "up"}],
          "serve": {"answering": False, "host": "h", "port": 1, "error": f"refused{CLEAR}"},
          "findings": [{"severity": "error", "id": "x", "title": f"t{OSC52}"}]}
    out = _cluster_text(cl)
    _no_controls(out)
    assert "refused" in out


def test_doctor_table_and_action_printer_are_neutralised():
    from sparktui.actions.base import ActionResult
    from sparktui.actions.cli_runner import _Printer, print_result
    from sparktui.commands.doctor import _table

    checks = [{"check": "driver", "node": "spark1", "status": "fail", "title": f"driver {OSC0}",
               "evidence": [f"nvidia-smi: {HOSTILE}", f"--api-key sekritvalue77 {CLEAR}"], "fix": f"fix{OSC52}"}]
    result = ActionResult("doctor", False, f"1 failure {OSC0}", data={"checks": checks})
    buf = io.StringIO()
    sys_stdout, sys.stdout = sys.stdout, buf
    try:
        print_result(result, False, extra_text=_table, show_findings=True)
    finally:
        sys.stdout = sys_stdout
    out = buf.getvalue()
    _no_controls(out)
    assert "FAIL" in out and "GB10" in out and "sekritvalue77" not in out
    err = io.StringIO()
    printer = _Printer(err)
    printer(ActionEvent("doctor", "driver", "fail", message=f"nvidia-smi says {HOSTILE}", node="spark1"))
    printer.finish()  # a failure line is held until the result is known (printed once)
    _no_controls(err.getvalue())
    assert "nvidia-smi says GB10" in err.getvalue()


# ------------------------------------------------------------------ the TUI

def test_widget_text_builders_show_hostile_fields_as_text():
    from sparktui.tui.widgets import node_stats

    gpus = (GpuInfo(0, HOSTILE, 5.0, 10.0, processes=(GpuProcess(7, f"python{OSC52}", None),)),)
    node = type("N", (), {"gpu_available": True, "gpus": gpus, "gpu_error": None})()
    plain = node_stats.gpu(node).plain
    _no_controls(plain)
    assert "GB10" in plain and "python" in plain
    down = type("N", (), {"gpu_available": False, "gpus": (), "gpu_error": f"nvidia-smi: {HOSTILE}"})()
    _no_controls(node_stats.gpu(down).plain)


def test_terminal_safe_filter_drops_controls_and_keeps_widths():
    from rich.segment import Segment
    from textual.color import Color

    from sparktui.tui.terminal_safe import TerminalSafe

    f = TerminalSafe()
    plain = [Segment("NVIDIA GB10 "), Segment("util 5%")]
    assert f.apply(plain, Color(0, 0, 0)) is plain  # nothing to do: no copy
    out = f.apply([Segment("GB10" + OSC52 + CLEAR), Segment(C1_CSI + "x")], Color(0, 0, 0))
    text = "".join(s.text for s in out)
    _no_controls(text)
    assert text == "GB10]52;c;cHduZWQ=[2J2Jx"


def _hostile_app():
    from sparktui.config import demo_config
    from sparktui.engine import Engine
    from sparktui.sim import DEMO_EPOCH, SimCluster
    from sparktui.tui.app import SparkApp

    config = demo_config()
    sim = SimCluster(config, "healthy", 1.0)
    engine = Engine(config, [])
    engine.process(sim.events_until(30))
    gpus = (GpuInfo(0, HOSTILE, 5.0, 10.0, processes=(GpuProcess(7, f"python{OSC52}", None),)),)
    info = ContainerInfo(id="e" * 64, name=f"evil{OSC0}", image=f"img{OSC52}{CLEAR}", state=ContainerState.RUNNING,
                         status=f"Up{C1_CSI}", started_at=DEMO_EPOCH, labels=(("x", HOSTILE),))
    engine.process([GpuSample("spark1", gpus), ContainerChanged("spark1", info)])
    return SparkApp(engine, nodes=lambda: {n.name: sim.node(n.name) for n in config.nodes}, live=False,
                    clock=lambda: DEMO_EPOCH + 30)


async def test_main_screen_renders_hostile_names_as_text():
    app = _hostile_app()
    async with app.run_test(size=(200, 50)) as pilot:
        app.refresh_now()
        for _ in range(50):
            await pilot.pause()
            strips = app.screen._compositor.render_strips()
            screen = "\n".join("".join(seg.text for seg in strip) for strip in strips)
            if "GB10" in screen and "evil" in screen:
                break
        assert "GB10" in screen and "evil" in screen and "python" in screen
        _no_controls(screen)
        assert "PWNED" not in screen


def test_the_engine_never_imports_textual():
    r = subprocess.run([sys.executable, "-c", "import sys, sparktui.engine, sparktui.logs.redact, "
                        "sparktui.logs.sanitize; assert 'textual' not in sys.modules"], cwd=ROOT, timeout=60)
    assert r.returncode == 0


@pytest.mark.parametrize("bad", [OSC52, OSC0, CLEAR, C1_CSI, "\x1bP1;2|x\x1b\\", "\x1b_apc\x1b\\"])
def test_each_sequence_alone(bad):
    _no_controls(safe(f"name{bad}tail"))
    assert safe(f"name{bad}tail").startswith("name")
