"""The child's GGUF served by llama-server on this machine, for `overbrainer eval`: the server
compare's job starts (compare/scripts/compare.sh), started from here.

- llama-server: found by the shared `llama_cpp.sh` (`llama_cpp_tool llama-server`) with the
  target's `OVERBRAINER_LLAMA_CPP*` variables (export/llama_cpp.py: the target's `llama_cpp_dir`,
  else `OVERBRAINER_LLAMA_CPP_DIR`, else the pinned llama.cpp built once in `runs/.cache`).
- Command: `llama-server -m <gguf> --host 127.0.0.1 --port P -ngl 999 -c <context> -np 1
  --no-webui`, its output in `server.log`, in a session of its own; its environment is this
  process's minus every `OVERBRAINER_*` / `VAULT_*` variable (exec/local.job_environment).
- Ready when `GET /health` answers 200, within `start_secs`; a server that exits first, or a
  timeout, is an OverbrainerError naming its log.
- Stopped (TERM, then KILL after 10 s) whatever ends the `serving` block.
"""

from __future__ import annotations

import socket
import subprocess
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

from overbrainer.errors import OverbrainerError
from overbrainer.exec.local import job_environment
from overbrainer.export import llama_cpp

STOP_SECS = 10.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_binary(target, work_dir: Path, cache: Path) -> tuple[str, dict[str, str]]:
    """(llama-server's path, the environment it runs with), found by llama_cpp.sh in `work_dir`."""
    env = {**job_environment(), **llama_cpp.job_env(target), "OVERBRAINER_CACHE": str(cache)}
    script = Path(work_dir) / llama_cpp.SCRIPT
    script.write_text(llama_cpp.script(llama_cpp.SCRIPT), encoding="utf-8")
    out = subprocess.run(["sh", "-c", f". ./{llama_cpp.SCRIPT} && llama_cpp_tool llama-server"],
                         cwd=work_dir, env=env, capture_output=True, text=True, timeout=3600)
    if out.returncode != 0 or not out.stdout.strip():
        last = (out.stderr.strip().splitlines() or ["llama-server not found"])[-1]
        raise OverbrainerError(f"eval: cannot start the child's server: {last}")
    return out.stdout.strip().splitlines()[-1], {k: v for k, v in env.items() if not k.startswith("OVERBRAINER_")}


def _ready(url: str, proc: subprocess.Popen, start_secs: float, log_path: Path) -> None:
    deadline = time.monotonic() + start_secs
    while True:
        if proc.poll() is not None:
            raise OverbrainerError(f"eval: llama-server exited before it was ready; its log is {log_path}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=5) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise OverbrainerError(f"eval: llama-server was not ready within {start_secs:g} s; its log is {log_path}")
        time.sleep(0.2)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(STOP_SECS)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextmanager
def serving(gguf: Path, *, target, context: int, start_secs: float, work_dir: Path, cache: Path):
    """Yields the server's base URL (`http://127.0.0.1:P`) while it runs; `work_dir` gets
    `llama_cpp.sh` and `server.log`."""
    binary, env = server_binary(target, work_dir, cache)
    port = free_port()
    log_path = Path(work_dir) / "server.log"
    args = [binary, "-m", str(gguf), "--host", "127.0.0.1", "--port", str(port), "-ngl", "999",
            "-c", str(int(context or 0)), "-np", "1", "--no-webui"]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=env, start_new_session=True, close_fds=True)
    try:
        url = f"http://127.0.0.1:{port}"
        _ready(url, proc, start_secs, log_path)
        yield url
    finally:
        _stop(proc)
        (Path(work_dir) / llama_cpp.SCRIPT).unlink(missing_ok=True)


