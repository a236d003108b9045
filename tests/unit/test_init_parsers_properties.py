"""Hypothesis over the parsers `sparktui init` feeds a stranger's bytes (issue 30, "Also"): the ssh
config's Host names, and what a node answers to the probes (`ip -j addr`, `ibdev2netdev`, the
socket and model-search scripts, `hostname; uname -m`, config.json, a weights index, `find -printf
%s`).  Each returns data of the documented types or raises its own one-line error; nothing else, and
an endless answer is not read past its bound."""

from __future__ import annotations

import json
import tracemalloc

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from sparktui.commands.init import host_aliases
from sparktui.model import LinkInfo
from sparktui.probes.inventory import (MAX_MODELS, RdmaDevice, parse_hostname_arch, parse_ibdev2netdev_all,
                                       parse_model_paths, parse_sockets)
from sparktui.probes.links import parse_ip_addr
from sparktui.probes.model import MAX_JSON_BYTES, ModelProbeError, parse_config, parse_index, parse_sizes

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

scalars = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(1 << 70), max_value=1 << 70),
                    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12),
                    st.sampled_from(["", "²", "1e999", "UP", "eth0", "10.0.0.1", "<none>:<none>"]))
values = st.one_of(scalars, st.recursive(scalars, lambda kids: st.one_of(
    st.lists(kids, max_size=4), st.dictionaries(st.text(max_size=10), kids, max_size=4)), max_leaves=12))


def _keyed(keys: list[str]):
    """JSON objects with the keys a parser looks for, holding any value (the likely breakage)."""
    return st.dictionaries(st.sampled_from(keys), values, max_size=len(keys))


def _json_text(shape) -> st.SearchStrategy[str]:
    # json.dumps writes NaN/Infinity as Python's json.loads reads them back: a node could too
    return st.one_of(shape.map(json.dumps), st.text(max_size=40),
                     st.integers(min_value=1, max_value=3000).map(lambda n: "[" * n + "]" * n),
                     st.sampled_from(["[1e999]", '{"a": 1', "\ufeff[]", "[" + "9" * 5000 + "]"]))


def _one_line(exc: BaseException) -> None:
    msg = str(exc)
    assert msg and "\n" not in msg and len(msg) < 400, msg


# ------------------------------------------------------------------ ssh config
ssh_lines = st.one_of(
    st.text(max_size=30),
    st.builds(lambda kw, sep, names: f"{kw}{sep}{' '.join(names)}",
              st.sampled_from(["Host", "host", "HOST", "Match", "HostName", "  Host"]),
              st.sampled_from([" ", "=", " = ", "\t"]),
              st.lists(st.text(min_size=1, max_size=8), max_size=4)))


@SETTINGS
@given(st.lists(ssh_lines, max_size=20).map("\n".join))
def test_host_aliases_gives_concrete_names_only(text):
    out = host_aliases(text)
    assert len(out) == len(set(out)) and len(out) <= len(text.split())
    for name in out:
        assert isinstance(name, str) and name and not any(c in name for c in "*?!")
        assert name == name.strip() and len(name.split()) == 1


# ------------------------------------------------------------------ ip -j addr
addr_info = _keyed(["local", "prefixlen", "family"])
iface = st.one_of(values, _keyed(["ifname", "mtu", "operstate", "addr_info"]),
                  st.builds(lambda d, a: {**d, "addr_info": a}, _keyed(["ifname", "mtu", "operstate"]),
                            st.lists(st.one_of(addr_info, values), max_size=3)))


@SETTINGS
@given(_json_text(st.one_of(st.lists(iface, max_size=4), values)))
def test_ip_addr_parser_gives_links_or_one_line(text):
    try:
        links = parse_ip_addr(text)
    except ValueError as exc:
        _one_line(exc)
        return
    for ln in links:
        assert isinstance(ln, LinkInfo) and isinstance(ln.name, str) and isinstance(ln.state, str)
        assert ln.mtu is None or (isinstance(ln.mtu, int) and not isinstance(ln.mtu, bool))
        assert all(isinstance(a, str) for a in ln.addresses)


# ------------------------------------------------------------------ the shell probes' text
probe_text = st.one_of(st.text(max_size=200), st.lists(st.one_of(
    st.text(max_size=20), st.sampled_from(["sock /run/docker.sock", "env ", "other tcp://x", "sock",
                                           "rocep1 port 1 ==> enp1 (Up)", "a port 9 ==> b (Down)"])),
    max_size=20).map("\n".join))


@SETTINGS
@given(probe_text)
def test_shell_probe_parsers_give_their_types(text):
    host, arch = parse_hostname_arch(text)
    assert isinstance(host, str) and isinstance(arch, str)
    found, env_sock, other = parse_sockets(text)
    assert all(isinstance(s, str) for s in found) and isinstance(env_sock, (str, type(None)))
    assert isinstance(other, (str, type(None)))
    paths = parse_model_paths(text)
    assert len(paths) <= MAX_MODELS and all(isinstance(p, str) and p.strip() for p in paths)
    for d in parse_ibdev2netdev_all(text):
        assert isinstance(d, RdmaDevice) and isinstance(d.name, str) and isinstance(d.netdev, str)
    sizes = parse_sizes(text)
    assert all(isinstance(n, int) and 0 <= n < 10**20 for n in sizes)


# ------------------------------------------------------------------ config.json and the index
def _bytes(shape):
    return st.one_of(_json_text(shape).map(lambda t: t.encode("utf-8", "surrogatepass")), st.binary(max_size=40))


@SETTINGS
@given(_bytes(st.one_of(_keyed(["architectures", "model_type", "torch_dtype"]), values)))
def test_config_json_parser_gives_a_model_or_one_line(raw):
    try:
        arches, model_type, config = parse_config(raw)
    except ModelProbeError as exc:
        _one_line(exc)
        return
    assert isinstance(arches, tuple) and all(isinstance(a, str) for a in arches)
    assert isinstance(model_type, str) and isinstance(config, dict)


@SETTINGS
@given(_bytes(st.one_of(_keyed(["metadata", "weight_map"]),
                        st.builds(lambda m, w: {"metadata": m, "weight_map": w},
                                  st.one_of(_keyed(["total_size"]), values), values))))
@example(b'{"metadata": {"total_size": 0.5}, "weight_map": null}')  # found by CI: int(0.5) is a size of 0
def test_weights_index_parser_gives_a_size_or_one_line(raw):
    try:
        total, shards = parse_index(raw)
    except ModelProbeError as exc:
        _one_line(exc)
        return
    assert total is None or (isinstance(total, int) and 0 < total < 2**63)
    assert isinstance(shards, int) and shards >= 0


@pytest.mark.parametrize("raw", [b'{"metadata": {"total_size": 1e999}}', b'{"weight_map": {"a": []}}',
                                 b"[" * 100_000 + b"]" * 100_000])
def test_index_cases_that_crashed_init(raw):
    """Each of these ended `init` (and doctor/validate's model check) in a traceback."""
    try:
        total, _ = parse_index(raw)
    except ModelProbeError as exc:
        _one_line(exc)
    else:
        assert total is None


def test_sizes_skip_unicode_digits_and_absurd_numbers():
    assert parse_sizes("12\n²\n١٢\n" + "9" * 5000 + "\n34\n") == [12, 34]


def test_an_endless_answer_is_parsed_within_bounded_memory():
    """A node that answers 64 MiB: each parser reads to its bound, not the whole answer."""
    big = "x" * (64 << 20)
    raw = b" " * (MAX_JSON_BYTES + 1)
    tracemalloc.start()
    try:
        parse_model_paths(big)
        parse_sockets(big)
        parse_hostname_arch(big)
        parse_ibdev2netdev_all(big)
        with pytest.raises(ModelProbeError):
            parse_config(raw)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20, f"peak {peak >> 20} MiB"
