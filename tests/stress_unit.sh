#!/usr/bin/env bash
# Run the unit tests again and again on a machine made busy on purpose: every core kept
# busy by a CPU burner and 1 GiB of memory held (touched) by another process. A unit test
# that fails only when the machine is slow or short of memory fails here.
#
#   tests/stress_unit.sh [RUNS] [PYTEST ARGS...]
#
# RUNS defaults to 20. PYTEST ARGS replace the default target (tests/unit), so a subset is
# e.g. `tests/stress_unit.sh 20 tests/unit/plugins/module_utils/test__page_cache.py`.
# The tests run at nice STRESS_NICE (default 0: they share the cores fairly with the burner);
# STRESS_NICE=10 leaves them about a tenth of a core each, a machine far busier than make test's.
# Stops at the first failing run (its output is kept in tests/output/stress_unit/), prints
# run, result and seconds for each run, and always stops the burner and the memory holder.
# The burner is stress-ng (Debian package stress-ng) when installed, else shell loops.
set -u -o pipefail

cd "$(dirname "$0")/.." || exit 1
runs=${1:-20}
shift $(( $# > 0 ? 1 : 0 ))
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(tests/unit)
case $runs in ''|*[!0-9]*) echo "usage: $0 [RUNS] [PYTEST ARGS...]" >&2; exit 2 ;; esac
nice_level=${STRESS_NICE:-0}
case $nice_level in ''|*[!0-9]*) echo "STRESS_NICE must be 0 to 19, got: $nice_level" >&2; exit 2 ;; esac

python=${PYTHON:-}
[ -n "$python" ] || { [ -x .venv/bin/python ] && python=.venv/bin/python || python=python3; }
cores=$(nproc)
hold_bytes=$((1 << 30))
logs=tests/output/stress_unit
mkdir -p "$logs"

pids=()
running=
# shellcheck disable=SC2317  # called by the EXIT trap
stop_load() {
    # Only what this script started, by pid (stress-ng's own workers follow their parent).
    local pid
    for pid in $running "${pids[@]}"; do kill "$pid" 2>/dev/null; done
    for pid in $running "${pids[@]}"; do wait "$pid" 2>/dev/null; done
    pids=()
    running=
}
trap stop_load EXIT
trap 'exit 130' INT TERM

if command -v stress-ng >/dev/null; then
    stress-ng --cpu "$cores" --quiet >/dev/null 2>&1 &
    pids+=($!)
    burner="stress-ng --cpu $cores"
else
    for _ in $(seq "$cores"); do
        bash -c 'while :; do :; done' &
        pids+=($!)
    done
    burner="$cores shell loops"
fi

# The holder writes every byte (untouched pages would cost the kernel nothing), says so, and sleeps.
ready=$(mktemp)
"$python" -c '
import sys, time
held = b"\x01" * int(sys.argv[1])
open(sys.argv[2], "w").write("held\n")
while True:
    time.sleep(3600)
' "$hold_bytes" "$ready" &
holder=$!
pids+=("$holder")
while [ ! -s "$ready" ]; do
    kill -0 "$holder" 2>/dev/null || { echo "the memory holder died" >&2; exit 1; }
    sleep 0.1
done
rm -f "$ready"
rss_kib=$(awk '/^VmRSS:/ {print $2}' "/proc/$holder/status")
echo "load: $burner on $cores core(s); pid $holder holds $((rss_kib / 1024)) MiB resident"
echo "target: ${targets[*]} ($runs runs, $python, nice $nice_level)"

results=()
status=0
printf '%-5s %-6s %8s\n' run result seconds
for run in $(seq "$runs"); do
    log="$logs/run-$run.log"
    started=$(date +%s.%N)
    # In the background and waited for, so an interrupt stops the load at once, not after the run.
    nice -n "$nice_level" "$python" -m pytest "${targets[@]}" -q -p no:cacheprovider >"$log" 2>&1 &
    running=$!
    wait "$running"
    rc=$?
    running=
    seconds=$(awk -v a="$started" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')
    result=pass
    [ "$rc" -eq 0 ] || result=FAIL
    results+=("$(printf '%-5s %-6s %8s' "$run" "$result" "$seconds")")
    printf '%s   %s\n' "${results[-1]}" "$(tail -n 1 "$log")"
    if [ "$rc" -ne 0 ]; then
        status=1
        echo "run $run failed; its output: $log" >&2
        grep -E '^(FAILED|ERROR) ' "$log" >&2
        break
    fi
done

echo
printf '%-5s %-6s %8s\n' run result seconds
printf '%s\n' "${results[@]}"
exit "$status"
