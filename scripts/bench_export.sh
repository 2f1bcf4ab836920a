#!/bin/sh
# bench_export.sh: the time of convert + quantize through `overbrainer export` (local target, its
# llama_cpp_dir) against the same two llama.cpp commands run by hand on the same model
# (SmolLM2-135M as an HF model, the test suite's cached fixture). Median of 3 alternated rounds;
# prints the ratio, target <= 1.1x, MISSED when over (exit 0 either way; 1 on a broken run).
#
#   scripts/bench_export.sh [QUANTIZE]     (default Q4_K_M; run from the repository root)
set -eu
TYPE=${1:-Q4_K_M}
ROUNDS=3
PY=${PYTHON:-python3}
work=$(mktemp -d "${TMPDIR:-/tmp}/bench_export.XXXXXX")
trap 'rm -rf -- "$work"' EXIT

# The fixtures (cached after their first use): the HF model and a llama.cpp laid out for llama_cpp_dir.
paths=$("$PY" -c 'from tests.fixtures.llama import prepare_hf, prepare_llama_cpp; print(prepare_hf()); print(prepare_llama_cpp())')
model=$(echo "$paths" | sed -n 1p)
llama=$(echo "$paths" | sed -n 2p)
prefix=$("$PY" -c 'import sys; print(sys.prefix)')
rid=bench_20260101-000000

# A project whose run `rid` succeeded, with the model as its output/ (hard links).
proj="$work/proj"
mkdir -p "$proj/runs/$rid/output"
ln "$model"/* "$proj/runs/$rid/output/"
printf 'sequence_len: 2048\n' > "$proj/runs/$rid/axolotl.yaml"
echo trained > "$proj/runs/$rid/job.log"
run_dir=$(cd "$proj/runs/$rid" && pwd -P)
printf '{"id": "%s", "target": "local", "created": "2026-01-01T00:00:00Z", "remote_dir": "%s", "job": null, "state": "succeeded", "message": null}\n' \
    "$rid" "$run_dir" > "$proj/runs/$rid/run.json"
cat > "$proj/overbrainer.toml" <<EOF
[project]
name = "bench"
[providers.fake]
protocol = "openai"
[roles]
generator = { provider = "fake", model = "m" }
parent = { provider = "fake", model = "m" }
[targets.local]
kind = "local"
runtime = "native"
venv = "$prefix"
llama_cpp_dir = "$llama"
EOF

now() { "$PY" -c 'import time; print(time.monotonic())'; }

by_tool() {
    out="$work/hand"
    rm -rf -- "$out" && mkdir -p -- "$out"
    t0=$(now)
    PYTHONPATH="$llama/gguf-py" "$PY" "$llama/convert_hf_to_gguf.py" "$model" --outtype auto \
        --outfile "$out/model.gguf" > "$out/log" 2>&1
    "$llama/bin/llama-quantize" "$out/model.gguf" "$out/q.gguf" "$TYPE" >> "$out/log" 2>&1
    t1=$(now)
    "$PY" -c "print($t1 - $t0)"
}

by_overbrainer() {
    rm -rf -- "$proj/runs/$rid/exports" "$proj/runs/$rid/output/gguf"
    t0=$(now)
    env -u OVERBRAINER_LLAMA_CPP_DIR "$PY" -m overbrainer -C "$proj" export "$rid" --quantize "$TYPE" \
        > "$work/ob.out" 2> "$work/ob.err" || { cat "$work/ob.err" >&2; exit 1; }
    t1=$(now)
    "$PY" -c "print($t1 - $t0)"
}

hand=""
ours=""
i=1
while [ $i -le $ROUNDS ]; do
    if [ $((i % 2)) = 1 ]; then
        h=$(by_tool); o=$(by_overbrainer)
    else
        o=$(by_overbrainer); h=$(by_tool)
    fi
    echo "round $i: by hand ${h}s, through overbrainer ${o}s" >&2
    hand="$hand $h"
    ours="$ours $o"
    i=$((i + 1))
done

"$PY" - "$hand" "$ours" <<'PY'
import statistics, sys
hand = statistics.median(float(x) for x in sys.argv[1].split())
ours = statistics.median(float(x) for x in sys.argv[2].split())
ratio = ours / hand
verdict = "ok" if ratio <= 1.1 else "MISSED"
print(f"export: convert + quantize by hand {hand:.2f} s, through overbrainer {ours:.2f} s (median of 3): "
      f"{ratio:.2f}x (target <= 1.10x) {verdict}")
PY
