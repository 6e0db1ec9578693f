#!/usr/bin/env bash
# After `make lab` deployed path=tensorfold on the lab: show the endpoint, the slot count the
# engine loaded, and one streamed chat completion, all from the head over ssh (the API binds
# the head's loopback, as on real Sparks).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
state="$here/.state"
head_ip=${GLM53_LAB_HEAD_IP:-198.18.0.10}
port=${GLM53_LAB_API_PORT:-8000}
on_head() {
  # ssh joins its arguments into one remote command line: quote each for the remote shell.
  ssh -i "$state/id_ed25519" -o UserKnownHostsFile="$state/known_hosts" -o StrictHostKeyChecking=yes \
      -o IdentitiesOnly=yes -o BatchMode=yes "spark@$head_ip" "$(printf '%q ' "$@")"
}
echo "endpoint: http://127.0.0.1:$port/v1 on spark-head (loopback; from here:"
echo "  ssh -i $state/id_ed25519 -o UserKnownHostsFile=$state/known_hosts -L $port:127.0.0.1:$port spark@$head_ip)"
echo "models:   $(on_head curl -sf "http://127.0.0.1:$port/v1/models")"
slots=$(on_head sh -c "docker logs glm53-tf-r0 2>&1 | grep -oE '[0-9]+ request slot\(s\)' | tail -n 1")
echo "slots:    ${slots:-unknown} (rank-0 log)"
echo "streamed chat completion:"
on_head curl -sN "http://127.0.0.1:$port/v1/chat/completions" -H 'Content-Type: application/json' \
  -d '{"model": "glm-5.3-flash", "stream": true, "max_tokens": 16, "messages": [{"role": "user", "content": "Say hello to the lab."}]}'
echo
