"""The child's GGUF served by llama-server, for a compare and an eval: on this machine for the
length of a block (`serving`: an eval here), or in a job on a target (`compare.sh` and a client:
a compare's questions, compare/job.py; a remote eval's lm-eval, eval/job.py).

The same server both ways: `llama-server -m <gguf> --host 127.0.0.1 --port P -ngl 999
-c <context> -np 1 --no-webui`, found by the shared `llama_cpp.sh` (`llama_cpp_tool
llama-server`) with the target's `OVERBRAINER_LLAMA_CPP*` variables (export/llama_cpp.job_env:
the target's `llama_cpp_dir`, else `OVERBRAINER_LLAMA_CPP_DIR`, else the pinned llama.cpp built
once in the target's cache), its output in `server.log`; ready when `GET /health` answers 200
within `[compare] server_start_secs`; stopped with TERM, then KILL after 10 s, whatever ends it.

On this machine (`serving`): the server runs in a session of its own, its environment this
process's minus every `OVERBRAINER_*` / `VAULT_*` variable (exec/local.job_environment), plus
what this CPU needs (export/llama_cpp.cpu_env: LLAMA_ARG_REPACK=0 where AMX is advertised); one
that exits before it is ready, or a timeout, is an OverbrainerError naming its log.

In a job (jobs.side_job; the job's kind says which: `compare`, `eval`):
- The GGUF (`ensure_gguf`): `<root>` (the run's directory on the target, see jobs.side_job) must
  hold the file `export.json` names, with its SHA-256; when it does not, that one file is sent
  there (`Executor.upload(entries=…)`). It stays on a local or SSH target; on a pod the job
  removes it once the server stopped (`OVERBRAINER_COMPARE_DROP_MODEL`). The job reads it as
  `../../<file>` (relative to the job directory, so a container's mount sees it too).
- The job's files (`job_files`): `compare.sh`, `compare_client.py` (package data,
  compare/scripts/; compare.sh runs the client `OVERBRAINER_COMPARE_CLIENT`, compare_client.py
  by default) and the shared `llama_cpp.sh` (export/scripts/), plus the client's own files.
- Its environment (`job_env`): the GGUF, the context, `[compare] max_tokens`, `temperature`,
  `server_start_secs`, and llama.cpp's source.
- A runpod target gets a new pod (`pod_settings`: `[compare] image`, `[compare] max_hours`, a
  VRAM floor from the GGUF's size, or from the base model's when the job exports it first).
- Its failures are said in the words of its kind (`run_explained`): which job, of which run, and
  where its server log is (`server_log`).
"""

from __future__ import annotations

import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from overbrainer.compare.plan import Gguf
from overbrainer.config.model import Config, Target
from overbrainer.errors import Interrupted, OverbrainerError
from overbrainer.exec.local import job_environment
from overbrainer.exec.transfer import sha256_file
from overbrainer.export import llama_cpp
from overbrainer.runpod import side_pods as pod
from overbrainer.export.gate import base_model
from overbrainer.jobs.run_record import RunRecord
from overbrainer.jobs.side_job import SideJob, SideJobFailed, SideJobResult, run_side_job

if TYPE_CHECKING:
    from overbrainer.front.session import Session

STOP_SECS = 10.0
SCRIPT = "compare.sh"  # the job's one step: serve, then run the client
SCRIPTS = (SCRIPT, "compare_client.py")
SERVER_LOG = "server.log"
HARDWARE = "hardware.json"
SERVER = "llama-server -ngl 999 -np 1"  # how the child is served, as eval.json says it


# --- on this machine ---------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def server_binary(target: Target | None, work_dir: Path, cache: Path) -> tuple[str, dict[str, str]]:
    """(llama-server's path, the environment it runs with), found by llama_cpp.sh in `work_dir`."""
    env = {**job_environment(), **llama_cpp.job_env(target), "OVERBRAINER_CACHE": str(cache)}
    script = Path(work_dir) / llama_cpp.SCRIPT
    script.write_text(llama_cpp.script(llama_cpp.SCRIPT), encoding="utf-8")
    out = subprocess.run(["sh", "-c", f". ./{llama_cpp.SCRIPT} && llama_cpp_tool llama-server"],
                         cwd=work_dir, env=env, capture_output=True, text=True, timeout=3600)
    if out.returncode != 0 or not out.stdout.strip():
        last = (out.stderr.strip().splitlines() or ["llama-server not found"])[-1]
        raise OverbrainerError(f"eval: cannot start the child's server: {last}")
    own = {k: v for k, v in env.items() if not k.startswith("OVERBRAINER_")}
    return out.stdout.strip().splitlines()[-1], {**own, **llama_cpp.cpu_env(own)}


def _ready(url: str, proc: subprocess.Popen[bytes], start_secs: float, log_path: Path) -> None:
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


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(STOP_SECS)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextmanager
def serving(gguf: Path, *, target: Target | None, context: int, start_secs: float, work_dir: Path,
            cache: Path) -> Iterator[str]:
    """Yields the server's base URL (`http://127.0.0.1:P`) while it runs; `work_dir` gets
    `llama_cpp.sh` and `server.log`."""
    binary, env = server_binary(target, work_dir, cache)
    port = free_port()
    log_path = Path(work_dir) / SERVER_LOG
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


# --- in a job on a target ----------------------------------------------------------------------

def script_text(name: str, package: str = "overbrainer.compare") -> str:
    """The text of a file shipped in `<package>/scripts/` (compare.sh and compare_client.py are
    compare's; a client of another kind is its package's)."""
    return resources.files(package).joinpath("scripts", name).read_text(encoding="utf-8")


def job_files() -> dict[str, str | bytes | Path]:
    """The files every serving job has: compare.sh, compare_client.py and llama_cpp.sh."""
    files: dict[str, str | bytes | Path] = {name: script_text(name) for name in SCRIPTS}
    files[llama_cpp.SCRIPT] = llama_cpp.script(llama_cpp.SCRIPT)
    return files


def ensure_gguf(executor: Any, remote_run_dir: str, run_dir: Path, gguf: Gguf) -> bool:
    """Make sure the target's run directory holds the GGUF with its SHA-256; True when it was sent."""
    expected = gguf.sha256 or sha256_file(run_dir / gguf.file)
    there = dict(executor.manifest(remote_run_dir, [gguf.file]))
    if there.get(str(PurePosixPath(gguf.file))) == expected:
        return False
    executor.upload(entries=[(run_dir / gguf.file, str(PurePosixPath(remote_run_dir, gguf.file)))])
    there = dict(executor.manifest(remote_run_dir, [gguf.file]))
    if there.get(str(PurePosixPath(gguf.file))) != expected:
        raise OverbrainerError(f"the GGUF {gguf.file} sent to the target does not have the SHA-256 of "
                               f"export.json ({expected[:12]}…)")
    return True


def job_env(config: Config, target: Target, gguf: Gguf, context: int, *, drop: bool = False) -> dict[str, str]:
    settings = config.compare
    env = {"OVERBRAINER_COMPARE_MODEL": f"../../{gguf.file}", "OVERBRAINER_COMPARE_CTX": str(int(context or 0)),
           "OVERBRAINER_COMPARE_MAX_TOKENS": str(int(settings.max_tokens)),
           "OVERBRAINER_COMPARE_TEMPERATURE": repr(float(settings.temperature)),
           "OVERBRAINER_COMPARE_START_SECS": str(int(settings.server_start_secs))}
    if drop:
        env["OVERBRAINER_COMPARE_DROP_MODEL"] = "1"
    return {**env, **llama_cpp.job_env(target)}


def pod_settings(config: Config, target: Target, gguf: Gguf, run_dir: Path, export: Any) -> dict[str, Any]:
    """A serving pod's settings: `[compare] image` and `max_hours`, and the VRAM floor from the
    GGUF's size (an export first: from the base model's)."""
    size = None
    if pod.needs_floor(target):
        if export is not None:
            size = pod.base_model_bytes(config, base_model(run_dir))
        else:
            size = (run_dir / gguf.file).stat().st_size
    settings = config.compare
    return pod.settings(target, settings.max_hours, image=settings.image, model_bytes=size)


def run_explained(session: Session, run: RunRecord, job: SideJob, name: str, keep: bool,
                  claimed: dict[str, str], required: str) -> SideJobResult:
    """run_side_job for a job that serves the child (compare.sh), its stop and failure said in
    the words of its kind (`compare`, `eval`: which one, of which run, and where its server log
    is); a job that left no `required` file failed. `claimed["id"]`: its ID once claimed."""
    kind = job.kind
    try:
        result = run_side_job(session, run, job, target=name, keep=keep)
    except Interrupted as e:
        label = f"{kind} {claimed['id']}" if "id" in claimed else f"the {kind}"
        tail = str(e).partition(" cancelled")[2]  # e.g. `; it has no pod left`
        err = Interrupted(f"interrupted: {label} of run {run.id} cancelled{tail}")
        err.exit_code = e.exit_code
        raise err from e
    except SideJobFailed as e:
        result = e.result
        reason = result.message or str(e)
        for prefix in ("compare: ", f"{kind}: "):  # compare.sh's and the client's own lines
            reason = reason[len(prefix):] if reason.startswith(prefix) else reason
        raise OverbrainerError(f"{kind} {result.job_id} failed: {reason}; its server log is "
                               f"{server_log(run.id, result.job_id, kind)}") from e
    if not (result.job_dir / required).is_file():
        raise OverbrainerError(f"{kind} {result.job_id} failed: the job left no {required}; its server log is "
                               f"{server_log(run.id, result.job_id, kind)}")
    return result


def server_log(run_id: str, job_id: str, kind: str = "compare") -> str:
    """Where the server log of a compare (or of another job of `kind` served by compare.sh) is."""
    return f"runs/{run_id}/{kind}s/{job_id}/{SERVER_LOG}"
