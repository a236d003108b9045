"""The finding catalogue (data) and its loader."""

from __future__ import annotations

import re

import pytest

from sparktui.diagnosis.catalogue import CATALOGUE_PATH, CatalogueError, default_catalogue, parse_catalogue
from sparktui.diagnosis.milestones import default_rules, parse_rules
from sparktui.model import MILESTONE_ORDER

# The original finding ids (the shared vocabulary; never renamed; docs/findings.md lists every id)
DESIGN_IDS = """
nccl_init_hang nccl_watchdog_timeout nccl_network_error nccl_ib_error nccl_comm_init_failed
nccl_internal_error nccl_collective_mismatch nccl_socket_transport wrong_network_interface
ray_placement_group_stuck ray_ip_mismatch ray_worker_missing unsupported_architecture
transformers_version_mismatch cuda_oom kv_cache_oom insufficient_free_memory host_oom_killed
unified_memory_pressure docker_entrypoint_error image_mismatch gb10_memory_not_supported
gb10_kernel_unsupported broken_install multinode_executor_misconfig engine_dead port_in_use
rendezvous_timeout model_path_missing
""".split()


def _design_ids() -> list[str]:
    """The "Finding ids" of the project's design notes when a checkout has them beside it (outside this
    repository, so optional), else the copy above."""
    from pathlib import Path

    for base in Path(__file__).resolve().parents:
        design = base.parent / "shared" / "DESIGN.md"
        if design.is_file():
            section = design.read_text().split("## Finding ids", 1)[-1].split("\n## ", 1)[0]
            found = re.findall(r"`([a-z0-9_]+)`", section)
            if found:
                return found
    return DESIGN_IDS


def test_every_design_id_is_in_the_catalogue():
    cat = default_catalogue()
    ids = _design_ids()
    assert set(DESIGN_IDS) <= set(ids)
    missing = [i for i in ids if i not in cat]
    assert missing == []
    assert cat["gb10_memory_not_supported"].severity == "info"
    assert cat["nccl_socket_transport"].severity == "warning"


def test_every_entry_is_complete_and_its_examples_match():
    cat = default_catalogue()
    for e in cat.entries.values():
        assert e.title and len(e.explanation) > 60 and len(e.advice) > 30, e.id
        if not e.derived:
            assert e.examples, f"{e.id} has no real example line"
            for ex in e.examples:
                assert cat.match(ex) is not None, (e.id, ex)


def test_root_causes_are_declared():
    cat = default_catalogue()
    assert "wrong_network_interface" in cat["nccl_comm_init_failed"].caused_by
    assert "nccl_network_error" in cat["nccl_watchdog_timeout"].caused_by


def _with(entry_toml: str) -> str:
    base = '''
[[finding]]
id = "a_thing"
severity = "error"
title = "A"
explanation = "because"
advice = "do this"
patterns = ['boom \\d+']
prefilter = ["boom"]
examples = ["boom 1"]
'''
    return base + entry_toml


@pytest.mark.parametrize(
    "extra, needle",
    [
        ('[[finding]]\nid = "b"\nseverity = "error"\ntitle = "B"\nexplanation = "x"\nadvice = "y"\n'
         'patterns = [\'(unclosed\']\nprefilter = ["u"]\n', "bad regex"),
        ('[[finding]]\nid = "b"\nseverity = "error"\ntitle = "B"\nexplanation = "x"\nadvice = "y"\n'
         'derived = true\ncaused_by = ["nope"]\n', "unknown id 'nope'"),
        ('[[finding]]\nid = "b"\nseverity = "fatal"\ntitle = "B"\nexplanation = "x"\nadvice = "y"\n'
         'derived = true\n', "severity"),
        ('[[finding]]\nid = "b"\nseverity = "error"\ntitle = "B"\nexplanation = "x"\nadvice = "y"\n'
         'patterns = [\'zap\']\nprefilter = ["zap"]\nexamples = ["zip"]\n', "example"),
        ('[[finding]]\nid = "b"\nseverity = "error"\ntitle = "B"\nexplanation = "x"\n'
         'derived = true\n', "advice"),
        ('[[finding]]\nid = "a_thing"\nseverity = "error"\ntitle = "B"\nexplanation = "x"\nadvice = "y"\n'
         'derived = true\n', "defined twice"),
        ('[[finding]]\nid = "b"\nseverity = "error"\ntitle = "B"\nexplanation = "x"\nadvice = "y"\n'
         'patterns = [\'zap\']\n', "prefilter"),
    ],
)
def test_loader_refuses_a_broken_catalogue_with_one_line(extra, needle):
    with pytest.raises(CatalogueError) as ei:
        parse_catalogue(_with(extra), "cat.toml")
    msg = str(ei.value)
    assert needle in msg and "\n" not in msg and msg.startswith("cat.toml")


def test_loader_refuses_a_cause_cycle():
    text = _with(
        '[[finding]]\nid = "b"\nseverity = "error"\ntitle = "B"\nexplanation = "x"\nadvice = "y"\n'
        'derived = true\ncaused_by = ["c"]\n'
        '[[finding]]\nid = "c"\nseverity = "error"\ntitle = "C"\nexplanation = "x"\nadvice = "y"\n'
        'derived = true\ncaused_by = ["b"]\n'
    )
    with pytest.raises(CatalogueError, match="cycle"):
        parse_catalogue(text)


def test_loader_refuses_invalid_toml():
    with pytest.raises(CatalogueError, match="not valid TOML"):
        parse_catalogue("[[finding]\nid=", "x.toml")


def test_priority_picks_the_specific_entry():
    cat = default_catalogue()
    line = "spark1:120:151 [0] misc/ibvwrap.cc:214 NCCL WARN Call to ibv_reg_mr_iova2 failed with error Cannot allocate memory"
    assert cat.match(line).id == "gb10_kernel_unsupported"
    assert cat.match("x:1:2 [0] NCCL WARN Call to ibv_create_qp failed with error Cannot allocate memory").id == "nccl_ib_error"


def test_ray_generic_oom_wording_is_not_an_oom_kill():
    cat = default_catalogue()
    line = ("The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR Worker exit "
            "detail: Worker unexpectedly exits with a connection error code 2. End of file. Some common causes "
            "include: (1) the process was killed by the OOM killer due to high memory usage")
    assert cat.match(line).id == "ray_worker_missing"


def test_catalogue_file_is_data_not_code():
    text = CATALOGUE_PATH.read_text()
    assert len(re.findall(r"^\[\[finding\]\]$", text, re.M)) == len(default_catalogue().entries)
    assert not re.search(r"^\s*(import|def) ", text, re.M)


def test_milestone_rules_load_and_cover_the_design_order():
    rules = default_rules()
    ids = {r.id for r in rules.rules}
    for mid in ("ray_joined", "arch_resolved", "weights_loading", "weights_loaded", "kv_cache", "cuda_graphs",
                "api_ready", "first_prompt"):
        assert mid in ids
    assert set(rules.labels) >= set(MILESTONE_ORDER)
    with pytest.raises(CatalogueError, match="not one of"):
        parse_rules('[[milestone]]\nid = "nope"\npattern = "x"\nprefilter = ["x"]\n')
