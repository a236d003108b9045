#!/bin/bash
# Test-bed copy of the launcher's per-node start script (spark-vllm-docker's run-cluster-node.sh
# interface: -r head|node -h HOST_IP -e ETH_IF -i IB_IF [-m HEAD_IP], long forms too).  It exports
# the fabric pinning the real one exports (and persists it in ~/.bashrc), then runs Ray.
# Test-bed deviations: `--num-gpus` is given (${SPARKTUI_TESTBED_GPUS:-1}) because there is no GPU
# for Ray to detect here and vLLM's placement group asks for one GPU per rank; the Ray port is
# ${SPARKTUI_TESTBED_RAY_PORT:-6379} (the real one always uses 6379) because two beds share one kernel;
# the dashboard is asked for only where its packages import: the real-vllm image has plain `ray`,
# not ray[default], and `ray start --include-dashboard=True` refuses to start without them.
set -e
GPUS=${SPARKTUI_TESTBED_GPUS:-1}
RAY_PORT=${SPARKTUI_TESTBED_RAY_PORT:-6379}
ROLE= HOST_IP= ETH_IF= IB_IF= HEAD_IP=
while [ $# -gt 0 ]; do
  case "$1" in
    -r|--role) ROLE=$2; shift 2 ;;
    -h|--host-ip) HOST_IP=$2; shift 2 ;;
    -e|--eth-if) ETH_IF=$2; shift 2 ;;
    -i|--ib-if) IB_IF=$2; shift 2 ;;
    -m|--head-ip) HEAD_IP=$2; shift 2 ;;
    *) echo "Unknown option: $1" >&2; exit 1 ;;
  esac
done
export_persist() { export "$1=$2"; echo "export $1=\"$2\"" >> /root/.bashrc; }
for v in VLLM_HOST_IP RAY_NODE_IP_ADDRESS RAY_OVERRIDE_NODE_IP_ADDRESS; do export_persist $v "$HOST_IP"; done
for v in MN_IF_NAME UCX_NET_DEVICES NCCL_SOCKET_IFNAME OMPI_MCA_btl_tcp_if_include GLOO_SOCKET_IFNAME TP_SOCKET_IFNAME; do
  export_persist $v "$ETH_IF"
done
export_persist NCCL_IB_HCA "$IB_IF"
export_persist NCCL_IB_DISABLE 0
export_persist RAY_memory_monitor_refresh_ms 0
if ! command -v ray >/dev/null 2>&1; then
  echo "run-cluster-node.sh: ray is not installed in this image" >&2
  exec sleep infinity
fi
if [ "$ROLE" = head ]; then
  DASHBOARD="--include-dashboard=True --dashboard-host 0.0.0.0 --dashboard-port 8265"
  python3 -c 'import ray.dashboard.optional_deps' 2>/dev/null || DASHBOARD="--include-dashboard=False"
  exec ray start --block --head --port "$RAY_PORT" --node-ip-address "$VLLM_HOST_IP" $DASHBOARD \
    --disable-usage-stats --num-gpus "$GPUS"
else
  exec ray start --block --address="$HEAD_IP:$RAY_PORT" --node-ip-address "$VLLM_HOST_IP" --num-gpus "$GPUS"
fi
