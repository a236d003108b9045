"""build-image's step containers are sparktui's own (issue 32 item 10): no container_started
milestone, no pane row, while the image's own containers still count."""

from __future__ import annotations

import json

from sparktui.actions.dockerfile import HybridSpec, render_dockerfile
from sparktui.diagnosis.diagnoser import Diagnoser
from sparktui.model import ContainerChanged, ContainerInfo
from sparktui.probes.containers import from_event, from_inspect, is_own_probe

SPEC = HybridSpec("vllm-node", "vllm-node-hybrid", (("Qwen3_5MoeForCausalLM", "m", "C"),), ())


def _labels_at(text: str, instruction: str) -> dict[str, str]:
    """The labels an image has when the Dockerfile reaches ``instruction`` (and after the last line)."""
    labels: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith(instruction):
            return labels
        if line.startswith("LABEL "):
            for pair in line[6:].split(" "):  # render_dockerfile writes k="v" pairs without spaces in them
                k, v = pair.split("=", 1)
                labels[k] = json.loads(v)
    return labels


def _step_event() -> dict:
    # what the Engine sends when the classic builder starts the RUN step: the labels so far in Attributes
    labels = _labels_at(render_dockerfile(SPEC), "RUN ")
    return {"Type": "container", "Action": "start", "id": "b" * 64, "from": "sha256:" + "a" * 64,
            "Actor": {"ID": "b" * 64, "Attributes": {"name": "eager_lovelace", "image": "sha256:" + "a" * 64,
                                                    **labels}}, "timeNano": 1_700_000_000_000_000_000}


def test_the_run_step_container_is_marked_and_the_image_is_not():
    text = render_dockerfile(SPEC)
    assert _labels_at(text, "RUN ").get("sparktui.build")  # the step's container inherits it
    assert _labels_at(text, "\0").get("sparktui.build") == ""  # the built image's containers: blank
    assert is_own_probe(from_event(_step_event(), "start"))
    image_labels = _labels_at(text, "\0")
    cluster = {"Id": "c" * 64, "Name": "/vllm_node", "State": {"Status": "running"},
               "Config": {"Image": "vllm-node-hybrid", "Labels": {**image_labels, "sparktui.cluster": "vllm_node"},
                          "Cmd": ["vllm", "serve"]}}
    assert not is_own_probe(from_inspect(cluster))


def test_a_step_container_known_by_its_command_only():
    attrs = {"Id": "d" * 64, "Name": "/quirky_euler", "State": {"Status": "running"},
             "Config": {"Image": "sha256:" + "a" * 64, "Labels": {},
                        "Cmd": ["python3", "/opt/sparktui/patch_vllm_registry.py", "--arch", "X=m:C"]}}
    assert is_own_probe(from_inspect(attrs))


def test_a_build_step_starting_is_no_container_started_milestone():
    d = Diagnoser()
    assert d.feed(ContainerChanged(node="spark1", container=from_event(_step_event(), "start"))) == []
    real = ContainerInfo(id="e" * 64, name="vllm_node", image="vllm-node-hybrid", labels=(("sparktui.build", ""),))
    assert [e.milestone.id for e in d.feed(ContainerChanged(node="spark1", container=real))] == ["container_started"]
