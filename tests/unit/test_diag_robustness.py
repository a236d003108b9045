"""The streaming classifier on damaged input: prefixes, CRLF, ANSI, NUL, invalid UTF-8, huge
lines, arbitrary bytes, arbitrary batch boundaries.  Never an exception, one finding per traceback."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparktui.diagnosis.classifier import MAX_LINE, SourceScanner

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "nccl-2gpu"
BAD_IFNAME = (FIX / "bad_ifname.rank0.log").read_text().split("\n")
WATCHDOG = (FIX / "watchdog.rank0.log").read_text().split("\n")
TB_START = BAD_IFNAME.index("Traceback (most recent call last):")
TB_END = next(i for i, ln in enumerate(BAD_IFNAME) if ln.startswith("Bootstrap : no socket")) + 1
TRACEBACK = BAD_IFNAME[TB_START:TB_END]

PREFIXES = [
    "",
    "(RayWorkerWrapper pid=1234, ip=192.168.200.13) ",  # data only, never contacted
    "(EngineCore_DP0 pid=96) ",
    "2026-11-29T19:15:09.123456789Z ",
    "2026-11-29T19:15:09.123456789Z (RayWorkerWrapper pid=1234, ip=192.168.200.13) ",  # data only, never contacted
    "\x1b[36m(RayWorkerWrapper pid=581, ip=10.0.0.2)\x1b[0m ",  # data only, never contacted
    "(EngineCore_DP0 pid=96) ERROR 04-08 23:14:15 [core.py:708] ",
]


def scan(lines, source="s", batch=None):
    sc = SourceScanner(source)
    out = []
    if batch is None:
        out += sc.feed(lines)
    else:
        for i in range(0, len(lines), batch):
            out += sc.feed(lines[i:i + batch])
    out += sc.finish()
    return sc, [x for x in out if hasattr(x, "severity")]


def test_ray_prefix_and_docker_timestamp_on_every_line_of_a_traceback():
    for prefix in PREFIXES:
        lines = ["some startup line"] + [prefix + ln for ln in TRACEBACK] + ["after"]
        _, fs = scan(lines)
        assert [f.id for f in fs] == ["wrong_network_interface"] or [f.id for f in fs] == ["nccl_comm_init_failed"], prefix
        assert len(fs) == 1
        f = fs[0]
        assert f.line == 1 + TRACEBACK.index(next(t for t in TRACEBACK if t.startswith("torch.distributed"))) + 1
        assert f.evidence[0].endswith("Traceback (most recent call last):")


def test_crlf_ansi_nul_do_not_hide_a_finding():
    base = WATCHDOG[81]
    assert "Watchdog caught" in base
    for damaged in (base + "\r", "\x1b[31m" + base + "\x1b[0m", base.replace("Rank 0", "Ra\x00nk 0"),
                    "\x1b[1m[rank0]:\x1b[0m" + base[8:]):
        _, fs = scan(["x", damaged, "y"])
        assert [f.id for f in fs] == ["nccl_watchdog_timeout"], repr(damaged[:30])
        assert fs[0].line == 2
        assert "\x1b" not in fs[0].evidence[0] and "\x00" not in fs[0].evidence[0]


def test_invalid_utf8_bytes_in():
    raw = WATCHDOG[81].encode() + b"\xff\xfe\xc3("
    _, fs = scan([b"\x80\x81 garbage", raw])
    assert [f.id for f in fs] == ["nccl_watchdog_timeout"] and fs[0].line == 2


def test_ten_megabyte_line_costs_bounded_work():
    huge = "A" * (10 * 1024 * 1024)
    lines = [huge, huge + "Watchdog caught collective operation timeout", WATCHDOG[81], huge]
    sc, fs = scan(lines)
    # only the first MAX_LINE characters of a line are scanned: the message at the end of line 2
    # is past the cap, the one on line 3 is found; line numbering is unaffected
    assert [f.id for f in fs] == ["nccl_watchdog_timeout"] and fs[0].line == 3
    assert sc.lineno == 4 and all(len(t) <= MAX_LINE for _, t in sc.tail)
    assert MAX_LINE < 10 * 1024 * 1024
    _, fs = scan(["x" * 100 + "torch.OutOfMemoryError: CUDA out of memory" + "y" * (10 * 1024 * 1024)])
    assert [f.id for f in fs] == ["cuda_oom"] and len(fs[0].evidence[0]) <= 400  # evidence is capped too


def test_c_plus_plus_frame_block_is_one_finding():
    # watchdog.rank0.log repeats the watchdog message inside three C++ blocks with 7 frames each
    _, fs = scan(WATCHDOG)
    assert [f.id for f in fs].count("nccl_watchdog_timeout") == 1
    assert all(not e.startswith("frame #") for f in fs for e in f.evidence)


def test_batch_boundaries_do_not_change_the_result():
    lines = (FIX / "bad_ifname.rank1.log").read_text().split("\n") + WATCHDOG
    _, whole = scan(lines)
    for batch in (1, 2, 3, 7, 50):
        _, parts = scan(lines, batch=batch)
        assert [(f.id, f.line) for f in parts] == [(f.id, f.line) for f in whole], batch


def test_open_traceback_at_end_of_stream_is_closed_by_finish():
    sc = SourceScanner("s")
    out = sc.feed(TRACEBACK)
    assert not [x for x in out if hasattr(x, "severity")]  # its message may continue
    fin = sc.finish()
    assert [f.id for f in fin] in (["wrong_network_interface"], ["nccl_comm_init_failed"])


def test_chained_traceback_is_one_finding_on_the_last_exception():
    lines = [
        "Traceback (most recent call last):",
        '  File "/usr/lib/python3.12/site-packages/transformers/models/auto/configuration_auto.py", line 1, in x',
        "    config_class = CONFIG_MAPPING[config_dict['model_type']]",
        "KeyError: 'qwen3_5_moe'",
        "",
        "During handling of the above exception, another exception occurred:",
        "",
        "Traceback (most recent call last):",
        '  File "/usr/lib/python3.12/site-packages/vllm/config.py", line 2, in y',
        "    raise ValueError(",
        "ValueError: The checkpoint you are trying to load has model type `qwen3_5_moe` but Transformers does "
        "not recognize this architecture. This could be because of an issue with the checkpoint, or because "
        "your version of Transformers is out of date.",
        "INFO 03-27 10:00:00 [x.py:1] next record",
    ]
    _, fs = scan(lines)
    assert [(f.id, f.line) for f in fs] == [("transformers_version_mismatch", 11)]


def test_interleaved_lines_of_another_process_are_classified_on_their_own():
    other = "(RayWorkerWrapper pid=9, ip=10.0.0.3) ERROR 03-27 10:00:00 [w.py:1] RPC call to execute_model timed out."  # data only, never contacted
    lines = ["(EngineCore_DP0 pid=96) " + ln for ln in TRACEBACK[:3]] + [other] + \
            ["(EngineCore_DP0 pid=96) " + ln for ln in TRACEBACK[3:]]
    _, fs = scan(lines)
    assert sorted(f.id for f in fs) in (sorted(["rpc_timeout", "wrong_network_interface"]),
                                       sorted(["rpc_timeout", "nccl_comm_init_failed"]))


def test_unknown_exception_is_one_unhandled_finding():
    lines = ["Traceback (most recent call last):", '  File "a.py", line 1, in <module>', "    f()",
             "ZeroDivisionError: division by zero"]
    _, fs = scan(lines)
    assert [(f.id, f.line) for f in fs] == [("unhandled_exception", 4)]
    assert fs[0].evidence[-1] == "ZeroDivisionError: division by zero"


# --------------------------------------------------------------------------- property tests


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.binary(max_size=300), max_size=40), st.integers(min_value=1, max_value=9))
def test_arbitrary_bytes_never_raise(chunks, batch):
    sc = SourceScanner("fuzz")
    for i in range(0, len(chunks), batch):
        sc.feed(chunks[i:i + batch])
    sc.finish()
    assert sc.lineno == len(chunks)


_damage = st.sampled_from(["", "\r", "\x00", "\x1b[31m", "\xff", "\ufffd", "\t", "  ", "\x1b]0;t\x07"])


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    prefix=st.sampled_from(PREFIXES),
    damage=st.lists(st.tuples(st.integers(min_value=0, max_value=len(TRACEBACK) - 1), _damage), max_size=6),
    repeats=st.integers(min_value=1, max_value=3),
    noise=st.lists(st.sampled_from(WATCHDOG[:60] + ["", "plain text", "frame #3: x"]), max_size=5),
    batch=st.integers(min_value=1, max_value=40),
)
def test_real_tracebacks_with_random_prefixes_and_damage(prefix, damage, repeats, noise, batch):
    tb = [prefix + ln for ln in TRACEBACK]
    for idx, junk in damage:
        tb[idx] = tb[idx] + junk if idx % 2 else junk + tb[idx]
    lines: list[str] = []
    spans = []
    for _ in range(repeats):
        lines.extend(noise)
        lines.append("")
        spans.append((len(lines) + 1, len(lines) + len(tb)))
        lines.extend(tb)
        lines.append("INFO 03-27 10:00:00 [x.py:1] next record")
    sc = SourceScanner("prop")
    out = []
    for i in range(0, len(lines), batch):
        out += sc.feed(lines[i:i + batch])
    out += sc.finish()
    fs = [x for x in out if hasattr(x, "severity")]
    for lo, hi in spans:
        inside = [f for f in fs if f.line is not None and lo <= f.line <= hi]
        assert len(inside) <= 1, (lo, hi, [(f.id, f.line) for f in inside])
