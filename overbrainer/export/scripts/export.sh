# shellcheck shell=sh source-path=SCRIPTDIR
# export.sh: a run's model to one GGUF file (POSIX sh). Runs in the export's job directory,
# runs/<run>/exports/<id>/ on the target, with the target's Python first on PATH, and:
#   OVERBRAINER_EXPORT_NAME      the run ID (the GGUF is ../../output/gguf/<name>-<TYPE>.gguf)
#   OVERBRAINER_EXPORT_QUANTIZE  Q4_K_M, Q8_0, …, F16 or BF16
#   OVERBRAINER_EXPORT_MODEL     the model directory (relative to this one)
#   OVERBRAINER_EXPORT_CONFIG    the run's axolotl.yaml (for a merge)
#   OVERBRAINER_EXPORT_OUT       where the GGUF goes (default ../../output/gguf; output/gguf when the
#                                export runs inside the training job, in the run directory)
#   OVERBRAINER_METRICS          where the stage lines go
#   OVERBRAINER_LLAMA_CPP*       where llama.cpp comes from (llama_cpp.sh)
# Steps: find llama.cpp and check the Python modules the converter needs (before anything long),
# pick or merge the HF model, convert with convert_hf_to_gguf.py, quantize with llama-quantize (not for F16/BF16), then rename
# <target>.part to <target>. export-work/ and <target>.part are removed on exit, always.
# Writes llama_cpp.txt (the version used). An error is the last line of job.log: `export: …`.

set -u
. ./llama_cpp.sh

NAME=$OVERBRAINER_EXPORT_NAME
TYPE=$OVERBRAINER_EXPORT_QUANTIZE
MODEL=$OVERBRAINER_EXPORT_MODEL
CONFIG=$OVERBRAINER_EXPORT_CONFIG
OUT_DIR=${OVERBRAINER_EXPORT_OUT:-../../output/gguf}
TARGET="$OUT_DIR/$NAME-$TYPE.gguf"
WORK=export-work

cleanup() { rm -rf -- "$WORK" "$TARGET.part"; }
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT HUP

fail() {
    echo "$*" >&2
    exit 1
}

stage() {
    printf '{"event":"stage","name":"%s","time":%s}\n' "$1" "$(date +%s)" >> "$OVERBRAINER_METRICS"
}

# `logged WHAT cmd…`: run cmd with its output kept; on failure, its last line ends the job's log.
logged() {
    what=$1
    shift
    "$@" > "$WORK/step.log" 2>&1
    code=$?
    cat "$WORK/step.log" >&2
    [ "$code" = 0 ] || fail "$what failed: $(grep -v '^[[:space:]]*$' "$WORK/step.log" | tail -n 1)"
}

rm -rf -- "$WORK"
mkdir -p -- "$WORK" "$OUT_DIR" || fail "cannot create $WORK and $OUT_DIR"
[ -d "$MODEL" ] || fail "$MODEL is not on the target"
MODEL=$(cd -- "$MODEL" && pwd -P)

# 1. llama.cpp and the converter's Python modules (checked first: a merge can take minutes).
SRC=$(llama_cpp_source) || exit 1
llama_cpp_version > llama_cpp.txt || exit 1
missing=$(python3 -c 'import importlib.util as u
print(" ".join(m for m in ("torch", "numpy", "transformers", "yaml") if u.find_spec(m) is None))') \
    || fail "python3 does not run on the target"
[ -z "$missing" ] || fail "the target's Python lacks $missing (needed by convert_hf_to_gguf.py): install it in the venv"

case $TYPE in
    F16) outtype=f16 ;;
    BF16) outtype=bf16 ;;
    *) outtype=auto ;;
esac
if [ "$outtype" = auto ]; then
    QUANTIZE=$(llama_cpp_tool llama-quantize) || exit 1
fi

# 2. The Hugging Face model.
if [ -f "$MODEL/merged/config.json" ]; then
    HF="$MODEL/merged"
elif [ -f "$MODEL/adapter_config.json" ]; then
    stage merge
    [ -f "$CONFIG" ] || fail "$CONFIG is not on the target: the adapter cannot be merged"
    logged "writing the merge config" python3 - "$CONFIG" "$MODEL" "$WORK" <<'PY'
import sys
import yaml
config, model, work = sys.argv[1:4]
with open(config, encoding="utf-8") as f:
    cfg = yaml.safe_load(f) or {}
for key in ("plugins", "resume_from_checkpoint", "hub_model_id", "hub_strategy"):
    cfg.pop(key, None)
cfg["output_dir"] = work
cfg["lora_model_dir"] = model
with open(f"{work}/merge.yaml", "w", encoding="utf-8") as f:
    yaml.safe_dump(cfg, f, sort_keys=False)
PY
    logged "axolotl merge-lora" axolotl merge-lora "$WORK/merge.yaml"
    [ -f "$WORK/merged/config.json" ] || fail "axolotl merge-lora left no $WORK/merged/config.json"
    HF="$WORK/merged"
elif [ -f "$MODEL/config.json" ]; then
    HF=$MODEL
else
    fail "$MODEL holds no model (no merged/config.json, adapter_config.json or config.json)"
fi

# 3. Convert, then quantize.
if [ "$outtype" = auto ]; then
    converted="$WORK/model.gguf"
else
    converted="$TARGET.part"
fi
stage convert
(
    PYTHONPATH="$SRC/gguf-py${PYTHONPATH:+:$PYTHONPATH}"
    export PYTHONPATH
    logged "convert_hf_to_gguf.py" python3 "$SRC/convert_hf_to_gguf.py" "$HF" --outtype "$outtype" --outfile "$converted"
) || exit 1
if [ "$outtype" = auto ]; then
    stage quantize
    logged "llama-quantize" "$QUANTIZE" "$converted" "$TARGET.part" "$TYPE"
fi
mv -f -- "$TARGET.part" "$TARGET" || fail "cannot rename $TARGET.part"
echo "export: $TARGET"
