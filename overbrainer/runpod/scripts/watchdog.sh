# shellcheck shell=sh
# overbrainer pod watchdog (POSIX sh: runs under bash, dash and busybox sh).
#
# Exec'd by the bootstrap as the container's main process, so it lives exactly as long as the
# container. It proves that its key can read its own pod, writes its verdict, then checks the run
# once per interval and deletes the pod when a limit says so. It never exits on an error: each tick
# runs in a subshell, every command is guarded, and only a confirmed deletion (after a delete was
# accepted: a 404 for its own pod, its status TERMINATED, or its absence from the pod list) or
# SIGTERM/SIGINT ends it.
#
# One clock: every limit is a duration counted from the watchdog's first start on this pod
# (BOOT_AT, kept in .pod/boot_at across container restarts), read with this pod's own `date`.
# Nothing here compares a time of the client's machine with the pod's.
#
# Environment (set by overbrainer in the pod's env; Runpod sets the RUNPOD_* ones):
#   RUNPOD_POD_ID, RUNPOD_API_KEY    this pod and Runpod's pod-scoped key. The key reaches curl on
#                                    stdin only (a `header = ...` line for `curl -K -`): never in
#                                    argv, a file, the environment of a child or the log.
#   OVERBRAINER_API_URL              API base URL (default https://api.runpod.io/v2)
#   OVERBRAINER_RUN_DIR              the run directory on the pod (job files, .pod/)
#   OVERBRAINER_POD_ROOT             prefix of the system paths (default: none, i.e. /; tests)
#   OVERBRAINER_MAX_SECONDS          max_hours in seconds: delete at BOOT_AT + it (absent when kept)
#   OVERBRAINER_MAX_COST_USD         spend cap; with the pod's own `cost` ($/h, read from the API)
#                                    the pod is deleted at BOOT_AT + cap / rate hours
#   OVERBRAINER_BOOT_GRACE           seconds without a job before deleting (default 1800)
#   OVERBRAINER_RETRIEVE_GRACE       seconds after the job ended before deleting (default 3600)
#   OVERBRAINER_KEEP_POD             1: once a job started, never delete (bootstrap failure aside)
#   OVERBRAINER_BOOT_FAILED          non-empty: the bootstrap failed for this fixed reason
#   OVERBRAINER_LEASE_SECONDS        set: a served provider's pod (runpod/serve.py), which lives
#                                    on the client's lease (.pod/lease) instead of a job: the
#                                    first lease lasts this long from the watchdog's first start
#   OVERBRAINER_VERSION              for the User-Agent overbrainer-watchdog/<version>
#   OVERBRAINER_WATCHDOG_INTERVAL_MS, _PROBE_TRIES, _PROBE_WAIT_MS, _CURL_MS
#                                    tick 60000 ms, 5 proof tries 10000 ms apart, curl 10000 ms.
#                                    The client passes the tick and the proof wait already
#                                    multiplied by the time scale (sh has no floats); the
#                                    curl cap, max_hours and graces are never scaled.
#
# Files in $OVERBRAINER_RUN_DIR (the job's, written by overbrainer's job wrapper):
#   job.pid (process group of the job), exit_code, cancelled
# Files in $OVERBRAINER_RUN_DIR/.pod/:
#   watchdog         the verdict, one line: `ready`, `failed <reason>` (http_<code>, unreachable,
#                    missing_key, missing_pod_id, bad_key, no_curl) or `failed bootstrap: <reason>`
#   watchdog.log     timestamped log (also on stdout, Runpod's container log)
#   retrieved        written by the client after verified retrieval: delete (unless kept)
#   cost_cap_in      optional, written by the client: seconds left until its cost cap when it wrote
#                    it; the first tick that sees it turns it into cost_cap_at (this pod's clock)
#   cost_cap_at      Unix seconds on this pod's clock: delete at or after it
#   rate             the pod's $/h as Runpod reported it
#   delete_reason    why the watchdog deleted the pod
#   boot_at          `<pod id> <Unix seconds>` of the first watchdog start on this pod
#   job_started_at, job_ended_at   Unix seconds the watchdog first saw them
#   lease            a served pod's lease, written by the client: `<token> <seconds|none> <held|idle>`:
#                    from the moment the watchdog sees a new token, the pod lives that many seconds
#                    more (`none`: no limit but the others); `held` while a command uses it, `idle`
#                    once the last one let it go (keep_warm)
#   lease_seen, lease_until        the last lease line seen; `<Unix seconds|none> <held|idle>`
#   released         written by the client when it lets a served pod go: delete now
#   engine.pid, engine_exit        a served pod's engine (written by the bootstrap)
#
# Delete rule, first match: bootstrap failed (even kept) → `bootstrap_failed`; kept and a job
# started → never; cost cap passed → `cost_cap`; max_hours passed → `deadline`; retrieved marker →
# `retrieved`; job ended RETRIEVE_GRACE ago → `abandoned`; no job BOOT_GRACE after the first
# start → `never_started`. A served pod has no job: after the deadline and the cost cap come its
# released marker → `released`, its engine's end → `engine_exited`, and its lease running out →
# `client_gone` (while `held`: the client stopped renewing it) or `idle` (keep_warm passed).
# Deleting: DELETE /pods/<id> (2xx or 404 = accepted), else action
# `terminate`, else action `stop` (the pod's volume keeps billing until `overbrainer pod rm`), else
# `runpodctl pod delete`; all failed → again next tick. Accepted → a GET each tick until Runpod
# answers 404 or shows it TERMINATED (or the pod list, when this key may read it, lacks it), then
# exit 0.
#
# A member of an Instant Cluster (its pod shows `cluster {id, ...}`) answers 409 to its own
# DELETE: its watchdog deletes the whole cluster instead (DELETE /clusters/<id>, 2xx or 404 =
# accepted; gone on the cluster's 404). Every member runs the same rules, so the first limit any
# member reaches ends every member. The client gives each member max_cost_usd / nodes, the cap
# counted against that member's own rate.

umask 077
set +e
set -f
trap '' HUP PIPE

ROOT=${OVERBRAINER_POD_ROOT:-}
ROOT=${ROOT%/}
RUN_DIR=${OVERBRAINER_RUN_DIR:-}
if [ -n "$RUN_DIR" ]; then POD=$RUN_DIR/.pod; else POD=$ROOT/run/overbrainer/pod; fi
LOG=$POD/watchdog.log
API=${OVERBRAINER_API_URL:-https://api.runpod.io/v2}
API=${API%/}
ID=${RUNPOD_POD_ID:-}
CLUSTER=  # the cluster this pod is a member of (read by the probe), or none
KEY=${RUNPOD_API_KEY:-}
unset RUNPOD_API_KEY
AGENT="overbrainer-watchdog/${OVERBRAINER_VERSION:-0}"
BOOT_FAILED=${OVERBRAINER_BOOT_FAILED:-}
KEEP=${OVERBRAINER_KEEP_POD:-0}
MAX_COST=${OVERBRAINER_MAX_COST_USD:-}
NL='
'

is_uint() { case $1 in ''|*[!0-9]*) return 1 ;; esac; return 0; }
uint_or() { if is_uint "$1"; then printf '%s' "$1"; else printf '%s' "$2"; fi; }

INTERVAL_MS=$(uint_or "${OVERBRAINER_WATCHDOG_INTERVAL_MS:-}" 60000)
PROBE_TRIES=$(uint_or "${OVERBRAINER_WATCHDOG_PROBE_TRIES:-}" 5)
PROBE_WAIT_MS=$(uint_or "${OVERBRAINER_WATCHDOG_PROBE_WAIT_MS:-}" 10000)
CURL_MS=$(uint_or "${OVERBRAINER_WATCHDOG_CURL_MS:-}" 10000)
BOOT_GRACE=$(uint_or "${OVERBRAINER_BOOT_GRACE:-}" 1800)
RETRIEVE_GRACE=$(uint_or "${OVERBRAINER_RETRIEVE_GRACE:-}" 3600)
LEASE_SECONDS=${OVERBRAINER_LEASE_SECONDS:-}
if [ -n "$LEASE_SECONDS" ] && ! is_uint "$LEASE_SECONDS"; then LEASE_SECONDS=0; fi
MAX_SECONDS=${OVERBRAINER_MAX_SECONDS:-}
# A limit that is set but unreadable counts as passed: no pod without a limit.
if [ -n "$MAX_SECONDS" ] && ! is_uint "$MAX_SECONDS"; then MAX_SECONDS=0; fi
DEADLINE=  # BOOT_AT + MAX_SECONDS, once BOOT_AT is known
if [ "$CURL_MS" -lt 1 ]; then CURL_MS=1; fi

T=0
now() { # sets T (the last good reading if `date` fails)
  t=$(date +%s 2>/dev/null)
  if is_uint "$t"; then T=$t; fi
}

secs() { # milliseconds → a sleep/curl argument in seconds
  printf '%d.%03d' "$(($1 / 1000))" "$(($1 % 1000))"
}

log() {
  line="$(date -u +%Y-%m-%dT%H:%M:%SZ 2>/dev/null) watchdog: $*"
  printf '%s\n' "$line" 2>/dev/null
  printf '%s\n' "$line" >> "$LOG" 2>/dev/null
}

put() { # file text: atomic write
  printf '%s\n' "$2" > "$1.tmp.$$" 2>/dev/null && mv -f "$1.tmp.$$" "$1" 2>/dev/null
  r=$?
  rm -f "$1.tmp.$$" 2>/dev/null
  return $r
}

first_line() { # file → its first line when it is an unsigned integer
  [ -f "$1" ] || return 1
  v=$(head -n 1 "$1" 2>/dev/null)
  is_uint "$v" || return 1
  printf '%s' "$v"
}

nap() { # milliseconds; SIGTERM ends the wait at once
  sleep "$(secs "$1")" 2>/dev/null &
  NAP=$!
  wait "$NAP" 2>/dev/null
  NAP=
}

stop_now() {
  log "stopping"
  [ -n "${NAP:-}" ] && kill "$NAP" 2>/dev/null
  exit 0
}
trap stop_now TERM INT

# api METHOD PATH [JSON]: sets CODE (000 when no answer) and BODY.
api() {
  CODE=000
  BODY=
  command -v curl >/dev/null 2>&1 || return 1
  if [ -n "${3:-}" ]; then
    resp=$(printf 'header = "Authorization: Bearer %s"\n' "$KEY" | curl -K - -s -X "$1" \
      -A "$AGENT" -H 'Content-Type: application/json' --data "$3" --max-time "$(secs "$CURL_MS")" \
      --max-redirs 0 -w "${NL}%{http_code}" "$API$2" 2>/dev/null)
  else
    resp=$(printf 'header = "Authorization: Bearer %s"\n' "$KEY" | curl -K - -s -X "$1" \
      -A "$AGENT" --max-time "$(secs "$CURL_MS")" --max-redirs 0 -w "${NL}%{http_code}" \
      "$API$2" 2>/dev/null)
  fi
  c=${resp##*"$NL"}
  case $c in [0-9][0-9][0-9]) CODE=$c ;; esac
  case $resp in *"$NL"*) BODY=${resp%"$NL"*} ;; esac
  return 0
}

note_rate() { # from BODY: the pod's `cost` ($/h) when positive
  r=$(printf '%s\n' "$BODY" \
    | sed -n 's/.*"cost"[[:space:]]*:[[:space:]]*\([0-9][0-9.eE+-]*\).*/\1/p' 2>/dev/null | head -n 1)
  [ -n "$r" ] || return 1
  awk -v r="$r" 'BEGIN { exit !(r + 0 > 0) }' 2>/dev/null || return 1
  [ -f "$POD/rate" ] || log "rate \$$r/h"
  put "$POD/rate" "$r"
}

note_cluster() { # from BODY: the cluster this pod is a member of (its `cluster.id`)
  c=$(printf '%s\n' "$BODY" | tr -d '\n' \
    | sed -n 's/.*"cluster"[[:space:]]*:[[:space:]]*{[^}]*"id"[[:space:]]*:[[:space:]]*"\([A-Za-z0-9_-]*\)".*/\1/p' \
      2>/dev/null | head -n 1)
  [ -n "$c" ] || return 0
  CLUSTER=$c
  log "member of cluster $c: a delete ends the whole cluster"
}

probe() { # sets VERDICT
  if [ -z "$KEY" ]; then VERDICT="failed missing_key"; return; fi
  case $KEY in *[!A-Za-z0-9_.:+/=-]*) VERDICT="failed bad_key"; return ;; esac
  if [ -z "$ID" ]; then VERDICT="failed missing_pod_id"; return; fi
  case $ID in *[!A-Za-z0-9_-]*) VERDICT="failed bad_pod_id"; return ;; esac
  if ! command -v curl >/dev/null 2>&1; then VERDICT="failed no_curl"; return; fi
  i=1
  while :; do
    api GET "/pods/$ID"
    log "probe GET $CODE"
    case $CODE in
      200) note_rate; note_cluster; VERDICT=ready; return ;;
      000|404|408|429|5[0-9][0-9]) ;;  # 404: Runpod may not show a pod it has just created
      *) VERDICT="failed http_$CODE"; return ;;
    esac
    if [ "$i" -ge "$PROBE_TRIES" ]; then
      if [ "$CODE" = 000 ]; then VERDICT="failed unreachable"; else VERDICT="failed http_$CODE"; fi
      return
    fi
    i=$((i + 1))
    nap "$PROBE_WAIT_MS"
  done
}

delete_pod() { # reason → 0 when Runpod accepted a delete (or stop)
  log "delete reason=$1"
  if [ -n "$CLUSTER" ]; then
    api DELETE "/clusters/$CLUSTER"
    log "DELETE cluster $CLUSTER $CODE"
    case $CODE in 200|202|204|404) return 0 ;; esac
    log "delete failed: trying again next tick"
    return 1
  fi
  api DELETE "/pods/$ID"
  log "DELETE $CODE"
  case $CODE in 200|202|204|404) return 0 ;; esac
  api POST "/pods/$ID/action" '{"action":"terminate"}'
  log "action terminate $CODE"
  case $CODE in 200|202|204|404) return 0 ;; esac
  api POST "/pods/$ID/action" '{"action":"stop"}'
  log "action stop $CODE"
  case $CODE in
    200|202|204)
      log "pod stopped, not deleted: its volume keeps billing until \`overbrainer pod rm\`"
      return 0 ;;
  esac
  if command -v runpodctl >/dev/null 2>&1; then
    RUNPOD_API_KEY=$KEY runpodctl pod delete "$ID" >/dev/null 2>&1
    r=$?
    log "runpodctl pod delete exit $r"
    [ "$r" = 0 ] && return 0
  fi
  log "delete failed: trying again next tick"
  return 1
}

arm_client_cap() { # the client's cost_cap_in (seconds left when written) → cost_cap_at, once
  [ -f "$POD/cost_cap_at" ] && return 0
  left=$(first_line "$POD/cost_cap_in") || return 0
  put "$POD/cost_cap_at" "$((T + left))" && log "cost cap armed: delete at $((T + left))"
}

cost_cap_at() { # sets CAP: the earliest cap time, from the client's file or the pod's rate
  arm_client_cap
  best=$(first_line "$POD/cost_cap_at")
  if [ -n "$MAX_COST" ]; then
    if [ ! -f "$POD/rate" ]; then api GET "/pods/$ID"; [ "$CODE" = 200 ] && note_rate; fi
    rate=$(head -n 1 "$POD/rate" 2>/dev/null)
    at=$(awk -v c="$MAX_COST" -v r="$rate" -v s="$BOOT_AT" \
      'BEGIN { if (r + 0 <= 0 || c + 0 <= 0) exit 1; printf "%d\n", s + (c / r) * 3600 }' 2>/dev/null)
    if is_uint "$at" && { [ -z "$best" ] || [ "$at" -lt "$best" ]; }; then best=$at; fi
  fi
  CAP=$best
}

job_state() { # sets STARTED_JOB, ENDED_AT (empty when running or none)
  STARTED_JOB=0
  ENDED_AT=
  [ -n "$RUN_DIR" ] || return 0
  if [ -s "$RUN_DIR/job.pid" ] || [ -f "$POD/job_started_at" ]; then
    STARTED_JOB=1
    [ -f "$POD/job_started_at" ] || { put "$POD/job_started_at" "$T"; log "job started"; }
  fi
  [ "$STARTED_JOB" = 1 ] || return 0
  ended=0
  if [ -e "$RUN_DIR/exit_code" ] || [ -e "$RUN_DIR/cancelled" ]; then
    ended=1
  else
    pid=$(head -n 1 "$RUN_DIR/job.pid" 2>/dev/null)
    if is_uint "$pid" && [ "$pid" -gt 1 ]; then
      kill -0 "-$pid" 2>/dev/null || ended=1
    elif [ ! -e "$RUN_DIR/job.pid" ]; then
      ended=1
    fi
  fi
  [ "$ended" = 1 ] || return 0
  ENDED_AT=$(first_line "$POD/job_ended_at")
  if [ -z "$ENDED_AT" ]; then
    ENDED_AT=$T
    put "$POD/job_ended_at" "$T"
    log "job ended"
  fi
}

lease_reason() { # a served pod: sets R when its lease ran out
  line=$(head -n 1 "$POD/lease" 2>/dev/null)
  if [ -n "$line" ] && [ "$line" != "$(head -n 1 "$POD/lease_seen" 2>/dev/null)" ]; then
    # shellcheck disable=SC2086 # split on purpose: token, seconds, kind
    set -- $line
    case ${2:-} in
      none) lease_end=none ;;
      *) if is_uint "${2:-}"; then lease_end=$((T + $2)); else lease_end=$T; fi ;;
    esac
    why=${3:-held}
    case $why in idle|held) ;; *) why=held ;; esac
    put "$POD/lease_until" "$lease_end $why" && put "$POD/lease_seen" "$line"
  fi
  # shellcheck disable=SC2046 # split on purpose: the time, then the kind
  set -- $(head -n 1 "$POD/lease_until" 2>/dev/null)
  lease_end=${1:-$((BOOT_AT + LEASE_SECONDS))}
  [ "$lease_end" = none ] && return 0
  is_uint "$lease_end" || lease_end=0
  if [ "$T" -ge "$lease_end" ]; then
    if [ "${2:-held}" = idle ]; then R=idle; else R=client_gone; fi
  fi
}

reason() { # sets R: the delete reason, or nothing
  R=
  if [ -n "$BOOT_FAILED" ]; then R=bootstrap_failed; return; fi
  job_state
  if [ "$KEEP" = 1 ] && [ "$STARTED_JOB" = 1 ]; then return; fi
  cost_cap_at
  if [ -n "$CAP" ] && [ "$T" -ge "$CAP" ]; then R=cost_cap; return; fi
  if [ -n "$DEADLINE" ] && [ "$T" -ge "$DEADLINE" ]; then R=deadline; return; fi
  if [ -n "$LEASE_SECONDS" ]; then
    if [ -e "$POD/released" ]; then R=released; return; fi
    if [ -e "$POD/engine_exit" ]; then R=engine_exited; return; fi
    lease_reason
    return
  fi
  if [ -e "$POD/retrieved" ]; then R=retrieved; return; fi
  if [ -n "$ENDED_AT" ] && [ $((T - ENDED_AT)) -ge "$RETRIEVE_GRACE" ]; then R=abandoned; return; fi
  if [ "$STARTED_JOB" = 0 ] && [ $((T - BOOT_AT)) -ge "$BOOT_GRACE" ]; then R=never_started; fi
}

status_of() { # from BODY: the pod's `status`
  printf '%s\n' "$BODY" \
    | sed -n 's/.*"status"[[:space:]]*:[[:space:]]*"\([A-Z_]*\)".*/\1/p' 2>/dev/null | head -n 1
}

gone() { # after an accepted delete: 0 when Runpod no longer shows this pod (or its cluster)
  if [ -n "$CLUSTER" ]; then
    api GET "/clusters/$CLUSTER"
    if [ "$CODE" = 404 ]; then log "cluster gone"; return 0; fi
    return 1
  fi
  api GET "/pods/$ID"
  if [ "$CODE" = 404 ]; then log "pod gone"; return 0; fi
  if [ "$CODE" = 200 ] && [ "$(status_of)" = TERMINATED ]; then log "pod gone (TERMINATED)"; return 0; fi
  look=$CODE
  api GET "/pods"
  if [ "$CODE" = 200 ]; then
    case $BODY in
      *"\"$ID\""*|*'"hasNextPage":true'*|*'"hasNextPage": true'*) ;;  # listed, or maybe on a next page
      *) log "pod gone (not in the pod list)"; return 0 ;;
    esac
  fi
  CODE=$look
  return 1
}

# One check; exit status 0 nothing to do, 10 delete accepted, 20 the pod is gone.
tick() {
  now
  if [ "$DELETING" = 1 ]; then
    gone && return 20
    log "pod still there after the delete (GET $CODE)"
    delete_pod "${WHY:-again}" && return 10
    return 0
  fi
  reason
  [ -n "$R" ] || return 0
  put "$POD/delete_reason" "$R"
  delete_pod "$R" && return 10
  return 0
}

mkdir -p "$POD" 2>/dev/null

now
BOOT_AT=
# shellcheck disable=SC2046 # split on purpose: the pod ID, then the boot time
set -- $(head -n 1 "$POD/boot_at" 2>/dev/null)
if [ "${1:-}" = "$ID" ] && is_uint "${2:-}"; then BOOT_AT=$2; fi
if [ -z "$BOOT_AT" ]; then BOOT_AT=$T; put "$POD/boot_at" "$ID $T"; fi
if [ -n "$MAX_SECONDS" ]; then DEADLINE=$((BOOT_AT + MAX_SECONDS)); fi
log "start pod=${ID:-?} boot_at=$BOOT_AT deadline=${DEADLINE:-none} keep=$KEEP boot_grace=${BOOT_GRACE}s" \
  "retrieve_grace=${RETRIEVE_GRACE}s interval=${INTERVAL_MS}ms${LEASE_SECONDS:+ lease=${LEASE_SECONDS}s}"

if [ -n "$BOOT_FAILED" ]; then
  VERDICT="failed bootstrap: $BOOT_FAILED"
else
  probe
fi
put "$POD/watchdog" "$VERDICT" || log "cannot write the verdict in $POD"
log "verdict $VERDICT"

DELETING=0
WHY=
while :; do
  ( tick )
  rc=$?
  case $rc in
    10) DELETING=1; WHY=$(head -n 1 "$POD/delete_reason" 2>/dev/null) ;;
    20) log "exiting"; exit 0 ;;
  esac
  nap "$INTERVAL_MS"
done
