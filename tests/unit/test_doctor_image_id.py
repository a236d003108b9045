"""doctor's image_id check (issue 32 item 12) on what `docker image inspect` returns: two nodes whose
tag names different image IDs fail, even when the content (the layers) is the same, as after a
`docker import` of one tarball on each node; the same ID on every node passes."""

from __future__ import annotations

import copy

from sparktui.actions.doctor import image_id_results
from sparktui.probes.image import image_info_from_attrs

IMAGE = "sparktui-base:bookworm"
LAYER = "sha256:5d0a7ce8d5b4b2b8e0c4ab6d2cbb1f1b0e94bfe3c9f2e6f7c0f1c5d6e1a2b3c4"

# `docker image inspect sparktui-base:bookworm` (one element of its JSON list) on a node where the
# image came from `docker import --change 'CMD ["/bin/bash"]' base-bookworm.tar`
INSPECT = {
    "Id": "sha256:0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0",
    "RepoTags": [IMAGE],
    "RepoDigests": [],
    "Parent": "",
    "Comment": "Imported from -",
    "Created": "2026-12-06T02:41:07.114417622Z",
    "DockerVersion": "26.1.5+dfsg1",
    "Author": "",
    "Config": {
        "Hostname": "", "Domainname": "", "User": "", "AttachStdin": False, "AttachStdout": False,
        "AttachStderr": False, "Tty": False, "OpenStdin": False, "StdinOnce": False, "Env": None,
        "Cmd": ["/bin/bash"], "Image": "", "Volumes": None, "WorkingDir": "", "Entrypoint": None,
        "OnBuild": None, "Labels": None,
    },
    "Architecture": "amd64",
    "Os": "linux",
    "Size": 187_311_212,
    "GraphDriver": {"Data": {"MergedDir": "/tmp/tb/nodes/spark1/docker/data/overlay2/9a1/merged"},
                    "Name": "overlay2"},
    "RootFS": {"Type": "layers", "Layers": [LAYER]},
    "Metadata": {"LastTagTime": "2026-12-06T02:41:07.201771907Z"},
}


def per_node_import() -> dict:
    """spark2's own import of the same tarball: same layer, another creation time, so another ID."""
    other = copy.deepcopy(INSPECT)
    other["Id"] = "sha256:a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4"
    other["Created"] = "2026-12-06T02:41:09.530188101Z"
    return other


def test_different_image_ids_fail_even_with_the_same_layers():
    other = per_node_import()
    assert other["RootFS"] == INSPECT["RootFS"]
    infos = {"spark1": image_info_from_attrs(IMAGE, INSPECT), "spark2": image_info_from_attrs(IMAGE, other)}
    [r] = image_id_results(IMAGE, infos, [], [])
    assert (r.check, r.status, r.finding) == ("image_id", "fail", "image_mismatch")
    assert r.title == f"{IMAGE} differs across nodes"
    assert list(r.evidence) == ["spark1: sha256:0f1e2d3c4b5a", "spark2: sha256:a9b8c7d6e5f4"]
    assert "push-image" in r.fix


def test_the_same_archive_loaded_on_every_node_passes():
    loaded = copy.deepcopy(INSPECT)  # `docker load` of one saved archive: the ID comes with the image
    loaded["Metadata"]["LastTagTime"] = "2026-12-06T02:41:12.004512339Z"
    loaded["GraphDriver"]["Data"]["MergedDir"] = "/tmp/tb/nodes/spark2/docker/data/overlay2/7c4/merged"
    infos = {"spark1": image_info_from_attrs(IMAGE, INSPECT), "spark2": image_info_from_attrs(IMAGE, loaded)}
    [r] = image_id_results(IMAGE, infos, [], [])
    assert (r.check, r.status) == ("image_id", "ok")
    assert r.title == "same image ID on every node (sha256:0f1e2d3c4b5a)"


def test_missing_on_a_node_fails_and_unreached_nodes_warn():
    infos = {"spark1": image_info_from_attrs(IMAGE, INSPECT)}
    [r] = image_id_results(IMAGE, infos, ["spark2"], [])
    assert (r.status, r.title) == ("fail", f"{IMAGE} missing on spark2")
    [r] = image_id_results(IMAGE, infos, [], ["spark2"])
    assert r.status == "warn" and "not compared on spark2" in r.title
    [r] = image_id_results(IMAGE, {}, ["spark1", "spark2"], [])
    assert (r.status, r.finding) == ("fail", "image_not_found")
