"""OVERBRAINER_A__B overrides: coercion, exemptions, unknown variables, env-only keys."""

from __future__ import annotations

import tomllib

import pytest

from overbrainer.config.envmap import env_var_for
from overbrainer.config.load import parse_config
from overbrainer.errors import ConfigError
from tests.unit.test_config_load import BASE, TRAINING


def load(text: str, env: dict):
    return parse_config(tomllib.loads(text), env)


def problems(text: str, env: dict) -> list[str]:
    with pytest.raises(ConfigError) as e:
        load(text, env)
    return e.value.problems


def test_env_overrides_the_file_with_type_coercion():
    c = load(BASE + TRAINING, {
        "OVERBRAINER_PIPELINE__CONCURRENCY": " 16 ",
        "OVERBRAINER_PIPELINE__EVAL_RATIO": "0.25",
        "OVERBRAINER_PIPELINE__INCLUDE_SYSTEM_PROMPT": "TRUE",
        "OVERBRAINER_ROLES__PARENT__MODEL": "other/model",
        "OVERBRAINER_ROLES__GENERATOR__REASONING": "yes",
        "OVERBRAINER_TRAINING__LEARNING_RATE": "1e-4",
        "OVERBRAINER_TRAINING__SAMPLE_PACKING": "off",
        "OVERBRAINER_PROJECT__NAME": "from_env",
    })
    assert c.pipeline.concurrency == 16 and c.pipeline.eval_ratio == 0.25
    assert c.pipeline.include_system_prompt is True
    assert c.roles.parent.model == "other/model" and c.roles.parent.reasoning is True
    assert c.roles.generator.reasoning is True
    assert c.training.learning_rate == 1e-4 and c.training.sample_packing is False
    assert c.project.name == "from_env"


def test_the_stop_grace_and_the_spend_cap_from_the_file_or_the_environment():
    c = load(BASE, {})
    assert c.pipeline.stop_grace_secs == 30 and c.pipeline.max_cost_usd is None
    c = load(BASE + "\n[pipeline]\nstop_grace_secs = 5\nmax_cost_usd = 2.5\n", {})
    assert c.pipeline.stop_grace_secs == 5 and c.pipeline.max_cost_usd == 2.5
    c = load(BASE, {"OVERBRAINER_PIPELINE__STOP_GRACE_SECS": "0", "OVERBRAINER_PIPELINE__MAX_COST_USD": "0.75"})
    assert c.pipeline.stop_grace_secs == 0 and c.pipeline.max_cost_usd == 0.75


def test_env_can_add_a_role_and_a_provider():
    c = load(BASE, {"OVERBRAINER_ROLES__JUDGE__PROVIDER": "extra", "OVERBRAINER_ROLES__JUDGE__MODEL": "j",
                    "OVERBRAINER_PROVIDERS__EXTRA__PROTOCOL": "openai",
                    "OVERBRAINER_PROVIDERS__EXTRA__BASE_URL": "http://127.0.0.1:1/v1"})
    assert c.roles.judge.provider == "extra" and c.providers["extra"].base_url == "http://127.0.0.1:1/v1"


def test_env_provider_without_protocol_is_missing_a_field():
    p = problems(BASE, {"OVERBRAINER_PROVIDERS__GHOST__BASE_URL": "http://x"})
    assert p == ["missing field `providers.ghost.protocol`"]


def test_a_typo_in_a_providers_or_a_targets_name_gets_a_did_you_mean():
    """A variable naming a provider (or target) that the file does not declare, near one it does:
    one line naming the variable and the declared name, not a `missing field … protocol`."""
    text = BASE + '\n[targets.homelab]\nkind = "ssh"\nruntime = "native"\n'
    p = problems(text, {"OVERBRAINER_PROVIDERS__LOCL__BASE_URL": "http://127.0.0.1:1/v1",
                        "OVERBRAINER_PROVIDERS__CLAUDE__API_KEY": "k",
                        "OVERBRAINER_TARGETS__HOMELB__HOST": "me@box"})
    assert p == ["unknown provider `locl` (from OVERBRAINER_PROVIDERS__LOCL__BASE_URL): did you mean `local`?",
                 "unknown target `homelb` (from OVERBRAINER_TARGETS__HOMELB__HOST): did you mean `homelab`?"]
    # With its protocol it is a provider of the environment's own, not a typo.
    assert problems(BASE, {"OVERBRAINER_PROVIDERS__LOCL__PROTOCOL": "nope"}) == [
        "providers.locl.protocol: expected one of openai, anthropic (from OVERBRAINER_PROVIDERS__LOCL__PROTOCOL)"]


@pytest.mark.parametrize("var, value, expected", [
    ("OVERBRAINER_PIPELINE__CONCURRENCY", "eight", "pipeline.concurrency: expected an integer (from OVERBRAINER_PIPELINE__CONCURRENCY)"),
    ("OVERBRAINER_PIPELINE__CONCURRENCY", "8.0", "pipeline.concurrency: expected an integer"),
    ("OVERBRAINER_PIPELINE__CONCURRENCY", "0", "pipeline.concurrency: must be at least 1 (from OVERBRAINER_PIPELINE__CONCURRENCY)"),
    ("OVERBRAINER_PIPELINE__EVAL_RATIO", "nan", "pipeline.eval_ratio: must be in (0, 1)"),
    ("OVERBRAINER_PIPELINE__EVAL_RATIO", "ten", "pipeline.eval_ratio: expected a number"),
    ("OVERBRAINER_PIPELINE__INCLUDE_SYSTEM_PROMPT", "maybe", "pipeline.include_system_prompt: expected a boolean"),
    ("OVERBRAINER_PIPELINE__STOP_GRACE_SECS", "-1", "pipeline.stop_grace_secs: must be at least 0"),
    ("OVERBRAINER_PIPELINE__MAX_COST_USD", "0", "pipeline.max_cost_usd: must be greater than 0"),
    ("OVERBRAINER_PIPELINE__MAX_COST_USD", "inf", "pipeline.max_cost_usd: must be greater than 0"),
    ("OVERBRAINER_PIPELINE__CONCURENCY", "4", "unknown field `pipeline.concurency` (from OVERBRAINER_PIPELINE__CONCURENCY)"),
    ("OVERBRAINER_NOPE", "1", "unknown field `nope` (from OVERBRAINER_NOPE)"),
    ("OVERBRAINER_TOPICS__OWNERSHIP__SUBTOPICS", "4", "unknown field `topics` (from OVERBRAINER_TOPICS__OWNERSHIP__SUBTOPICS)"),
    ("OVERBRAINER_PIPELINE", "3", "pipeline: expected a table (from OVERBRAINER_PIPELINE)"),
    ("OVERBRAINER_PIPELINE____SEED", "3", "OVERBRAINER_PIPELINE____SEED: unknown field"),
    ("OVERBRAINER_TARGETS__T__KIND", "runpod", "missing field `targets.t.gpu_types`"),
    ("OVERBRAINER_METRICS__LISTEN", "my-host:9464", "metrics.listen: expected IP:PORT"),
    ("OVERBRAINER_RUNPOD__BASE_URL", "http://example.com", "runpod.base_url: must be https (plain http only on a loopback host)"),
    ("OVERBRAINER_HUB__BASE_URL", "ftp://example.com", "hub.base_url: expected an http:// or https:// URL"),
    ("OVERBRAINER_PROVIDERS__LOCAL__BASE_URL", "127.0.0.1:11434", "providers.local.base_url: expected an http:// or https:// URL"),
])
def test_env_problem(var, value, expected):
    p = problems(BASE, {var: value})
    assert any(x.startswith(expected) for x in p), p
    assert not any(value in x for x in p if len(value) > 2 and value not in expected), p


def test_exempt_variables_are_not_keys():
    c = load(BASE, {"OVERBRAINER_LOG": "debug", "OVERBRAINER_SSH_CLIENT": "builtin",
                    "OVERBRAINER_LLAMA_CPP_DIR": "/opt/llama.cpp", "OTHER_VAR": "x", "overbrainer_lower": "x"})
    assert c.pipeline.concurrency == 8
    # No variable is read for the tests alone (they once kept OVERBRAINER_TEST_* and a time scale).
    for name, key in (("OVERBRAINER_TEST_ANYTHING", "test_anything"), ("OVERBRAINER_TIME_SCALE", "time_scale")):
        assert problems(BASE, {name: "x"}) == [f"unknown field `{key}` (from {name})"], name


def test_empty_values_count_as_unset():
    c = load(BASE, {"OVERBRAINER_PROVIDERS__LOCAL__API_KEY": "", "OVERBRAINER_PIPELINE__SEED": ""})
    assert c.providers["local"].api_key is None and c.pipeline.seed == 42


def test_secrets_keep_their_exact_text():
    c = load(BASE, {"OVERBRAINER_PROVIDERS__LOCAL__API_KEY": "0123",
                    "OVERBRAINER_HF_TOKEN": " hf_with spaces ",
                    "OVERBRAINER_RUNPOD__API_KEY": "rp_key"})
    assert c.providers["local"].api_key.resolve() == "0123"
    assert c.hf_token.resolve() == " hf_with spaces "
    assert c.runpod.api_key.reference == "rp_key"
    assert [k for k, _ in c.secrets()] == ["providers.local.api_key", "runpod.api_key", "hf_token"]


@pytest.mark.parametrize("snippet, key", [
    ("[providers.x]\nprotocol = \"openai\"\nbase_url = \"http://127.0.0.1\"", "providers.x.base_url"),
    ("[providers.x]\nprotocol = \"openai\"\napi_key = \"sk-123\"", "providers.x.api_key"),
    ("[targets.box]\nkind = \"ssh\"\nruntime = \"native\"\nhost = \"me@box\"", "targets.box.host"),
    ("[runpod]\napi_key = \"rp\"", "runpod.api_key"),
    ("[runpod]\nbase_url = \"https://api\"", "runpod.base_url"),
    ("[hub]\nbase_url = \"https://hub\"", "hub.base_url"),
])
def test_env_only_keys_are_refused_in_the_file(snippet, key):
    p = problems(BASE + "\n" + snippet + "\n", {})
    assert f"{key}: must be set through env, not in overbrainer.toml" in p
    value = snippet.rsplit("= ", 1)[1].strip('"')
    assert not any(value in x for x in p)


@pytest.mark.parametrize("key", ["hf_token", "log"])
def test_top_level_env_only_keys(key):
    p = problems(f'{key} = "x"\n' + BASE, {})
    assert p == [f"{key}: must be set through env, not in overbrainer.toml"]


def test_env_only_keys_come_from_env():
    c = load(BASE, {"OVERBRAINER_PROVIDERS__LOCAL__BASE_URL": "http://127.0.0.1:11434/v1",
                    "OVERBRAINER_RUNPOD__BASE_URL": "http://127.0.0.1:8000/v2",
                    "OVERBRAINER_HUB__BASE_URL": "https://hub.example.com"})
    assert c.providers["local"].base_url == "http://127.0.0.1:11434/v1"
    assert c.runpod.url == "http://127.0.0.1:8000/v2" and c.hub.url == "https://hub.example.com"


def test_runpod_target_from_env_strings():
    c = load(BASE, {"OVERBRAINER_TARGETS__GPU__KIND": "runpod",
                    "OVERBRAINER_TARGETS__GPU__GPU_TYPES": " NVIDIA A40 , NVIDIA L40S",
                    "OVERBRAINER_TARGETS__GPU__MAX_HOURS": "2.5",
                    "OVERBRAINER_TARGETS__GPU__GPU_COUNT": "2",
                    "OVERBRAINER_TARGETS__GPU__DATA_CENTER_IDS": "auto"})
    t = c.targets["gpu"]
    assert t.gpu_types == ["NVIDIA A40", "NVIDIA L40S"] and t.max_hours == 2.5 and t.gpu_count == 2
    assert t.data_center_ids == "auto"


def test_ssh_client_is_read_by_nothing_and_a_warning_says_so():
    """SSH is always paramiko: `ssh_client` (file or environment) and OVERBRAINER_SSH_CLIENT are
    still accepted, each with a warning naming it, and change nothing."""
    text = BASE + '\n[targets.box]\nkind = "ssh"\nruntime = "native"\nssh_client = "putty"\n'
    c = load(text, {"OVERBRAINER_SSH_CLIENT": "openssh", "OVERBRAINER_TARGETS__GPU__KIND": "runpod",
                    "OVERBRAINER_TARGETS__GPU__GPU_TYPES": "auto", "OVERBRAINER_TARGETS__GPU__MAX_HOURS": "1",
                    "OVERBRAINER_TARGETS__GPU__SSH_CLIENT": "builtin"})
    assert not hasattr(c.targets["box"], "ssh_client") and not hasattr(c.targets["gpu"], "ssh_client")
    ignored = "is ignored: overbrainer always uses its built-in SSH client (paramiko)"
    assert c.warnings == [f"OVERBRAINER_SSH_CLIENT {ignored}; unset it",
                          f"targets.box.ssh_client {ignored}; remove it",
                          f"targets.gpu.ssh_client (from OVERBRAINER_TARGETS__GPU__SSH_CLIENT) {ignored}; remove it"]
    assert load(BASE + '\n[targets.box]\nkind = "ssh"\nruntime = "native"\n', {}).warnings == []


def test_axolotl_extra_from_env_is_coerced():
    c = load(BASE + TRAINING, {"OVERBRAINER_TRAINING__AXOLOTL_EXTRA__WARMUP_RATIO": "0.05",
                               "OVERBRAINER_TRAINING__AXOLOTL_EXTRA__BF16": "false",
                               "OVERBRAINER_TRAINING__AXOLOTL_EXTRA__EVAL_STEPS": "20",
                               "OVERBRAINER_TRAINING__AXOLOTL_EXTRA__CHAT_TEMPLATE": "qwen3"})
    assert c.training.axolotl_extra == {"warmup_ratio": 0.05, "bf16": False, "eval_steps": 20, "chat_template": "qwen3"}


def test_env_var_for():
    assert env_var_for("providers.local.base_url") == "OVERBRAINER_PROVIDERS__LOCAL__BASE_URL"
