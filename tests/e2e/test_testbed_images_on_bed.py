"""Issue 32 item 12 on the lean bed: every node holds the base image under the same image ID (the bed
imports it once and loads that one archive everywhere), so `sparktui doctor` on the bed's config
passes its image_id check.  The check's failing half (IDs that truly differ) is
tests/unit/test_doctor_image_id.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
import uuid
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
BASE = "sparktui-base:bookworm"


def lean_config(bed, tmp_path: Path) -> Path:
    """The bed's config on the base image, whether or not `--scenario seed` rewrote it before."""
    sys.path.insert(0, str(ROOT / "scripts" / "testbed_scenarios"))
    import seed as seed_mod  # the scenario's own TOML writer

    data = tomllib.loads(bed.config.read_text())
    data["cluster"]["image"] = BASE
    data["cluster"]["name"] = f"imageid_{uuid.uuid4().hex[:6]}"
    data["cluster"].pop("hybrid_image", None)  # doctor would check the hybrid when the head has it
    out = tmp_path / "cluster.toml"
    seed_mod.write_config(out, data)
    return out


def test_every_bed_node_has_the_same_base_image_id_and_doctor_says_so(bed, tmp_path):
    ids = {}
    for node in bed.nodes:
        r = bed.docker(node, "image", "inspect", "--format", "{{.Id}}", BASE, check=False)
        assert r.returncode == 0, f"{node}: {r.stderr}"
        ids[node] = r.stdout.strip()
    assert len(ids) >= 2 and len(set(ids.values())) == 1, ids

    r = subprocess.run([sys.executable, "-m", "sparktui", "doctor", "--config", str(lean_config(bed, tmp_path)),
                        "--json"], capture_output=True, text=True, cwd=str(ROOT), timeout=300)
    assert "Traceback" not in r.stderr, r.stderr
    res = json.loads(r.stdout)
    [check] = [c for c in res["data"]["checks"] if c["check"] == "image_id"]
    assert check["status"] == "ok", check
    assert check["title"] == f"same image ID on every node ({next(iter(ids.values()))[:19]})"
    assert sorted(ln.split(":")[0] for ln in check["evidence"]) == sorted(bed.nodes)
    assert "image_mismatch" not in {f["id"] for f in res["findings"]}


def test_up_moves_a_node_imported_on_its_own_onto_the_shared_image_id(bed):
    """A bed made before the fix (each node ran its own `docker import`): the next `up` loads the shared
    archive into the odd node.  Driven through the bed's own steps, not `up`, which would rewrite the
    session bed's cluster.toml under the seed tests."""
    sys.path.insert(0, str(ROOT / "scripts"))
    env_before = dict(os.environ)
    os.environ.update(bed.env)
    try:
        from testbed_lib.bed import IMAGE, Bed

        tb = Bed()
        first, odd = tb.nodes()[0], tb.nodes()[1]
        archive, want = tb.ensure_base_archive(first, tb.ensure_base_tarball())
        assert tb.image_id(first) == want
        tb.docker(odd, "import", "--change", 'CMD ["/bin/bash"]', str(tb.cache / "base-bookworm.tar"), IMAGE,
                  timeout=600)
        stray = tb.image_id(odd)
        assert stray and stray != want  # what every node's own import used to give
        tb.ensure_image(odd, archive, want)
        assert tb.image_id(odd) == want
        tb.docker(odd, "rmi", stray, check=False)  # the untagged leftover of the odd import
    finally:
        os.environ.clear()
        os.environ.update(env_before)
