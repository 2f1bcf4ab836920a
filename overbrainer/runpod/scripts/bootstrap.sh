# shellcheck shell=sh
# overbrainer pod bootstrap (POSIX sh: runs under bash, dash and busybox sh).
#
# The pod's command: overbrainer replaces the WATCHDOG_SH line below with the watchdog's text and
# sends the whole base64-encoded in the pod's env (OVERBRAINER_BOOTSTRAP); the create request's
# `args`, `sh -c '…'`, decodes it and runs it in that shell (`eval`), through the image's
# ENTRYPOINT when it has one. So the pod needs nothing but its image: a POSIX sh, base64, curl.
#
# Order (no failure may leave the pod without its killer):
#  1. write the watchdog to /run/overbrainer/watchdog.sh (temp file + rename), FIRST;
#  2. make $OVERBRAINER_RUN_DIR/.pod, drop a stale verdict (volumes outlive pods); a served
#     provider's pod (OVERBRAINER_ENGINE_ARGV set) starts its engine now, in the background, so
#     that the model loads while the rest goes on (see "The engine" below);
#  3. install the run's host key as /etc/ssh/ssh_host_ed25519_key (the image's host keys are
#     removed: never trusted) and the run's client key as the only line of
#     /root/.ssh/authorized_keys (.ssh 700, files 600);
#  4. start sshd (/usr/sbin/sshd, else the one on PATH; with OVERBRAINER_INSTALL_SSHD=1 an image
#     without one gets Debian's openssh-server through apt-get) with /run/overbrainer/sshd_config:
#     port 22, key authentication only, that host key and that authorized_keys; wait for its pid file;
#  5. compare the GPUs `nvidia-smi -L` lists with OVERBRAINER_GPU_COUNT (skipped without
#     nvidia-smi);
#  6. exec the watchdog. It proves its key with a GET of its own pod and writes the verdict the
#     client waits for, one line in $OVERBRAINER_RUN_DIR/.pod/watchdog: `ready`, `failed <reason>`
#     or `failed bootstrap: <reason>`.
# On any failure the fixed reason goes to .pod/bootstrap_failed and the watchdog is exec'd with
# OVERBRAINER_BOOT_FAILED=<reason>: it writes the verdict and deletes the pod at once, even a
# kept one. The log is .pod/bootstrap.log (and stdout, Runpod's container log).
#
# Environment (set by overbrainer in the pod's env):
#   OVERBRAINER_RUN_DIR        the run directory on the pod
#   OVERBRAINER_HOST_KEY       the run's host key: a `{{ RUNPOD_SECRET_… }}` reference that Runpod
#                              fills at container start with the base64 of the OpenSSH private key
#                              file (a plain `-----BEGIN` text works too); never logged
#   OVERBRAINER_AUTHORIZED_KEY the run's client public key (one authorized_keys line)
#   OVERBRAINER_GPU_COUNT      GPUs asked for (default 1)
#   OVERBRAINER_SSHD_WAIT_MS   how long sshd may take to listen (default 10000)
#
# The engine (a served provider's pod only):
#   OVERBRAINER_ENGINE_ARGV    its command line, one POSIX shell word list (no secret in it); a
#                              first word not on PATH is looked for in /app (llama.cpp's images)
#   OVERBRAINER_ENGINE_KEY_VAR the variable the engine reads its API key from (VLLM_API_KEY, …)
#   OVERBRAINER_ENGINE_KEY     the API key: a `{{ RUNPOD_SECRET_… }}` reference Runpod fills in
#   OVERBRAINER_ENGINE_HF_TOKEN optional, the Hub token the same way (the engine's HF_TOKEN)
# It runs with neither the pod's Runpod key nor the run's keys in its environment; its output goes
# to .pod/engine.log, its pid to .pod/engine.pid and, once it ended, its exit code to
# .pod/engine_exit (the watchdog then deletes the pod). The key variables are dropped from the
# bootstrap's own environment before sshd and the watchdog start.
# Testing aids: OVERBRAINER_POD_ROOT prefixes /run/overbrainer, /etc/ssh and /root/.ssh (and turns
# sshd's StrictModes off, since the modes of a test folder's parents are not ours);
# OVERBRAINER_SSHD_PORT (22) and OVERBRAINER_SSHD_ADDRESS (all) move sshd; OVERBRAINER_WATCHDOG_SHELL
# (sh) is the shell that runs the watchdog. The watchdog's own variables are listed in its header.

umask 077
set +e
trap '' HUP PIPE

WATCHDOG_SH=@OVERBRAINER_WATCHDOG@

ROOT=${OVERBRAINER_POD_ROOT:-}
ROOT=${ROOT%/}
OB=$ROOT/run/overbrainer
WATCHDOG=$OB/watchdog.sh
RUN_DIR=${OVERBRAINER_RUN_DIR:-}
POD=$RUN_DIR/.pod
LOG=$POD/bootstrap.log
ETC_SSH=$ROOT/etc/ssh
HOST_KEY=$ETC_SSH/ssh_host_ed25519_key
SSH_DIR=$ROOT/root/.ssh
AUTH_KEYS=$SSH_DIR/authorized_keys

log() {
  line="$(date -u +%Y-%m-%dT%H:%M:%SZ 2>/dev/null) bootstrap: $*"
  printf '%s\n' "$line" 2>/dev/null
  [ -n "$RUN_DIR" ] && printf '%s\n' "$line" >> "$LOG" 2>/dev/null
}

run_watchdog() {
  unset OVERBRAINER_HOST_KEY OVERBRAINER_AUTHORIZED_KEY
  if [ -s "$WATCHDOG" ]; then
    exec ${OVERBRAINER_WATCHDOG_SHELL:-sh} "$WATCHDOG"
  fi
  exec ${OVERBRAINER_WATCHDOG_SHELL:-sh} -c "$WATCHDOG_SH" overbrainer-watchdog
}

fail() {
  log "failed: $1"
  [ -n "$RUN_DIR" ] && printf '%s\n' "$1" > "$POD/bootstrap_failed" 2>/dev/null
  OVERBRAINER_BOOT_FAILED=$1
  export OVERBRAINER_BOOT_FAILED
  run_watchdog
}

put() { # file: stdin → file, atomically
  cat > "$1.tmp" && chmod 600 "$1.tmp" && mv -f "$1.tmp" "$1"
}

# 1. The watchdog, first.
if [ "$WATCHDOG_SH" = "@OVERBRAINER_WATCHDOG@" ] || [ -z "$WATCHDOG_SH" ]; then
  WATCHDOG_SH='echo "watchdog: missing from the bootstrap" >&2; sleep 3600'
  fail watchdog_missing
fi
{ mkdir -p "$OB" && printf '%s\n' "$WATCHDOG_SH" | put "$WATCHDOG" && chmod 700 "$WATCHDOG"; } 2>/dev/null \
  || log "cannot write $WATCHDOG: running the watchdog from memory"

# 2. The run's .pod folder.
[ -n "$RUN_DIR" ] || fail no_run_dir
mkdir -p "$POD" 2>/dev/null || fail run_dir
rm -f "$POD/watchdog" "$POD/bootstrap_failed" 2>/dev/null
log "start run_dir=$RUN_DIR"

# 2b. The engine of a served provider.
# shellcheck disable=SC2120 # its arguments are the engine's, from `eval set --`
start_engine() {
  key_var=${OVERBRAINER_ENGINE_KEY_VAR:-}
  case $key_var in ''|*[!A-Za-z0-9_]*) fail engine_key_var ;; esac
  key_value=${OVERBRAINER_ENGINE_KEY:-}
  case $key_value in
    '') fail engine_key_missing ;;
    *RUNPOD_SECRET_*) fail engine_key_unresolved ;;
  esac
  hf_value=${OVERBRAINER_ENGINE_HF_TOKEN:-}
  case $hf_value in *RUNPOD_SECRET_*) fail hf_token_unresolved ;; esac
  rm -f "$POD/engine_exit" "$POD/engine.pid" 2>/dev/null
  (
    eval "set -- $OVERBRAINER_ENGINE_ARGV" || exit 127
    prog=$1
    shift
    if ! command -v "$prog" >/dev/null 2>&1 && [ -x "/app/$prog" ]; then prog=/app/$prog; fi
    unset RUNPOD_API_KEY OVERBRAINER_HOST_KEY OVERBRAINER_AUTHORIZED_KEY OVERBRAINER_ENGINE_KEY \
      OVERBRAINER_ENGINE_HF_TOKEN OVERBRAINER_ENGINE_ARGV OVERBRAINER_BOOTSTRAP
    export "$key_var=$key_value"
    if [ -n "$hf_value" ]; then export HF_TOKEN="$hf_value"; fi
    unset key_value hf_value
    "$prog" "$@" < /dev/null >> "$POD/engine.log" 2>&1 &
    pid=$!
    printf '%s\n' "$pid" > "$POD/engine.pid"
    wait "$pid"
    printf '%s\n' "$?" > "$POD/engine_exit"
  ) < /dev/null > /dev/null 2>&1 &
  unset key_value hf_value OVERBRAINER_ENGINE_KEY OVERBRAINER_ENGINE_HF_TOKEN
  log "engine started"
}
# shellcheck disable=SC2119
if [ -n "${OVERBRAINER_ENGINE_ARGV:-}" ]; then start_engine; fi

# 3. Keys.
HOST_VALUE=${OVERBRAINER_HOST_KEY:-}
case $HOST_VALUE in
  '') fail host_key_missing ;;
  *RUNPOD_SECRET_*) fail host_key_unresolved ;;
esac
mkdir -p "$ETC_SSH" 2>/dev/null || fail host_key_write
rm -f "$ETC_SSH"/ssh_host_* 2>/dev/null
case $HOST_VALUE in
  -----BEGIN*) printf '%s\n' "$HOST_VALUE" | put "$HOST_KEY" 2>/dev/null || fail host_key_write ;;
  *) printf '%s' "$HOST_VALUE" | base64 -d 2>/dev/null | put "$HOST_KEY" 2>/dev/null \
       || fail host_key_invalid ;;
esac
unset HOST_VALUE OVERBRAINER_HOST_KEY
grep -q 'PRIVATE KEY-----' "$HOST_KEY" 2>/dev/null || fail host_key_invalid
if command -v ssh-keygen >/dev/null 2>&1; then
  ssh-keygen -y -f "$HOST_KEY" > "$HOST_KEY.pub" 2>/dev/null || fail host_key_invalid
  chmod 644 "$HOST_KEY.pub" 2>/dev/null
fi

CLIENT_KEY=${OVERBRAINER_AUTHORIZED_KEY:-}
case $CLIENT_KEY in
  '') fail authorized_key_missing ;;
  *"
"*) fail authorized_key_invalid ;;
  ssh-*|ecdsa-*|sk-*) ;;
  *) fail authorized_key_invalid ;;
esac
{ mkdir -p "$SSH_DIR" && chmod 700 "$SSH_DIR" \
  && printf '%s\n' "$CLIENT_KEY" | put "$AUTH_KEYS"; } 2>/dev/null \
  || fail authorized_key_write
log "keys installed"

# 4. sshd.
SSHD=/usr/sbin/sshd
[ -x "$SSHD" ] || SSHD=$(command -v sshd 2>/dev/null)
case $SSHD in
  /*) ;;
  *)
    if [ "${OVERBRAINER_INSTALL_SSHD:-0}" = 1 ] && command -v apt-get >/dev/null 2>&1; then
      log "installing openssh-server"
      { DEBIAN_FRONTEND=noninteractive apt-get update -qq \
          && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends openssh-server; } \
        >> "$LOG" 2>&1 < /dev/null || fail sshd_install
      SSHD=/usr/sbin/sshd
    else
      fail no_sshd
    fi ;;
esac
[ -x "$SSHD" ] || fail no_sshd
mkdir -p /run/sshd 2>/dev/null && chmod 755 /run/sshd 2>/dev/null
STRICT=yes
[ -n "$ROOT" ] && STRICT=no
{
  printf 'Port %s\n' "${OVERBRAINER_SSHD_PORT:-22}"
  [ -n "${OVERBRAINER_SSHD_ADDRESS:-}" ] && printf 'ListenAddress %s\n' "$OVERBRAINER_SSHD_ADDRESS"
  printf 'HostKey "%s"\n' "$HOST_KEY"
  printf 'AuthorizedKeysFile "%s"\n' "$AUTH_KEYS"
  printf 'PidFile "%s"\n' "$OB/sshd.pid"
  printf 'StrictModes %s\n' "$STRICT"
  printf '%s\n' 'PermitRootLogin prohibit-password' 'PubkeyAuthentication yes' \
    'PasswordAuthentication no' 'KbdInteractiveAuthentication no' 'HostbasedAuthentication no' \
    'UsePAM no' 'UseDNS no' 'X11Forwarding no' 'AllowAgentForwarding no' \
    'PermitUserEnvironment no' 'MaxStartups 64' 'MaxSessions 64' 'ClientAliveInterval 30' \
    'Subsystem sftp internal-sftp'
} 2>/dev/null | put "$OB/sshd_config" 2>/dev/null || fail sshd_config
"$SSHD" -t -f "$OB/sshd_config" >> "$LOG" 2>&1 || fail sshd_config
rm -f "$OB/sshd.pid" 2>/dev/null
( unset RUNPOD_API_KEY OVERBRAINER_AUTHORIZED_KEY; exec "$SSHD" -f "$OB/sshd_config" -E "$POD/sshd.log" ) \
  < /dev/null > /dev/null 2>&1 || fail sshd_start
wait_ms=${OVERBRAINER_SSHD_WAIT_MS:-10000}
case $wait_ms in ''|*[!0-9]*) wait_ms=10000 ;; esac
i=0
while [ ! -s "$OB/sshd.pid" ]; do
  [ "$i" -ge "$wait_ms" ] && fail sshd_start
  sleep 0.05 2>/dev/null || sleep 1
  i=$((i + 50))
done
log "sshd listening on port ${OVERBRAINER_SSHD_PORT:-22}"

# 5. GPUs.
WANT=${OVERBRAINER_GPU_COUNT:-1}
case $WANT in ''|*[!0-9]*) WANT=1 ;; esac
if command -v nvidia-smi >/dev/null 2>&1; then
  SEEN=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
  case $SEEN in ''|*[!0-9]*) SEEN=0 ;; esac
  [ "$SEEN" -ge "$WANT" ] || fail "gpu_count $SEEN of $WANT"
  log "$SEEN GPU(s)"
else
  log "no nvidia-smi: GPU count not checked"
fi

# 6. The watchdog takes over.
log "ok"
run_watchdog
