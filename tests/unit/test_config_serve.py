"""A served provider (`[providers.<name>] serve = "<runpod target>"`, docs/serving.md): its keys,
their defaults and every rule, found before anything is created."""

from __future__ import annotations

import tomllib

import pytest

from overbrainer.config.check import data, text
from overbrainer.config.load import parse_config
from overbrainer.config.model import SERVE_IMAGES
from overbrainer.errors import ConfigError

HEAD = """
[project]
name = "demo"

[targets.gpu]
kind = "runpod"
gpu_types = ["NVIDIA H100 80GB HBM3"]
gpu_count = 2
max_hours = 2

[targets.here]
kind = "local"
runtime = "native"
"""


def toml(provider: str, role_model: str = "Qwen/Qwen3-8B") -> str:
    return HEAD + f"""
[providers.rented]
{provider}

[providers.api]
protocol = "openai"

[roles]
generator = {{ provider = "api", model = "m" }}
parent = {{ provider = "rented", model = "{role_model}" }}
"""


def load(text_: str, env: dict | None = None):
    return parse_config(tomllib.loads(text_), env or {})


def problems(text_: str, env: dict | None = None) -> list[str]:
    with pytest.raises(ConfigError) as e:
        load(text_, env)
    return e.value.problems


def test_a_served_provider_gets_every_default():
    config = load(toml('serve = "gpu"\nmodel = "Qwen/Qwen3-8B"'))
    p = config.providers["rented"]
    assert p.protocol == "openai" and p.dialect == "vllm" and p.base_url is None and p.api_key is None
    s = p.serve
    assert (s.target, s.model, s.engine, s.image, s.replicas, s.engine_args, s.keep_warm_minutes) == (
        "gpu", "Qwen/Qwen3-8B", "vllm", SERVE_IMAGES["vllm"], 1, (), None)
    assert s.per_replica == 256 and s.concurrency == 256
    assert config.providers["api"].serve is None


def test_engine_image_replicas_engine_args_and_keep_warm():
    config = load(toml('serve = "gpu"\nmodel = "org/m-GGUF:Q4_K_M"\nengine = "llamacpp"\nreplicas = 3\n'
                       'engine_args = { parallel = 8, ctx-size = 8192, flash_attn = true }\nkeep_warm = 15',
                       role_model="org/m-GGUF:Q4_K_M"))
    s = config.providers["rented"].serve
    assert s.engine == "llamacpp" and s.image == SERVE_IMAGES["llamacpp"] and s.replicas == 3
    assert s.engine_args == (("parallel", 8), ("ctx-size", 8192), ("flash_attn", True))
    assert s.keep_warm_minutes == 15 and s.per_replica == 8 and s.concurrency == 24
    assert config.providers["rented"].dialect == "llamacpp"
    sg = load(toml('serve = "gpu"\nmodel = "Qwen/Qwen3-8B"\nengine = "sglang"\nimage = "mine:1"\nkeep_warm = 0'))
    assert sg.providers["rented"].serve.image == "mine:1" and sg.providers["rented"].serve.keep_warm_minutes is None
    assert sg.providers["rented"].serve.per_replica == 256


def test_config_check_shows_what_a_served_provider_rents():
    config = load(toml('serve = "gpu"\nmodel = "Qwen/Qwen3-8B"\nreplicas = 2\nengine_args = { max_num_seqs = 64 }'))
    shown = text(config)
    assert ("providers.rented.serve = vllm Qwen/Qwen3-8B × 2 replicas on target gpu (image "
            f"{SERVE_IMAGES['vllm']}, 64 requests in flight per replica, engine_args max_num_seqs=64, deleted after "
            "the command's last stage that uses it)") in shown
    assert "providers.rented.base_url" not in shown
    doc = data(config)["providers"]["rented"]["serve"]
    assert doc["engine_args"] == {"max_num_seqs": 64} and doc["per_replica"] == 64 and doc["replicas"] == 2


@pytest.mark.parametrize("provider, expected", [
    ('serve = "gpu"', "missing field `providers.rented.model`"),
    ('serve = "gpu"\nmodel = "Qwen/Qwen3-8B"\nengine = "tgi"',
     "providers.rented.engine: expected one of vllm, sglang, llamacpp"),
    ('serve = "gpu"\nmodel = "Qwen/Qwen3-8B"\nreplicas = 0', "providers.rented.replicas: must be at least 1"),
    ('serve = "gpu"\nmodel = "Qwen/Qwen3-8B"\nreplicas = 17', "providers.rented.replicas: must be at most 16"),
    ('serve = "gpu"\nmodel = "Qwen/Qwen3-8B"\nprotocol = "anthropic"',
     "providers.rented.protocol: a served provider speaks the openai protocol"),
    ('serve = "gpu"\nmodel = "Qwen/Qwen3-8B"\nprice = 0',
     "providers.rented.price: not for a served provider: its price is what its pods cost (docs/serving.md#money)"),
    ('serve = "gpu"\nmodel = "Qwen/Qwen3-8B"\nengine_args = { port = 9000 }',
     "providers.rented.engine_args.port: overbrainer sets it itself (docs/serving.md#engine-args)"),
    ('serve = "gpu"\nmodel = "Qwen/Qwen3-8B"\nengine_args = { tensor-parallel-size = 4 }',
     "providers.rented.engine_args.tensor-parallel-size: overbrainer sets it itself (docs/serving.md#engine-args)"),
    ('serve = "gpu"\nmodel = "Qwen/Qwen3-8B"\nengine_args = { "--max-model-len" = 4 }',
     "providers.rented.engine_args.--max-model-len: a flag name: lowercase letters, digits, `_` and `-`, "
     "without the leading `--`"),
    ('serve = "gpu"\nmodel = "Qwen/Qwen3-8B"\nengine_args = { max_num_seqs = 0 }',
     "providers.rented.engine_args.max_num_seqs: must be an integer of at least 1 (the requests one replica "
     "batches)"),
    ('serve = "gpu"\nmodel = "Qwen/Qwen3-8B"\nengine_args = { x = [1] }',
     "providers.rented.engine_args.x: expected a string, a number or a boolean"),
    ('serve = "gpu"\nmodel = "Qwen/Qwen3-8B"\nkeep_warm = -1', "providers.rented.keep_warm: must be minutes, 0 to 10080"),
    ('serve = "nope"\nmodel = "Qwen/Qwen3-8B"', "providers.rented.serve: unknown target `nope`"),
    ('serve = "here"\nmodel = "Qwen/Qwen3-8B"',
     "providers.rented.serve: target `here` is local; a served provider rents its GPUs on a runpod target"),
    ('protocol = "openai"\nmodel = "Qwen/Qwen3-8B"',
     'providers.rented.model: only for a served provider (with `serve = "<runpod target>"`)'),
])
def test_rule(provider, expected):
    assert expected in problems(toml(provider))


def test_a_role_asks_for_the_model_its_served_provider_serves():
    found = problems(toml('serve = "gpu"\nmodel = "Qwen/Qwen3-8B"', role_model="other"))
    assert found == ['roles.parent.model: provider `rented` serves `Qwen/Qwen3-8B` (providers.rented.model); '
                     'set model = "Qwen/Qwen3-8B"']


def test_its_address_and_key_come_from_its_pods_never_the_environment():
    env = {"OVERBRAINER_PROVIDERS__RENTED__BASE_URL": "https://example.com/v1",
           "OVERBRAINER_PROVIDERS__RENTED__API_KEY": "sk-1"}
    found = problems(toml('serve = "gpu"\nmodel = "Qwen/Qwen3-8B"'), env)
    assert found == ["providers.rented.base_url: not for a served provider: its pods give it (docs/serving.md)",
                     "providers.rented.api_key: not for a served provider: its pods give it (docs/serving.md)"]


def test_its_settings_may_come_from_the_environment():
    env = {"OVERBRAINER_PROVIDERS__RENTED__REPLICAS": "2", "OVERBRAINER_PROVIDERS__RENTED__KEEP_WARM": "5"}
    s = load(toml('serve = "gpu"\nmodel = "Qwen/Qwen3-8B"'), env).providers["rented"].serve
    assert s.replicas == 2 and s.keep_warm_minutes == 5
