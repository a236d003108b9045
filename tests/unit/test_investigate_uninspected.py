"""Issue 14 item 7: a node that could not be inspected (host key, login, down) is said so, with the
next step; it is never read as a dead peer, and the other nodes' evidence is still analysed."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparktui.diagnosis.evidence import Evidence, NodeEvidence, read_bundle, write_bundle
from sparktui.diagnosis.verdict import decide

CAP = Path(__file__).parents[1] / "fixtures" / "nccl-2gpu"

HOSTKEY = ("spark2: host key of 127.0.0.3 is CHANGED (SHA256:Zk3v); refusing to connect. If the node was really "
           "reinstalled, ... only if they match: ssh-keygen -R 127.0.0.3 -f /k && printf '%s\\n' '127.0.0.3 ssh-ed25519 AAAA' >> /k")


@pytest.mark.parametrize("error, fix", [
    (HOSTKEY, "host key"),
    ("spark2: 127.0.0.3: login refused: Permission denied", "Fix the SSH login"),
    ("spark2: cannot connect to 127.0.0.3: [Errno 111] Connection refused", "reachable over SSH"),
    ("spark2: UserKnownHostsFile none in /root/.ssh/config turns host-key checking off for spark2; refusing",
     "host-key checking back on"),
])
def test_unreachable_node_with_idle_peer_is_not_a_dead_peer(error, fix):
    ev = Evidence(nodes=[NodeEvidence(node="spark1"), NodeEvidence(node="spark2", reachable=False, error=error)])
    v = decide(ev)
    assert v.rule == "uninspected" and v.rule != "R1" and "Peer dead" not in v.title
    assert v.title.startswith("spark2 could not be inspected: ") and "spark2: spark2" not in v.title
    assert fix in v.next_action and "Restart BOTH" not in v.next_action
    assert v.problem and v.exit_code == 1 and v.finding_ids == ["ssh_unreachable"]
    assert "No NCCL workers running" in v.next_action  # what spark1 showed is still said
    assert v.details["others"]["rule"] == "idle" and v.details["uninspected"]["spark2"] == error[len("spark2: "):]
    assert v.evidence["spark2"] == ["could not be inspected: " + error[len("spark2: "):]]


def test_host_key_title_is_the_first_sentence_and_evidence_keeps_the_command():
    ev = Evidence(nodes=[NodeEvidence(node="spark1"), NodeEvidence(node="spark2", reachable=False, error=HOSTKEY)])
    v = decide(ev)
    assert v.title == "spark2 could not be inspected: host key of 127.0.0.3 is CHANGED (SHA256:Zk3v)"
    assert "printf" in v.evidence["spark2"][0]


def test_problem_on_the_inspected_node_stays_the_verdict():
    ((_, ev),) = read_bundle(CAP / "desync_ras")
    ev.nodes.append(NodeEvidence(node="spark2", reachable=False, error=HOSTKEY))
    v = decide(ev)
    assert v.rule == "R4" and v.details["lagging"] == [1]  # the local evidence was analysed as before
    item = v.latent[0]
    assert item["id"] == "ssh_unreachable" and item["title"].startswith("spark2 could not be inspected")
    assert "host key" in item["advice"] and v.details["uninspected"] == {"spark2": HOSTKEY[len("spark2: "):]}


def test_missing_rank_on_an_uninspected_node_is_not_called_never_joined():
    ((_, ev),) = read_bundle(CAP / "init_hang")
    assert "rank 1 never joined" in decide(ev).title  # baseline: every node was looked at
    ev.nodes.append(NodeEvidence(node="spark2", reachable=False, error="spark2: login refused"))
    v = decide(ev)
    assert "never joined" not in v.title and v.rule == "R2"
    assert v.latent[0]["id"] == "ssh_unreachable"


def test_nothing_inspected_at_all():
    ev = Evidence(nodes=[NodeEvidence(node="a", reachable=False, error="a: down"),
                         NodeEvidence(node="b", reachable=False, error="")])
    v = decide(ev)
    assert v.rule == "uninspected" and v.title == "a, b could not be inspected: down; no answer"
    assert "none was inspected" in v.next_action


def test_bundle_round_trip_keeps_the_uninspected_verdict(tmp_path):
    ev = Evidence(nodes=[NodeEvidence(node="spark1"), NodeEvidence(node="spark2", reachable=False, error=HOSTKEY)])
    before = decide(ev)
    write_bundle(ev, tmp_path / "b", verdict=before.to_json())
    ((_, again),) = read_bundle(tmp_path / "b")
    after = decide(again)
    assert (after.rule, after.title, after.finding_ids) == (before.rule, before.title, before.finding_ids)
