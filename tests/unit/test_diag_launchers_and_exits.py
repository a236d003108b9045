"""How a job was started and how it ended: launcher ssh failures, Ray's placement demands and
worker exits (and its exit-time notice that names no cause), more GPUs asked of a cluster than it
has, the rank that never joined torch's rendezvous, an engine's death in older wordings.

Each detector is checked on a held-in excerpt of the corpus (``score_corpus.part_of`` decides; a
held-out file is refused) or a real line quoted from one, and on a counterpart that must stay quiet.
"""

from __future__ import annotations

from pathlib import Path

from sparktui.commands.diagnose import analyse
from sparktui.diagnosis.catalogue import default_catalogue
from sparktui.diagnosis.exc_shapes import default_shapes

from corpus_helpers import NCCL_2GPU, bare_errors, body, held_in, line_of, named, ranked, read_header, scan_named

# ----------------------------------------------------------------------------- launcher ssh

def test_ssh_permission_denied_publickey_line():
    line = line_of("b/deepspeed_deepspeed_5709_localhost_publickey_denied", "Permission denied (publickey")
    assert default_catalogue().match(line).id == "launcher_ssh_failed"


def test_launcher_ssh_shapes_runtimeerror_not_reachable_via_ssh():
    # a RuntimeError nothing in the catalogue names: its message shape says "ssh"
    assert named(held_in("b/deepspeed_volcano_2952_hostfile_not_reachable_via_ssh"))[0] == "launcher_ssh_failed"
    shapes = default_shapes()
    assert shapes.classify_line(
        "subprocess.CalledProcessError: Command 'ssh -o PasswordAuthentication=no 192.168.3.100 hostname' "
        "returned non-zero exit status 255.") == "launcher_ssh_failed"
    # exit 255 of something that is not ssh stays what it was (a JIT build)
    assert shapes.classify_line("subprocess.CalledProcessError: Command '['ninja', '-v']' returned non-zero exit status 255.") \
        == "broken_install"


# ----------------------------------------------------------------------------- Ray

def test_ray_worker_exit_detail_line():
    line = line_of("b/ray_activevln_25_actor_died_connection_error_code_2", "Worker unexpectedly exits")
    assert default_catalogue().match(line).id == "ray_worker_missing"


def test_ray_resource_request_cannot_be_scheduled():
    # the wording of Ray's own warning (ray/_private: "...cannot be scheduled right now...") for a demand
    # no node can meet; the held-in autoscaler status tables (healthy, pending nodes) stay clean
    line = ("(autoscaler +2m) Warning: The following resource request cannot be scheduled right now: {'GPU': 1.0}. "
            "This is likely due to all cluster resources being claimed by actors. Consider creating fewer actors or "
            "increase the resources available to this Ray cluster.")
    assert default_catalogue().match(line).id == "ray_placement_group_stuck"
    for rel in ("b/ray_ray_12221_autoscaler_status_rfc_pending", "b/ray_ray_30328_autoscaler_status_healthy_nodes",
                "b/ray_ray_14232_autoscaler_updater_resized"):
        assert read_header(Path(held_in(rel)[0]))["expect"] == "healthy"
        assert not [f for f in analyse(held_in(rel)).findings if f.severity == "error"], rel


# ------------------------------------------------------------------ GPUs asked of a cluster

def test_more_gpus_requested_than_the_cluster_has_is_a_placement_problem():
    assert "ray_placement_group_stuck" in scan_named(body("b/ray_nemorl_271_requested_16_gpus_only_8"))


def test_as_many_gpus_available_as_requested_names_nothing():
    assert scan_named(["Requested 8 GPUs, but only 8 are available in the cluster."]) == []


# ------------------------------------------------------------------ Ray's exit-time worker notice

def test_the_drivers_warning_notice_of_a_task_worker_naming_no_cause_is_no_error(tmp_path):
    # old Ray printed it at every exit of a RaySGD run that went on to print success
    assert bare_errors("b/ray_ray_8000_worker_died_warning_on_exit_success_healthy", tmp_path) == []


def test_a_worker_death_with_its_cause_or_as_an_exception_is_still_raised():
    entry = default_catalogue()["ray_worker_missing"]
    assert entry.search("(raylet) A worker died or was killed while executing a task by an unexpected system error.")
    assert entry.search("ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.")
    assert entry.search("2020-04-13 15:35:00,032 WARNING worker.py:1072 -- A worker died or was killed while "
                        "executing task ffffffffffffffff45b95b1c0100.") is None


# ----------------------------------------------------------------------------- the rank that never joined the rendezvous
# vLLM's parallel_state line (the format of held-in vLLM excerpts): each rank announces world size
# and rank, then blocks in init_process_group until every rank has joined the store

_ENGINE = "INFO 08-31 09:50:40 llm_engine.py:174] Initializing an LLM engine (v0.5.4) with config: model='m'"


def _rdzv(rank, world=4, pid=""):
    return (f"{pid}DEBUG 08-31 09:50:46 parallel_state.py:845] world_size={world} rank={rank} local_rank={rank % 2} "
            "distributed_init_method=tcp://10.0.0.1:29500 backend=nccl")


def _logs(tmp_path, *parts):
    out = []
    for k, lines in enumerate(parts):
        p = tmp_path / f"node{k}.log"
        p.write_text("\n".join(lines) + "\n", encoding="utf-8")
        out.append(str(p))
    return out


def test_logs_stopped_in_the_rendezvous_name_the_rank_that_never_joined(tmp_path):
    paths = _logs(tmp_path, [_ENGINE, _rdzv(0), _rdzv(1, pid="(VllmWorkerProcess pid=9) ")], [_ENGINE, _rdzv(2)])
    f = next(f for f in analyse(paths).findings if f.severity != "info")
    assert (f.id, f.severity, f.title) == ("rendezvous_timeout", "error", "Rank(s) 3 of 4 never joined the rendezvous")


def test_one_log_alone_only_suspects_the_ranks_it_does_not_show(tmp_path):
    (f,) = [f for f in analyse(_logs(tmp_path, [_ENGINE, _rdzv(0), _rdzv(1)])).findings if f.severity != "info"]
    assert (f.id, f.severity) == ("rendezvous_timeout", "warning") and "2, 3 of 4" in f.title


def test_every_rank_in_the_rendezvous_names_no_absent_rank(tmp_path):
    paths = _logs(tmp_path, [_ENGINE, _rdzv(0), _rdzv(1)], [_ENGINE, _rdzv(2), _rdzv(3)])
    fs = [f for f in analyse(paths).findings if f.severity != "info"]
    assert fs and all(f.severity == "warning" and "never joined" not in f.title for f in fs)


def test_a_log_that_went_past_the_rendezvous_may_hold_the_missing_ranks(tmp_path):
    # node1 went on into NCCL init (its rendezvous line may be long gone from its last lines)
    nccl = (NCCL_2GPU / "healthy.rank1.log").read_text(encoding="utf-8").splitlines()[:14]
    paths = _logs(tmp_path, [_ENGINE, _rdzv(0), _rdzv(1)], [_ENGINE, *nccl])
    assert not [f for f in analyse(paths).findings if "never joined" in f.title]


# ------------------------------------------------------------------ engine death, older wordings

def test_v0_launcher_finding_its_engine_dead_is_engine_dead(tmp_path):
    assert ranked("a/vllm_vllm_13939_mqllmengine_already_dead_after_requests", tmp_path)[:1] == ["engine_dead"]


def test_engine_dead_wording_needs_the_engine_name():
    entry = default_catalogue()["engine_dead"]
    assert entry.search("CRITICAL 02-25 11:11:34 launcher.py:101] MQLLMEngine is already dead, terminating server process")
    assert entry.search("INFO 02-25 11:11:34 worker.py:1] the old checkpoint is already dead weight") is None
