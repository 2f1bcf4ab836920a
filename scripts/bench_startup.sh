#!/usr/bin/env bash
# Start-up time of the CLI against a bare interpreter: median wall time of N runs each of
# `python3 -c pass`, `overbrainer --help` and `overbrainer -C <project> config check`, printed
# as ratios. Target: each ratio under 3 (exit 1 when one is not).
#
# Usage: scripts/bench_startup.sh [-n RUNS] [--help-only]
#   OVERBRAINER   command to time (default: "python3 -m overbrainer" when the entry point is missing)
set -euo pipefail

runs=15
help_only=0
while [ $# -gt 0 ]; do
    case "$1" in
        -n) runs="$2"; shift 2 ;;
        --help-only) help_only=1; shift ;;
        -h|--help) sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench_startup.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done

py=${PYTHON:-python3}
if [ -z "${OVERBRAINER:-}" ]; then
    if command -v overbrainer >/dev/null 2>&1; then OVERBRAINER=overbrainer
    else OVERBRAINER="$py -m overbrainer"; fi
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export NO_COLOR=1

cases=("baseline|$py -c pass" "--help|$OVERBRAINER --help")
if [ "$help_only" = 0 ]; then
    project="$tmp/project"
    if ! $OVERBRAINER init "$project" >"$tmp/init.log" 2>&1; then
        echo "bench_startup.sh: \`overbrainer init\` failed:" >&2
        cat "$tmp/init.log" >&2
        exit 1
    fi
    export OVERBRAINER_PROVIDERS__LOCAL__BASE_URL=http://127.0.0.1:9/v1
    if ! $OVERBRAINER -C "$project" config check >"$tmp/check.log" 2>&1; then
        echo "bench_startup.sh: \`overbrainer -C $project config check\` failed:" >&2
        cat "$tmp/check.log" >&2
        exit 1
    fi
    cases+=("config check|$OVERBRAINER -C $project config check")
fi

timer=$(cat <<'PY'
import shlex, statistics, subprocess, sys, time

runs = int(sys.argv[1])
cases = [arg.split("|", 1) for arg in sys.argv[2:]]
medians = {}
for name, cmd in cases:
    argv = shlex.split(cmd)
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # warm the caches
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - t0)
    medians[name] = statistics.median(times)

base = medians.pop("baseline")
print(f"python3 -c pass: {base * 1000:.1f} ms (median of {runs})")
worst = 0.0
for name, m in medians.items():
    ratio = m / base
    worst = max(worst, ratio)
    print(f"overbrainer {name}: {m * 1000:.1f} ms, {ratio:.2f}x")
sys.exit(0 if worst < 3 else 1)
PY
)
"$py" -c "$timer" "$runs" "${cases[@]}"
