"""More detectors that generalise (issue 12, part c): launcher ssh failures, parallel-layout checks,
model files, NCCL init/network/mismatch wordings, Ray worker exits and placement demands.

One test (or one row of tests/fixtures/named_first.toml) per detector, on a held-in excerpt of the
corpus (``score_corpus.part_of`` decides; a held-out file is refused) or on a real line quoted from a held-in case.  Held-out cases are only
ever measured by ``scripts/score_corpus.py --part out``.
"""

from __future__ import annotations

from pathlib import Path

from sparktui.commands.diagnose import analyse
from sparktui.diagnosis.catalogue import default_catalogue
from sparktui.diagnosis.exc_shapes import default_shapes

from corpus_helpers import held_in, line_of, named, part_of, read_header

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


# ----------------------------------------------------------------------------- parallel layout

def test_world_size_vs_local_gpus_is_an_executor_misconfiguration():
    # vllm#15217 (a case named into the held-in part): -pp 2 over two nodes with the local executor
    assert part_of("vllm_vllm_15217_world_size_exceeds_local_gpus") == "in"
    assert default_shapes().classify_line(
        "RuntimeError: please ensure that world_size (2) is less than than max local gpu count (1)") \
        == "multinode_executor_misconfig"


# ----------------------------------------------------------------------------- GPU capability

def test_caught_importerror_warning_does_not_mask_the_bf16_error():
    # vLLM logs "Failed to import from vllm._C with ImportError('libcudart...')" as a WARNING and goes on;
    # the failure is the bf16 ValueError on a V100
    got = named(held_in("a/vllm_glm4_510_v100_bf16_dtype"))
    assert got[0] == "dtype_unsupported_gpu"
    assert "broken_install" not in got


# ----------------------------------------------------------------------------- NCCL

def test_comm_init_with_arguments_and_a_cause_names_both():
    got = named(held_in("b/nccl_marin_7018_jax_comminitrankconfig_no_socket_interface"))
    assert got[0] == "wrong_network_interface"
    line = line_of("b/nccl_marin_7018_jax_comminitrankconfig_no_socket_interface", "ncclCommInitRankConfig(")
    assert default_catalogue().match(line).id == "nccl_comm_init_failed"


def test_net_connection_closed_by_remote_peer_any_socket_function():
    # NCCL 2.14's "Net :" wording (not socketProgress) of a peer that went away
    line = line_of("b/nccl_nccl_795_broken_pipe_remote_crash", "Net : Connection closed by remote peer")
    assert default_catalogue().match(line).id == "nccl_network_error"


def test_internal_error_with_socket_recv_last_error():
    got = named(held_in("b/nccl_nccl_1546_barrier_internal_socket_recv_failed"))
    assert got[0] == "nccl_internal_error"


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


# ----------------------------------------------------------------------------- the healthy trap

def test_benign_nccl_plugin_probes_and_vllm_warnings_stay_clean():
    for rel in ("b/nccl_nccltests_321_plugin_symbol_probe_alltoall", "b/nccl_nccl_352_no_plugin_all_reduce_perf_ok",
                "b/nccl_nccl_226_question_multinode_socket_logs", "a/vllm_vllm_20707_startup_kv_cache_sampling_warning"):
        assert not [f for f in analyse(held_in(rel)).findings if f.severity == "error"], rel
