"""Hypothesis over the bundle reader and the Flight Recorder reader: whatever value lands in any
field of a real capture, reading it (and deciding a verdict on it) raises nothing but the reader's
own one-line error."""

from __future__ import annotations

import json
import pickle
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparktui.diagnosis import flight_recorder
from sparktui.diagnosis.evidence import BundleError, read_bundle
from sparktui.diagnosis.verdict import decide

FIX = Path(__file__).resolve().parents[1] / "fixtures"
CAP = FIX / "nccl-2gpu"
DEV_BUNDLE = FIX / "device-runs" / "desync" / "bundle"

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# JSON-ish values: what a hand-edited or hostile file can hold (Python-only values for pickles too)
scalars = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(1 << 70), max_value=1 << 70),
                    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=20),
                    st.sampled_from(["", "0", "-1", "²", "१", "rank 1", "spark1", "completed", "abc"]))
# scalars get half the draws on their own: st.recursive alone mostly draws containers
values = st.one_of(scalars, st.recursive(scalars, lambda kids: st.one_of(
    st.lists(kids, max_size=4), st.dictionaries(st.text(max_size=8), kids, max_size=4)), max_leaves=12))
pickle_values = st.recursive(
    st.one_of(scalars, st.binary(max_size=8)),
    lambda kids: st.one_of(st.lists(kids, max_size=4), st.tuples(kids, kids),
                           st.dictionaries(st.one_of(st.text(max_size=8), st.integers()), kids, max_size=4)),
    max_leaves=12)


def _paths(doc, prefix=()):
    """Every key path in a document (dict keys and list indexes), the root included.  Lists give
    their first two items, large maps (a worker's env) three keys: the rest repeat the same shape."""
    yield prefix
    if isinstance(doc, dict):
        items = list(doc.items())
        for k, v in items[:3] if len(items) > 12 else items:
            yield from _paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc[:2]):
            yield from _paths(v, prefix + (i,))


def _get(doc, path):
    for k in path:
        doc = doc[k]
    return doc


def _put(doc, path, value):
    if not path:
        return value
    cur = doc
    for k in path[:-1]:
        cur = cur[k]
    cur[path[-1]] = value
    return doc


# --------------------------------------------------------------------------- Flight Recorder

FR_BASE = [pickle.loads((CAP / f"watchdog.fr_trace_{r}").read_bytes()) for r in (0, 1)]
FR_PATHS = sorted({p for d in FR_BASE for p in _paths(d)}, key=repr)


@SETTINGS
@given(rank=st.sampled_from([0, 1]), path=st.sampled_from(FR_PATHS), value=pickle_values,
       proto=st.integers(min_value=0, max_value=pickle.HIGHEST_PROTOCOL))
def test_flight_recorder_reader_any_value_in_any_field(rank, path, value, proto):
    doc = pickle.loads(pickle.dumps(FR_BASE[rank]))  # a fresh copy of the real dump
    try:
        doc = _put(doc, path, value)
    except (KeyError, IndexError, TypeError):
        return  # the path went away under an earlier replacement
    try:
        out = flight_recorder.read(pickle.dumps(doc, protocol=proto), "fr_trace")
    except flight_recorder.FlightRecorderError as exc:
        assert "\n" not in str(exc)
        return
    assert out.status is None or all(type(x) is int for x in out.status)
    assert isinstance(out.pending, str) and all(isinstance(n, str) for n in out.notes)


@SETTINGS
@given(blob=st.binary(max_size=200))
def test_flight_recorder_reader_any_bytes(blob):
    try:
        flight_recorder.read(blob, "fr_trace")
    except flight_recorder.FlightRecorderError:
        pass


@SETTINGS
@given(cut=st.integers(min_value=0, max_value=4000), flip=st.integers(min_value=0, max_value=255))
def test_flight_recorder_reader_damaged_real_dump(cut, flip):
    blob = bytearray((CAP / "watchdog.fr_trace_0").read_bytes())
    i = cut % len(blob)
    blob[i] ^= flip or 1
    try:
        flight_recorder.read(bytes(blob[: len(blob) - cut // 7]), "fr_trace")
    except flight_recorder.FlightRecorderError:
        pass


# --------------------------------------------------------------------------- bundle reader

BUNDLE_DOCS = {
    "meta.json": json.loads((DEV_BUNDLE / "meta.json").read_text()),
    "gpuhost/node.json": json.loads((DEV_BUNDLE / "gpuhost" / "node.json").read_text()),
    "gpuhost/ev.t20.pyspy.rank1.json": json.loads((DEV_BUNDLE / "gpuhost" / "ev.t20.pyspy.rank1.json").read_text()),
}
# the device runs had no containers: add one shaped as probes.workers.container_settings writes it
BUNDLE_DOCS["gpuhost/node.json"]["containers"] = {
    "3f2a": {"Name": "vllm_node", "Image": "vllm-node", "NetworkMode": "host", "IpcMode": "host", "ShmSize": 1 << 34,
             "Devices": ["/dev/infiniband/uverbs0"], "CapAdd": ["SYS_PTRACE"], "Ulimits": [], "Privileged": False}}
RAS = (DEV_BUNDLE / "gpuhost" / "ev.t20.ras.json").read_text()
RAS_HEAD, RAS_BODY = RAS[: RAS.index("{")], json.loads(RAS[RAS.index("{"):])
BUNDLE_DOCS["gpuhost/ev.t20.ras.json"] = RAS_BODY
BUNDLE_PATHS = [(name, p) for name, doc in BUNDLE_DOCS.items() for p in _paths(doc)]


def _check_read(folder: Path) -> None:
    try:
        groups = read_bundle(folder)
    except BundleError as exc:
        assert "\n" not in str(exc)
        return
    for _, ev in groups:
        decide(ev).to_json()  # the rules run over whatever the reader let through


@pytest.fixture(scope="module")
def bundle_dir(tmp_path_factory) -> Path:
    b = tmp_path_factory.mktemp("prop") / "bundle"
    shutil.copytree(DEV_BUNDLE, b)
    for name, doc in BUNDLE_DOCS.items():  # the base documents, containers included
        text = json.dumps(doc)
        (b / name).write_text(RAS_HEAD + text if name.endswith(".ras.json") else text)
    return b


# every field of every document gets its own run: a wrong value in one field is not hidden behind
# the first error another field would raise
@pytest.mark.parametrize("target", BUNDLE_PATHS, ids=lambda t: f"{t[0]}:{'.'.join(map(str, t[1])) or '<root>'}")
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(value=values, extra=st.one_of(st.none(), st.text(max_size=8)))
def test_bundle_reader_any_value_in_any_field(bundle_dir, target, value, extra):
    name, path = target
    doc = json.loads(json.dumps(BUNDLE_DOCS[name]))
    if extra is not None and isinstance(_get(doc, path), dict):
        path = path + (extra,)  # a key the writer never wrote
    try:
        doc = _put(doc, path, value)
    except (KeyError, IndexError, TypeError):
        return
    f = bundle_dir / name
    before = f.read_text()
    text = json.dumps(doc)
    f.write_text(RAS_HEAD + text if name.endswith(".ras.json") else text)
    try:
        _check_read(bundle_dir)
    finally:
        f.write_text(before)


CAPTURE_FILES = sorted(p.name for p in CAP.glob("watchdog.*"))


@SETTINGS
@given(victim=st.sampled_from(CAPTURE_FILES), data=st.one_of(st.binary(max_size=300), values.map(
    lambda v: json.dumps(v).encode())))
def test_capture_reader_any_content_in_any_file(victim, data):
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        for f in CAPTURE_FILES:
            shutil.copy(CAP / f, d / f)
        (d / victim).write_bytes(data)
        _check_read(d)
