""".env parsing (python-dotenv's) and loading: shell wins, ${VAR}, last occurrence, BOM, errors, reload."""

from __future__ import annotations

import os

import pytest

from overbrainer.config.dotenv import load_project_env, parse
from overbrainer.errors import ConfigError


def test_syntax():
    text = (
        "# comment\n"
        "\n"
        "PLAIN=value\n"
        "export EXPORTED=yes\n"
        "SPACED = spaced value  # inline comment\n"
        "HASH=a#b\n"
        "SINGLE='lit ${PLAIN} # not a comment \\' \\n'\n"
        'DOUBLE="line1\\nline2 \\"q\\" \\$HOME ${PLAIN}"\n'
        "EMPTY=\n"
        "COMMENTED=      # the value goes here\n"
        "'QUOTED_KEY'=q\n"
        'MULTI="first\n'
        'second"\n'
        "DEFAULTED=${UNDEFINED_VAR_X:-fallback}\n"
        "UNDEFINED=${UNDEFINED_VAR_X}\n"
        "CRLF=value\r\n"
    )
    got = dict(parse(text, {}))
    assert got == {
        "PLAIN": "value", "EXPORTED": "yes", "SPACED": "spaced value", "HASH": "a#b",
        "SINGLE": "lit value # not a comment ' \\n", "DOUBLE": 'line1\nline2 "q" \\$HOME value',
        "EMPTY": "", "COMMENTED": "", "QUOTED_KEY": "q", "MULTI": "first\nsecond", "DEFAULTED": "fallback",
        "UNDEFINED": "", "CRLF": "value",
    }


def test_expansion_prefers_the_shell_then_earlier_keys():
    got = dict(parse("A=from_file\nB=${A}-${HOME_X}\n", {"HOME_X": "/home/x", "A": "from_shell"}))
    assert got["B"] == "from_shell-/home/x"
    got = dict(parse("A=from_file\nB=${A}\n", {}))
    assert got["B"] == "from_file"


def test_the_last_occurrence_wins_a_key_without_a_value_sets_nothing_and_bom_is_ignored():
    assert parse("\ufeffKEY=first\nKEY=second\nJUSTAKEY\nexport OTHER\n", {}) == [("KEY", "second")]
    assert dict(parse("A=${EMPTY:-d}\nB=${UNSET:-d}\n", {"EMPTY": ""})) == {"A": "", "B": "d"}


def test_the_template_s_lines_uncommented_read_as_meant():
    """env.example ends some lines with a comment after the `=` (`OVERBRAINER_HF_TOKEN=   # …`):
    uncommented, those keys are empty, not the comment's text."""
    from importlib.resources import files

    template = (files("overbrainer.config") / "templates" / "env.example").read_text(encoding="utf-8")
    lines = [line[2:] for line in template.splitlines() if line.startswith("# ") and "=" in line.split()[1]]
    got = dict(parse("\n".join(lines) + "\n", {}))
    assert got["OVERBRAINER_HF_TOKEN"] == "" and got["VAULT_TOKEN"] == ""
    assert got["OVERBRAINER_PROVIDERS__LLM__API_KEY"] == "vault:secret/overbrainer/openrouter#api_key"


@pytest.mark.parametrize("text, line", [
    ("GOOD=1\nthis line is not an assignment\n", 2),
    ("A=1\n\n# c\n=novalue\n", 4),
    ("A=1\n\n\r\n  \nbad line\n", 5),
    ('A=1\nB="unterminated\nC=3\n', 2),
    ("A='unterminated\n", 1),
    ('A="x" trailing\n', 1),
    ("KEY value\n", 1),
    ("A=1\nB='x' 'y'\n", 2),
])
def test_syntax_error_names_the_line_only(text, line):
    with pytest.raises(ConfigError) as e:
        parse(text, {})
    assert str(e.value) == f"cannot parse .env (syntax error at line {line})"


def test_syntax_error_never_shows_the_content(tmp_path):
    (tmp_path / ".env").write_text("OK=1\nsk-SECRET-VALUE-123 oops\n")
    with pytest.raises(ConfigError) as e:
        load_project_env(tmp_path, {})
    assert "SECRET" not in str(e.value) and "line 2" in str(e.value)
    assert e.value.exit_code == 2


def test_invalid_utf8_names_the_file_and_the_line(tmp_path):
    (tmp_path / ".env").write_bytes(b"A=1\nB=2\nC=\xff\n")
    with pytest.raises(ConfigError) as e:
        load_project_env(tmp_path, {})
    assert str(e.value) == f"cannot read {tmp_path}/.env: it is not UTF-8 text (line 3); save it as UTF-8"
    assert e.value.exit_code == 2


def test_load_shell_wins_and_keys_are_remembered(tmp_path):
    (tmp_path / ".env").write_text("FROM_FILE=1\nSHELL_SET=file\n")
    env = {"SHELL_SET": "shell"}
    state = load_project_env(tmp_path, env)
    assert env == {"SHELL_SET": "shell", "FROM_FILE": "1"}
    assert state.keys == {"FROM_FILE"}


def test_missing_env_file_is_fine(tmp_path):
    env: dict = {}
    state = load_project_env(tmp_path, env)
    assert env == {} and state.keys == set() and not state.changed()


def test_reload(tmp_path):
    (tmp_path / "overbrainer.toml").write_text("x\n")
    (tmp_path / ".env").write_text("KEEP=1\nDROPPED=1\nSHELL_SET=file\n")
    env = {"SHELL_SET": "shell", "OTHER": "o"}
    state = load_project_env(tmp_path, env)
    assert not state.changed()
    (tmp_path / ".env").write_text("KEEP=2\nADDED=${KEEP}x\nSHELL_SET=file2\n")
    assert state.changed()
    new = state.reload(env)
    assert new == {"SHELL_SET": "shell", "OTHER": "o", "KEEP": "2", "ADDED": "2x"}
    assert env == new and state.keys == {"KEEP", "ADDED"} and not state.changed()
    (tmp_path / "overbrainer.toml").write_text("longer x\n")
    assert state.changed()


def test_reload_with_a_broken_env_changes_nothing(tmp_path):
    (tmp_path / ".env").write_text("A=1\n")
    env: dict = {}
    state = load_project_env(tmp_path, env)
    (tmp_path / ".env").write_text("A=2\nbroken line\n")
    with pytest.raises(ConfigError, match="line 2"):
        state.reload(env)
    assert env == {"A": "1"} and state.keys == {"A"}


def test_defaults_to_os_environ(tmp_path, monkeypatch):
    (tmp_path / ".env").write_text("OVERBRAINER_DOTENV_PROBE=1\n")
    monkeypatch.delenv("OVERBRAINER_DOTENV_PROBE", raising=False)
    state = load_project_env(tmp_path)
    try:
        assert os.environ["OVERBRAINER_DOTENV_PROBE"] == "1"
    finally:
        for k in state.keys:
            os.environ.pop(k, None)
