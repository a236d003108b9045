#!/bin/bash
# Test-bed copy of eugr/spark-vllm-docker's launch-cluster.sh as of 2026-01-28 (commit 74c02c3, the
# Ray-based version), rewritten from that version's documented behaviour for the sparktui test bed.
# It keeps that version's behaviour, traps included, because sparktui has to cope with them:
#   - any unknown argument ends option parsing and becomes the exec command (later flags such as
#     -e/--solo/--no-ray silently run as a shell command); exec joins its words, quoting is lost;
#   - DOCKER_ARGS + $VLLM_SPARK_EXTRA_DOCKER_ARGS are appended unquoted, and re-parsed by the
#     worker's shell inside `ssh worker "docker run ..."`;
#   - an already running container of that name is reused ("Skipping launch."), image rebuilds or not;
#   - wait_for_cluster asks `ray status` on the head only, never whether the worker joined;
#   - exec always sets `trap cleanup EXIT INT TERM HUP`, even with -d: when the command ends, or
#     the SSH session drops, both containers are stopped (and, being --rm, removed with their logs).
# Test-bed deviations (every bed node is a real sshd + dockerd on a loopback address of ONE host):
#   - no `--gpus all`: there are no GPUs (run-cluster-node.sh gives Ray --num-gpus instead);
#   - no `--privileged`: this sandbox's runc refuses it ("unable to apply caps"); nothing here needs
#     it (no RDMA devices);
#   - `--ipc=host` is replaced by `--shm-size 1g`: the nodes share one kernel, and with host IPC vLLM
#     takes ranks in different containers for one node (the head waits forever for an ipc:// socket);
#   - head IP: the real one takes the IPv4 of ETH_IF; here every node's address lives on `lo`
#     (127.0.0.1/8), so when that address is not in -n, the server address of $SSH_CONNECTION (the
#     node this session reached) is taken if it is in -n; otherwise the real error;
#   - no RDMA: without ibdev2netdev, ETH_IF defaults to lo and IB_IF stays empty (then no --ib-if
#     goes to run-cluster-node.sh); with it, the real discovery (§1.2) runs;
#   - node scan without -n: the real one probes every host of ETH_IF's CIDR; lo's is a /8, so this
#     copy probes the /24 of the head address (port 22, nc or bash's /dev/tcp);
#   - --apply-mod takes a directory (no zip).
# -d: `start -d` returns once the head's Ray answers; `start` without it follows the head's
# `docker logs` and stops the cluster when it ends; exec ignores -d (issue #63 of that version).
# Ray listens on 6379 as in the real script; two beds at once can move it with
# VLLM_SPARK_EXTRA_DOCKER_ARGS="-e SPARKTUI_TESTBED_RAY_PORT=N" (the bed's run-cluster-node.sh).
# Messages other than the ones quoted in the reference are this copy's own.

IMAGE_NAME="vllm-node"
DEFAULT_CONTAINER_NAME="vllm_node"
ACTION="start"
CONTAINER_NAME=""
NODES_ARG=""
ETH_IF=""
IB_IF=""
NCCL_DEBUG_VAL=""
CHECK_CONFIG="false"
DAEMON_MODE="false"
COMMAND_TO_RUN=""
CLUSTER_WAS_RUNNING="false"
MOD_PATHS=()

usage() {
    echo "Usage: $0 [-n <node_ips>] [-t <image>] [--name <container>] [--eth-if <if>] [--ib-if <hcas>]"
    echo "          [--nccl-debug [VERSION|WARN|INFO|TRACE]] [--apply-mod <dir>]... [--check-config] [-d]"
    echo "          [start|stop|status|exec <command...>]"
    exit 1
}

while [[ "$#" -gt 0 ]]; do
    case "$1" in
        -n|--nodes) NODES_ARG="$2"; shift ;;
        -t) IMAGE_NAME="$2"; shift ;;
        --name) CONTAINER_NAME="$2"; shift ;;
        --eth-if) ETH_IF="$2"; shift ;;
        --ib-if) IB_IF="$2"; shift ;;
        --apply-mod) MOD_PATHS+=("$2"); shift ;;
        --nccl-debug)
            if [[ "$2" =~ ^(VERSION|WARN|INFO|TRACE)$ ]]; then
                NCCL_DEBUG_VAL="$2"; shift
            else
                NCCL_DEBUG_VAL="INFO"  # bare --nccl-debug
            fi
            ;;
        --check-config) CHECK_CONFIG="true" ;;
        -d) DAEMON_MODE="true" ;;
        -h|--help) usage ;;
        start|stop|status) ACTION="$1" ;;
        exec)
            ACTION="exec"; shift
            COMMAND_TO_RUN="$*"  # words joined with spaces: the caller's quoting is gone
            break
            ;;
        *)
            # the trap: anything unknown (a newer flag too) is taken as the command to exec
            ACTION="exec"
            COMMAND_TO_RUN="$*"
            break
            ;;
    esac
    shift
done

CONTAINER_NAME="${CONTAINER_NAME:-$DEFAULT_CONTAINER_NAME}"

DOCKER_ARGS="-e NCCL_IGNORE_CPU_AFFINITY=1 -v $HOME/.cache/huggingface:/root/.cache/huggingface"
if [[ -n "$NCCL_DEBUG_VAL" ]]; then
    DOCKER_ARGS="$DOCKER_ARGS -e NCCL_DEBUG=$NCCL_DEBUG_VAL"
fi
if [[ -n "$VLLM_SPARK_EXTRA_DOCKER_ARGS" ]]; then
    DOCKER_ARGS="$DOCKER_ARGS $VLLM_SPARK_EXTRA_DOCKER_ARGS"  # unquoted on purpose (as the real one)
fi

# ---------------------------------------------------------------- discovery (autodiscover.sh, §1.2)
detect_interfaces() {
    if ! command -v ibdev2netdev >/dev/null 2>&1; then
        # test bed: no RDMA anywhere; every node's address is on lo
        ETH_IF="${ETH_IF:-lo}"
        return 0
    fi
    local up
    up=$(ibdev2netdev | awk '/Up\)/ {print $1" "$5}')
    if [[ -z "$up" ]]; then
        echo "Error: No active IB interfaces found"
        return 1
    fi
    if [[ -z "$IB_IF" ]]; then
        IB_IF=$(echo "$up" | awk '{print $1}' | paste -sd, -)
    fi
    if [[ -z "$ETH_IF" ]]; then
        local dev cand="" first=""
        # first Up netdev with an IPv4, preferring names without a capital P (enp1s0f1np1 over enP2p1s0f1np1)
        for dev in $(echo "$up" | awk '{print $2}'); do
            ip -4 -o addr show "$dev" 2>/dev/null | grep -q inet || continue
            [[ -z "$first" ]] && first="$dev"
            if [[ "$dev" != *P* && -z "$cand" ]]; then cand="$dev"; fi
        done
        ETH_IF="${cand:-$first}"
        if [[ -z "$ETH_IF" ]]; then
            echo "Error: No active IB-associated interfaces have IP addresses"
            return 1
        fi
    fi
}

if_ipv4() {
    ip -4 -o addr show "$1" 2>/dev/null | awk '{print $4}' | cut -d/ -f1 | head -n 1
}

in_nodes() {
    local n
    for n in "${NODES[@]}"; do [[ "$n" == "$1" ]] && return 0; done
    return 1
}

port_open() {
    if command -v nc >/dev/null 2>&1; then
        nc -z -w 1 "$1" 22 >/dev/null 2>&1
    else
        timeout 1 bash -c "exec 3<>/dev/tcp/$1/22" >/dev/null 2>&1
    fi
}

detect_nodes() {
    local base="$1" i
    NODES=()
    for i in $(seq 1 254); do
        port_open "$base.$i" && NODES+=("$base.$i")
    done
}

if [[ -z "$ETH_IF" || -z "$IB_IF" ]]; then
    detect_interfaces || exit 1
fi

LOCAL_IP=$(if_ipv4 "$ETH_IF")
SSH_SERVER_IP=$(echo "$SSH_CONNECTION" | awk '{print $3}')

if [[ -n "$NODES_ARG" ]]; then
    IFS=',' read -r -a NODES <<< "$NODES_ARG"
else
    # test bed: the /24 of the node this session reached (see the header)
    detect_nodes "$(echo "${SSH_SERVER_IP:-$LOCAL_IP}" | cut -d. -f1-3)"
fi

if ! in_nodes "$LOCAL_IP" && [[ -n "$SSH_SERVER_IP" ]] && in_nodes "$SSH_SERVER_IP"; then
    LOCAL_IP="$SSH_SERVER_IP"  # test bed: lo's 127.0.0.1 is every node's; the sshd's address is this node's
fi
if ! in_nodes "$LOCAL_IP"; then
    echo "Error: Local IP ($LOCAL_IP) is not in the list of nodes (${NODES[*]})"
    exit 1
fi
HEAD_IP="$LOCAL_IP"
WORKER_IPS=()
for n in "${NODES[@]}"; do
    [[ "$n" != "$HEAD_IP" ]] && WORKER_IPS+=("$n")
done

IB_ARGS=""
if [[ -n "$IB_IF" ]]; then
    IB_ARGS="--ib-if $IB_IF"  # test bed: left out when there is no IB at all
fi

if [[ "$CHECK_CONFIG" == "true" ]]; then
    echo "Head: $HEAD_IP"
    echo "Workers: ${WORKER_IPS[*]}"
    echo "ETH_IF: $ETH_IF"
    echo "IB_IF: $IB_IF"
    echo "Image: $IMAGE_NAME"
    echo "Container: $CONTAINER_NAME"
    echo "Docker args: $DOCKER_ARGS"
    exit 0
fi

# ---------------------------------------------------------------- cluster
check_ssh() {
    local w
    for w in "${WORKER_IPS[@]}"; do
        # host keys are verified: the bed's ssh config (known_hosts, StrictHostKeyChecking yes) decides
        if ! ssh -o BatchMode=yes -o ConnectTimeout=5 "$w" true >/dev/null 2>&1; then
            echo "Error: Passwordless SSH to $w failed."
            exit 1
        fi
    done
}

check_cluster_running() {
    local running="false" w
    if docker ps --format '{{.Names}}' | grep -q "^${CONTAINER_NAME}\$"; then
        running="true"
    fi
    for w in "${WORKER_IPS[@]}"; do
        if ssh "$w" "docker ps --format '{{.Names}}' | grep -q '^${CONTAINER_NAME}\$'"; then
            running="true"
        fi
    done
    if [[ "$running" == "true" ]]; then
        echo "Cluster containers are already running. Skipping launch."
        CLUSTER_WAS_RUNNING="true"
        return 0
    fi
    return 1
}

node_cmd() {  # $1 role, $2 host ip
    local cmd="./run-cluster-node.sh --role $1 --host-ip $2 --eth-if $ETH_IF $IB_ARGS"
    [[ "$1" == "node" ]] && cmd="$cmd --head-ip $HEAD_IP"
    echo "$cmd"
}

MOD_WAIT='while [ ! -f /tmp/mod_done ]; do sleep 1; done; exec'  # with mods: Ray starts once they ran

apply_mods() {  # copy each mod to every node's container, run its run.sh, then let Ray start
    local mod name ip
    for mod in "${MOD_PATHS[@]}"; do
        mod="${mod%/}"
        name=$(basename "$mod")
        docker exec "$CONTAINER_NAME" mkdir -p /workspace/mods
        docker cp "$mod" "$CONTAINER_NAME:/workspace/mods/$name" >/dev/null
        if ! docker exec "$CONTAINER_NAME" bash -c "cd /workspace/mods/$name && ./run.sh"; then
            echo "Error: Patch script failed on $HEAD_IP"
            exit 1
        fi
        for ip in "${WORKER_IPS[@]}"; do
            ssh "$ip" "rm -rf /tmp/mod_$name && mkdir -p /tmp/mod_$name" && scp -rq "$mod/." "$ip:/tmp/mod_$name/"
            if ! ssh "$ip" "docker exec $CONTAINER_NAME mkdir -p /workspace/mods && docker cp /tmp/mod_$name $CONTAINER_NAME:/workspace/mods/$name >/dev/null && docker exec $CONTAINER_NAME bash -c 'cd /workspace/mods/$name && ./run.sh'"; then
                echo "Error: Patch script failed on $ip"
                exit 1
            fi
        done
    done
    docker exec "$CONTAINER_NAME" touch /tmp/mod_done
    for ip in "${WORKER_IPS[@]}"; do
        ssh "$ip" "docker exec $CONTAINER_NAME touch /tmp/mod_done"
    done
}

wait_for_cluster() {  # the head's `ray status` only: whether the workers joined is never checked
    local i
    for i in $(seq 1 30); do
        if docker exec "$CONTAINER_NAME" ray status >/dev/null 2>&1; then
            sleep 5
            return 0
        fi
        sleep 2
    done
    echo "Timeout waiting for cluster to start."
    exit 1
}

start_cluster() {
    check_cluster_running && return 0
    local w
    # test bed: no --gpus all, no --privileged, --shm-size 1g instead of --ipc=host (see the header)
    local run="docker run -d --rm --shm-size 1g --network host --name $CONTAINER_NAME"
    if [[ ${#MOD_PATHS[@]} -gt 0 ]]; then
        $run $DOCKER_ARGS $IMAGE_NAME bash -c "$MOD_WAIT $(node_cmd head "$HEAD_IP")" || exit 1
    else
        $run $DOCKER_ARGS $IMAGE_NAME $(node_cmd head "$HEAD_IP") || exit 1
    fi
    for w in "${WORKER_IPS[@]}"; do
        # the worker's shell parses this line again: DOCKER_ARGS' words are re-split there
        if [[ ${#MOD_PATHS[@]} -gt 0 ]]; then
            ssh "$w" "$run $DOCKER_ARGS $IMAGE_NAME bash -c '$MOD_WAIT $(node_cmd node "$w")'" || exit 1
        else
            ssh "$w" "$run $DOCKER_ARGS $IMAGE_NAME $(node_cmd node "$w")" || exit 1
        fi
    done
    [[ ${#MOD_PATHS[@]} -gt 0 ]] && apply_mods
    wait_for_cluster
}

stop_cluster() {
    local w
    docker stop "$CONTAINER_NAME"
    for w in "${WORKER_IPS[@]}"; do
        ssh "$w" "docker stop $CONTAINER_NAME"
    done
}

cleanup() {
    trap - EXIT INT TERM HUP
    # not ours to stop: it was running before this launch
    [[ "$CLUSTER_WAS_RUNNING" == "true" ]] && return
    echo ""
    echo "Stopping cluster..."
    stop_cluster >/dev/null 2>&1
    echo "Cluster stopped."
}

case "$ACTION" in
    start)
        check_ssh
        if [[ "$DAEMON_MODE" == "true" ]]; then
            start_cluster
        else
            trap cleanup EXIT INT TERM HUP
            start_cluster
            docker logs -f "$CONTAINER_NAME"
        fi
        ;;
    stop)
        stop_cluster
        ;;
    status)
        if docker ps | grep -q "$CONTAINER_NAME"; then  # substring match, as the real one
            echo "Head ($HEAD_IP): RUNNING"
            docker exec "$CONTAINER_NAME" ray status
        else
            echo "Head ($HEAD_IP): NOT running"
        fi
        for w in "${WORKER_IPS[@]}"; do
            if ssh "$w" "docker ps | grep -q $CONTAINER_NAME"; then
                echo "Worker ($w): RUNNING"
            else
                echo "Worker ($w): NOT running"
            fi
        done
        ;;
    exec)
        check_ssh
        trap cleanup EXIT INT TERM HUP  # always, -d or not: the command's end stops the cluster
        start_cluster
        if [[ -t 0 ]]; then
            docker exec -it "$CONTAINER_NAME" bash -i -c "$COMMAND_TO_RUN"
        else
            docker exec -i "$CONTAINER_NAME" bash -i -c "$COMMAND_TO_RUN"
        fi
        ;;
esac
