"""`config check` lines and data: defaults applied, secrets and URL credentials masked."""

from __future__ import annotations

import json
import tomllib

from overbrainer.config import check
from overbrainer.config.load import parse_config
from tests.unit.test_config_load import BASE, TRAINING

MARK = "sk-CHECK-MARKER-55"


def config(extra: str = "", env: dict | None = None):
    return parse_config(tomllib.loads(BASE + extra), env or {})


def test_lines_show_every_section_with_defaults():
    c = config(TRAINING + '\n[targets.box]\nkind = "ssh"\nruntime = "docker"\n'
               '\n[targets.gpu]\nkind = "runpod"\ngpu_types = "auto"\nmax_hours = 6\nmin_vram_gb = 24\n',
               {"OVERBRAINER_PROVIDERS__LOCAL__BASE_URL": "http://127.0.0.1:8080/v1",
                "OVERBRAINER_PROVIDERS__LOCAL__API_KEY": MARK})
    lines = dict(check.lines(c))
    assert lines["project.name"] == "demo"
    assert lines["topics.ownership"] == "3 subtopics x 5 questions"
    assert lines["providers.local.protocol"] == "openai"
    assert lines["providers.local.base_url"] == "http://127.0.0.1:8080/v1"
    assert lines["providers.local.api_key"] == "***"
    assert lines["providers.claude.base_url"] == "(unset)" and lines["providers.claude.api_key"] == "(unset)"
    assert lines["roles.generator"] == "local/m1 (reasoning: false, max_tokens: 16384)"
    assert lines["roles.parent"] == "local/m2 (reasoning: true, max_tokens: 16384)"
    assert lines["pipeline"].startswith("concurrency: 8, max_retries: 5, dedup_threshold: 0.8")
    assert lines["training"] == "Qwen/Qwen3-4B on local (qlora)"
    assert lines["targets.local"] == "local, native runtime, axolotl from PATH"
    assert lines["targets.box"].startswith("ssh to (unset host: set OVERBRAINER_TARGETS__BOX__HOST), docker runtime (docker, image axolotlai/")
    assert lines["targets.box"].endswith("workdir overbrainer")
    assert lines["targets.gpu"].startswith("runpod, gpu_types auto x1, max_hours 6.0, min_vram_gb 24, data_center_ids any")
    assert lines["runpod.api_key"] == "(unset)" and lines["hf_token"] == "(unset)"
    assert lines["runpod.base_url"] == "https://api.runpod.io/v2 (default)"
    assert lines["export"] == ("after_training: false, quantize: Q4_K_M, ollama_name: (unset), target: (unset), "
                               "max_hours: 1.0")
    assert lines["hub"] == (
        "repo: (default), private: true, after_training: false, dataset_repo: (default), dataset_license: (unset)")
    assert lines["metrics.listen"] == "(unset)" and lines["metrics.textfile"] == "(unset)"
    text = check.text(c)
    assert MARK not in text and text.count("\n") == len(check.lines(c)) - 1


def test_no_training_says_run_stops_after_split():
    assert dict(check.lines(config()))["training"] == "(unset): `run` stops after split"


def test_url_credentials_and_query_are_masked():
    assert check.show_url("https://user:pw@host:8443/v1?key=abc") == "https://***@host:8443/v1?***"
    assert check.show_url("http://127.0.0.1:11434/v1") == "http://127.0.0.1:11434/v1"
    c = config(env={"OVERBRAINER_PROVIDERS__LOCAL__BASE_URL": f"https://u:{MARK}@h/v1"})
    assert MARK not in check.text(c) and MARK not in json.dumps(check.data(c))


def test_data_has_the_same_facts_and_masks_secrets():
    c = config(TRAINING + f'\n[training.axolotl_extra]\nwandb_api_key = "{MARK}"\nwarmup_ratio = 0.1\n',
               {"OVERBRAINER_HF_TOKEN": MARK, "OVERBRAINER_RUNPOD__API_KEY": MARK,
                "OVERBRAINER_PROVIDERS__CLAUDE__API_KEY": MARK})
    d = check.data(c)
    dumped = json.dumps(d)
    assert MARK not in dumped
    assert d["hf_token"] == "***" and d["runpod"]["api_key"] == "***"
    assert d["providers"]["claude"]["api_key"] == "***" and d["providers"]["local"]["api_key"] is None
    assert d["training"]["axolotl_extra"] == {"wandb_api_key": "***", "warmup_ratio": 0.1}
    assert d["pipeline"]["concurrency"] == 8 and d["roles"]["embedder"] is None
    assert d["targets"]["local"]["summary"] == "local, native runtime, axolotl from PATH"
