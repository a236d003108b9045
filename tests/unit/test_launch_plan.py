"""The launch plan (pure): per-node commands, fabric pinning, mounts, labels; the assessment of what
is already running; `ray status` parsing; the launch-cluster.sh command line."""

from __future__ import annotations

import shlex

import pytest

from sparktui.actions.cluster_plan import PlanError, plan_cluster, strip_owned
from sparktui.config import parse_config
from sparktui.probes.cluster import LABEL, LABEL_LAUNCH, LABEL_PLAN, ClusterContainer, ClusterView, assess, \
    parse_ray_status

BASE = """
[cluster]
name = "vllm_qwen35"
image = "vllm-node-qwen35"
model_path = "/home/aurora/models/Qwen3.5 FP8"
model_mount = "/models/q"
serve_port = 8001
{extra}
[cluster.env]
HF_TOKEN = "hf_secret"

[[node]]
name = "spark1"
host = "10.1.230.180"
fabric_ip = "192.168.200.12"
fabric_if = "enp1s0f1np1"
ib_hcas = ["rocep1s0f1", "roceP2p1s0f1"]
role = "head"

[[node]]
name = "spark2"
host = "10.1.230.181"
fabric_ip = "192.168.200.13"
fabric_if = "enp1s0f1np1"
ib_hcas = ["rocep1s0f1", "roceP2p1s0f1"]
{node2}
"""


def cfg(extra: str = "", node2: str = "", nodes3: bool = False):
    text = BASE.format(extra=extra, node2=node2)
    if nodes3:
        text += '\n[[node]]\nname = "spark3"\nhost = "10.1.230.182"\nfabric_ip = "192.168.200.14"\nfabric_if = "enp1s0f1np1"\n'
    return parse_config(text, "t.toml")


def test_mp_plan_ranks_headless_and_pinning():
    p = plan_cluster(cfg('executor = "mp"'), launch_id="abc")
    head, w = p.nodes
    assert (head.node, head.rank, w.node, w.rank) == ("spark1", 0, "spark2", 1)
    assert p.tp == 2  # one GPU per node by default
    assert head.command[:3] == ("vllm", "serve", "/models/q")
    assert "--headless" not in head.command and w.command.count("--headless") == 1
    for np, ip in ((head, "192.168.200.12"), (w, "192.168.200.13")):
        c = list(np.command)
        assert c[c.index("--nnodes") + 1] == "2" and c[c.index("--node-rank") + 1] == str(np.rank)
        assert c[c.index("--master-addr") + 1] == "192.168.200.12"
        assert np.env["VLLM_HOST_IP"] == ip and np.env["MASTER_ADDR"] == "192.168.200.12"
        for k in ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME", "UCX_NET_DEVICES"):
            assert np.env[k] == "enp1s0f1np1"
        assert np.env["NCCL_IB_HCA"] == "rocep1s0f1,roceP2p1s0f1"
        assert np.env["NCCL_RAS_ENABLE"] == "1"  # the investigator's pre-armed env
        assert "RAY_NODE_IP_ADDRESS" not in np.env and "SGLANG_HOST_IP" not in np.env
        # RDMA nodes: devices, IPC_LOCK, memlock; host network and IPC; the model read-only
        assert np.devices == ("/dev/infiniband",) and "IPC_LOCK" in np.cap_add
        assert ("memlock", -1, -1) in np.ulimits and np.ipc_mode == "host"
        assert np.volumes["/home/aurora/models/Qwen3.5 FP8"] == {"bind": "/models/q", "mode": "ro"}
        assert np.labels[LABEL] == "vllm_qwen35" and np.labels[LABEL_LAUNCH] == "abc"
    assert p.serve_argv == ()


def test_ray_plan_starts_ray_and_serves_in_the_head():
    p = plan_cluster(cfg('executor = "ray"\nray_port = 6380'))
    head, w = p.nodes
    assert head.command[:4] == ("ray", "start", "--block", "--head")
    assert list(w.command)[list(w.command).index("--address") + 1] == "192.168.200.12:6380"
    assert w.env["RAY_NODE_IP_ADDRESS"] == w.env["RAY_OVERRIDE_NODE_IP_ADDRESS"] == "192.168.200.13"
    assert p.serve_argv[:2] == ("vllm", "serve")
    assert p.serve_argv[p.serve_argv.index("--distributed-executor-backend") + 1] == "ray"


def test_sglang_plan_pins_host_ip_and_dist_init():
    p = plan_cluster(cfg('executor = "mp"\nengine = "sglang"\nmaster_port = 20000'))
    for np in p.nodes:
        c = list(np.command)
        assert c[:3] == ["python3", "-m", "sglang.launch_server"]
        assert c[c.index("--dist-init-addr") + 1] == "192.168.200.12:20000"
        assert c[c.index("--node-rank") + 1] == str(np.rank)
        assert np.env["SGLANG_HOST_IP"] == np.env["VLLM_HOST_IP"]
    with pytest.raises(PlanError, match="executor"):
        plan_cluster(cfg('executor = "ray"\nengine = "sglang"'))


def test_tp_defaults_to_gpus_and_n_nodes():
    p = plan_cluster(cfg('executor = "mp"', nodes3=True))
    assert p.tp == 3 and [n.rank for n in p.nodes] == [0, 1, 2]
    assert all("--nnodes" in n.command and n.command[n.command.index("--nnodes") + 1] == "3" for n in p.nodes)
    p = plan_cluster(cfg('executor = "mp"\ntensor_parallel = 4', node2="gpu_count = 3"))
    assert p.tp == 4


def test_owned_serve_args_are_dropped_with_a_warning():
    args, dropped = strip_owned(("--trust-remote-code", "--distributed-executor-backend", "ray", "-tp=2",
                                 "--reasoning-parser", "qwen3", "--headless"))
    assert args == ("--trust-remote-code", "--reasoning-parser", "qwen3")
    assert dropped == ["--distributed-executor-backend ray", "-tp=2", "--headless"]
    p = plan_cluster(cfg('executor = "mp"\nserve_args = ["--distributed-executor-backend", "ray", "--enforce-eager"]'))
    assert p.warnings and "--enforce-eager" in p.head.command
    assert list(p.head.command).count("--distributed-executor-backend") == 1


def test_commands_text_is_exact_and_hides_secrets():
    p = plan_cluster(cfg('executor = "mp"'))
    text = p.commands_text()
    assert "hf_secret" not in text and "HF_TOKEN=***" in text
    line = [l for l in text.splitlines() if l.startswith("docker run")][0]
    argv = shlex.split(line)  # a path with a space stays one word
    assert "/home/aurora/models/Qwen3.5 FP8:/models/q:ro" in argv
    assert argv[argv.index("--device") + 1] == "/dev/infiniband"


def test_private_ipc_and_no_rdma_on_plain_nodes():
    c = parse_config('[cluster]\nipc = "private"\nshm_size = "1g"\nexecutor = "mp"\n[[node]]\nname = "a"\n'
                     'host = "127.0.0.2"\n[[node]]\nname = "b"\nhost = "127.0.0.3"\n[node.env]\nX = "1"\n', "t")
    p = plan_cluster(c)
    a, b = p.nodes
    assert a.ipc_mode is None and a.shm_size == "1g" and a.devices == () and "IPC_LOCK" not in a.cap_add
    assert all(u[0] != "memlock" for u in a.ulimits)
    assert a.env["VLLM_HOST_IP"] == "127.0.0.2" and b.env["X"] == "1" and "X" not in a.env


def test_a_node_without_an_address_is_a_plan_error():
    c = parse_config('[cluster]\n[[node]]\nname = "a"\nhost = "spark-alias"\n', "t")
    with pytest.raises(PlanError, match="fabric_ip"):
        plan_cluster(c)


def _c(node, name="vllm_node", state="running", status="Up 2 minutes", labels=None):
    return ClusterContainer(node=node, name=name, id=node * 8, state=state, status=status, image="img",
                            image_id="sha256:1", labels=labels or {})


def _ours(node, rank, launch="L1", plan="P", **kw):
    return _c(node, labels={LABEL: "vllm_node", LABEL_LAUNCH: launch, LABEL_PLAN: plan, "sparktui.rank": str(rank)},
              **kw)


def test_assess_running_half_stale_absent():
    nodes = ["spark1", "spark2"]
    assert assess(ClusterView("vllm_node", {"spark1": [], "spark2": []}), nodes).state == "absent"
    run = ClusterView("vllm_node", {"spark1": [_ours("spark1", 0)], "spark2": [_ours("spark2", 1)]})
    a = assess(run, nodes, "P")
    assert (a.state, a.launch, a.findings) == ("running", "L1", ())
    # the same containers from another plan (image or args changed) are stale, not this cluster
    a = assess(run, nodes, "OTHER")
    assert a.state == "stale" and {f.id for f in a.findings} == {"stale_container"}
    half = ClusterView("vllm_node", {"spark1": [_ours("spark1", 0)],
                                     "spark2": [_ours("spark2", 1, state="exited", status="Exited (137) 1 minute ago")]})
    a = assess(half, nodes)
    assert a.state == "half" and [f.id for f in a.findings] == ["half_cluster"]
    assert "spark2 exited (137)" in a.findings[0].title
    one_node = ClusterView("vllm_node", {"spark1": [_ours("spark1", 0)], "spark2": []})
    assert assess(one_node, nodes).state == "half"
    manual = ClusterView("vllm_node", {"spark1": [_c("spark1")], "spark2": []})
    a = assess(manual, nodes)
    assert a.state == "stale" and "no launch label" in a.findings[0].title
    assert a.findings[0].advice  # from the catalogue


def test_parse_ray_status_counts_active_nodes_and_gpus():
    text = """======== Autoscaler status: 2026-12-01 02:40:01 ========
Node status
---------------------------------------------------------------
Active:
 1 node_0a1b2c
Pending:
 1 node_ffff
Recent failures:
 (no failures)

Resources
---------------------------------------------------------------
Total Usage:
 0.0/2.0 CPU
 0.0/1.0 GPU
"""
    assert parse_ray_status(text) == (1, 1.0)
    assert parse_ray_status("") == (0, 0.0)


def test_launcher_script_argv_options_before_exec_and_quoted_words():
    from sparktui.actions.base import ActionContext
    from sparktui.actions.launch_script import script_argv

    c = cfg('launcher = "spark-vllm-docker"\nlauncher_dir = "/home/aurora/spark-vllm-docker"\n'
            'serve_args = ["--speculative-config", "{\\"method\\": \\"mtp\\"}"]')
    with pytest.raises(PlanError, match="whitespace"):  # the model path has a space: cannot pass the script
        script_argv(ActionContext(c, {}), "x")
    c = parse_config(BASE.format(extra='launcher_dir = "/opt/svd"\nserve_args = ["--speculative-config", '
                                       '"{\\"method\\": \\"mtp\\"}"]', node2="").replace(
        "Qwen3.5 FP8", "Qwen3.5-FP8").replace('HF_TOKEN = "hf_secret"', 'A = "1"'), "t")
    argv, log = script_argv(ActionContext(c, {}), "id1")
    inner = argv[argv.index("env"):]
    assert inner[1] == "VLLM_SPARK_EXTRA_DOCKER_ARGS=-v /home/aurora/models/Qwen3.5-FP8:/models/q:ro -e A=1"
    assert inner.index("-n") < inner.index("--name") < inner.index("exec")
    words = inner[inner.index("exec") + 1:]
    # exec joins its words and runs them with bash -c: each word is pre-quoted, so JSON survives
    assert shlex.split(" ".join(words))[-2:] == ["--speculative-config", '{"method": "mtp"}']
    assert log.endswith("/launcher-id1.log")


def test_launch_containers_carry_the_operators_labels_outside_the_plan_identity():
    from sparktui.actions.base import ActionContext
    from sparktui.actions.lock import LABEL_ACTION, LABEL_OPERATOR, LABEL_SESSION, owner_labels

    c = cfg('executor = "mp"')
    ctx = ActionContext(c, {}, session_id="sess-1")
    ctx.action_name = "launch"
    owner = owner_labels(ctx)
    p = plan_cluster(c, launch_id="abc", owner=owner)
    assert "@" in owner[LABEL_OPERATOR]
    for np in p.nodes:
        assert np.labels[LABEL_ACTION] == "launch" and np.labels[LABEL_SESSION] == "sess-1"
        assert np.labels[LABEL_OPERATOR] == owner[LABEL_OPERATOR] and np.labels[LABEL] == "vllm_qwen35"
        assert f"{LABEL_OPERATOR}={owner[LABEL_OPERATOR]}" in np.docker_run_argv()
    # who launched it is not what it is: another operator's identical launch is the same cluster (attach)
    assert p.plan_hash == plan_cluster(c, launch_id="abc").plan_hash


def test_summary_lines_one_per_node_mp_and_ray():
    # issue 32 item 1: what a person checks before yes, one line per node, not 1,700-char commands
    for executor, rendezvous in (("mp", "29501 master"), ("ray", "6379 ray")):
        p = plan_cluster(cfg(f'executor = "{executor}"'), launch_id="abc")
        head, worker = p.summary_lines()
        assert len(p.summary_lines()) == len(p.nodes)
        assert head.split()[:4] == ["spark1", "head", "192.168.200.12", "vllm-node-qwen35"]
        assert worker.split()[:4] == ["spark2", "worker", "192.168.200.13", "vllm-node-qwen35"]
        assert f"vllm/{executor}" in head and "rank 0/2 TP 2" in head and "rank 1/2 TP 2" in worker
        assert f"ports 8001 api, {rendezvous}" in head
        assert f"ports joins spark1:{rendezvous.split()[0]}" in worker
        for line in (head, worker):
            assert "/home/aurora/models/Qwen3.5 FP8:/models/q:ro" in line and "docker" not in line
            assert len(line) <= 200 and "hf_secret" not in line


def test_wrapped_commands_are_the_same_shell_commands_one_group_a_line():
    p = plan_cluster(cfg('executor = "ray"'))
    flat, wrapped = p.commands_text(), p.commands_text(wrapped=True)
    assert shlex.split(wrapped.replace("\\\n", ""), comments=True) == shlex.split(flat, comments=True)
    lines = wrapped.splitlines()
    assert max(map(len, lines)) <= 120 and "    -e 'HF_TOKEN=***' \\" in lines
    assert "    --node-ip-address 192.168.200.13 \\" in lines and "    --distributed-executor-backend ray" in lines
