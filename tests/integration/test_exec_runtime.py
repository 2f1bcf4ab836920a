"""Job commands per runtime: native (venv or PATH), docker and podman command lines; the native
command runs for real through the local executor with a fake `axolotl`."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import pytest

from overbrainer.exec.base import Container, JobSpec, JobState
from overbrainer.config.model import LocalTarget
from overbrainer.exec.local import LocalExecutor
from overbrainer.exec.runtime import DEFAULT_IMAGE, Runtime, Step
from tests.fixtures.sshd import wait_for

TRAIN = Step("train", ("axolotl", "train", "axolotl.yaml"))
MERGE = Step("merge", ("axolotl", "merge-lora", "axolotl.yaml"))


def test_native_with_a_venv_exports_settings_and_chains_with_the_stop_marker():
    rt = Runtime.from_target(LocalTarget("t", "local", runtime="native", venv="~/.venvs/axolotl"))
    script, container = rt.job("r1", "/w/r1", "/w/.hf-cache", [TRAIN, MERGE], secret_names=["HF_TOKEN"])
    assert container is None
    exports, chain = script.split(" && ", 1)
    assert exports == (
        "export AXOLOTL_DO_NOT_TRACK=1 DO_NOT_TRACK=1 HF_HUB_DISABLE_TELEMETRY=1 "
        "OVERBRAINER_METRICS=/w/r1/metrics.jsonl OVERBRAINER_SNAPSHOT=/w/r1/snapshot.request "
        "PYTHONPATH=/w/r1/plugin\"${PYTHONPATH:+:$PYTHONPATH}\" HF_HOME=/w/.hf-cache "
        "PATH=\"$HOME\"/.venvs/axolotl/bin\"${PATH:+:$PATH}\""
    )
    assert '"$HOME"/.venvs/axolotl/bin/axolotl train axolotl.yaml && { [ -f snapshot.json ] || {' in chain
    assert chain.endswith('"$HOME"/.venvs/axolotl/bin/axolotl merge-lora axolotl.yaml; }; }')
    assert "HF_TOKEN" not in script


def test_native_without_a_venv_uses_path_and_a_single_step_has_no_marker():
    script, _ = Runtime().job("r1", "/w/r1", "/c", [TRAIN])
    assert "PATH=" not in script.replace("PYTHONPATH=", "")
    assert script.endswith('>> "$OVERBRAINER_METRICS" && axolotl train axolotl.yaml')
    assert "snapshot.json" not in script


def test_docker_command_line():
    rt = Runtime(kind="docker")
    script, container = rt.job("r1", "/w/r1", "/w/.hf-cache", [TRAIN, MERGE], secret_names=["HF_TOKEN"],
                               env={"OVERBRAINER_EXPORT_QUANTIZE": "q4_k_m"})
    assert container == Container("docker", "overbrainer-r1")
    head, cmd = script.split(" && ", 1)
    assert head == "mkdir -p -- /w/.hf-cache"
    argv = shlex.split(cmd)
    assert argv[:14] == ["docker", "run", "--rm", "--name", "overbrainer-r1", "--gpus", "all", "--ulimit",
                         "memlock=-1", "--ulimit", "stack=67108864", "--ipc=host", "-v", "/w/r1:/workspace/run"]
    assert argv[14:20] == ["-v", "/w/.hf-cache:/workspace/hf-cache", "-w", "/workspace/run", "-e",
                           "HF_HOME=/workspace/hf-cache"]
    envs = [argv[i + 1] for i, a in enumerate(argv) if a == "-e"]
    assert envs[1:] == ["AXOLOTL_DO_NOT_TRACK=1", "DO_NOT_TRACK=1", "HF_HUB_DISABLE_TELEMETRY=1",
                        "OVERBRAINER_METRICS=/workspace/run/metrics.jsonl",
                        "OVERBRAINER_SNAPSHOT=/workspace/run/snapshot.request",
                        "PYTHONPATH=/workspace/run/plugin", "OVERBRAINER_EXPORT_QUANTIZE=q4_k_m", "HF_TOKEN"]
    assert argv[-4:-1] == [DEFAULT_IMAGE, "sh", "-c"]
    assert argv[-1].startswith("printf ") and "axolotl train axolotl.yaml && { [ -f snapshot.json ]" in argv[-1]


def test_a_side_job_in_docker_mounts_the_run_and_works_in_its_subdirectory():
    rt = Runtime(kind="docker", gpus=False)
    step = Step("export", ("sh", "export.sh"), from_path=True)
    script, container = rt.job("r1-export_1", "/w/r1", "/w/.cache", [step], stop_marker=False,
                               subdir="exports/export_1")
    argv = shlex.split(script.split(" && ", 1)[1])
    assert container == Container("docker", "overbrainer-r1-export_1")
    assert argv[argv.index("-v") + 1] == "/w/r1:/workspace/run"
    assert argv[argv.index("-w") + 1] == "/workspace/run/exports/export_1"
    assert "OVERBRAINER_METRICS=/workspace/run/exports/export_1/metrics.jsonl" in argv
    assert argv[-1].endswith("&& sh export.sh")
    native, _ = Runtime(venv="/v").job("r1", "/w/r1/exports/e", "/w/.cache", [step], stop_marker=False,
                                       subdir=None)
    assert native.endswith("&& sh export.sh") and "OVERBRAINER_METRICS=/w/r1/exports/e/metrics.jsonl" in native


def test_podman_command_line_relabels_mounts_and_uses_cdi_gpus():
    rt = Runtime.from_target(LocalTarget("t", "local", runtime="docker", engine="podman", image="img:1"))
    script, container = rt.job("r2", "/w/r2", "/w/c", [TRAIN])
    assert container == Container("podman", "overbrainer-r2")
    argv = shlex.split(script.split(" && ", 1)[1])
    assert argv[:10] == ["podman", "run", "--rm", "--name", "overbrainer-r2", "--device", "nvidia.com/gpu=all",
                         "--security-opt=label=disable", "--ulimit", "host"]
    assert "/w/r2:/workspace/run:Z" in argv and "/w/c:/workspace/hf-cache:z" in argv
    assert argv[-4] == "img:1"


def test_unknown_runtime_or_engine_is_refused():
    with pytest.raises(ValueError):
        Runtime(kind="lxc")
    with pytest.raises(ValueError):
        Runtime(kind="docker", engine="rkt")


def write_tool(bin_dir: Path, name: str, body: str) -> None:
    """A `/bin/sh` script `bin_dir/name` running `body`, then exiting 0."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    (bin_dir / name).write_text(f"#!/bin/sh\n{body}exit 0\n")
    (bin_dir / name).chmod(0o755)


def test_native_job_runs_with_telemetry_off_stage_lines_and_the_stop_marker(tmp_path):
    venv = tmp_path / "venv"
    write_tool(venv / "bin", "axolotl", (
        'echo "$@|$AXOLOTL_DO_NOT_TRACK$DO_NOT_TRACK$HF_HUB_DISABLE_TELEMETRY|$PYTHONPATH|$HF_HOME" >> calls.txt\n'
        '[ "$1" = train ] && [ -e stop ] && echo \'{}\' > snapshot.json\n'
    ))
    ex = LocalExecutor(tmp_path / "runs")
    rt = Runtime(venv=str(venv))
    for name, stop in (("full", False), ("stopped", True)):
        d = f"{ex.workdir}/{name}"
        Path(d).mkdir()
        if stop:
            Path(d, "stop").touch()
        script, _ = rt.job(name, d, f"{ex.workdir}/.hf-cache", [TRAIN, MERGE])
        job = ex.spawn(JobSpec(d, script))
        assert wait_for(lambda job=job: (s := ex.status(job)).ended and s) == JobState("exited", 0)
        calls = Path(d, "calls.txt").read_text().splitlines()
        args, telemetry, pythonpath, hf_home = calls[0].split("|")
        assert (args, telemetry, hf_home) == ("train axolotl.yaml", "111", f"{ex.workdir}/.hf-cache")
        assert pythonpath.split(":")[0] == f"{d}/plugin"
        assert len(calls) == (1 if stop else 2)
        stages = [json.loads(line) for line in Path(d, "metrics.jsonl").read_text().splitlines()]
        assert [s["name"] for s in stages] == (["train"] if stop else ["train", "merge"])
        assert all(s["event"] == "stage" and isinstance(s["time"], int) for s in stages)


def test_native_job_with_a_venv_has_the_venv_bin_first_on_path(tmp_path):
    """Axolotl launches `accelerate` from PATH: the venv's bin/ comes first, the inherited PATH after."""
    write_tool(tmp_path / "venv" / "bin", "axolotl", 'echo "$PATH" > path.txt\naccelerate launch\n')
    write_tool(tmp_path / "venv" / "bin", "accelerate", 'echo "$@" > accelerate.txt\n')
    write_tool(tmp_path / "elsewhere", "accelerate", "echo wrong accelerate >&2\nexit 9\n")
    run = tmp_path / "r1"
    run.mkdir()
    script, _ = Runtime(venv="~/venv/").job("r1", str(run), str(tmp_path / "c"), [TRAIN])
    inherited = f"{tmp_path / 'elsewhere'}:/usr/bin:/bin"
    out = subprocess.run(["sh", "-c", script], cwd=run, env={"HOME": str(tmp_path), "PATH": inherited},
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert Path(run, "path.txt").read_text() == f"{tmp_path}/venv/bin:{inherited}\n"
    assert Path(run, "accelerate.txt").read_text() == "launch\n"
