# shellcheck shell=bash
# Sourced by the scripts/e2e_*.sh scripts: their messages, their one failure line, their work folder.
#   e2e_start NAME   sets WORK to a new folder under ${TMPDIR:-/tmp} (removed at exit unless KEEP=1)
#                    and runs `e2e_stop` (define it to stop what you started) at exit.
say() { printf 'e2e: %s\n' "$*" >&2; }
fail() { printf 'e2e: FAILED: %s\n' "$*" >&2; exit 1; }
# Whatever fails without its own message still ends with one.
# shellcheck disable=SC2154 # rc is set inside the trap
trap 'rc=$?; fail "\`${BASH_COMMAND}\` exited $rc (line $LINENO)"' ERR

e2e_stop() { :; }
_e2e_cleanup() {
  e2e_stop
  [ -n "${WORK:-}" ] || return 0
  if [ -z "${KEEP:-}" ]; then rm -rf "$WORK"; else echo "e2e: kept $WORK" >&2; fi
}

e2e_start() {
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")
  trap _e2e_cleanup EXIT
  trap 'fail "interrupted"' INT
  trap 'fail "terminated"' TERM
}
