#!/usr/bin/env bash
# Start-up time of the CLI, measured honestly: overbrainer is installed regularly (not editable)
# into a temporary venv, and every command runs on that venv's own interpreter binary, so the
# baselines pay exactly what overbrainer pays to start Python. Cases, run alternately (one of
# each per round) and reported as medians:
#   python -c pass            the bare interpreter
#   python -c "import click"  the floor of any click CLI
#   overbrainer --help
#   overbrainer -C <project> config check
# Targets (exit 1 when one is missed), against the click floor measured in the same run:
#   overbrainer --help            <= 1.25x the click floor
#   overbrainer config check      <= 1.5x the click floor
# on CPU time (user + system; wall time is printed too but counts whatever else the machine runs),
# or with --instructions on instructions executed.
#
# Usage: scripts/bench_startup.sh [-n ROUNDS] [--python PY] [--instructions]
#   PYTHON          the interpreter to build the venv from (default python3)
#   --python PY     skip the venv: time PY -m overbrainer where PY has it installed (PYTHONPATH is
#                   kept), e.g. to check a work tree quickly; the README's numbers use the venv
#   --instructions  judge on instructions executed instead (valgrind's cachegrind, one run of each
#                   case, PYTHONHASHSEED=0): the same on a busy machine as on an idle one
set -euo pipefail

rounds=21
use_python=""
measure=cpu
while [ $# -gt 0 ]; do
    case "$1" in
        -n) rounds="$2"; shift 2 ;;
        --python) use_python="$2"; shift 2 ;;
        --instructions) measure=instructions; shift ;;
        -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench_startup.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done

here=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
keep=()
if [ -n "$use_python" ]; then
    vpy=$("$use_python" -c 'import sys; print(sys.executable)')
    ob="$vpy -m overbrainer"
    [ -n "${PYTHONPATH:-}" ] && keep=(PYTHONPATH="$PYTHONPATH")
else
    py=${PYTHON:-python3}
    # The real interpreter binary behind `python3` (a version-manager shim is a shell script).
    real=$("$py" -c 'import sys; print(sys.executable)')
    echo "bench_startup: installing overbrainer into $tmp/venv (regular install)" >&2
    "$real" -m venv "$tmp/venv"
    # --use-pep517: a wheel is built and installed, as from PyPI. Without it, a pip older than 23.1
    # (Debian 12's) without the `wheel` package runs the legacy `setup.py install`, whose console
    # script finds its entry point with importlib.metadata at every start (70M instructions, half
    # the click floor): the installer's cost, not the tool's.
    "$tmp/venv/bin/python" -m pip install -q --disable-pip-version-check --use-pep517 "$here" >"$tmp/pip.log" 2>&1 \
        || { cat "$tmp/pip.log" >&2; echo "bench_startup: pip install failed" >&2; exit 1; }
    vpy="$tmp/venv/bin/python"
    ob="$tmp/venv/bin/overbrainer"
fi

# shellcheck disable=SC2086
env -i PATH="$(dirname "$vpy"):/usr/bin:/bin" HOME="$tmp" "${keep[@]}" $ob init "$tmp/project" >"$tmp/init.log" 2>&1 \
    || { cat "$tmp/init.log" >&2; echo "bench_startup: \`overbrainer init\` failed" >&2; exit 1; }

env -i PATH="$(dirname "$vpy"):/usr/bin:/bin" HOME="$tmp" NO_COLOR=1 "${keep[@]}" \
    OVERBRAINER_PROVIDERS__LLM__BASE_URL=http://127.0.0.1:9/v1 \
    "$vpy" - "$rounds" "$vpy" "$ob" "$tmp/project" "$measure" <<'PY'
import os
import re
import shlex
import statistics
import subprocess
import sys
import time

rounds, vpy, ob, project, measure = int(sys.argv[1]), sys.argv[2], shlex.split(sys.argv[3]), sys.argv[4], sys.argv[5]
cases = {
    "python -c pass": [vpy, "-c", "pass"],
    "python -c 'import click'": [vpy, "-c", "import click"],
    "overbrainer --help": [*ob, "--help"],
    "overbrainer config check": [*ob, "-C", project, "config", "check"],
}


def once(argv):
    """(wall seconds, CPU seconds: user + system of the child)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit(f"bench_startup: {shlex.join(argv)} exited {proc.returncode}")
    return wall, usage.ru_utime + usage.ru_stime


def instructions(argv):
    """Instructions one run of `argv` executes (valgrind's cachegrind, no cache simulation)."""
    proc = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
                           *argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          env={**os.environ, "PYTHONHASHSEED": "0"})
    found = re.search(r"I\s+refs:\s+([\d,]+)", proc.stderr)
    if proc.returncode != 0 or found is None:
        sys.exit(f"bench_startup: valgrind {shlex.join(argv)} failed: {proc.stderr.strip()[-300:]}")
    return int(found.group(1).replace(",", ""))


for argv in cases.values():  # warm the caches, and fail early on a broken command
    once(argv)
targets = {"overbrainer --help": 1.25, "overbrainer config check": 1.5}
if measure == "instructions":
    counts = {name: instructions(argv) for name, argv in cases.items()}
    floor = counts["python -c 'import click'"]
    print(f"interpreter: {vpy} -> {os.path.realpath(vpy)}")
    print("instructions executed (valgrind cachegrind, PYTHONHASHSEED=0):")
    for name, count in counts.items():
        print(f"  {name:26s} {count:>14,d}  {count / floor:5.3f}x floor")
    missed = [f"{n}: {counts[n] / floor:.3f}x the click floor's instructions (target <= {t}x)"
              for n, t in targets.items() if counts[n] > t * floor]
    for line in missed:
        print(f"MISSED {line}")
    print("all targets met" if not missed else f"{len(missed)} target(s) missed")
    sys.exit(1 if missed else 0)
wall = {name: [] for name in cases}
cpu = {name: [] for name in cases}
for _ in range(rounds):
    for name, argv in cases.items():
        w, c = once(argv)
        wall[name].append(w)
        cpu[name].append(c)
print(f"interpreter: {vpy} -> {os.path.realpath(vpy)}")
print(f"medians of {rounds} alternated rounds (CPU = user + system time of the process):")
ratios = {}
for name in cases:
    w, c = statistics.median(wall[name]), statistics.median(cpu[name])
    wf, cf = statistics.median(wall["python -c 'import click'"]), statistics.median(cpu["python -c 'import click'"])
    ratios[name] = c / cf
    print(f"  {name:26s} wall {w * 1000:6.1f} ms {w / wf:5.2f}x floor   CPU {c * 1000:6.1f} ms {c / cf:5.2f}x floor")
# Judged on CPU time: it is what starting costs; wall time adds whatever else the machine runs.
missed = [f"{n}: {ratios[n]:.2f}x the click floor's CPU time (target <= {t}x)" for n, t in targets.items()
          if ratios[n] > t]
for line in missed:
    print(f"MISSED {line}")
print("all targets met" if not missed else f"{len(missed)} target(s) missed")
sys.exit(1 if missed else 0)
PY
