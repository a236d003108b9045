"""Issue 12 round m: healthy traps made structural.  Loopback (or a bridge) for NCCL's sockets is
only wrong when a peer is on another machine; torch's W-level c10d connect notice is a retried
attempt, not a wrong interface; V0's "MQLLMEngine is already dead" is the engine dying; NCCL before
2.4 names the interfaces it uses on their own lines.

Each rule is checked on held-in excerpts of the corpus (fed without our header lines) and on a
benign or failing counterpart.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sparktui.diagnosis.catalogue import CatalogueError, default_catalogue, parse_catalogue

from corpus_helpers import bare_findings, diagnose_lines


def errors(rel: str, tmp_path: Path) -> list[str]:
    return [f.id for f in bare_findings(rel, tmp_path) if f.severity == "error"]


def ranked(rel: str, tmp_path: Path) -> list[str]:
    return [f.id for f in bare_findings(rel, tmp_path) if f.severity != "info"]


# ------------------------------------------------------------------ loopback on one host

def test_loopback_sockets_of_a_one_host_job_are_no_error(tmp_path):
    # nccl-tests on two local V100s with NCCL_SOCKET_IFNAME=lo: both processes on one host
    got = bare_findings("b/nccl_nccl_352_mpirun_lo_socket_no_plugin_no_ib_healthy", tmp_path)
    wni = [f for f in got if f.id == "wrong_network_interface"]
    assert wni and all(f.severity == "info" for f in wni)
    assert "one machine" in wni[0].title
    assert not [f for f in got if f.severity == "error"]


def test_wifi_bootstrap_on_one_workstation_leaves_the_hang_first(tmp_path):
    # two ranks on one host bootstrap over Wi-Fi and hang: the interface is no cause there
    assert ranked("a/vllm_vllm_5484_nccl_test_hang_wifi_bootstrap", tmp_path)[:1] == ["nccl_init_hang"]


def test_loopback_across_two_hosts_stays_the_root_cause(tmp_path):
    # Horovod on two machines: NCCL < 2.4 lists lo among its socket interfaces, connects are refused
    got = ranked("b/nccl_horovod_584_lo_interface_connect_refused_multinode", tmp_path)
    assert got[:1] == ["wrong_network_interface"]


def test_one_process_with_a_bigger_communicator_is_not_one_host():
    # a rank's own log of a two-rank communicator: the other rank may be on another machine
    lines = [
        "node1:100:100 [0] NCCL INFO Bootstrap : Using lo:127.0.0.1<0>",
        "node1:100:200 [0] NCCL INFO comm 0x55 rank 0 nranks 2 cudaDev 0 busId 1000 - Init START",
    ]
    got = [f for f in diagnose_lines(lines) if f.id == "wrong_network_interface"]
    assert got and got[0].severity == "error"


def test_a_missing_interface_on_one_host_is_still_an_error():
    # only the interface CHOICE patterns are excused on one host, not a name that does not exist
    lines = [
        "h:1:1 [0] NCCL INFO Bootstrap : Using lo:127.0.0.1<0>",
        "h:2:2 [1] NCCL INFO Bootstrap : Using lo:127.0.0.1<0>",
        'Error: Device "enp1s0f1np1" does not exist.',
    ]
    got = [f for f in diagnose_lines(lines) if f.id == "wrong_network_interface"]
    assert got and got[0].severity == "error"


# ------------------------------------------------------------------ torch's c10d connect notice

# verbatim from https://github.com/pytorch/PiPPy/issues/158 (a one-line paste: too short for the corpus)
C10D_NOTICE = ("[W socket.cpp:558] [c10d] The client socket has failed to connect to [localhost]:29500 "
               "(errno: 99 - Cannot assign requested address).")


def test_a_w_level_c10d_connect_notice_is_no_wrong_interface(tmp_path):
    assert [f.id for f in diagnose_lines([C10D_NOTICE]) if f.severity == "error"] == []
    assert errors("b/pytorch_llamafactory_7127_windows_c10d_10049_warning_healthy", tmp_path) == []


def test_cannot_assign_requested_address_elsewhere_is_still_a_wrong_interface():
    cat = default_catalogue()
    entry = cat["wrong_network_interface"]
    assert entry.search(C10D_NOTICE) is None
    # a bind to an address this host does not have: the E level, or another library's wording
    assert entry.search("[E socket.cpp:610] [c10d] bind: Cannot assign requested address") is not None
    assert entry.search("zmq.error.ZMQError: Cannot assign requested address") is not None


# ------------------------------------------------------------------ engine death, older wordings

def test_v0_launcher_finding_its_engine_dead_is_engine_dead(tmp_path):
    assert ranked("a/vllm_vllm_13939_mqllmengine_already_dead_after_requests", tmp_path)[:1] == ["engine_dead"]


def test_engine_dead_wording_needs_the_engine_name():
    entry = default_catalogue()["engine_dead"]
    assert entry.search("CRITICAL 02-25 11:11:34 launcher.py:101] MQLLMEngine is already dead, terminating server process")
    assert entry.search("INFO 02-25 11:11:34 worker.py:1] the old checkpoint is already dead weight") is None


def test_nccl_before_2_4_interface_lines_name_loopback():
    entry = default_catalogue()["wrong_network_interface"]
    assert entry.search("paigcr-b-gpu-1012:4152:4206 [0] NCCL INFO NET : Using interface lo:127.0.0.1<0>")
    assert entry.search("paigcr-b-gpu-1012:4152:4206 [0] NCCL INFO NET : Using interface eth0:10.151.40.240<0>") is None


# ------------------------------------------------------------------ the catalogue keys

_ENTRY = '''
[[finding]]
id = "x"
severity = "error"
title = "t"
explanation = "e"
advice = "a"
'''


def test_unless_and_single_host_ok_are_checked_regexes():
    with pytest.raises(CatalogueError, match="bad regex"):
        parse_catalogue(_ENTRY + "patterns = ['a']\nprefilter = ['a']\nunless = ['(']\n")
    with pytest.raises(CatalogueError, match="need line patterns"):
        parse_catalogue(_ENTRY + "derived = true\nsingle_host_ok = ['a']\n")
    cat = parse_catalogue(_ENTRY + "patterns = ['boom']\nprefilter = ['boom']\nunless = ['^retrying']\n")
    assert cat["x"].search("boom now") and cat["x"].search("retrying after boom") is None


# ------------------------------------------------------------------ Ray's exit-time worker notice

def test_the_drivers_warning_notice_of_a_task_worker_naming_no_cause_is_no_error(tmp_path):
    # old Ray printed it at every exit of a RaySGD run that went on to print success
    assert errors("b/ray_ray_8000_worker_died_warning_on_exit_success_healthy", tmp_path) == []


def test_a_worker_death_with_its_cause_or_as_an_exception_is_still_raised():
    entry = default_catalogue()["ray_worker_missing"]
    assert entry.search("(raylet) A worker died or was killed while executing a task by an unexpected system error.")
    assert entry.search("ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.")
    assert entry.search("2020-04-13 15:35:00,032 WARNING worker.py:1072 -- A worker died or was killed while "
                        "executing task ffffffffffffffff45b95b1c0100.") is None


# ------------------------------------------------------------------ the level a line was logged at

def _scan(cat, lines: list[str]):
    from sparktui.diagnosis.classifier import SourceScanner

    sc = SourceScanner("t", catalogue=cat)
    sc.feed(lines)
    sc.finish()
    return [(f.id, f.severity) for f in sc.findings]


def test_an_error_entry_on_an_info_or_warning_line_is_a_warning_and_an_error_line_still_counts():
    cat = parse_catalogue(_ENTRY + "patterns = ['out of memory']\nprefilter = ['out of memory']\n")
    info = "INFO 08-07 00:12:04 model_runner.py:984] If you are running out of memory, lower it."
    warn = "2021-01-20 16:57:03,655 WARNING services.py:1628 -- the run went out of memory once"
    err = "ERROR 08-07 00:12:09 worker.py:12] CUDA out of memory"
    assert _scan(cat, [info]) == [("x", "warning")]
    assert _scan(cat, [warn]) == [("x", "warning")]
    # the quiet sighting does not swallow the error line of the same id that follows it
    assert _scan(cat, [info, err]) == [("x", "warning"), ("x", "error")]
    assert _scan(cat, [err]) == [("x", "error")]


def test_info_lines_and_warning_lines_keep_a_failure_that_its_source_reports_below_error():
    cat = parse_catalogue(_ENTRY + "patterns = ['boom']\nprefilter = ['boom']\ninfo_lines = true\n")
    assert _scan(cat, ["INFO 01-01 00:00:00 a.py:1] boom"]) == [("x", "error")]
    assert _scan(cat, ["WARNING 01-01 00:00:00 a.py:1] boom"]) == [("x", "warning")]
    with pytest.raises(CatalogueError, match="true or false"):
        parse_catalogue(_ENTRY + "patterns = ['a']\nprefilter = ['a']\nwarning_lines = 'yes'\n")


def test_failures_their_sources_log_below_error_stay_errors(tmp_path):
    # Ray's core worker logs the tasks it fails for a dead actor at I; vLLM logs the failed import
    # of its compiled ops at WARNING; Ray logs a GCS it cannot reach at WARNING while it retries
    assert errors("b/ray_ray_18586_actor_dead_core_worker_log", tmp_path)[:1] == ["ray_worker_missing"]
    assert errors("b/ray_ray_44112_skein_worker_ip_no_raylet", tmp_path)[:1] == ["ray_ip_mismatch"]
    assert errors("a/vllm_vllm_5501_c_abi3_undefined_symbol_warning", tmp_path)[:1] == ["broken_install"]
    assert errors("b/ray_ray_29412_raylet_terminated_unexpectedly", tmp_path)[:1] == ["ray_worker_missing"]
