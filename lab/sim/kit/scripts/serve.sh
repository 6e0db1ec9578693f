#!/usr/bin/env bash
# Lab simulator of scripts/serve.sh of the 2x DGX Spark TensorFold kit
# (jayleaton/glm53-tensorfold-spark @ 5624dfc), for the dgx_spark.glm53 Spark lab.
# Written from the kit's documented behaviour, not from its code: the same config
# loading, names, subcommands, exit codes and `docker run` arguments, on the lab's
# simulated engine. What it leaves out is listed in AGENTS.md ("Simplified").
#
#   scripts/serve.sh build            build $IMAGE on the head, ship it to the worker
#   scripts/serve.sh preflight        read-only checks of both nodes
#   scripts/serve.sh start | restart  both ranks, wait for /v1/models, check the slots
#   scripts/serve.sh stop             remove both rank containers
#   scripts/serve.sh status           containers on both nodes, /v1/models, /health
#   scripts/serve.sh logs [0|1]       last $TAIL (80) lines of rank 0 (default) or 1
#
# Exit codes: 0 ok; 1 failed; 2 config (no config file, a placeholder left, unknown
# command); 3 fewer request slots than GLM53_TF_BATCH after the slot retries, with the
# server left running.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

log() { printf '[glm53-tf] %s\n' "$*"; }

usage() {
  echo "usage:"
  sed -n 's|^#   \(scripts/serve.sh .*\)|  \1|p' "$0"
}

# ------------------------------------------------------------------------- config

CONFIG=${CONFIG:-config/prod.env}
if [ ! -f "$CONFIG" ]; then
  log "no $CONFIG: cp config/prod.env.example $CONFIG and fill WORKER_SSH, HEAD_IP, HEAD_HF, WORKER_HF"
  [ -f config/tensorfold.env ] && log "(config/tensorfold.env is the old name of the config: copy the example instead)"
  exit 2
fi

# Keys the caller may override on the command line (non-empty values win over the file).
declare -A CALLER=()
while IFS= read -r key; do
  case $key in
    HEAD_PREPARED | WORKER_PREPARED | HEAD_SESSIONS | WORKER_SESSIONS | CONTEXT | MTP_DRAFTS | NO_DRAFTS | \
      IMAGE | PORT | HOST | DRAFTER | MODEL_PATH | EXTRA_ARGS | SERVED_NAME | MAX_TOKENS | CPUSET | \
      HEAD_CPUSET | WORKER_CPUSET | CANARY* | MEM_GATE_* | START_ATTEMPTS | READY_TIMEOUT | LOG_MAX_* | \
      WATCH_* | GPUWATCH_* | WARMUP_LENGTHS | PREFLIGHT | NCCL_PASSTHROUGH | PATCHES | GLM53_TF_*)
      [ -n "${!key-}" ] && CALLER[$key]=${!key}
      ;;
  esac
done < <(compgen -e)

case $CONFIG in /*) config_file=$CONFIG ;; *) config_file=./$CONFIG ;; esac
set -a
# shellcheck disable=SC1090
. "$config_file" || { set +a; log "$CONFIG: could not be read as a shell file"; exit 2; }
set +a
for key in "${!CALLER[@]}"; do export "$key=${CALLER[$key]}"; done

for key in WORKER_SSH HEAD_IP HEAD_HF WORKER_HF MODEL_PATH; do
  case ${!key-} in
    *'<'*'>'*) log "$CONFIG: set $key (still '${!key}')"; exit 2 ;;
  esac
done

NAME=${NAME:-glm53-tf}
IMAGE=${IMAGE:-glm53-tensorfold:dev}
PORT=${PORT:-8080}
MASTER_PORT=${MASTER_PORT:-29551}
R0=$NAME-r0
R1=$NAME-r1
CACHE_VOLUME=$NAME-cache
HEAD_HF=${HEAD_HF:-}
WORKER_HF=${WORKER_HF:-}
HEAD_PREPARED=${HEAD_PREPARED:-${HEAD_HF%/*}/glm53-tf/prepared}
WORKER_PREPARED=${WORKER_PREPARED:-${WORKER_HF%/*}/glm53-tf/prepared}
HEAD_SESSIONS=${HEAD_SESSIONS:-${HEAD_HF%/*}/glm53-tf/sessions}
WORKER_SESSIONS=${WORKER_SESSIONS:-${WORKER_HF%/*}/glm53-tf/sessions}
STATE_DIR=${XDG_STATE_HOME:-$HOME/.local/state}/glm53-tf
API=http://127.0.0.1:$PORT
WORKER_SSH=${WORKER_SSH:-}
SSH=(ssh -o BatchMode=yes -o ConnectTimeout=10 "$WORKER_SSH")

# A command on the worker, every word quoted for its shell.
remote() { "${SSH[@]}" "$(printf '%q ' "$@")"; }
# A shell line on the worker, as given.
remote_sh() { "${SSH[@]}" "$1"; }

need_worker() {
  if [ -z "$WORKER_SSH" ]; then
    log "$CONFIG: set WORKER_SSH (the ssh target of the worker)"
    exit 2
  fi
}

# ------------------------------------------------------------------------ helpers

# Page cache (MemAvailable - MemFree) and MemFree, whole GiB, of the node running it.
# Single-quoted on purpose: awk programs, expanded by awk, not by this shell.
# shellcheck disable=SC2016
CACHE_GIB_AWK='/^MemFree:/{f=$2} /^MemAvailable:/{a=$2} END{printf "%d\n", (a-f)/1048576}'
# shellcheck disable=SC2016
FREE_GIB_AWK='/^MemFree:/{printf "%d\n", $2/1048576}'

take_lock() {
  [ "${GLM53_TF_LOCKED:-0}" = 1 ] && return 0
  command -v flock >/dev/null 2>&1 || return 0
  mkdir -p "$STATE_DIR" 2>/dev/null || return 0
  exec 8>>"$STATE_DIR/lock" || return 0
  if ! flock -n 8; then
    log "another start (or a watchdog heal) is running"
    exit 1
  fi
}

stop_both() {
  docker rm -f "$R0" >/dev/null 2>&1 &
  local head=$!
  remote docker rm -f "$R1" >/dev/null 2>&1
  wait "$head"
  return 0
}

gpu_busy() {
  local head worker
  head=$(nvidia-smi --query-compute-apps=pid --format=csv,noheader 2>/dev/null)
  worker=$(remote nvidia-smi --query-compute-apps=pid --format=csv,noheader 2>/dev/null)
  [ -n "$head$worker" ]
}

context_check() {
  local ctx=${CONTEXT:-} kv=per-head
  [ "${GLM53_TF_LATENT_KV:-0}" = 1 ] && kv="latent ${GLM53_TF_KV_DTYPE:-bf16}"
  log "$CONFIG: CONTEXT=${ctx:-unset} tokens a request (prompt + max_tokens), KV cache $kv," \
    "GLM53_TF_BATCH=${GLM53_TF_BATCH:-1}, GLM53_TF_KV_POOL_TOKENS=${GLM53_TF_KV_POOL_TOKENS:-0}"
  if [ -z "$ctx" ]; then
    log "warning: CONTEXT is not set: the engine serves 2051 tokens a request"
    return 0
  fi
  case $ctx in
    *[!0-9]*) log "CONTEXT=$ctx is not a number of tokens"; return 1 ;;
  esac
  ((ctx <= 65536)) && log "warning: CONTEXT=$ctx is a short context for agent clients"
  if [ "$kv" = per-head ] && ((ctx > 131072)) && [ "${FORCE_CONTEXT:-0}" != 1 ]; then
    log "CONTEXT=$ctx needs the latent KV cache (GLM53_TF_LATENT_KV=1); FORCE_CONTEXT=1 tries anyway"
    return 1
  fi
  return 0
}

# Host path of a container path under the HF cache mount, on a node whose cache is $2.
host_path() {
  local path=$1 hf=$2
  case $path in
    /root/.cache/huggingface/*) printf '%s\n' "$hf${path#/root/.cache/huggingface}" ;;
    *) return 1 ;;
  esac
}

hf_hint() {
  local repo rev
  repo=$(printf '%s\n' "$1" | sed -n 's|.*/models--\([^/]*\)--\([^/]*\)/snapshots/.*|\1/\2|p')
  rev=${1##*/snapshots/}
  rev=${rev%%/*}
  [ -n "$repo" ] && printf 'hf download %s --revision %s' "$repo" "$rev"
}

preflight() {
  local problems=0 key missing="" head_addrs worker_addrs hca state_h state_w
  problem() { log "preflight: $*"; problems=$((problems + 1)); }
  warning() { log "preflight warning: $*"; }

  context_check || problems=$((problems + 1))
  for key in WORKER_SSH HEAD_IP NCCL_SOCKET_IFNAME NCCL_IB_HCA MODEL_PATH HEAD_HF WORKER_HF; do
    [ -n "${!key-}" ] || missing="$missing $key"
  done
  if [ -n "$missing" ]; then
    problem "$CONFIG: set$missing"
    return 1
  fi
  if ! remote true; then
    problem "cannot ssh to the worker ($WORKER_SSH) without a prompt: ssh-copy-id $WORKER_SSH"
    return 1
  fi
  docker info >/dev/null 2>&1 || problem "docker does not answer on the head (as $(id -un))"
  remote docker info >/dev/null 2>&1 || problem "docker does not answer on the worker"
  docker image inspect "$IMAGE" >/dev/null 2>&1 || problem "no image $IMAGE on the head: scripts/serve.sh build"
  remote docker image inspect "$IMAGE" >/dev/null 2>&1 ||
    problem "no image $IMAGE on the worker: scripts/serve.sh build ships it"
  [ -n "$(ls -A vendor/TensorFold 2>/dev/null)" ] ||
    warning "vendor/TensorFold is empty: git submodule update --init (the build copies it)"
  if command -v ip >/dev/null 2>&1; then
    head_addrs=$(ip -o -4 addr show dev "$NCCL_SOCKET_IFNAME" 2>/dev/null | awk '{split($4, a, "/"); print a[1]}')
    worker_addrs=$(remote ip -o -4 addr show dev "$NCCL_SOCKET_IFNAME" 2>/dev/null | awk '{split($4, a, "/"); print a[1]}')
    [ -n "$head_addrs" ] || problem "no IPv4 on $NCCL_SOCKET_IFNAME on the head"
    [ -n "$worker_addrs" ] || problem "no IPv4 on $NCCL_SOCKET_IFNAME on the worker"
    if [[ $HEAD_IP =~ ^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$ ]] && [ -n "$head_addrs" ] &&
      ! grep -qxF "$HEAD_IP" <<<"$head_addrs"; then
      problem "HEAD_IP=$HEAD_IP is not an address of the head's $NCCL_SOCKET_IFNAME (${head_addrs//$'\n'/ })"
    fi
  else
    warning "no ip command: link addresses not checked"
  fi
  hca=${NCCL_IB_HCA%%,*}
  hca=${hca%%:*}
  state_h=$(cat "/sys/class/infiniband/$hca/ports/1/state" 2>/dev/null)
  state_w=$(remote cat "/sys/class/infiniband/$hca/ports/1/state" 2>/dev/null)
  if [ -z "$state_h" ] || [ -z "$state_w" ]; then
    warning "cannot read the RDMA port state of $hca on both nodes"
  else
    [[ $state_h == *ACTIVE* ]] || problem "$hca is $state_h on the head, not ACTIVE"
    [[ $state_w == *ACTIVE* ]] || problem "$hca is $state_w on the worker, not ACTIVE"
  fi
  local mh mw
  mh=$(cat /proc/sys/vm/min_free_kbytes 2>/dev/null)
  mw=$(remote cat /proc/sys/vm/min_free_kbytes 2>/dev/null)
  [ "$mh" = "$mw" ] || warning "vm.min_free_kbytes differs: $mh (head) / $mw (worker)"
  local dh dw
  dh=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n1)
  dw=$(remote nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n1)
  [ "$dh" = "$dw" ] || warning "driver versions differ: $dh (head) / $dw (worker)"
  [[ $dh == 590.* || $dw == 590.* ]] && warning "driver 590.x has a reported CUDA-graph deadlock on GB10"
  local what path node hf host
  for what in MODEL_PATH DRAFTER; do
    path=${!what-}
    [ -n "$path" ] || continue
    for node in head worker; do
      if [ $node = head ]; then hf=$HEAD_HF; else hf=$WORKER_HF; fi
      host=$(host_path "$path" "$hf") || continue
      if [ $what = MODEL_PATH ]; then
        if [ $node = head ]; then test -e "$host/config.json"; else remote test -e "$host/config.json"; fi
      else
        if [ $node = head ]; then test -d "$host"; else remote test -d "$host"; fi
      fi || problem "the weights are not in the $node's HF cache ($host): $(hf_hint "$path")"
    done
  done
  local gate=${MEM_GATE_GIB:-0} fh fw
  if ((gate > 0)); then
    fh=$(awk "$FREE_GIB_AWK" /proc/meminfo)
    fw=$(remote awk "$FREE_GIB_AWK" /proc/meminfo)
    ((fh >= gate && fw >= gate)) || warning "MemFree $fh / $fw GiB (head / worker) is under MEM_GATE_GIB=$gate"
  fi
  if [ "${MEM_GATE_DROP_CACHES:-0}" = 1 ]; then
    sudo -n true 2>/dev/null || warning "sudo -n fails on the head: MEM_GATE_DROP_CACHES cannot drop caches"
    remote sudo -n true 2>/dev/null || warning "sudo -n fails on the worker: MEM_GATE_DROP_CACHES cannot drop caches"
  fi
  gpu_busy && problem "a CUDA process is running on a node; stop the other stack first"
  ((problems == 0)) || return 1
  log "preflight ok"
}

run_preflight() {
  case ${PREFLIGHT:-off} in
    off) return 0 ;;
    warn) preflight || log "preflight found problems (PREFLIGHT=warn): starting anyway" ;;
    strict) preflight || return 1 ;;
    *) log "PREFLIGHT=$PREFLIGHT: expected off, warn or strict"; return 1 ;;
  esac
  return 0
}

drop_caches() { # level 1 or 3, on both nodes; failures only logged
  local level=$1
  sync
  sudo -n sh -c "echo $level > /proc/sys/vm/drop_caches" 2>/dev/null || log "cannot drop the head's page cache (sudo -n)"
  remote_sh "sync; sudo -n sh -c 'echo $level > /proc/sys/vm/drop_caches'" 2>/dev/null ||
    log "cannot drop the worker's page cache (sudo -n)"
}

drop_caches_if_needed() {
  local threshold=${START_DROP_CACHES_GIB:-}
  if [ -z "$threshold" ]; then
    if [ "${MEM_GATE_DROP_CACHES:-0}" = 1 ]; then threshold=4; else threshold=0; fi
  fi
  local ch cw
  ch=$(awk "$CACHE_GIB_AWK" /proc/meminfo)
  cw=$(remote awk "$CACHE_GIB_AWK" /proc/meminfo)
  if [ "${FORCE_DROP:-0}" = 1 ] || { ((threshold > 0)) && ((ch >= threshold || cw >= threshold)); }; then
    log "dropping the page caches (head $ch GiB, worker $cw GiB)"
    drop_caches 3
  fi
}

mem_gate() {
  local gate=${MEM_GATE_GIB:-0} timeout=${MEM_GATE_TIMEOUT:-600} t0=$SECONDS fh fw
  ((gate > 0)) || return 0
  while :; do
    fh=$(awk "$FREE_GIB_AWK" /proc/meminfo)
    fw=$(remote awk "$FREE_GIB_AWK" /proc/meminfo)
    if ((fh >= gate && fw >= gate)); then
      log "MemFree $fh / $fw GiB (head / worker) >= $gate"
      return 0
    fi
    if ((SECONDS - t0 >= timeout)); then
      log "MemFree $fh / $fw GiB (head / worker) still under $gate after $timeout s: starting anyway"
      return 0
    fi
    log "waiting for memory: MemFree $fh / $fw GiB (head / worker), want $gate"
    [ "${MEM_GATE_DROP_CACHES:-0}" = 1 ] && drop_caches 1
    sleep 10
  done
}

# Decided by the node that runs the line (lab simplification, see AGENTS.md): the RDMA
# devices only where they exist, the unlimited memlock limit only where the engine can
# grant it (CAP_SYS_RESOURCE in the node's bounding set; the lab's nodes lack it).
# Single-quoted on purpose: evaluated later by the shell on the node that starts the rank.
# shellcheck disable=SC2016
NODE_OPTS='$(test -e /dev/infiniband && echo --device=/dev/infiniband)'
# shellcheck disable=SC2016
NODE_OPTS+=' $(test $(( 0x$(sed -n "s/^CapBnd:[[:space:]]*//p" /proc/1/status) >> 24 & 1 )) = 1'
# shellcheck disable=SC2016
NODE_OPTS+=' && echo --ulimit=memlock=-1)'

# One `docker run` line for a rank, for the shell of the node that runs it.
run_line() {
  local rank=$1 hf=$2 prepared=$3 sessions=$4 cpuset=$5 key
  local -a opts=(docker run -d --name "$NAME-r$rank" --gpus all --ipc=host --network host)
  local -a rest=(--cap-add IPC_LOCK)
  [ -n "$cpuset" ] && rest+=(--cpuset-cpus "$cpuset")
  [ -n "${LOG_MAX_SIZE:-}" ] && rest+=(--log-opt "max-size=$LOG_MAX_SIZE" --log-opt "max-file=${LOG_MAX_FILE:-3}")
  rest+=(-v "$hf:/root/.cache/huggingface" -v "$CACHE_VOLUME:/cache" -v "$prepared:/prepared" -v "$sessions:/sessions")
  export GLM53_TF_PREPARED=/prepared GLM53_TF_PREPARED_WRITE=${GLM53_TF_PREPARED_WRITE:-1}
  export GLM53_TF_CALIB=${GLM53_TF_CALIB:-cached} GLM53_TF_IMAGE_ID=$IMAGE_ID
  export GLM53_TF_NONEXPERT=${GLM53_TF_NONEXPERT:-bf16} GLM53_TF_PREFILL_ROWS=${GLM53_TF_PREFILL_ROWS:-auto}
  export GLM53_TF_AUTO_FDRAFTS=${GLM53_TF_AUTO_FDRAFTS:-7} GLM53_TF_PROFILE=${GLM53_TF_PROFILE:-0}
  export GLM53_TF_EXPERT_LOOP=${GLM53_TF_EXPERT_LOOP:-1} GLM53_TF_EXPERT_LOOP_CFG=${GLM53_TF_EXPERT_LOOP_CFG:-4,2}
  export GLM53_TF_LAUNCH_T0
  GLM53_TF_LAUNCH_T0=$(date +%s.%N)
  rest+=(
    -e "RANK=$rank" -e "MASTER=$HEAD_IP" -e "MASTER_PORT=$MASTER_PORT" -e "MODEL_PATH=$MODEL_PATH"
    -e "DRAFTER=${DRAFTER:-}" -e "CONTEXT=${CONTEXT:-}" -e "SERVED_NAME=${SERVED_NAME:-}"
    -e "MAX_TOKENS=${MAX_TOKENS:-}" -e "MTP_DRAFTS=${MTP_DRAFTS:-}" -e "NO_DRAFTS=${NO_DRAFTS:-0}"
    -e "HOST=${HOST:-127.0.0.1}" -e "PORT=$PORT" -e "EXTRA_ARGS=${EXTRA_ARGS:-}"
  )
  # GLM53_LAB_*: the simulated engine's lab knobs (a lab addition, see AGENTS.md).
  while IFS= read -r key; do
    rest+=(-e "$key=${!key}")
  done < <(compgen -e | grep -E '^GLM53_(TF|LAB)_' | sort)
  if [ "${NCCL_PASSTHROUGH:-0}" = 1 ]; then
    while IFS= read -r key; do
      case $key in NCCL_SOCKET_IFNAME | NCCL_IB_HCA | NCCL_PASSTHROUGH) continue ;; esac
      rest+=(-e "$key=${!key}")
    done < <(compgen -e | grep '^NCCL_' | sort)
  fi
  rest+=(-e "NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-}" -e "NCCL_IB_HCA=${NCCL_IB_HCA:-}")
  rest+=(-e "GLOO_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-}" "$IMAGE")
  printf '%s %s %s' "$(printf '%q ' "${opts[@]}")" "$NODE_OPTS" "$(printf '%q ' "${rest[@]}")"
}

wait_ready() {
  local t0=$SECONDS tick=0 unreachable=0 state rc
  log "waiting for rank 0 on :$PORT (first start compiles the kernels)"
  while :; do
    if MODELS=$(curl -sf -m 5 "$API/v1/models"); then
      log "ready after $((SECONDS - t0)) s"
      printf '%s\n' "$MODELS"
      return 0
    fi
    if [ "$(docker inspect -f '{{.State.Running}}' "$R0" 2>/dev/null)" != true ]; then
      log "rank 0 exited; its last 40 log lines:"
      docker logs --tail 40 "$R0" 2>&1
      return 1
    fi
    tick=$((tick + 1))
    if ((tick % 10 == 0)); then
      state=$(remote docker inspect -f '{{.State.Running}}' "$R1" 2>/dev/null)
      rc=$?
      if ((rc == 255)); then
        unreachable=$((unreachable + 1))
        log "the worker does not answer over ssh ($unreachable)"
        if ((unreachable >= 3)); then
          log "the worker ($WORKER_SSH) is unreachable"
          return 1
        fi
      else
        unreachable=0
        if [ "$state" != true ]; then
          log "rank 1 exited; its last 40 log lines:"
          remote docker logs --tail 40 "$R1" 2>&1
          return 1
        fi
      fi
    fi
    if ((${READY_TIMEOUT:-0} > 0 && SECONDS - t0 >= READY_TIMEOUT)); then
      log "rank 0 not ready after $READY_TIMEOUT s (READY_TIMEOUT)"
      return 1
    fi
    sleep 1
  done
}

check_slots() {
  local want=${GLM53_TF_BATCH:-1} n="" i
  ((want > 1)) || return 0
  for ((i = 0; i < 60; i++)); do
    n=$(docker logs "$R0" 2>&1 | grep -oE '[0-9]+ request slot\(s\)' | tail -n 1 | grep -oE '^[0-9]+')
    [ -n "$n" ] && break
    sleep 1
  done
  if [ -z "$n" ]; then
    log "rank 0 logged no 'request slot(s)' line: slots not checked"
    return 0
  fi
  if ((n < want)); then
    log "request slots: $n, fewer than GLM53_TF_BATCH=$want"
    return 3
  fi
  log "request slots: $n (GLM53_TF_BATCH=$want)"
  return 0
}

start_once() {
  local worker_out rc max
  stop_both
  drop_caches_if_needed
  mem_gate
  if ! IMAGE_ID=$(docker image inspect -f '{{.Id}}' "$IMAGE" 2>/dev/null); then
    log "no image $IMAGE on the head: scripts/serve.sh build"
    return 1
  fi
  worker_out=$(mktemp)
  remote_sh "mkdir -p $(printf '%q' "$WORKER_PREPARED") $(printf '%q' "$WORKER_SESSIONS") && \
$(run_line 1 "$WORKER_HF" "$WORKER_PREPARED" "$WORKER_SESSIONS" "${WORKER_CPUSET:-${CPUSET:-}}")" \
    >"$worker_out" 2>&1 &
  local worker_job=$!
  mkdir -p "$HEAD_PREPARED" "$HEAD_SESSIONS"
  if ! bash -c "$(run_line 0 "$HEAD_HF" "$HEAD_PREPARED" "$HEAD_SESSIONS" "${HEAD_CPUSET:-${CPUSET:-}}")" >/dev/null; then
    log "rank 0 did not start"
    wait "$worker_job"
    rm -f "$worker_out"
    return 1
  fi
  wait "$worker_job"
  rc=$?
  if ((rc != 0)); then
    log "rank 1 did not start:"
    cat "$worker_out"
    rm -f "$worker_out"
    return 1
  fi
  rm -f "$worker_out"
  wait_ready || return 1
  max=$(printf '%s' "$MODELS" | grep -oE '"max_model_len": *[0-9]+' | grep -oE '[0-9]+$' | head -n 1)
  log "serving up to ${max:-${CONTEXT:-2051}} tokens a request (max_model_len)"
  check_slots || return $?
  case ${CANARY:-off} in
    off) ;;
    *) log "canary: not simulated in the lab (CANARY=$CANARY)" ;;
  esac
  return 0
}

cmd_start() {
  local attempt=1 slot_tries=0 rc
  local attempts=${START_ATTEMPTS:-1} slot_retries=${SLOT_RETRIES:-2}
  if gpu_busy; then
    log "a CUDA process is running on a node; stop the other stack first"
    exit 1
  fi
  context_check || exit 1
  run_preflight || exit 1
  while :; do
    start_once
    rc=$?
    case $rc in
      0) exit 0 ;;
      3)
        if ((slot_tries < slot_retries)); then
          slot_tries=$((slot_tries + 1))
          log "too few request slots: dropping the page caches on both nodes and restarting"
          FORCE_DROP=1
          continue
        fi
        log "serving with fewer request slots than GLM53_TF_BATCH=${GLM53_TF_BATCH:-1} (server left running)"
        exit 3
        ;;
      *)
        if ((attempt < attempts)); then
          attempt=$((attempt + 1))
          log "start failed: attempt $attempt of $attempts"
          stop_both
          run_preflight || exit 1
          continue
        fi
        log "start failed (containers left for inspection: scripts/serve.sh logs 0|1)"
        exit 1
        ;;
    esac
  done
}

# ----------------------------------------------------------------------- commands

cmd=${1:-}
case $cmd in
  build)
    need_worker
    log "building $IMAGE"
    docker build -f docker/Dockerfile ${PATCHES:+--build-arg "PATCHES=$PATCHES"} -t "$IMAGE" . || exit 1
    log "shipping $IMAGE to the worker ($WORKER_SSH)"
    docker save "$IMAGE" | "${SSH[@]}" docker load || exit 1
    log "built $IMAGE ($(docker image inspect -f '{{.Id}}' "$IMAGE")) on both nodes"
    ;;
  preflight)
    need_worker
    preflight || exit 1
    ;;
  start)
    need_worker
    take_lock
    cmd_start
    ;;
  restart)
    need_worker
    take_lock
    stop_both
    cmd_start
    ;;
  stop)
    need_worker
    stop_both
    log "stopped"
    ;;
  status)
    need_worker
    log "head:"
    docker ps -a --filter "name=$NAME" --format '{{.Names}} {{.Status}}'
    log "worker ($WORKER_SSH):"
    remote docker ps -a --filter "name=$NAME" --format '{{.Names}} {{.Status}}' || exit 1
    log "$API/v1/models:"
    curl -s -m 5 "$API/v1/models"
    echo
    log "$API/health:"
    curl -s -m 5 "$API/health"
    echo
    ;;
  logs)
    case ${2:-0} in
      0) docker logs --tail "${TAIL:-80}" "$R0" ;;
      1) need_worker; remote docker logs --tail "${TAIL:-80}" "$R1" ;;
      *) usage; exit 2 ;;
    esac
    ;;
  *)
    usage
    exit 2
    ;;
esac
