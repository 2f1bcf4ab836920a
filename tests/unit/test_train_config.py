"""The generated Axolotl config (docs/runs.md#axolotl-config): keys, defaults, eval rules, merge, YAML."""

from __future__ import annotations


import pytest
import yaml

from overbrainer.config.model import Training
from overbrainer.errors import ConfigError, OverbrainerError
from overbrainer.train import axolotl_config as ac

# A full example (qlora + merge + eval + hub_model_id + extra chat_template/pad_token),
# with `test_datasets` spelled out.
GOLDEN = '''adapter: "qlora"
attn_implementation: "sdpa"
base_model: "Qwen/Qwen3-4B"
chat_template: "qwen3"
dataset_prepared_path: "/workspace/run/prepared"
datasets:
  - ds_type: "json"
    field_messages: "messages"
    field_thinking: "reasoning_content"
    path: "/workspace/run/data/train.jsonl"
    roles_to_train:
      - "assistant"
    train_on_eos: "turn"
    type: "chat_template"
eval_sample_packing: false
evals_per_epoch: 4
gradient_accumulation_steps: 4
gradient_checkpointing: true
hub_model_id: "me/qwen3-rust"
learning_rate: 0.0002
load_in_4bit: true
load_in_8bit: false
logging_steps: 1
lora_alpha: 32
lora_dropout: 0.05
lora_r: 16
lora_target_linear: true
lr_scheduler: "cosine"
micro_batch_size: 2
num_epochs: 3
optimizer: "adamw_torch_fused"
output_dir: "/workspace/run/output"
plugins:
  - "overbrainer_metrics.OverbrainerMetricsPlugin"
sample_packing: true
save_total_limit: 2
saves_per_epoch: 1
sequence_len: 4096
special_tokens:
  pad_token: "<|endoftext|>"
test_datasets:
  - ds_type: "json"
    field_messages: "messages"
    field_thinking: "reasoning_content"
    path: "/workspace/run/data/eval.jsonl"
    roles_to_train:
      - "assistant"
    split: "train"
    train_on_eos: "turn"
    type: "chat_template"
val_set_size: 0
warmup_ratio: 0.1
'''

# What a CPU-only Axolotl 0.19 needs: typed settings in [training], the rest in axolotl_extra
# (config validation refuses typed keys in axolotl_extra).
CPU_TRAINING = {"optimizer": "adamw_torch", "sample_packing": False}
CPU_EXTRA = {
    "bf16": False,
    "fp16": False,
    "lora_mlp_kernel": False,
    "lora_qkv_kernel": False,
    "lora_o_kernel": False,
}


def training_ns(**kw):
    """A [training] section with only the required keys unless given (defaults: config/model.Training)."""
    base = dict(target="local", base_model="Qwen/Qwen3-4B", adapter="qlora", axolotl_extra={})
    base.update(kw)
    return Training(**base)


def full_example():
    return training_ns(merge=True, hub_model_id="me/qwen3-rust",
                    axolotl_extra={"chat_template": "qwen3", "special_tokens": {"pad_token": "<|endoftext|>"}})


def test_full_example_is_emitted_exactly_and_reads_back():
    config = ac.build_config(full_example(), "/workspace/run", has_eval=True)
    text = ac.dump_yaml(config)
    assert text == GOLDEN
    assert yaml.safe_load(text) == config == yaml.safe_load(GOLDEN)


def test_full_without_eval_has_no_adapter_keys_and_no_eval_keys():
    config = ac.build_config(training_ns(adapter="full", axolotl_extra={"eval_steps": 10, "eval_strategy": "steps"}),
                             "/home/u/runs/r1/", has_eval=False)
    for key in ("adapter", "load_in_4bit", "load_in_8bit", "lora_r", "lora_alpha", "lora_dropout",
                "lora_target_linear", "test_datasets", "evals_per_epoch", "eval_steps", "eval_strategy",
                "hub_model_id", "resume_from_checkpoint"):
        assert key not in config, key
    assert config["output_dir"] == "/home/u/runs/r1/output"
    assert config["datasets"][0]["path"] == "/home/u/runs/r1/data/train.jsonl"
    assert config["val_set_size"] == 0 and config["eval_sample_packing"] is False
    assert config["saves_per_epoch"] == 1 and config["save_total_limit"] == 2


def test_lora_sets_4bit_false_and_typed_settings_map():
    config = ac.build_config(training_ns(adapter="lora", epochs=1, learning_rate=1e-5, lora_r=8, lora_alpha=16,
                                      lora_dropout=0.0, sequence_len=512, micro_batch_size=1,
                                      gradient_accumulation_steps=2, optimizer="adamw_torch",
                                      lr_scheduler="linear", sample_packing=False, evals_per_epoch=2,
                                      saves_per_epoch=3),
                             "/r", has_eval=True)
    assert config["adapter"] == "lora" and config["load_in_4bit"] is False and config["load_in_8bit"] is False
    assert (config["num_epochs"], config["learning_rate"], config["lora_r"], config["lora_alpha"]) == (1, 1e-5, 8, 16)
    assert (config["lora_dropout"], config["sequence_len"], config["micro_batch_size"]) == (0.0, 512, 1)
    assert (config["gradient_accumulation_steps"], config["optimizer"], config["lr_scheduler"]) == (2, "adamw_torch", "linear")
    assert config["sample_packing"] is False
    assert (config["evals_per_epoch"], config["saves_per_epoch"]) == (2, 3)
    assert config["test_datasets"][0]["split"] == "train"
    assert yaml.safe_load(ac.dump_yaml(config)) == config


def test_extra_steps_replace_per_epoch_settings():
    config = ac.build_config(training_ns(axolotl_extra={"eval_steps": 50, "save_steps": 100, "save_total_limit": 5}),
                             "/r", has_eval=True)
    assert "evals_per_epoch" not in config and "saves_per_epoch" not in config
    assert (config["eval_steps"], config["save_steps"], config["save_total_limit"]) == (50, 100, 5)


@pytest.mark.parametrize("epochs, evals, expect", [
    (1, 1, {"eval_strategy": "epoch"}),  # Axolotl: eval_steps 1.0 = no evaluation at all
    (1, 2, {"evals_per_epoch": 2}),
    (2, 1, {"evals_per_epoch": 1}),
])
def test_settings_that_give_no_evaluation_are_corrected_and_warned(epochs, evals, expect):
    training = training_ns(epochs=epochs, evals_per_epoch=evals)
    config = ac.build_config(training, "/r", has_eval=True)
    assert {k: config[k] for k in ("eval_strategy", "evals_per_epoch") if k in config} == expect
    warning = ac.eval_warning(training, has_eval=True)
    if "eval_strategy" in expect:
        assert warning == ("training.evals_per_epoch = 1 with training.epochs = 1 gives no evaluation in "
                           "Axolotl (it skips an eval_steps of 1.0): the run evaluates at the end of each "
                           'epoch instead (eval_strategy: "epoch" in axolotl.yaml)')
    else:
        assert warning is None
    # Without eval data, or with the user's own eval_steps, nothing is corrected.
    assert ac.eval_warning(training, has_eval=False) is None
    assert "eval_strategy" not in ac.build_config(training, "/r", has_eval=False)
    own = training_ns(epochs=epochs, evals_per_epoch=evals, axolotl_extra={"eval_steps": 5})
    assert ac.eval_warning(own, has_eval=True) is None
    assert "eval_strategy" not in ac.build_config(own, "/r", has_eval=True)


def test_resume_checkpoint_is_set():
    config = ac.build_config(training_ns(), "/r", has_eval=False, resume_checkpoint="/r/resume/checkpoint-40")
    assert config["resume_from_checkpoint"] == "/r/resume/checkpoint-40"


def test_extra_deep_merges_mappings_and_replaces_the_rest():
    base = {"a": {"b": 1, "c": {"d": 2}}, "l": [1, 2], "s": "x"}
    merged = ac.deep_merge(base, {"a": {"c": {"e": 3}, "b": 9}, "l": [3], "s": {"now": "a map"}})
    assert merged == {"a": {"b": 9, "c": {"d": 2, "e": 3}}, "l": [3], "s": {"now": "a map"}}
    assert base == {"a": {"b": 1, "c": {"d": 2}}, "l": [1, 2], "s": "x"}  # untouched


def test_extra_merges_into_generated_mapping_keys():
    config = ac.build_config(training_ns(axolotl_extra={"special_tokens": {"eos_token": "<e>"},
                                                     "gradient_checkpointing": False}), "/r", has_eval=False)
    assert config["special_tokens"] == {"eos_token": "<e>"}
    assert config["gradient_checkpointing"] is False


@pytest.mark.parametrize("key", ac.MANAGED_KEYS)
def test_managed_keys_are_refused(key):
    with pytest.raises(ConfigError) as err:
        ac.build_config(training_ns(axolotl_extra={key: "x"}), "/r", has_eval=True)
    assert f"training.axolotl_extra.{key}" in str(err.value)


def test_save_only_model_true_is_refused_false_is_fine():
    with pytest.raises(ConfigError, match="save_only_model"):
        ac.build_config(training_ns(axolotl_extra={"save_only_model": True}), "/r", has_eval=False)
    assert ac.build_config(training_ns(axolotl_extra={"save_only_model": False}), "/r", has_eval=False)["save_only_model"] is False


def test_typed_keys_are_problems_only_when_asked():
    extra = {"num_epochs": 5, "bf16": False}
    assert ac.extra_problems(extra) == []
    problems = ac.extra_problems(extra, typed=True)
    assert problems == ["training.axolotl_extra.num_epochs has its own setting: set training.num_epochs instead"]


def test_cpu_knobs_merge_cleanly():
    training = Training(target="local", base_model="HuggingFaceTB/SmolLM2-135M-Instruct", adapter="lora",
                        axolotl_extra=dict(CPU_EXTRA, chat_template="qwen3"), **CPU_TRAINING)
    config = ac.build_config(training, "/r", has_eval=True)
    for key, value in {**CPU_EXTRA, **CPU_TRAINING}.items():
        assert config[key] == value, key
    back = yaml.safe_load(ac.dump_yaml(config))
    assert back == config
    assert back["bf16"] is False and back["lora_o_kernel"] is False and back["sample_packing"] is False
    # The builder itself does not refuse typed keys in extra (validation does): they merge last.
    loose = ac.build_config(training_ns(axolotl_extra={**CPU_EXTRA, **CPU_TRAINING}), "/r", has_eval=False)
    assert loose["optimizer"] == "adamw_torch" and loose["sample_packing"] is False


def test_config_dataclass_gives_the_full_example():
    t = Training(target="local", base_model="Qwen/Qwen3-4B", adapter="qlora", merge=True, hub_model_id="me/qwen3-rust",
                 axolotl_extra={"chat_template": "qwen3", "special_tokens": {"pad_token": "<|endoftext|>"}})
    assert ac.dump_yaml(ac.build_config(t, "/workspace/run", has_eval=True)) == GOLDEN


def test_bad_adapter_and_missing_base_model_are_config_errors():
    with pytest.raises(ConfigError, match="training.adapter"):
        ac.build_config(training_ns(adapter="dora"), "/r", has_eval=False)
    with pytest.raises(ConfigError, match="training.base_model"):
        ac.build_config(training_ns(base_model=None), "/r", has_eval=False)


def test_yaml_quotes_tricky_strings_and_floats_read_back():
    extra = {"chat_template_jinja": "{{ x }}: \"q\" # not a comment\nline2\u0085\u2028 ünïcode",
             "no": "yes", "on": 1, "tiny": 1e-7, "big": 1e20, "whole": 2.0, "weird key": "null", "n": None}
    config = ac.build_config(training_ns(axolotl_extra=extra), "/r", has_eval=False)
    text = ac.dump_yaml(config)
    assert yaml.safe_load(text) == config
    assert "\u0085" not in text and "tiny: 1.0e-7" in text and "big: 1.0e+20" in text and "whole: 2.0" in text
    assert '"no": "yes"' in text and '"on": 1' in text
    keys = [line.split(":")[0] for line in text.splitlines() if line and not line.startswith(" ")]
    assert keys == sorted(keys, key=lambda k: k.strip('"'))


def test_write_config_is_atomic_and_readable(tmp_path):
    path = tmp_path / "axolotl.yaml"
    config = ac.build_config(full_example(), "/workspace/run", has_eval=True)
    ac.write_config(path, config)
    assert path.read_text() == GOLDEN
    assert [p.name for p in tmp_path.iterdir()] == ["axolotl.yaml"]
    assert ac.recorded_adapter(tmp_path) == "qlora"
    assert ac.recorded_adapter(tmp_path / "nowhere") == "full"


@pytest.mark.parametrize("content", [None, "", "\n\n  \n"])
def test_empty_train_file_is_refused(tmp_path, content):
    path = tmp_path / "train.jsonl"
    if content is not None:
        path.write_text(content)
    with pytest.raises(OverbrainerError) as err:
        ac.require_examples(path, shown="data/train.jsonl")
    assert str(err.value) == "data/train.jsonl has no example: run `overbrainer split` first"


def test_train_file_with_an_example_passes(tmp_path):
    path = tmp_path / "train.jsonl"
    path.write_text('{"messages": []}\n')
    ac.require_examples(path)
    assert ac.has_examples(path) and not ac.has_examples(tmp_path / "eval.jsonl")


@pytest.mark.parametrize("base_model, extra, warns", [
    ("Qwen/Qwen3-4B", {}, False),
    ("Qwen/Qwen3-4B", {"chat_template": "tokenizer_default"}, False),
    ("meta-llama/Llama-3.2-1B", {}, True),
    ("meta-llama/Llama-3.2-1B", {"chat_template": "qwen3"}, False),
    ("meta-llama/Llama-3.2-1B", {"chat_template": "gemma4_unified"}, False),
    ("meta-llama/Llama-3.2-1B", {"chat_template": "llama3"}, True),
    ("Qwen/Qwen3-4B", {"chat_template": "chatml"}, True),
    ("x/y", {"chat_template_jinja": "{{ m.reasoning_content }}"}, False),
    ("Qwen/Qwen3-4B", {"chat_template_jinja": "{{ m.content }}", "chat_template": "qwen3"}, True),
])
def test_template_warning(base_model, extra, warns):
    message = ac.template_warning(training_ns(base_model=base_model, axolotl_extra=extra))
    assert (message is not None) == warns
    if warns:
        assert "reasoning_content" in message and "\n" not in message


# --- resume check ----------------------------------------------------------------------------

def test_resume_allows_only_save_eval_log_hub_differences(tmp_path):
    from overbrainer.train.resume import resume_differences

    old = ac.build_config(full_example(), "/old/runs/r1", has_eval=True,
                          resume_checkpoint="/old/runs/r0/resume/checkpoint-3")
    path = tmp_path / "axolotl.yaml"
    ac.write_config(path, old)
    assert resume_differences(path, full_example(), has_eval=True) == []
    changed = training_ns(merge=True, hub_model_id=None, epochs=5, learning_rate=1e-4,
                          axolotl_extra={"chat_template": "qwen3", "special_tokens": {"pad_token": "<|endoftext|>"},
                                         "save_steps": 10, "wandb_project": "p", "logging_steps": 5})
    assert resume_differences(path, changed, has_eval=True) == ["learning_rate", "num_epochs"]
    assert resume_differences(path, full_example(), has_eval=False) == ["test_datasets"]


def test_resume_refuses_an_unreadable_old_config(tmp_path):
    from overbrainer.train.resume import resume_differences

    path = tmp_path / "axolotl.yaml"
    path.write_text("a: [unclosed\n  secret-marker\n")
    with pytest.raises(OverbrainerError) as err:
        resume_differences(path, full_example(), has_eval=False)
    assert "is not a valid Axolotl config (line" in str(err.value) and "secret-marker" not in str(err.value)
    path.write_text("base_model: x\n")
    with pytest.raises(OverbrainerError, match="no output_dir"):
        resume_differences(path, full_example(), has_eval=False)
    with pytest.raises(OverbrainerError, match="cannot read"):
        resume_differences(tmp_path / "none.yaml", full_example(), has_eval=False)


@pytest.mark.parametrize("kind,keys", [
    (None, {}),
    ("ddp", {}),
    ("fsdp", {"fsdp_version": 2, "fsdp_config": ac.FSDP_CONFIG}),
    ("deepspeed_zero2", {"deepspeed": "/workspace/run/deepspeed.json"}),
    ("deepspeed_zero3", {"deepspeed": "/workspace/run/deepspeed.json"}),
])
def test_distributed_maps_onto_axolotls_own_keys(kind, keys):
    config = ac.build_config(training_ns(distributed=kind), "/workspace/run/", has_eval=False)
    assert {k: config[k] for k in ("fsdp_version", "fsdp_config", "deepspeed") if k in config} == keys
    shipped = ac.deepspeed_config(training_ns(distributed=kind))
    if kind and kind.startswith("deepspeed"):
        stage = shipped["zero_optimization"]["stage"]
        assert stage == int(kind[-1]) and shipped["train_micro_batch_size_per_gpu"] == "auto"
        assert shipped["bf16"] == {"enabled": "auto"}  # the trainer fills "auto" from the Axolotl config
    else:
        assert shipped is None
    assert yaml.safe_load(ac.dump_yaml(config)) == config
