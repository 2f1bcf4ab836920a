"""The names of providers and targets: a-z, 0-9 and _ only, checked without a regex (start-up
time), and a trailing newline refused (`re.match("^[a-z0-9_]+$")` lets "llm\\n" through)."""

from __future__ import annotations

import tomllib

import pytest

from overbrainer.config.fields import is_name
from overbrainer.config.read import parse_config
from overbrainer.errors import ConfigError
from tests.unit.test_config_load import BASE


@pytest.mark.parametrize("text, ok", [
    ("llm", True), ("a_1", True), ("_", True), ("0", True),
    ("", False), ("Bad-Name", False), ("LLM", False), ("a b", False), ("é", False), ("a.b", False),
    ("llm\n", False), ("\nllm", False), ("llm\r", False),
])
def test_is_name(text, ok):
    assert is_name(text) is ok


@pytest.mark.parametrize("section, extra", [
    ("providers", 'protocol = "openai"'),
    ("targets", 'kind = "local"\nruntime = "native"'),
])
def test_a_name_ending_in_a_newline_is_refused(section, extra):
    text = BASE + f'\n[{section}."box\\n"]\n{extra}\n'
    assert "box\n" in tomllib.loads(text)[section]
    with pytest.raises(ConfigError) as e:
        parse_config(tomllib.loads(text), {})
    assert f"{section}.box\n: name must match ^[a-z0-9_]+$" in e.value.problems
