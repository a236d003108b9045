"""push-image sends only the layers the target lacks: the plan (probes/layers.py) and the tar filter
that runs on the source (transport/layer_skip.py), on real `docker save` output of Docker 20.10."""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from sparktui.probes.layers import LayerPlan, chain_ids, plan_layers
from sparktui.transport import layer_skip
from sparktui.transport.layer_skip import filter_tar, go_json, octal_or_binary, v1_id_chain

SAVED = Path(__file__).resolve().parents[1] / "fixtures" / "docker_save" / "three-layers-docker-20.10.tar"


def _saved() -> tuple[bytes, dict, list[str]]:
    raw = SAVED.read_bytes()
    with tarfile.open(fileobj=io.BytesIO(raw)) as t:
        manifest = json.load(t.extractfile("manifest.json"))[0]
        diff_ids = json.load(t.extractfile(manifest["Config"]))["rootfs"]["diff_ids"]
    return raw, manifest, diff_ids


def _members(raw: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(raw)) as t:
        return {m.name: (t.extractfile(m).read() if m.isfile() else b"") for m in t.getmembers()}


def _filter(raw: bytes, blobs=(), chains=()) -> tuple[bytes, tuple[int, int]]:
    out = io.BytesIO()
    left = filter_tar(io.BytesIO(raw), out, set(blobs), list(chains))
    return out.getvalue(), left


def test_chain_ids_and_v1_ids_agree_with_what_docker_wrote():
    # Docker named each layer folder by a digest of its json and the layer's chain ID: recomputing it
    # from our chain IDs proves both the chain IDs and the digest's encoding against the real engine
    raw, manifest, diff_ids = _saved()
    members = _members(raw)
    for layer, diff_id in zip(manifest["Layers"], diff_ids):
        assert "sha256:" + hashlib.sha256(members[layer]).hexdigest() == diff_id  # a diff ID is the layer tar's
    chains = chain_ids(diff_ids)
    assert chains[0] == diff_ids[0]
    assert chains[1] == "sha256:" + hashlib.sha256(f"{diff_ids[0]} {diff_ids[1]}".encode()).hexdigest()
    for i, layer in enumerate(manifest["Layers"]):
        folder = layer.split("/")[0]
        assert v1_id_chain(members[f"{folder}/json"], chains) == chains[i]
        assert v1_id_chain(members[f"{folder}/json"], chains[:i] + chains[i + 1:]) is None


def test_held_bottom_layers_are_left_out_and_everything_else_is_byte_identical():
    raw, manifest, diff_ids = _saved()
    out, left = _filter(raw, chains=chain_ids(diff_ids)[:2])
    before, after = _members(raw), _members(out)
    dropped = set(manifest["Layers"][:2])
    assert set(before) - set(after) == dropped
    assert all(after[name] == before[name] for name in after)  # the rest passes through unchanged
    assert left == (2, sum(len(before[n]) for n in dropped))
    assert manifest["Layers"][2] in after and "manifest.json" in after


def test_nothing_held_or_other_chains_pass_the_tar_through_unchanged():
    raw, _, diff_ids = _saved()
    assert _filter(raw) == (raw, (0, 0))
    other = chain_ids(["sha256:" + "ab" * 32, *diff_ids[1:]])  # same layers above an unrelated bottom
    assert _filter(raw, chains=other) == (raw, (0, 0))
    # a layer's chain is its whole stack: the second layer alone, without its bottom, is not held
    assert _filter(raw, chains=[diff_ids[1]]) == (raw, (0, 0))


def test_a_json_from_another_encoding_sends_the_layer():
    # a Docker whose v1 json digest differs from ours (fields added after hashing) never drops a layer
    raw, manifest, diff_ids = _saved()
    folder = manifest["Layers"][0].split("/")[0]
    doc = json.loads(_members(raw)[f"{folder}/json"])
    doc["variant"] = "v8"
    assert v1_id_chain(json.dumps(doc).encode(), chain_ids(diff_ids)) is None
    assert v1_id_chain(b"not json", chain_ids(diff_ids)) is None
    assert v1_id_chain(b'["a list"]', chain_ids(diff_ids)) is None


def _oci_tar(layers: dict[str, bytes], fmt=tarfile.USTAR_FORMAT, long_name: str = "") -> bytes:
    """Docker >= 25's save layout (moby image/tarexport/save.go): blobs/sha256/<digest> for layers
    (named by diff ID) and the config, then index.json, manifest.json, oci-layout."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as t:
        def add(name: str, data: bytes) -> None:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
        names = []
        for diff, data in layers.items():
            names.append(f"blobs/sha256/{diff}")
            add(names[-1], data)
        if long_name:
            add(long_name, b"held too")
        config = json.dumps({"rootfs": {"diff_ids": [f"sha256:{d}" for d in layers]}}).encode()
        add(f"blobs/sha256/{hashlib.sha256(config).hexdigest()}", config)
        add("manifest.json", json.dumps([{"Config": "c", "Layers": names}]).encode())
        add("oci-layout", b'{"imageLayoutVersion":"1.0.0"}')
    return buf.getvalue()


@pytest.mark.parametrize("fmt", [tarfile.USTAR_FORMAT, tarfile.PAX_FORMAT, tarfile.GNU_FORMAT])
def test_oci_layout_blobs_are_left_out_by_name_with_their_long_name_headers(fmt):
    blob = {hashlib.sha256(b"%d" % i).hexdigest(): (b"layer %d " % i) * 300 for i in range(3)}
    long_name = "blobs/sha256/" + "x" * 120  # past the 100-byte name field: a pax or GNU header of its own
    raw = _oci_tar(blob, fmt, long_name if fmt != tarfile.USTAR_FORMAT else "")
    held = [f"blobs/sha256/{d}" for d in list(blob)[:2]] + ([long_name] if fmt != tarfile.USTAR_FORMAT else [])
    out, left = _filter(raw, blobs=held)
    before, after = _members(raw), _members(out)
    assert set(before) - set(after) == set(held)
    assert all(after[n] == before[n] for n in after)
    assert left[0] == len(held)


def test_sizes_past_8_gib_in_base_256():
    field = bytes([0x80]) + (9 << 30).to_bytes(11, "big")  # GNU's binary size field, 12 bytes
    assert octal_or_binary(field) == 9 << 30
    assert octal_or_binary(b"00000004000\0") == 2048
    assert octal_or_binary(b"\0" * 12) == 0


def test_go_json_escapes_as_go_does():
    assert go_json("a<b>&c") == '"a\\u003cb\\u003e\\u0026c"'
    assert go_json({"k": [1, None, True, "é"]}) == '{"k":[1,null,true,"é"]}'


def test_the_program_runs_standalone_and_a_cut_tar_fails_loudly(tmp_path):
    # as on the node: python3 -c SOURCE PLAN, stdin -> stdout, the count on stderr
    raw, _, diff_ids = _saved()
    src = Path(layer_skip.__file__).read_text()
    plan = LayerPlan(3, 1, tuple(chain_ids(diff_ids)[:1])).argument
    r = subprocess.run([sys.executable, "-c", src, plan], input=raw, capture_output=True, timeout=30)
    assert r.returncode == 0 and r.stderr.decode().strip() == "SPARKTUI-SKIPPED 1 2048"
    assert len(_members(r.stdout)) == len(_members(raw)) - 1
    r = subprocess.run([sys.executable, "-c", src, plan], input=raw[:5000], capture_output=True, timeout=30)
    assert r.returncode == 1 and b"ended in the middle of a member" in r.stderr


DIFF = [f"sha256:{c * 64}" for c in "abcdef"]


def test_plan_holds_the_longest_shared_bottom():
    base = (tuple(DIFF[:3]), 3_000)
    plan = plan_layers(tuple(DIFF[:5]), [base])
    assert (plan.held, plan.total, plan.held_bytes) == (3, 5, 3_000)
    assert plan.chains == tuple(chain_ids(DIFF[:3]))
    assert plan.blobs == tuple(f"blobs/sha256/{d[7:]}" for d in DIFF[:3])
    # an image that shares only the bottom two and then differs: two held, size unknown
    fork = (tuple(DIFF[:2]) + (DIFF[5],), 9_999)
    plan = plan_layers(tuple(DIFF[:5]), [fork])
    assert (plan.held, plan.held_bytes) == (2, None)


def test_plan_holds_nothing_when_the_target_differs_at_the_bottom():
    plan = plan_layers(tuple(DIFF[:3]), [((DIFF[5], *DIFF[1:3]), 1)])
    assert plan.held == 0 and plan.why == "the target holds none of its layers" and plan.argument == '{"blobs":[],"chains":[]}'
    assert plan_layers((), []).held == 0


def test_a_diff_id_at_a_held_and_an_unheld_height_keeps_its_blob():
    # an empty layer twice: held at height 1, needed again at height 3 (OCI saves one blob for both)
    layers = (DIFF[0], DIFF[1], DIFF[2], DIFF[1])
    plan = plan_layers(layers, [(layers[:2], 10)])
    assert plan.held == 2 and plan.blobs == (f"blobs/sha256/{DIFF[0][7:]}",)
    assert len(plan.chains) == 2  # Docker <= 24 names each height apart: both folders may go
