"""A log as users paste it (issue 31, found by scripts/failing_stress.py): what a terminal adds after
it (a prompt, Ctrl+C and Python's KeyboardInterrupt), the formats a collector wraps it in (the CRI
log files of containerd and CRI-O, docker's json-file log), and a stamp on every line that no known
format reads.  Each reading has its benign counterpart: a real healthy server stopped by a request,
real progress lines, a structured application log, known prefixes left to their own reader.

Failing lines are held-in corpus cases; the KeyboardInterrupt traceback is what a real CPython
prints when a real process gets SIGINT (made by the test).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from sparktui.commands.diagnose import analyse
from sparktui.diagnosis import lineprefix, paste
from sparktui.diagnosis import last_words as lw
from sparktui.diagnosis.end_phase import default_end_phases, log_end

from corpus_helpers import ROOT, body, diagnose_lines

VLLM_CPU = ROOT / "tests" / "fixtures" / "vllm-cpu"
PROMPT = "user@spark1:~/vllm$ "


@pytest.fixture(scope="module")
def ctrl_c() -> list[str]:
    """What a terminal shows when a person presses Ctrl+C on a Python program that waits: the echoed
    ^C in front of the real interpreter's KeyboardInterrupt traceback, then the prompt."""
    p = subprocess.Popen([sys.executable, "-u", "-c", "import time\nprint('ready', flush=True)\ntime.sleep(60)\n"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    p.send_signal(signal.SIGINT)
    out = p.communicate(timeout=30)[0].splitlines()
    assert out[-1] == "KeyboardInterrupt" and out[0].startswith("Traceback")
    return ["^C" + out[0], *out[1:], PROMPT]


def _named(lines: list[str]) -> list[str]:
    return [f.id for f in diagnose_lines(lines) if f.severity != "info"]


def _file(tmp_path: Path, lines: list[str], name: str = "pasted.log", end: str = "\n") -> str:
    p = tmp_path / name
    p.write_bytes((end.join(lines) + end).encode("utf-8"))
    return str(p)


# ------------------------------------------------------------------- the terminal after the log
@pytest.mark.parametrize("line", [PROMPT, "root@3f2a9c:/workspace# ", "(venv) me@box:~/x$ python serve.py", "$ ",
                                  "[me@node01 ~]$ ls", "PS C:\\Users\\me> ", "^C", ""])
def test_a_prompt_or_an_echoed_ctrl_c_is_the_terminal_not_the_log(line):
    assert lw.terminal_residue(line)


@pytest.mark.parametrize("line", ["INFO 08-31 09:50:46 utils.py:975] Found nccl", "Loading $ 3 shards",
                                  "alice@example.com wrote:", "worker@node1: 12 tasks", "KeyboardInterrupt"])
def test_log_lines_that_look_alike_are_not_the_terminal(line):
    assert not lw.terminal_residue(line)


@pytest.mark.parametrize("case, expect", [
    ("a/vllm_vllm_8058_hang_nccl_step_tp2", "nccl_init_hang"),  # stops in NCCL bootstrap
    ("a/sglang_sglang_17157_dp_encoder_capture_hang", "suspected_hang"),  # stops in CUDA graph capture
    ("b/pytorch_powersgd_21_stale_file_init_barrier", "rendezvous_timeout"),  # stops in the store barrier
])
def test_a_hang_a_person_ended_with_ctrl_c_is_still_the_hang(case, expect, ctrl_c):
    lines = body(case)
    assert _named(lines)[:1] == [expect]
    assert _named([*lines, "^C"])[:1] == [expect]
    assert _named([*lines, PROMPT])[:1] == [expect]
    found = [f for f in diagnose_lines([*lines, *ctrl_c]) if f.id == expect]
    assert found and found[0].severity == "warning"
    assert any("a stop was asked for" in e for e in found[0].evidence)


@pytest.mark.parametrize("case, expect", [
    ("a/vllm_akash_543_rank0_pynccl_comminitrank", "nccl_comm_init_failed"),  # frames cut, then Ctrl+C
    ("a/vllm_ipexllm_13287_glm41v_unsupported", "unsupported_architecture"),
    ("a/gpustack_gpustack_2023_crosshost_vllm_pp_group_nccl", "nccl_comm_init_failed"),
])
def test_a_failure_then_ctrl_c_is_still_the_failure(case, expect, ctrl_c):
    lines = body(case)
    assert _named(lines)[:1] == [expect]
    assert _named([*lines, *ctrl_c])[:1] == [expect]


def test_ctrl_c_after_a_wait_that_is_not_a_phase_says_nothing_is_wrong(ctrl_c):
    # the real vLLM serving and idle, then Ctrl+C: no phase was open, nothing failed
    lines = (VLLM_CPU / "serve.log").read_text(encoding="utf-8").splitlines()
    up = next(k for k, t in enumerate(lines) if "Application startup complete" in t)
    assert [f.id for f in diagnose_lines([*lines[:up + 1], *ctrl_c]) if f.severity != "info"] == []
    assert lw.failure(list(enumerate([*lines[:up + 1], *ctrl_c], 1))) is None


@pytest.mark.parametrize("name", ["stopped_startup_sigint.log", "stopped_startup_docker_stop.log"])
def test_the_real_vllm_stopped_during_start_up_is_no_failure(name):
    # recorded from the real server (scripts/record_vllm_failures.py): a stop asked for during
    # start-up is not a failure, and not a hang where the log left no phase open
    dg = analyse([str(VLLM_CPU / name)])
    assert [f.id for f in dg.findings if f.severity == "error"] == []
    assert [f.id for f in dg.findings if f.severity == "warning"] == []


def test_the_log_end_sets_aside_a_stop_only_when_nothing_after_it_is_in_a_phase():
    eps = default_end_phases()
    hang = body("a/vllm_vllm_8058_hang_nccl_step_tp2")
    w = list(enumerate([*hang, "^C", "INFO:     Shutting down", PROMPT], 1))
    end = log_end(w, eps)
    assert end.stop == (len(hang) + 1, "^C") and end.lines[-1][1] == hang[-1]
    # the process went on into a phase after the request: its end is that phase line, no stop
    w2 = list(enumerate(["Received SIGTERM, shutting down", *hang], 1))
    end2 = log_end(w2, eps)
    assert end2.stop is None and end2.lines[-1][1] == hang[-1]


# ------------------------------------------------------------------- collectors' formats
def test_the_cri_format_of_a_pod_log_file_is_a_prefix():
    line = "2025-11-29T19:11:29.002992818Z stderr F RuntimeError: NCCL error: unhandled system error"
    assert lineprefix.split(line)[1] == "RuntimeError: NCCL error: unhandled system error"
    # benign: the words themselves in a message are not a prefix
    assert lineprefix.split("stderr F is a flag")[1] == "stderr F is a flag"


def test_a_failure_in_a_pod_log_file_is_named_as_without_it(tmp_path):
    lines = body("a/vllm_msswift_3739_world_size_not_tp_times_pp")
    plain = [f.id for f in analyse([_file(tmp_path, lines)]).findings if f.severity != "info"]
    cri = [f"2025-11-29T19:11:{k % 60:02d}.002992818Z stderr F {t}" for k, t in enumerate(lines)]
    got = [f.id for f in analyse([_file(tmp_path, cri, "cri.log")]).findings if f.severity != "info"]
    assert plain[:1] == ["world_size_mismatch"] and got[:1] == plain[:1]


def _docker_json(lines: list[str]) -> list[str]:
    # the json-file driver's records, in its own key order and compact separators
    return [json.dumps({"log": t + "\n", "stream": "stderr", "time": f"2025-11-29T19:11:{k % 60:02d}.002992818Z"},
                       separators=(",", ":")) for k, t in enumerate(lines)]


def test_docker_json_file_logs_are_read_line_by_line(tmp_path):
    lines = body("a/vllm_glm4_510_v100_bf16_dtype")
    wrapped = _docker_json(lines)
    assert paste.docker_json(wrapped)
    assert paste.from_docker_json(wrapped) == lines
    got = [f.id for f in analyse([_file(tmp_path, wrapped)]).findings if f.severity != "info"]
    assert got[:1] == ["dtype_unsupported_gpu"]


def test_a_structured_application_log_is_not_taken_for_docker_json():
    # JSON lines of an application's own logger keep their fields (their level is read elsewhere)
    app = ['{"level":"error","msg":"engine died","ts":1732907489.0}', '{"level":"info","msg":"retrying"}'] * 3
    assert not paste.docker_json(app)
    # a log with a few docker records pasted into it is read as it is
    mixed = body("a/vllm_glm4_510_v100_bf16_dtype") + _docker_json(["x"])
    assert not paste.docker_json(mixed)
    # a broken record passes through untouched
    assert paste.from_docker_json(['{"log":"cut']) == ['{"log":"cut']


# ------------------------------------------------------------------- a stamp on every line
@pytest.mark.parametrize("stamp", ["19:11:29 ", "[19:11:29.120] ", "[worker]: ", "node-a> ", "* ", "- "])
def test_a_stamp_on_every_line_is_read_off_the_paste(stamp, tmp_path):
    lines = body("a/vllm_vllm_8422_llm_class_stuck_after_init_complete")
    stamped = [stamp + t for t in lines]
    rx = paste.paste_prefix(stamped)
    assert rx is not None and paste.strip_prefix(stamped, rx) == lines
    got = [f.id for f in analyse([_file(tmp_path, stamped)]).findings if f.severity != "info"]
    assert got[:1] == ["nccl_init_hang"]


def test_repeated_words_of_a_program_are_no_stamp():
    # real progress lines all start alike: a phrase, not a stamp
    bars = [t for t in body("a/vllm_vllmascend_6734_glm5_loading_stuck") if t.startswith("Loading safetensors")]
    assert len(bars) >= 10 and paste.paste_prefix(bars) is None


def test_known_prefixes_stay_with_their_reader_and_a_stamp_needs_nearly_every_line():
    compose = ["vllm-1  | " + t for t in body("a/vllm_vllm_8422_llm_class_stuck_after_init_complete")]
    assert paste.paste_prefix(compose) is None  # docker compose's service: lineprefix reads it
    half = [("[worker]: " if k % 2 else "") + t
            for k, t in enumerate(body("a/vllm_vllm_8422_llm_class_stuck_after_init_complete"))]
    assert paste.paste_prefix(half) is None


# ------------------------------------------------------------------- colour codes copied as text
@pytest.mark.parametrize("esc", ["", "ESC", "^["])
def test_colour_codes_that_lost_their_esc_are_read_off(esc, tmp_path):
    lines = body("a/vllm_msswift_3739_world_size_not_tp_times_pp")
    # the exception's class and torch's level letter coloured in place, as a terminal shows them
    coloured = [t.replace("RuntimeError", f"{esc}[1;31mRuntimeError{esc}[0m", 1).replace("W0401", f"{esc}[33mW0401{esc}[0m", 1)
                for t in lines]
    assert coloured != lines
    assert paste.visible_colour(coloured)
    got = [f.id for f in analyse([_file(tmp_path, coloured)]).findings if f.severity != "info"]
    assert got[:1] == ["world_size_mismatch"]


def test_brackets_that_are_no_colour_code_stay():
    lines = ["eta [10m elapsed]", "step [3m] of [0 1]", "INFO 08-31 09:50:46 utils.py:975] Found nccl"]
    assert not paste.visible_colour(lines)
    assert paste.strip_visible_colour(["x[1m y"]) == ["x[1m y"]  # no reset on the line: kept


def test_real_escapes_are_left_to_the_line_cleaner():
    # a terminal's copy that kept its ESC bytes: clean() strips those; the text reading stays out
    assert not paste.visible_colour(["\x1b[31mERROR\x1b[0m boom", "\x1b[32mINFO\x1b[0m ok"] * 3)


# ------------------------------------------------------------------- a report pasted after the log
ENV_REPORT = (ROOT / "tests" / "fixtures" / "collect_env" / "torch-2.13-cpu.txt").read_text().splitlines()


@pytest.mark.parametrize("case, expect", [
    ("a/vllm_glm4_510_v100_bf16_dtype", "dtype_unsupported_gpu"),  # an exception, then the report
    ("a/vllm_vllm_8058_hang_nccl_step_tp2", "nccl_init_hang"),  # a hang, then the report
    ("a/vllm_akash_543_rank0_pynccl_comminitrank", "nccl_comm_init_failed"),  # cut frames, then the report
    # a fact 9 lines above the report's 74 (the last-words window once held 80 lines: it was cut away)
    ("a/triton_hugectr_backend_42_sigbus_ncclgroupend_shm", "nccl_shm_error"),
    ("a/trtllm_tensorrt_llm_815_engine_trtllm_071_vs_backend_070", "trt_engine_version_mismatch"),
])
def test_an_environment_report_after_the_log_is_not_its_last_words(case, expect):
    lines = body(case)
    assert _named(lines)[:1] == [expect]
    assert _named([*lines, "", *ENV_REPORT])[:1] == [expect]
    cut = lw.before_report(list(enumerate([*lines, "", *ENV_REPORT], 1)))
    assert cut is not None and [t for _, t in cut[0] if t.strip()][-1] == lines[-1]


def test_a_healthy_log_with_a_report_after_it_stays_healthy():
    lines = (VLLM_CPU / "serve.log").read_text(encoding="utf-8").splitlines()
    up = next(k for k, t in enumerate(lines) if "Application startup complete" in t)
    assert _named([*lines[:up + 1], "", *ENV_REPORT]) == []


def test_a_programs_own_indented_listing_is_no_pasted_report():
    # held-in healthy: torchelastic prints its launch configuration as "  key   : value" rows
    lines = body("b/pytorch_kubeflow_1504_elastic_launch_config_c10d_host_healthy")
    assert lw.before_report(list(enumerate(lines, 1))) is None
    assert "error" not in {f.severity for f in diagnose_lines(lines)}
    # a log's own "Key: value" lines alone are no report (the padded rows make one)
    assert lw.before_report(list(enumerate(["INFO start", "RuntimeError: boom", "Model: x", "Device: y"], 1))) is None


# ------------------------------------------------------------------- a post's markup, line numbers
@pytest.mark.parametrize("line", ["```", "```text", "~~~", "</details>", "<details>", "<summary>Full log</summary>",
                                  "</pre>", "[/code]"])
def test_a_posts_markup_around_the_log_is_not_the_log(line):
    assert lw.terminal_residue(line)


@pytest.mark.parametrize("line", ["``` not a fence", "<summary>", "details>", "print('```')"])
def test_markup_inside_a_line_is_the_log(line):
    assert not lw.terminal_residue(line)


@pytest.mark.parametrize("case, expect", [
    ("a/vllm_vllm_8058_hang_nccl_step_tp2", "nccl_init_hang"),
    ("a/vllm_glm4_510_v100_bf16_dtype", "dtype_unsupported_gpu"),
])
def test_a_log_in_an_issues_collapsed_section_is_read_as_the_log(case, expect):
    lines = body(case)
    wrapped = ["<details>", "<summary>Full log</summary>", "", "```text", *lines, "```", "", "</details>"]
    assert _named(wrapped)[:1] == [expect]


@pytest.mark.parametrize("fmt", ["{:6d}\t", "{}: ", "{:>4} | "])
def test_line_numbers_counting_up_are_read_off(fmt, tmp_path):
    lines = body("a/vllm_vllm_8422_llm_class_stuck_after_init_complete")
    numbered = [fmt.format(k + 1) + t for k, t in enumerate(lines)]
    rx = paste.paste_prefix(numbered)
    assert rx is not None and paste.strip_prefix(numbered, rx) == lines
    got = [f.id for f in analyse([_file(tmp_path, numbered)]).findings if f.severity != "info"]
    assert got[:1] == ["nccl_init_hang"]


def test_numbers_that_do_not_count_up_are_the_log():
    # nccl-tests' size column doubles from row to row: a table, not line numbers
    table = [t for t in body("b/nccl_tinygrad-kernel-modules_45_allreduce_4090_stops") if t.strip()[:1].isdigit()]
    assert len(table) >= 3 and paste.paste_prefix(table) is None
    # srun's task prefix on two interleaved ranks: "0: ", "1: ", "0: ", ... (lineprefix reads it)
    ranks = [f"{k % 2}: line {k}" for k in range(12)]
    assert paste.paste_prefix(ranks) is None


# ------------------------------------------------------------------- a terminal's hard wrap
def test_a_paste_hard_wrapped_at_the_terminals_width_is_joined_back(tmp_path):
    # held-in a/vllm_arcb70_4_kv_cache_10mib_short is itself such a paste (119 columns)
    lines = body("a/vllm_arcb70_4_kv_cache_10mib_short")
    width = paste.hard_wrap_width(lines)
    assert width == 119
    joined, held = paste.unwrap(lines, width, 1)
    assert held is None
    assert any(t.endswith("self._initialize_kv_caches(vllm_config)") for _, t in joined)
    # a joined line keeps the file's number of its first piece
    n, t = next((n, t) for n, t in joined if "_initialize_kv_caches" in t)
    assert lines[n - 1] == t[:width]


def test_wrapping_a_log_ourselves_is_undone(tmp_path):
    lines = body("a/vllm_vllm_10626_groupcoordinator_pynccl_init")
    width = 100
    wrapped = [ln[i:i + width] for ln in lines for i in range(0, len(ln), width)] or [""]
    assert paste.hard_wrap_width(wrapped) == width
    joined, held = paste.unwrap(wrapped, width, 1)
    assert [t for _, t in joined] + ([held[1]] if held else []) == lines
    got = [f.id for f in analyse([_file(tmp_path, wrapped)]).findings if f.severity != "info"]
    assert got[:1] == ["nccl_comm_init_failed"]


@pytest.mark.parametrize("case, expect", [
    # held-in b/pytorch_cppo_6_tcpstore_client_timeout ends in torch's C++ frames; wrapped at 100 columns
    # every frame's tail starts "ython3.11/...", lowercase as the frames themselves: the start shape
    # alone did not tell a piece from a line, a shorter line starting unlike its predecessor does
    ("b/pytorch_cppo_6_tcpstore_client_timeout", "rendezvous_timeout"),
    # held-in b/pytorch_basicsr_737_watchdog_allreduce: each record is three pieces, two of them 100
    # wide, so half the lines at the width are followed by another at it; the pieces start unlike any
    # record of the paste (a record starts "[rank")
    ("b/pytorch_basicsr_737_watchdog_allreduce", "nccl_watchdog_timeout"),
])
def test_a_log_wrapped_at_100_columns_is_joined_back(case, expect, tmp_path):
    lines = body(case)
    wrapped = [ln[i:i + 100] for ln in lines for i in range(0, len(ln), 100)] or [""]
    assert paste.hard_wrap_width(wrapped) == 100
    got = [f.id for f in analyse([_file(tmp_path, wrapped)]).findings if f.severity != "info"]
    assert got[:1] == [expect], got


# open-r1#620 as its reporter pasted it: torch's watchdog lines broken by the terminal inside a word
_OPEN_R1_620 = [
    "[rank2]:[E424 01:11:21.160832730 ProcessGroupNCCL.cpp:629] [Rank 2] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=4, OpTy",
    "pe=BROADCAST, NumelIn=112, NumelOut=112, Timeout(ms)=1800000) ran for 1800010 milliseconds before timing out.",
    "[rank3]:[E424 01:11:21.160815008 ProcessGroupNCCL.cpp:629] [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=4, OpTy",
    "pe=BROADCAST, NumelIn=112, NumelOut=112, Timeout(ms)=1800000) ran for 1800011 milliseconds before timing out.",
]


def test_one_or_two_long_lines_broken_inside_a_word_are_a_wrap():
    width = len(_OPEN_R1_620[0])
    for lines in (_OPEN_R1_620, _OPEN_R1_620[:2]):
        assert paste.hard_wrap_width(lines) == width
        joined, held = paste.unwrap(lines, width, 1)
        assert held is None and "OpType=BROADCAST" in joined[0][1]


def test_a_short_pastes_longest_line_followed_by_a_record_is_no_wrap():
    # held-in a/vllm_vllm_10517_kv_fits_20k: its 218-column engine line is followed by a line that starts
    # capitalised after a number (no word broken); a/vllm_glm4_510_v100_bf16_dtype: a 628-column line
    # (wider than a terminal) followed by the ValueError
    for case in ("a/vllm_vllm_10517_kv_fits_20k", "a/vllm_glm4_510_v100_bf16_dtype"):
        assert paste.hard_wrap_width(body(case)) is None
    # one long line whose next line is a record by its look (a level word, an exception)
    long = "x" * 99 + "a"
    assert paste.hard_wrap_width(["start", long, "ERROR something", "end"]) is None
    assert paste.hard_wrap_width(["start", long, "ValueError: bad", "end"]) is None
    assert paste.hard_wrap_width(["start", long, "  indented frame", "end"]) is None


def test_equal_longest_lines_followed_by_lines_that_start_like_them_are_no_wrap():
    # a log whose longest lines repeat (one message, each at the same length) and whose next lines
    # start like them (the same logger's header): no piece of a wrap
    head = "(Worker_TP0 pid=40) INFO 12-07 13:16:54 [x.py:1] "
    lines = []
    for k in range(6):
        lines += [head + "y" * (120 - len(head)), head + f"step {k}"]
    assert paste.hard_wrap_width(lines) is None


@pytest.mark.parametrize("case", ["a/vllm_vllm_6689_llama31_idle_metrics_healthy",
                                  "b/nccl_nccl-tests_293_allreduce_table_small_sizes_healthy",
                                  "b/other_mooncake_3484_collective_bench_table_healthy",
                                  "a/spark_inferencesnaps_143_vram_detection_gb10"])
def test_rows_as_long_as_the_longest_line_that_start_alike_are_no_wrap(case):
    # held-in: metrics lines, benchmark tables, nvidia-smi's table: many lines at the maximum length
    lines = body(case)
    longest = max(map(len, lines))
    assert sum(1 for t in lines if len(t) == longest) >= 3
    assert paste.hard_wrap_width(lines) is None


def test_a_hard_wrapped_paste_with_windows_line_ends_is_joined_without_its_crs(tmp_path):
    lines = body("a/vllm_arcb70_4_kv_cache_10mib_short")
    plain = [f.id for f in analyse([_file(tmp_path, lines)]).findings if f.severity != "info"]
    crlf = [f.id for f in analyse([_file(tmp_path, lines, "crlf.log", end="\r\n")]).findings if f.severity != "info"]
    assert plain[:1] == ["kv_cache_oom"] and crlf[:1] == plain[:1]
    joined, _ = paste.unwrap([t + "\r" for t in lines], 119, 1)
    assert not any("\r" in t for _, t in joined)


# ------------------------------------------------------------------- a notebook's traceback
IPYTHON = ROOT / "tests" / "fixtures" / "ipython" / "nccl_error.ipython8.txt"


def test_ipythons_traceback_is_read_as_cpythons():
    lines = IPYTHON.read_text().splitlines()
    assert paste.ipython_tracebacks(lines)
    cpy = paste.from_ipython(lines)
    assert len(cpy) == len(lines)  # line for line: findings keep the file's numbers
    assert "Traceback (most recent call last):" in cpy
    assert '  File "/tmp/ipy_case.py", line 2, in init' in cpy
    assert cpy[-1] == lines[-1]  # the exception line is CPython's already
    dg = analyse([str(IPYTHON)])
    errs = [f for f in dg.findings if f.severity == "error"]
    assert [f.id for f in errs] == ["nccl_comm_init_failed"] and errs[0].line == len(lines)


def test_a_log_without_ipythons_head_is_left_alone():
    lines = body("a/vllm_vllm_10626_groupcoordinator_pynccl_init")
    assert not paste.ipython_tracebacks(lines)
    # numbered lines and arrows outside an IPython traceback are the log's
    other = ["----> 5 looks like a frame", "      4 context", "RuntimeError: boom"]
    assert paste.from_ipython(other) == other
