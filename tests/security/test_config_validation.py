"""Issue 14 item 9: bad config values fail at load as one ConfigError line (key + line), never later
in a doctor run; and no TOML document makes the loader raise anything else (Hypothesis)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparktui.config import ConfigError, load_config, parse_config
from sparktui.imageref import problem as image_problem

ROOT = Path(__file__).resolve().parents[2]

BASE = """\
[cluster]
image = "vllm-node-qwen35"
{cluster}

[[node]]
name = "spark1"
host = "127.0.0.2"
role = "head"
{node1}

[[node]]
name = "spark2"
host = "127.0.0.3"
{node2}
"""


def doc(cluster: str = "", node1: str = "", node2: str = "") -> str:
    return BASE.format(cluster=cluster, node1=node1, node2=node2)


def line_of(text: str, needle: str, nth: int = 1) -> int:
    lines = [i + 1 for i, ln in enumerate(text.splitlines()) if needle in ln]
    return lines[nth - 1]


def test_base_document_is_valid():
    cfg = parse_config(doc(), "c.toml")
    assert cfg.head.name == "spark1" and cfg.cluster.image == "vllm-node-qwen35"


@pytest.mark.parametrize("image", [
    "vllm-node", "nvcr.io/nvidia/vllm:25.09-py3", "localhost:5000/team/vllm:v1", "a__b/c-d.e",
    "registry.example.com/x@sha256:" + "a" * 64, "[::1]:5000/x:latest", "UPPER.example/x",
])
def test_valid_image_references_load(image):
    assert parse_config(doc().replace('"vllm-node-qwen35"', json.dumps(image)), "c.toml").cluster.image == image


@pytest.mark.parametrize("image, why", [
    ("Vllm-Node", "must be lowercase"),
    ("vllm node", "whitespace"),
    ("vllm-node:", "tag"),
    ("vllm..node", "is not valid"),
    ("vllm-node:bad tag!", "whitespace"),
    ("vllm-node:" + "t" * 129, "tag"),
    ("vllm@md5:xyz", "digest"),
    ("", "empty"),
    ("bad_host_/x", "is not valid"),
    ("/vllm", "is not valid"),
])
def test_invalid_image_reference_fails_at_load(image, why):
    text = doc().replace('"vllm-node-qwen35"', json.dumps(image))
    with pytest.raises(ConfigError) as ei:
        parse_config(text, "c.toml")
    e = ei.value
    assert e.key == "cluster.image" and e.line == line_of(text, "image =") and why in str(e)
    assert "\n" not in str(e)


@pytest.mark.parametrize("key", ["base_image", "hybrid_image"])
def test_build_image_references_are_checked_too(key):
    with pytest.raises(ConfigError) as ei:
        parse_config(doc(cluster=f'{key} = "Not/Valid:"'), "c.toml")
    assert ei.value.key == f"cluster.{key}"


def test_node_and_nodes_tables_together_are_an_error():
    text = doc() + '\n[[nodes]]\nname = "spark3"\nhost = "127.0.0.4"\n'
    with pytest.raises(ConfigError) as ei:
        parse_config(text, "c.toml")
    assert ei.value.key == "nodes" and ei.value.line == line_of(text, "[[nodes]]")
    assert "both [[node]] and [[nodes]]" in str(ei.value)


def test_nodes_alone_still_loads():
    text = doc().replace("[[node]]", "[[nodes]]")
    assert [n.name for n in parse_config(text, "c.toml").nodes] == ["spark1", "spark2"]


@pytest.mark.parametrize("where, setting, key", [
    ("node2", "gpu_count = -5", "node[1].gpu_count"),
    ("node2", "gpu_count = 65", "node[1].gpu_count"),
    ("node2", "gpu_count = 1.0", "node[1].gpu_count"),
    ("cluster", "tensor_parallel = 1e17", "cluster.tensor_parallel"),
    ("cluster", "tensor_parallel = 100000000000000000", "cluster.tensor_parallel"),
    ("cluster", "tensor_parallel = 0", "cluster.tensor_parallel"),
    ("cluster", "max_model_len = -1", "cluster.max_model_len"),
    ("cluster", "max_model_len = 0", "cluster.max_model_len"),
    ("cluster", "max_model_len = 10000001", "cluster.max_model_len"),
    ("cluster", "max_model_len = 32768.0", "cluster.max_model_len"),
    ("cluster", "join_timeout = nan", "cluster.join_timeout"),
    ("cluster", "ready_timeout = inf", "cluster.ready_timeout"),
    ("cluster", "gpu_memory_utilization = nan", "cluster.gpu_memory_utilization"),
])
def test_numbers_out_of_range_or_of_the_wrong_type(where, setting, key):
    text = doc(**{where: setting})
    with pytest.raises(ConfigError) as ei:
        parse_config(text, "c.toml")
    assert ei.value.key == key and ei.value.line == line_of(text, setting.split(" =")[0] + " =")


@pytest.mark.parametrize("setting", ["gpu_count = 0", "gpu_count = 64"])
def test_gpu_count_bounds_inclusive(setting):
    assert parse_config(doc(node2=setting), "c.toml").node("spark2").gpu_count == int(setting.split()[-1])


def test_limits_accepted():
    cfg = parse_config(doc(cluster="tensor_parallel = 1024\nmax_model_len = 10000000"), "c.toml")
    assert cfg.cluster.tensor_parallel == 1024 and cfg.cluster.max_model_len == 10_000_000


@pytest.mark.parametrize("node2, msg", [
    ('', None),  # baseline: distinct hosts
    ('port = 22', None),
])
def test_distinct_hosts_baseline(node2, msg):
    parse_config(doc(node2=node2), "c.toml")


@pytest.mark.parametrize("spark2_host, ports, bad", [
    ('"127.0.0.2"', ("", ""), True),
    ('"127.0.0.2"', ("", "port = 22"), True),  # 22 is the default port
    ('"127.0.0.2"', ("port = 2201", "port = 2202"), False),  # one host, two sshds: two nodes
])
def test_two_nodes_on_one_host(spark2_host, ports, bad):
    text = doc(node1=ports[0], node2=ports[1]).replace('"127.0.0.3"', spark2_host)
    if not bad:
        parse_config(text, "c.toml")
        return
    with pytest.raises(ConfigError) as ei:
        parse_config(text, "c.toml")
    assert ei.value.key == "node[1].host" and ei.value.line == line_of(text, "host =", 2)
    assert "'spark1' and 'spark2'" in str(ei.value)


def test_host_comparison_ignores_case():
    text = doc().replace('"127.0.0.2"', '"Spark-A"').replace('"127.0.0.3"', '"spark-a"')
    with pytest.raises(ConfigError):
        parse_config(text, "c.toml")


def test_two_heads_are_an_error():
    text = doc(node2='role = "head"')
    with pytest.raises(ConfigError) as ei:
        parse_config(text, "c.toml")
    assert ei.value.key == "node[1].role" and ei.value.line == line_of(text, "role =", 2)
    assert "2 nodes have role" in str(ei.value)


@pytest.mark.parametrize("value", ['"none"', '"None"', '""', '"/dev/null"'])
def test_known_hosts_none_is_refused(value):
    text = doc(node2=f"known_hosts = {value}")
    with pytest.raises(ConfigError) as ei:
        parse_config(text, "c.toml")
    assert ei.value.key == "node[1].known_hosts" and "host-key checking off" in str(ei.value)


def test_session_dir_is_honoured(tmp_path):
    """session_dir is where the TUI writes its sessions, not a key accepted and ignored."""
    from sparktui.session import Session, sessions_dir

    cfg = parse_config(f'session_dir = "{tmp_path / "my sessions"}"\n' + doc(), "c.toml")
    assert sessions_dir(cfg) == tmp_path / "my sessions"
    s = Session.create("c", root=sessions_dir(cfg))
    assert s.path.parent == tmp_path / "my sessions" and (s.path / "meta.json").exists()
    # without it: the state dir, as before
    assert sessions_dir(parse_config(doc(), "c.toml")) == sessions_dir()


def test_session_dir_used_by_the_engine(tmp_path):
    from sparktui.tui.boot import make_engine

    cfg = parse_config(f'session_dir = "{tmp_path / "s"}"\n' + doc(), "c.toml")
    engine = make_engine(cfg, [], "test")
    try:
        assert engine.session.path.parent == tmp_path / "s"
    finally:
        engine.session.close()


def test_session_dir_tilde_and_empty(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    assert parse_config('session_dir = "~/s"\n' + doc(), "c.toml").session_dir == str(tmp_path / "s")
    with pytest.raises(ConfigError) as ei:
        parse_config('session_dir = " "\n' + doc(), "c.toml")
    assert ei.value.key == "session_dir" and ei.value.line == 1


def test_cli_prints_one_line_and_exits_2(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text(doc(node2='role = "head"'))
    env = {**os.environ, "SPARKTUI_STATE_DIR": str(tmp_path / "st")}
    r = subprocess.run([sys.executable, "-m", "sparktui", "--config", str(cfg), "doctor"],
                       capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 2, r.stderr
    err = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(err) == 1 and f"{cfg}:" in err[0] and "node[1].role" in err[0]
    assert "Traceback" not in r.stderr


# ----------------------------------------------------------------------------- Hypothesis

KEYS_CLUSTER = ["name", "image", "model_path", "model_mount", "mount_readonly", "served_model", "tensor_parallel",
                "serve_port", "serve_host", "gpu_memory_utilization", "max_model_len", "serve_args", "env",
                "launcher_dir", "nccl_debug", "add_architectures", "base_image", "hybrid_image", "peer_ssh_args",
                "executor", "engine", "launcher", "master_port", "ray_port", "ipc", "shm_size", "join_timeout",
                "ready_timeout", "api_base", "bogus"]
KEYS_NODE = ["name", "backend", "host", "user", "port", "identity_file", "known_hosts", "ssh_config",
             "docker_socket", "fabric_ip", "fabric_if", "ib_hcas", "role", "model_path", "gpu_count", "env",
             "meminfo_path", "bogus"]

texts = st.one_of(st.text(max_size=20), st.sampled_from(
    ["spark1", "127.0.0.2", "head", "worker", "ssh", "sim", "local", "none", "vllm-node", "Bad Image", "64g",
     "http://x:1", "~", "", "1.2.3.4", "ray", "mp", "host"]))
scalars = st.one_of(
    texts, st.booleans(), st.integers(min_value=-(2 ** 63), max_value=2 ** 63 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
)
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(["A", "B_1", "x y", "PATH"]), inner, max_size=3)),
    max_leaves=6)


def _key(k: str) -> str:
    return k if k.replace("_", "").replace("-", "").isalnum() and k.isascii() else json.dumps(k)


def _val(v) -> str:
    """TOML for one value (inline tables/arrays; TOML has no null, so none are generated)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        # JSON escapes are TOML basic-string escapes; DEL must be escaped in TOML, not in JSON
        return json.dumps(v, ensure_ascii=False).replace("\x7f", "\\u007f")
    if isinstance(v, list):
        return "[" + ", ".join(_val(x) for x in v) + "]"
    return "{" + ", ".join(f"{_key(k)} = {_val(x)}" for k, x in v.items()) + "}"


def _table(d: dict) -> str:
    return "".join(f"{_key(k)} = {_val(v)}\n" for k, v in d.items())


# mostly-valid nodes with random keys on top, so that many documents load and the checks after
# parsing (distinct hosts, heads, bounds) are reached, not only the first type error
plausible = st.one_of(values, st.integers(min_value=-3, max_value=70), st.sampled_from(
    ["head", "worker", "127.0.0.2", "spark1", "vllm-node", "sim", "~/.ssh/known_hosts", "none"]))
node_tables = st.builds(
    lambda i, extra: {"name": f"n{i}", "host": f"127.0.0.{i % 250 + 2}", **extra},
    st.integers(min_value=0, max_value=3), st.dictionaries(st.sampled_from(KEYS_NODE), plausible, max_size=3))
documents = st.builds(
    lambda cluster, nodes, both, top: (
        (f"session_dir = {_val(top)}\n" if top is not None else "")
        + ("[cluster]\n" + _table(cluster) if cluster is not None else "")
        + "".join(f"\n[[{'nodes' if both and i else 'node'}]]\n" + _table(n) for i, n in enumerate(nodes))),
    st.one_of(st.none(), st.dictionaries(st.sampled_from(KEYS_CLUSTER), plausible, max_size=4)),
    st.lists(st.one_of(node_tables, st.dictionaries(st.sampled_from(KEYS_NODE), values, max_size=5)), max_size=3),
    st.booleans(),
    st.one_of(st.none(), values),
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents)
def test_loader_raises_only_config_error(text):
    try:
        cfg = parse_config(text, "fuzz.toml")
    except ConfigError as exc:
        assert "\n" not in str(exc)
        return
    # what loads is usable: a head, distinct names, sane numbers
    assert cfg.nodes and cfg.head in cfg.nodes
    assert len({n.name for n in cfg.nodes}) == len(cfg.nodes)
    assert 1 <= cfg.tp <= 1024 * 64


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_loader_on_arbitrary_text(text):
    try:
        parse_config(text, "fuzz.toml")
    except ConfigError:
        pass


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=100))
def test_load_config_on_arbitrary_bytes(tmp_path, data):
    p = tmp_path / "c.toml"
    p.write_bytes(data)
    try:
        load_config(p)
    except ConfigError:
        pass


@given(st.text(max_size=40))
def test_image_problem_never_raises(ref):
    assert image_problem(ref) is None or isinstance(image_problem(ref), str)


def test_session_log_cap_is_honoured_and_bad_values_are_one_line_errors(tmp_path):
    from sparktui.tui.boot import make_engine

    cfg = parse_config(f'session_dir = "{tmp_path}"\nsession_log_cap_mib = 3\n' + doc(), "c.toml")
    engine = make_engine(cfg, [], "test")
    try:
        assert engine.session.max_log_bytes == 3 << 20
    finally:
        engine.session.close()
    for bad, why in (("0", "between"), ('"1G"', "integer"), ("true", "boolean")):
        with pytest.raises(ConfigError) as ei:
            parse_config(f"session_log_cap_mib = {bad}\n" + doc(), "c.toml")
        assert ei.value.key == "session_log_cap_mib" and why in str(ei.value) and "\n" not in str(ei.value)
