"""The engine's command line on a served provider's pod (runpod/engines.py): only flags the engine
documents (tests/fixtures/engine_flags.py), the model served under the provider's name, tensor
parallelism over the pod's GPUs, the batch the client fills, engine_args after them, and never
the API key."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

from overbrainer.config.model import Serve
from overbrainer.runpod import engines
from tests.fixtures.engine_flags import SGLANG_FLAGS, VLLM_FLAGS, VLLM_KEY_VAR


def flags(argv) -> list[str]:
    return [a for a in argv if a.startswith("--")]


def value(argv, flag: str) -> str:
    return argv[list(argv).index(flag) + 1]


def test_vllm_serves_the_model_under_its_name_on_every_gpu_with_documented_flags_only():
    cmd = engines.command(Serve("gpu", "Qwen/Qwen3-8B"), gpu_count=2)
    argv = cmd.argv
    assert argv[:3] == ("vllm", "serve", "Qwen/Qwen3-8B")
    assert set(flags(argv)) <= VLLM_FLAGS
    assert (value(argv, "--host"), value(argv, "--port"), value(argv, "--served-model-name"),
            value(argv, "--tensor-parallel-size"), value(argv, "--max-num-seqs")) == (
        "0.0.0.0", "8000", "Qwen/Qwen3-8B", "2", "256")
    assert cmd.key_var == VLLM_KEY_VAR and "--api-key" not in argv
    assert shlex.split(cmd.shell()) == list(argv)


def test_engine_args_come_last_in_order_booleans_alone_and_false_left_out():
    serve = Serve("gpu", "m/m", engine_args=(("max_num_seqs", 64), ("max-model-len", 32768),
                                             ("enable_prefix_caching", True), ("enforce_eager", False)))
    argv = engines.command(serve, gpu_count=1).argv
    assert argv[-5:] == ("--max-num-seqs", "64", "--max-model-len", "32768", "--enable-prefix-caching")
    assert argv.count("--max-num-seqs") == 1 and "--enforce-eager" not in argv
    assert serve.per_replica == 64


def test_sglang_gets_its_key_inside_the_process_never_on_its_command_line(tmp_path):
    cmd = engines.command(Serve("gpu", "Qwen/Qwen3-8B", engine="sglang"), gpu_count=4)
    argv = cmd.argv
    assert argv[:2] == ("python3", "-c") and set(flags(argv[3:])) <= SGLANG_FLAGS
    assert (value(argv, "--model-path"), value(argv, "--tp-size"), value(argv, "--max-running-requests"),
            value(argv, "--served-model-name")) == ("Qwen/Qwen3-8B", "4", "256", "Qwen/Qwen3-8B")
    # The launcher runs the module with --api-key appended from the environment: a stand-in module
    # records the argv it got and the process's own command line.
    pkg = tmp_path / "sglang"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "launch_server.py").write_text(
        "import json, sys\n"
        "cmdline = open('/proc/self/cmdline', 'rb').read().split(b'\\0')\n"
        f"open({str(tmp_path / 'seen.json')!r}, 'w').write(json.dumps("
        "{'argv': sys.argv[1:], 'cmdline': [c.decode() for c in cmdline if c]}))\n")
    env = {"PYTHONPATH": str(tmp_path), cmd.key_var: "sk-secret-value", "PATH": "/usr/bin:/bin"}
    subprocess.run([sys.executable, *argv[1:]], env=env, check=True, timeout=60)
    import json

    seen = json.loads((tmp_path / "seen.json").read_text())
    assert seen["argv"][-2:] == ["--api-key", "sk-secret-value"]
    assert seen["argv"][:-2] == list(argv[3:])
    assert not any("sk-secret-value" in part for part in seen["cmdline"])


def test_llamacpp_serves_a_gguf_path_or_a_hub_repo_under_the_providers_name():
    local = engines.command(Serve("gpu", "/models/m.gguf", engine="llamacpp"), gpu_count=1).argv
    assert local[:3] == ("llama-server", "-m", "/models/m.gguf") and value(local, "--alias") == "/models/m.gguf"
    assert value(local, "--parallel") == "4"
    hub = engines.command(Serve("gpu", "org/m-GGUF:Q4_K_M", engine="llamacpp"), gpu_count=1)
    assert hub.argv[1:3] == ("-hf", "org/m-GGUF:Q4_K_M") and hub.key_var == "LLAMA_API_KEY"


def test_the_engine_key_variable_is_never_an_engine_argument():
    for engine in ("vllm", "sglang", "llamacpp"):
        cmd = engines.command(Serve("gpu", "m/m", engine=engine), gpu_count=1)
        assert cmd.key_var not in " ".join(cmd.argv[3:]) and "--api-key" not in cmd.argv[3:]


def test_the_documented_flags_list_is_not_empty():
    assert Path(__file__).exists() and "--max-num-seqs" in VLLM_FLAGS and "--tp-size" in SGLANG_FLAGS
