"""llama.cpp off its AMX code on a CPU that advertises AMX (a VM that advertises it without enabling
it kills llama.cpp at its first matrix multiply): LLAMA_ARG_REPACK=0 for what this machine starts
(export/llama_cpp.cpu_env) and for what a job starts on its target (llama_cpp.sh's
llama_cpp_cpu_guard, run under each POSIX shell a target may have); a value already set wins."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from overbrainer.export import llama_cpp

SCRIPT = Path(llama_cpp.__file__).parent / "scripts" / "llama_cpp.sh"
AMX = ("processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Platinum 8481C\nflags\t\t: fpu vme avx2 avx512f "
       "avx512_vnni amx_bf16 avx512_fp16 amx_tile amx_int8\n")
NO_AMX = "processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu vme avx2 fma amx_tiles_not_a_flag\n"


@pytest.fixture
def cpuinfo(tmp_path):
    def write(text: str) -> str:
        path = tmp_path / "cpuinfo"
        path.write_text(text)
        return str(path)
    return write


def test_cpu_env_turns_repacking_off_where_amx_is_advertised(cpuinfo):
    assert llama_cpp.cpu_env({}, cpuinfo(AMX)) == {"LLAMA_ARG_REPACK": "0"}
    assert llama_cpp.cpu_env({}, cpuinfo(NO_AMX)) == {}
    assert llama_cpp.cpu_env({"LLAMA_ARG_REPACK": "1"}, cpuinfo(AMX)) == {}  # the caller's choice wins
    assert llama_cpp.cpu_env({}, str(Path(cpuinfo(AMX)).parent / "missing")) == {}


@pytest.mark.parametrize("shell", [["sh"], ["dash"], ["busybox", "sh"]])
def test_the_jobs_guard_exports_the_same_on_the_target(shell, cpuinfo):
    if shutil.which(shell[0]) is None:
        pytest.fail(f"{shell[0]} is not installed (the README's test setup installs it)")
    env = {k: v for k, v in os.environ.items() if k != "LLAMA_ARG_REPACK"}

    def repack(path: str, **extra: str) -> str:
        script = f'. "{SCRIPT}"; unset LLAMA_ARG_REPACK; {"export LLAMA_ARG_REPACK=1; " if extra else ""}' \
                 f'llama_cpp_cpu_guard "{path}"; sh -c \'echo "${{LLAMA_ARG_REPACK-unset}}"\''
        return subprocess.run([*shell, "-c", script], env=env, capture_output=True, text=True,
                              check=True).stdout.strip()

    assert repack(cpuinfo(AMX)) == "0"  # exported: the programs the job starts see it
    assert repack(cpuinfo(NO_AMX)) == "unset"
    assert repack(cpuinfo(AMX), preset="1") == "1"
    assert repack(str(Path(cpuinfo(AMX)).parent / "missing")) == "unset"
