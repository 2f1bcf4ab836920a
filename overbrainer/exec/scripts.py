"""The POSIX sh text of the job-control scripts, shared by both executors.

Every function returns a script for `sh -c`; every value in it is quoted with shlex.quote.
Only POSIX sh, tar, setsid, nohup, find, sha256sum, ls, awk, tail, head, kill, sleep are needed.
The files they use and what each status means: docs/runs.md#job-control-on-the-target.
"""

from __future__ import annotations

import shlex
from typing import Sequence

from overbrainer.exec.base import Container
from overbrainer.exec.transfer import check_entries

q = shlex.quote

STALE = "rm -f exit_code exit_code.tmp cancelling cancelled job.pid job.pid.tmp"


def wrapper(script: str) -> str:
    """Run `script` in a subshell of its own lines, record the pid and the exit code."""
    return (
        "echo $$ > job.pid.tmp && mv -f job.pid.tmp job.pid\n"
        "(\n"
        f"{script}\n"
        ")\n"
        "code=$?\n"
        'echo "$code" > exit_code.tmp && mv -f exit_code.tmp exit_code\n'
        'exit "$code"\n'
    )


def dir_expr(path: str) -> str:
    """A shell word for `path`; a leading `~/` becomes "$HOME"/… (expanded on the target)."""
    if path == "~":
        return '"$HOME"'
    if path.startswith("~/"):
        return '"$HOME"/' + q(path[2:])
    return q(path)


def resolve_workdir(path: str) -> str:
    return f"mkdir -p -- {dir_expr(path)} && cd -- {dir_expr(path)} && pwd -P"


def status(job_dir: str, pid: int) -> str:
    return (
        f"cd -- {q(job_dir)} 2>/dev/null || {{ echo lost; exit 0; }}\n"
        f"pid={int(pid)}\n"
        '[ "$pid" -gt 1 ] || exit 1\n'
        'if kill -0 "-$pid" 2>/dev/null; then alive=1; else alive=0; fi\n'
        "if [ -e cancelled ]; then echo cancelled\n"
        "elif [ -e cancelling ]; then if [ $alive = 1 ]; then echo running; else echo cancelled; fi\n"
        'elif [ -f exit_code ]; then echo "exited $(cat exit_code)"\n'
        "elif [ $alive = 1 ]; then echo running\n"
        "else echo lost\n"
        "fi\n"
    )


def cancel(job_dir: str, pid: int, container: Container | None, wait_tenths: int = 100) -> str:
    stop = ""
    if container is not None:
        stop = f"{q(container.engine)} stop -t 30 {q(container.name)} >/dev/null 2>&1 || true\n"
    return (
        f"cd -- {q(job_dir)} || exit 1\n"
        f"pid={int(pid)}\n"
        '[ "$pid" -gt 1 ] || exit 1\n'
        "if [ -e exit_code ] || [ -e cancelled ]; then exit 0; fi\n"
        ": > cancelling.tmp && mv -f cancelling.tmp cancelling || exit 1\n"
        f"{stop}"
        'kill -TERM "-$pid" 2>/dev/null\n'
        "i=0\n"
        f'while kill -0 "-$pid" 2>/dev/null && [ $i -lt {wait_tenths} ]; do sleep 0.1; i=$((i+1)); done\n'
        'kill -KILL "-$pid" 2>/dev/null\n'
        "i=0\n"
        'while kill -0 "-$pid" 2>/dev/null; do\n'
        f"  if [ $i -ge {wait_tenths} ]; then\n"
        '    echo "processes of the job are still there after SIGKILL: retry the cancel" >&2; exit 1\n'
        "  fi\n"
        "  sleep 0.1; i=$((i+1))\n"
        "done\n"
        ": > cancelled\n"
    )


def launcher(job_dir: str, wrapped: str, env: dict[str, str], secret_names: list[str]) -> str:
    """SSH spawn: secrets from stdin (one line each), then a detached job; prints its pid."""
    lines = [f"IFS= read -r {n} && export {n} || exit 3" for n in secret_names]
    lines.append(f"mkdir -p -- {q(job_dir)} && cd -- {q(job_dir)} || exit 1")
    lines.append(STALE)
    lines += [f"export {k}={q(v)}" for k, v in env.items()]
    lines.append(f"{{ setsid nohup sh -c {q(wrapped)} > job.log 2>&1 < /dev/null & }} || exit 1")
    # The group exists once the wrapper wrote job.pid (after setsid): wait for it so a status
    # asked right away never reads `lost`; its content is the group leader even if setsid forked.
    lines.append('pid=$! i=0')
    lines.append('while [ ! -s job.pid ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done')
    lines.append('if [ -s job.pid ]; then cat job.pid; else echo "$pid"; fi')
    return "\n".join(lines) + "\n"


def claim(run_dir: str, owner: str) -> str:
    return (
        f"mkdir -p -- {q(run_dir)} && cd -- {q(run_dir)} || exit 1\n"
        f"if ( set -C; printf '%s\\n' {q(owner)} > .claim ) 2>/dev/null; then echo ours; exit 0; fi\n"
        f'if [ "$(cat .claim 2>/dev/null)" = {q(owner)} ]; then echo ours; else echo taken; fi\n'
    )


def read_from(path: str, offset: int, limit: int) -> str:
    return (
        f"[ -f {q(path)} ] || exit 0\n"
        f"tail -c +{int(offset) + 1} -- {q(path)} | head -c {int(limit)}\n"
    )


def file_size(path: str) -> str:
    """Prints the size of a regular file in bytes, or `missing`."""
    return f"if [ -f {q(path)} ]; then wc -c < {q(path)}; else echo missing; fi\n"


def put_file(path: str) -> str:
    """Content arrives on stdin (never on the command line)."""
    parent = path.rsplit("/", 1)[0] or "/"
    return (
        f"mkdir -p -- {q(parent)} && cat > {q(path)}.$$.tmp && mv -f {q(path)}.$$.tmp {q(path)}\n"
    )


def upload(remote: str, folders: Sequence[str] = ()) -> str:
    """Extract the tar on stdin into `remote`, after making it and `folders` (the folders the
    members land in)."""
    made = " ".join(q(f) for f in dict.fromkeys([remote, *folders]))
    return f"mkdir -p -- {made} && tar -C {q(remote)} -xf -\n"


def _prune(exclude: list[str]) -> str:
    if not exclude:
        return ""
    names = " -o ".join(f"-name {q(p)}" for p in exclude)
    return f"\\( {names} \\) -prune -o "


def _missing(remote: str) -> str:
    return f"cd -- {q(remote)} 2>/dev/null || {{ echo {q(remote + ' does not exist')} >&2; exit 1; }}\n"


def download(remote: str, entries: list[str], exclude: list[str]) -> str:
    """A tar of the existing entries on stdout (empty stream when none exists)."""
    entries = check_entries(entries)
    excl = " ".join(f"--exclude={q(p)}" for p in exclude)
    return (
        _missing(remote)
        + "set --\n"
        + "".join(f'[ -e {q(e)} ] && set -- "$@" {q(e)}\n' for e in entries)
        + '[ $# -gt 0 ] || exit 0\n'
        + f'exec tar -cf - {excl} -- "$@"\n'
    )


def tree_size(remote: str, entries: list[str], exclude: list[str]) -> str:
    """Prints the bytes of the regular files under the existing `entries` (sizes from `ls -ln`,
    no file is read): the total of a download's progress."""
    entries = check_entries(entries)
    prune = _prune(exclude)
    body = "".join(
        f"[ -e ./{q(e)} ] && find ./{q(e)} {prune}-type f -exec ls -ln {{}} +\n" for e in entries
    )
    return _missing(remote) + "{\n" + body + "true\n} | awk '{ s += $5 } END { printf \"%.0f\\n\", s }'\n"


def manifest(remote: str, entries: list[str], exclude: list[str]) -> str:
    """NUL-terminated `<sha256>  ./path` (or `<sha256> *./path`) records. `openssl dgst -r` (several
    times faster than coreutils' sha256sum) hashes every file whose path holds no newline or
    backslash (it would escape those); `sha256sum -z` the others, or all where openssl is missing;
    a loop of `sha256sum <` per file where neither is there."""
    entries = check_entries(entries)
    prune = _prune(exclude)
    per_file = (
        "sh -c 'for f; do h=$(sha256sum < \"$f\") || exit 1; "
        "printf \"%s  %s\\000\" \"${h%% *}\" \"$f\"; done' sh {} +"
    )
    odd = "\\( -path \"*$nl*\" -o -path '*\\\\*' \\)"
    body = "".join(
        f'[ -e ./{q(e)} ] && if [ -n "$fast" ]; then\n'
        # the pipe's status is tr's: find's comes back on fd 3
        f"  st=$( {{ {{ find ./{q(e)} {prune}-type f ! {odd} -exec openssl dgst -sha256 -r {{}} +; "
        "echo $? >&3; } | tr '\\n' '\\000' >&4; } 3>&1 ) 4>&1\n"
        '  [ "$st" = 0 ] || exit 1\n'
        f'  find ./{q(e)} {prune}-type f {odd} -exec "$@" || exit 1\n'
        f'else find ./{q(e)} {prune}-type f -exec "$@" || exit 1; fi\n'
        for e in entries
    )
    return (
        _missing(remote)
        + "nl='\n'\n"
        + "if printf '' | sha256sum -z >/dev/null 2>&1; then set -- sha256sum -z -- {} +\n"
        + f"else set -- {per_file}\nfi\n"
        + "fast=; if printf '' | openssl dgst -sha256 -r >/dev/null 2>&1; then fast=1; fi\n"
        + body
        + "exit 0\n"
    )
