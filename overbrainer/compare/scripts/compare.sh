# shellcheck shell=sh source-path=SCRIPTDIR/../../export/scripts
# compare.sh: serve the child GGUF with llama-server on 127.0.0.1 and let a client ask it:
# compare_client.py the questions of a compare (POSIX sh; needs python3 with its standard library
# only), or eval_client.py lm-eval's tasks for an `overbrainer eval` on a remote target.
#
# Runs in the job directory on the target, which holds the client, its input (questions.jsonl,
# or eval_job.json and the task files), compare_client.py and llama_cpp.sh (the shared llama.cpp
# helpers: llama-server comes from `llama_cpp_tool`); leaves server.log there, and the client's
# outputs: child_answers.jsonl and hardware.json (compare; eval: see eval_client.py).
#
# Environment:
#   OVERBRAINER_COMPARE_CLIENT         the client (default compare_client.py)
#   OVERBRAINER_COMPARE_INPUT          the client's input file (default questions.jsonl)
#   OVERBRAINER_COMPARE_MODEL          the GGUF (relative to this directory, or absolute)
#   OVERBRAINER_COMPARE_CTX            llama-server's -c (0: the model's own context)
#   OVERBRAINER_COMPARE_MAX_TOKENS     limit on each answer (read by the client)
#   OVERBRAINER_COMPARE_TEMPERATURE    sampling temperature (read by the client)
#   OVERBRAINER_COMPARE_START_SECS     how long the server may take to be ready (the client)
#   OVERBRAINER_COMPARE_DROP_MODEL     1: remove the GGUF once the server stopped (a pod's copy,
#                                      sent for this job only)
#   OVERBRAINER_LLAMA_CPP*             where llama.cpp comes from (llama_cpp.sh)
#   OVERBRAINER_METRICS                progress lines (the client appends them)
#
# Whatever ends the job (success, failure, TERM from a cancel), the exit trap stops the server:
# TERM, then KILL after about 10 s (and removes the GGUF when asked to).

set -u
. ./llama_cpp.sh

model=${OVERBRAINER_COMPARE_MODEL:-}
ctx=${OVERBRAINER_COMPARE_CTX:-0}
client=${OVERBRAINER_COMPARE_CLIENT:-compare_client.py}
input=${OVERBRAINER_COMPARE_INPUT:-questions.jsonl}
server_pid=

fail() {
    echo "compare: $*" >&2
    exit 1
}

stop_server() {
    [ -n "$server_pid" ] || return 0
    kill -TERM "$server_pid" 2>/dev/null || { wait "$server_pid" 2>/dev/null; return 0; }
    (
        i=0
        while [ $i -lt 100 ]; do
            sleep 0.1
            kill -0 "$server_pid" 2>/dev/null || exit 0
            i=$((i + 1))
        done
        kill -KILL "$server_pid" 2>/dev/null
    ) &
    watchdog=$!
    wait "$server_pid" 2>/dev/null
    kill "$watchdog" 2>/dev/null
    wait "$watchdog" 2>/dev/null
    server_pid=
}

on_exit() {
    code=$?
    trap - EXIT INT TERM
    stop_server
    if [ "${OVERBRAINER_COMPARE_DROP_MODEL:-}" = 1 ] && [ -n "$model" ]; then
        rm -f "$model"
    fi
    exit "$code"
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The build name recorded in hardware.json: the platform's CPU build name (the GPUs, if any, are
# named by hardware.json's `gpus`).
compare_build() {
    case "$(uname -sm)" in
        "Linux x86_64") echo ubuntu-x64 ;;
        "Linux aarch64") echo ubuntu-arm64 ;;
        "Darwin arm64") echo macos-arm64 ;;
        *) uname -sm ;;
    esac
}

[ -n "$model" ] || fail "OVERBRAINER_COMPARE_MODEL is not set"
[ -f "$model" ] || fail "the GGUF $model is missing"
[ -f "$client" ] || fail "$client is missing"
[ -f "$input" ] || fail "$input is missing"
server=$(llama_cpp_tool llama-server) || exit 1
build=$(compare_build)
port=$(python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])') || fail "cannot find a free port on 127.0.0.1 (python3)"

echo "compare: llama-server on 127.0.0.1:$port, context ${ctx}" >&2
"$server" -m "$model" --host 127.0.0.1 --port "$port" -ngl 999 -c "$ctx" -np 1 --no-webui > server.log 2>&1 &
server_pid=$!

python3 "$client" --port "$port" --server-pid "$server_pid" --build "$build"
