"""Diagnosis of the real NCCL captures (tests/fixtures/nccl-2gpu: two ranks on a 2-GPU machine, made to fail on purpose)."""

from __future__ import annotations

import gzip
import io
import json
import sys
from pathlib import Path

import pytest

from sparktui.cli import main
from sparktui.commands.diagnose import analyse, to_json

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "nccl-2gpu"


def files(scenario: str) -> list[str]:
    return [str(p) for p in sorted(FIX.glob(f"{scenario}.rank*.log"))]


def ids(dg) -> list[str]:
    return [f.id for f in dg.findings]


def test_healthy_has_no_error_and_reports_socket_transport():
    dg = analyse(files("healthy"))
    assert [f for f in dg.findings if f.severity == "error"] == []
    summ = dg.summary()
    assert summ["transport"] == "NET/Socket"
    assert {r["rank"] for r in summ["nccl"]} == {0, 1}
    assert all(c["init"] == "COMPLETE" and c["rings_connected"] for r in summ["nccl"] for c in r["comms"])
    assert "nccl_socket_transport" in ids(dg)  # latent: NET/IB expected on a Spark pair
    ready = [m for m in dg.milestones() if m.id == "nccl_ready"]
    assert len(ready) == 2 and all(dict(m.detail)["transport"] == "NET/Socket" for m in ready)


def test_watchdog_rank0_alone():
    dg = analyse(files("watchdog")[:1])
    wd = [f for f in dg.findings if f.id == "nccl_watchdog_timeout"]
    assert len(wd) == 1 and wd[0].line == 82
    assert "SeqNum=2" in wd[0].evidence[0]
    # the peer closing its socket AFTER the timeout is a consequence, listed after it
    order = ids(dg)
    assert order.index("nccl_watchdog_timeout") < order.index("nccl_network_error")


def test_watchdog_both_ranks_says_rank1_never_reached_seqnum_2():
    dg = analyse(files("watchdog"))
    behind = dg.summary()["behind"]
    assert len(behind) == 1
    assert behind[0]["rank"] == 1 and behind[0]["source"].endswith("watchdog.rank1.log")
    assert "never reached SeqNum 2" in behind[0]["reason"]
    order = ids(dg)
    assert "nccl_watchdog_timeout" in order
    # the lagging rank is the root cause: before the watchdog it provoked
    assert order.index("nccl_collective_mismatch") < order.index("nccl_watchdog_timeout")


def test_bad_ifname_root_cause_ranks_before_the_traceback():
    dg = analyse(files("bad_ifname"))
    order = ids(dg)
    root = [i for i in ("nccl_network_error", "wrong_network_interface") if i in order]
    assert root
    tb = [f for f in dg.findings if f.evidence and f.evidence[0].startswith("Traceback")]
    assert tb, "the traceback gives a finding"
    assert order.index(root[0]) < order.index(tb[0].id)
    first = dg.findings[0]
    assert first.id == "wrong_network_interface" and "no socket interface found" in first.evidence[0]
    # one finding per traceback, anchored on the final exception line
    r0 = [f for f in dg.findings if f.source.endswith("rank0.log") and f.id == "nccl_comm_init_failed"]
    assert len(r0) == 1 and r0[0].line == 24
    assert any("invalid usage" in e for e in r0[0].evidence)


def test_init_hang_is_a_rendezvous_timeout():
    dg = analyse(files("init_hang"))
    assert ids(dg)[0] == "rendezvous_timeout"
    f = dg.findings[0]
    assert f.line == 21 and "1/2 clients joined" in " ".join(f.evidence)


def test_desync_names_the_rank_that_stopped_issuing_collectives():
    dg = analyse(files("desync_ras"))
    behind = dg.summary()["behind"]
    assert [b["rank"] for b in behind] == [1]
    assert "stopped issuing collectives" in behind[0]["reason"]
    f = dg.findings[0]
    assert f.id == "nccl_collective_mismatch" and f.source.endswith("desync_ras.rank1.log")


def test_busy_flood_is_healthy():
    dg = analyse(files("busy_ras"))
    assert [f.id for f in dg.findings if f.severity == "error"] == []
    assert dg.summary()["lines"] > 180_000


# --------------------------------------------------------------------------- the CLI contract


def run_cli(argv, capsys, stdin: bytes | None = None, monkeypatch=None):
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
    rc = main(["diagnose", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_cli_json_contract_and_exit_code(capsys):
    rc, out, err = run_cli([*files("bad_ifname"), "--json"], capsys)
    assert rc == 1 and err == ""
    doc = json.loads(out)
    assert set(doc) == {"findings", "milestones", "summary"}
    for f in doc["findings"]:
        assert set(f) == {"id", "severity", "title", "source", "line", "evidence", "advice"}
        assert f["severity"] in ("error", "warning", "info") and isinstance(f["evidence"], list)
        assert f["line"] is None or f["line"] >= 1
    assert doc["summary"]["counts"]["error"] >= 2
    assert doc["summary"]["files"] == files("bad_ifname")


def test_cli_healthy_exit_0_and_text_mode_without_colour(capsys):
    rc, out, _ = run_cli(files("healthy"), capsys)
    assert rc == 0
    assert "\x1b[" not in out  # not a TTY: no colour
    assert "NET/Socket" in out


def test_cli_stdin_and_gzip(capsys, monkeypatch, tmp_path):
    raw = (FIX / "init_hang.rank0.log").read_bytes()
    rc, out, _ = run_cli(["-", "--json"], capsys, stdin=gzip.compress(raw), monkeypatch=monkeypatch)
    assert rc == 1 and json.loads(out)["findings"][0]["id"] == "rendezvous_timeout"
    gz = tmp_path / "x.log.gz"
    gz.write_bytes(gzip.compress(raw))
    rc, out, _ = run_cli([str(gz), "--json"], capsys)
    assert rc == 1 and json.loads(out)["findings"][0]["source"] == str(gz)


@pytest.mark.parametrize("kind", ["missing", "directory", "truncated_gz"])
def test_cli_unreadable_input_is_one_line_exit_2(capsys, tmp_path, kind):
    if kind == "missing":
        path = tmp_path / "nope.log"
    elif kind == "directory":
        path = tmp_path
    else:
        path = tmp_path / "t.gz"
        path.write_bytes(gzip.compress(b"hello\n" * 1000)[:30])
    rc, out, err = run_cli([str(path)], capsys)
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and "Traceback" not in err and str(path) in err


def test_to_json_milestones_shape():
    doc = to_json(analyse(files("healthy")))
    assert doc["milestones"] and all({"id", "line", "text"} <= set(m) for m in doc["milestones"])
