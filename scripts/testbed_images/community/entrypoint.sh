#!/bin/bash
# Env-driven entrypoint like the community Qwen3.5 GB10 images: it is configured
# with MODEL_PATH / HOST / PORT / MAX_MODEL_LEN / GPU_MEMORY_UTIL / SERVED_MODEL_NAME and ignores the
# arguments it is given (so `./run-cluster-node.sh ...` or `vllm serve ...` never reach vLLM).
if [ $# -gt 0 ]; then
  echo "entrypoint: ignoring arguments: $*"
fi
echo "entrypoint: starting vLLM with MODEL_PATH=${MODEL_PATH} PORT=${PORT}"
exec vllm serve "${MODEL_PATH}" --host "${HOST}" --port "${PORT}" --max-model-len "${MAX_MODEL_LEN}" \
  --gpu-memory-utilization "${GPU_MEMORY_UTIL}" --served-model-name "${SERVED_MODEL_NAME}"
