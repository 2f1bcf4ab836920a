"""The command line of a served provider's engine on its pods (docs/serving.md#engines): vLLM's
`vllm serve`, SGLang's `python3 -m sglang.launch_server`, llama.cpp's `llama-server`, each with
the flags its reference documents, listening on PORT for every address of the pod (Runpod's HTTP
proxy reaches it there), the model served under the provider's `model` name, the GPUs of the pod
used by tensor parallelism, and the batch the client fills (`Serve.per_replica`).

The engine's API key never goes on the command line: vLLM reads it from `VLLM_API_KEY`,
llama-server from `LLAMA_API_KEY`; SGLang has no such variable, so its module is started by a
one-line Python launcher that appends `--api-key` to its `sys.argv` from the environment inside the
process (the kernel's command line of the process never holds it). The pod's bootstrap puts the
key in that variable from `OVERBRAINER_ENGINE_KEY` (a Runpod secret reference) and drops the
reference; a gated model's Hub token reaches the engine as `HF_TOKEN` the same way.

`engine_args` come after overbrainer's own flags, in order: a value `true` is the flag alone,
`false` leaves it out, anything else is the flag and its value (`max_model_len = 32768` →
`--max-model-len 32768`).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from overbrainer.config.model import SERVE_BATCH, Serve

PORT = 8000
KEY_VARS = {"vllm": "VLLM_API_KEY", "sglang": "OVERBRAINER_SGLANG_API_KEY", "llamacpp": "LLAMA_API_KEY"}
# SGLang's launcher: its module run as `python3 -m sglang.launch_server` would be, with --api-key
# appended inside the process from the environment (see the module docstring).
SGLANG_LAUNCHER = ("import os, runpy, sys; "
                   "sys.argv = ['sglang.launch_server', *sys.argv[1:], '--api-key', "
                   "os.environ.pop('OVERBRAINER_SGLANG_API_KEY')]; "
                   "runpy.run_module('sglang.launch_server', run_name='__main__', alter_sys=True)")


@dataclass(frozen=True)
class EngineCommand:
    argv: tuple[str, ...]  # no secret in it
    key_var: str  # the environment variable the engine (or its launcher) reads its API key from

    def shell(self) -> str:
        """The argv as one POSIX shell word list (what the pod's bootstrap runs with `eval set --`)."""
        return shlex.join(self.argv)


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _extra(serve: Serve) -> list[str]:
    out: list[str] = []
    for name, value in serve.engine_args:
        if value is False:
            continue
        out.append(flag(name))
        if value is not True:
            out.append(str(value))
    return out


def _batch(serve: Serve) -> list[str]:
    """The batch flag with its default, unless engine_args sets it (it comes later, from there)."""
    name, default = SERVE_BATCH[serve.engine]
    return [] if serve.arg(name) is not None else [flag(name), str(default)]


def command(serve: Serve, gpu_count: int, port: int = PORT) -> EngineCommand:
    """The engine's command line on a pod with `gpu_count` GPUs."""
    model, engine = serve.model, serve.engine
    if engine == "vllm":
        argv = ["vllm", "serve", model, "--host", "0.0.0.0", "--port", str(port), "--served-model-name", model,
                "--tensor-parallel-size", str(gpu_count)]
    elif engine == "sglang":
        argv = ["python3", "-c", SGLANG_LAUNCHER, "--model-path", model, "--host", "0.0.0.0", "--port", str(port),
                "--served-model-name", model, "--tp-size", str(gpu_count)]
    elif engine == "llamacpp":
        source = ["-m", model] if model.startswith("/") else ["-hf", model]
        argv = ["llama-server", *source, "--alias", model, "--host", "0.0.0.0", "--port", str(port),
                "-ngl", "999", "--no-webui"]
    else:  # pragma: no cover - the configuration allows only these
        raise ValueError(f"unknown engine {engine}")
    return EngineCommand(tuple(argv + _batch(serve) + _extra(serve)), KEY_VARS[engine])
