"""The patterns that check a whole value end at the value's end (`\\Z`), not before a final
newline (`$`): `"me/model\\n"` is not a Hub repository, `"run\\n"` not a run ID."""

from __future__ import annotations

import importlib
import re

import pytest

CASES = [
    ("overbrainer.config.build_train", "HUB_REPO", "me/model"),
    ("overbrainer.hub.card", "_HUB_ID", "HuggingFaceTB/SmolLM2-135M"),
    ("overbrainer.hub.flow", "REPO", "me/model"),
    ("overbrainer.llm.batch_types", "CUSTOM_ID", "ob1-q_0001"),
    ("overbrainer.train.axolotl_config", "_PLAIN_KEY", "base_model"),
    ("overbrainer.runpod.pod_spec", "_RUN_ID", "demo_20261201-101010"),
    ("overbrainer.runpod.pod_spec", "_KEY_LINE", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5 me@host"),
]


@pytest.mark.parametrize("module, name, good", CASES, ids=[f"{m.rsplit('.', 1)[1]}.{n}" for m, n, _ in CASES])
def test_a_whole_value_pattern_refuses_a_final_newline(module, name, good):
    pattern = getattr(importlib.import_module(module), name)
    assert re.match(pattern, good), good
    assert not re.match(pattern, good + "\n")

