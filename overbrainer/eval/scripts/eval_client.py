"""Run lm-evaluation-harness on the child served by llama-server, for an `overbrainer eval` on a
remote target (an SSH host or a pod).

Runs on the target in the eval's job directory, started by compare.sh (which started the server;
OVERBRAINER_COMPARE_CLIENT=eval_client.py), next to compare_client.py, whose helpers it uses (the
readiness wait, the server's liveness, hardware.json, the server log's tail):

    python3 eval_client.py --port P --server-pid PID --build NAME

lm-eval: this python3 when it has lm-eval 0.4.13 and the modules of its `api` extra; else the venv
`$OVERBRAINER_CACHE/lm-eval-0.4.13`, made once (`python3 -m venv`, then `pip install
'lm-eval[api]==0.4.13'`: the target needs to reach PyPI; made beside and renamed into place, so
a venv there is whole), and this script runs again with that venv's python.

Files (in the working directory):
  eval_job.json         input: `{arguments, include, index}`: lm-eval's simple_evaluate keyword
                        arguments (overbrainer's eval_harness.arguments; the `base_url` of
                        `model_args` is set here to the server's), the task folders (lm-eval's
                        include_path, relative) and whether lm-eval's own task index is needed
  output-child.json     output: lm-eval's result without its samples
  samples-child.jsonl   output: its logged samples, one line each with its `task`
  hardware.json         output: `{build, gpus, cpu}`

Environment: OVERBRAINER_COMPARE_START_SECS (how long the server may take to answer `GET /health`
with 200), OVERBRAINER_CACHE (where the venv is made), OVERBRAINER_METRICS (progress lines
`{"event": "eval", "step": i, "total": n}` over the tasks: 0 when the server is ready, n when
lm-eval is done).

Exit status: 0 with both outputs written; 1 when lm-eval cannot be had, the server died or never
became ready (the last 20 lines of server.log first), lm-eval failed, or an input is unreadable
(the reason as the last line of stderr).
"""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from importlib import metadata

import compare_client as shared  # type: ignore[import-not-found]  # beside this script

LM_EVAL = "0.4.13"
PACKAGE = f"lm-eval[api]=={LM_EVAL}"
API_MODULES = ("aiohttp", "tenacity", "requests")  # what local-chat-completions needs beyond lm-eval
VENV = f"lm-eval-{LM_EVAL}"
AGAIN = "OVERBRAINER_EVAL_VENV"  # set when this script runs again with the venv's python
JOB = "eval_job.json"
OUTPUT = "output-child.json"
SAMPLES = "samples-child.jsonl"


class Failed(Exception):
    """The eval cannot go on: why, in one line."""


def one_line(error):
    return (" ".join(str(error).split()) or type(error).__name__)[:300]


def has_lm_eval():
    """Whether this python has lm-eval 0.4.13 and what its chat model needs."""
    try:
        if metadata.version("lm_eval") != LM_EVAL:
            return False
    except metadata.PackageNotFoundError:
        return False
    return all(importlib.util.find_spec(name) is not None for name in API_MODULES)


def venv_python(venv):
    return os.path.join(venv, "bin", "python")


def cache_dir():
    return os.environ.get("OVERBRAINER_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "overbrainer")


def lm_eval_python():
    """None when this python has lm-eval 0.4.13; else the venv's python (the venv made if missing)."""
    if has_lm_eval():
        return None
    if os.environ.get(AGAIN):
        venv = os.path.dirname(os.path.dirname(sys.executable))
        raise Failed(f"{venv} has no lm-eval {LM_EVAL}: remove it to have it made again")
    venv = os.path.join(cache_dir(), VENV)
    if not os.path.isfile(venv_python(venv)):
        make_venv(venv)
    return venv_python(venv)


def run_quietly(args, what, venv):
    try:
        out = subprocess.run(args, capture_output=True, text=True)
    except OSError as e:
        out = subprocess.CompletedProcess(args, 1, "", str(e))
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or [f"exit {out.returncode}"])[-1]
        raise Failed(f"cannot make {venv} ({what}: {one_line(last)}); a target whose python3 has no lm-eval "
                     f"{LM_EVAL} needs to reach PyPI")


def make_venv(venv):
    """The venv with lm-eval, made beside `venv` and renamed into place."""
    if os.path.exists(venv):
        raise Failed(f"{venv} is not a venv: remove it to have it made again")
    os.makedirs(os.path.dirname(venv), exist_ok=True)
    work = f"{venv}.part-{os.getpid()}"
    print(f"eval: making {venv} (pip install {PACKAGE})", file=sys.stderr, flush=True)
    try:
        run_quietly([sys.executable, "-m", "venv", work], "python3 -m venv", venv)
        run_quietly([venv_python(work), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", PACKAGE],
                    "pip", venv)
        try:
            os.rename(work, venv)
        except OSError:
            if not os.path.isfile(venv_python(venv)):  # not another eval's, made meanwhile
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)


def read_job():
    try:
        with open(JOB, encoding="utf-8") as fh:
            job = json.load(fh)
    except FileNotFoundError:
        raise Failed(f"{JOB} is missing") from None
    except (OSError, ValueError) as e:
        raise Failed(f"{JOB} is not readable: {one_line(e)}") from None
    if not isinstance(job, dict) or not isinstance(job.get("arguments"), dict):
        raise Failed(f"{JOB} has no `arguments`")
    return job


def evaluate(job, port, server_pid):
    """lm-eval's output on the server at `port`."""
    import lm_eval  # this python has it (lm_eval_python)
    from lm_eval.tasks import TaskManager

    arguments = dict(job["arguments"])
    arguments["model_args"] = {**arguments["model_args"],
                               "base_url": f"http://127.0.0.1:{port}/v1/chat/completions"}
    os.environ["OPENAI_API_KEY"] = ""  # lm-eval's chat model reads it; the child has no key
    include = [os.path.abspath(p) for p in job.get("include") or []]
    try:
        manager = TaskManager(include_path=include or None, include_defaults=bool(job.get("index")))
        return lm_eval.simple_evaluate(**arguments, task_manager=manager)
    except Exception as e:  # noqa: BLE001 - whatever the harness raised, said in one line
        if not shared.alive(server_pid):
            raise shared.ServerGone("llama-server died during the eval") from e
        raise Failed(f"lm-eval failed on the child: {one_line(e)}") from None


def write_outputs(out):
    with open(SAMPLES + ".tmp", "w", encoding="utf-8") as fh:
        for task, rows in (out.get("samples") or {}).items():
            for row in rows:
                fh.write(json.dumps({"task": task, **row}, ensure_ascii=False, default=str) + "\n")
    os.replace(SAMPLES + ".tmp", SAMPLES)
    result = {k: v for k, v in out.items() if k != "samples"}
    with open(OUTPUT + ".tmp", "w", encoding="utf-8") as fh:
        fh.write(json.dumps(result, ensure_ascii=False, default=str) + "\n")
    os.replace(OUTPUT + ".tmp", OUTPUT)


def run(args):
    job = read_job()
    start_secs = shared.env_number("OVERBRAINER_COMPARE_START_SECS", float, 300.0)
    metrics = shared.Metrics(os.environ.get("OVERBRAINER_METRICS"))
    shared.write_json(shared.HARDWARE, shared.hardware(args.build))
    shared.wait_ready(args.port, args.server_pid, start_secs)
    tasks = list(job["arguments"].get("tasks") or [])
    metrics.write(event="eval", step=0, total=len(tasks))
    out = evaluate(job, args.port, args.server_pid)
    if not isinstance(out, dict):
        raise Failed("lm-eval returned no results")
    write_outputs(out)
    metrics.write(event="eval", step=len(tasks), total=len(tasks))
    print(f"eval: lm-eval done: {', '.join(tasks)}", file=sys.stderr)


def main():
    args = shared.client_args("Run lm-eval on the child served by llama-server.")
    try:
        python = lm_eval_python()
        if python is not None:
            sys.stderr.flush()
            os.execve(python, [python, os.path.abspath(__file__), *sys.argv[1:]], {**os.environ, AGAIN: "1"})
        print(f"eval: lm-eval {LM_EVAL} of {sys.executable}", file=sys.stderr, flush=True)
        run(args)
    except shared.ServerGone as e:
        shared.exit_server_gone("eval", e)
    except Failed as e:
        print(f"eval: {e}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
