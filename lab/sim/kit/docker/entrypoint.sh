#!/usr/bin/env bash
# Lab simulator of the kit's docker/entrypoint.sh: one TensorFold rank per container.
# serve.sh passes RANK, MASTER, MASTER_PORT, MODEL_PATH and the serving options as
# environment; rank 0 alone gets --host/--port (rank 1 has no HTTP server).
set -euo pipefail

t0=${GLM53_TF_LAUNCH_T0:-}
if [ -n "$t0" ]; then
  since=$(awk -v now="$(date +%s.%N)" -v t0="$t0" 'BEGIN { printf "%.1f", now - t0 }')
else
  since=0.0
fi
echo "[boot] r${RANK:-?} +${since}s container started"
# The lab's simulated engine prints that line itself unless told the entrypoint did.
export GLM53_LAB_CONTAINER_LINE=0

mkdir -p "$TORCH_EXTENSIONS_DIR" "$TRITON_CACHE_DIR" "$CUDA_CACHE_PATH"
# A start killed mid-compile leaves a lock behind and the next start would wait on it.
find "$TORCH_EXTENSIONS_DIR" -name lock -type f -delete 2>/dev/null || true

: "${RANK:?RANK is not set (serve.sh sets it)}"
: "${MASTER:?MASTER is not set (serve.sh sets it from HEAD_IP)}"
: "${MODEL_PATH:?MODEL_PATH is not set}"

args=(serve "$MODEL_PATH" --tp 2 --rank "$RANK" --master "$MASTER" --master-port "${MASTER_PORT:-29551}"
  --no-update-check)
[ -n "${DRAFTER:-}" ] && args+=(--drafter "$DRAFTER")
[ -n "${CONTEXT:-}" ] && args+=(--context "$CONTEXT")
[ -n "${SERVED_NAME:-}" ] && args+=(--name "$SERVED_NAME")
[ -n "${MAX_TOKENS:-}" ] && args+=(--max-tokens "$MAX_TOKENS")
[ -n "${MTP_DRAFTS:-}" ] && args+=(--mtp-drafts "$MTP_DRAFTS")
[ "${NO_DRAFTS:-0}" = 1 ] && args+=(--no-drafts)
[ "$RANK" = 0 ] && args+=(--host "${HOST:-127.0.0.1}" --port "${PORT:-8000}")
# EXTRA_ARGS is a list of words on purpose.
# shellcheck disable=SC2206
args+=(${EXTRA_ARGS:-})
exec tensorfold "${args[@]}"
