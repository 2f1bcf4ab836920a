"""`overbrainer init` and `overbrainer config check` end to end, in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.fixtures.cli import clean_env

LOCAL_URL = {"OVERBRAINER_PROVIDERS__LLM__BASE_URL": "http://127.0.0.1:11434/v1"}

ENV_MARK = "sk-ENV-MARKER-4411"
DOTENV_MARK = "sk-DOTENV-MARKER-8822"
VAULT_MARK = "sk-VAULT-MARKER-9933"


def listing(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.fixture
def project(cli, tmp_path):
    r = cli(["init", tmp_path / "demo"])
    assert r.returncode == 0, r.stderr
    return tmp_path / "demo"


def test_init_then_config_check(cli, tmp_path):
    r = cli(["init", "demo"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert out[0] == "created demo/overbrainer.toml"
    assert "created demo/prompts/judge.txt" in out and "created demo/.overbrainer/version" in out
    assert "created demo/.gitignore" in out
    r = cli(["-C", "demo", "config", "check"], cwd=tmp_path, env=LOCAL_URL)
    assert r.returncode == 0, r.stderr
    assert "providers.llm.base_url = http://127.0.0.1:11434/v1" in r.stdout.splitlines()
    assert "providers.llm.dialect = ollama (guessed from base_url)" in r.stdout.splitlines()
    assert "providers.llm.api_key = (unset)" in r.stdout.splitlines()
    assert r.stdout.startswith("project.name = demo\n")
    r = cli(["-C", "demo", "config", "check"], cwd=tmp_path)  # no URL: nothing to guess the dialect from
    assert r.returncode == 2
    assert "providers.llm.dialect = generic (default: base_url not set)" in r.stdout.splitlines()


def test_inits_next_line_runs_as_given_in_a_shell_with_the_variables_the_readme_exports(cli, tmp_path):
    """The command `init` prints next works when pasted into a shell, whatever the folder's name,
    and the line names the variables the README exports (.env as the other way)."""
    r = cli(["-C", "my proj dir/demo x", "init"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    next_line = r.stdout.splitlines()[-1]
    assert next_line.startswith("next: export OVERBRAINER_PROVIDERS__LLM__BASE_URL (and __API_KEY for a hosted "
                                "provider), or set them in my proj dir/demo x/.env")
    command = next_line.split("`")[1]
    assert command == "overbrainer -C 'my proj dir/demo x' config check"
    shell = subprocess.run(["sh", "-c", command.replace("overbrainer", f"{sys.executable} -m overbrainer", 1)],
                           cwd=tmp_path, env=clean_env(LOCAL_URL, tmp_path / "home"), capture_output=True, text=True,
                           timeout=60)
    assert shell.returncode == 0, shell.stderr
    assert shell.stdout.startswith("project.name = demo_x\n")


def test_init_uses_the_project_dir_option_and_refuses_to_overwrite(cli, tmp_path):
    r = cli(["-C", tmp_path / "p", "init"])
    assert r.returncode == 0, r.stderr
    before = listing(tmp_path / "p")
    (tmp_path / "p" / ".env.example").write_text("mine\n")
    r = cli(["init", tmp_path / "p"])
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip() == (f"error: {tmp_path / 'p' / 'overbrainer.toml'} already exists: "
                                "`init` never overwrites a project")
    assert listing(tmp_path / "p") == before
    assert (tmp_path / "p" / ".env.example").read_text() == "mine\n"


def test_init_json(cli, tmp_path):
    r = cli(["--json", "init", tmp_path / "j"])
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["gitignore"] == "created" and str(tmp_path / "j" / "overbrainer.toml") in data["created"]


def test_config_check_is_read_only(cli, project):
    (project / ".overbrainer" / "version").unlink()
    (project / ".overbrainer").rmdir()
    before = listing(project)
    r = cli(["-C", project, "config", "check"], env=LOCAL_URL)
    assert r.returncode == 0, r.stderr
    assert listing(project) == before  # no lock, nothing written


def test_config_check_json(cli, project):
    r = cli(["--json", "-C", project, "config", "check"], env=LOCAL_URL)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["providers"]["llm"] == {"protocol": "openai", "dialect": "ollama", "dialect_guessed": True,
                                        "base_url": "http://127.0.0.1:11434/v1", "api_key": None}
    assert data["project"]["name"] == "demo" and data["pipeline"]["concurrency"] == 8


def test_invalid_configuration_lists_every_problem_exit_2(cli, project):
    toml = project / "overbrainer.toml"
    toml.write_text(toml.read_text().replace("concurrency = 8", "concurrency = 0\ncolour = 1"))
    r = cli(["-C", project, "config", "check"], env={"OVERBRAINER_PIPELINE__SEED": "abc", "OVERBRAINER_BOGUS": "1"})
    assert r.returncode == 2 and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert lines[0] == "error: invalid configuration"
    assert {line.strip() for line in lines[1:]} == {
        "pipeline.concurrency: must be at least 1",
        "unknown field `pipeline.colour`",
        "pipeline.seed: expected an integer (from OVERBRAINER_PIPELINE__SEED)",
        "unknown field `bogus` (from OVERBRAINER_BOGUS)",
    }


def test_an_old_projects_ssh_client_is_ignored_with_a_warning(cli, project):
    """`ssh_client` (and OVERBRAINER_SSH_CLIENT) chose a client that no longer exists: accepted,
    read by nothing, and a warning on stderr says so; config check shows no such setting."""
    toml = project / "overbrainer.toml"
    toml.write_text(toml.read_text() + '\n[targets.box]\nkind = "ssh"\nruntime = "native"\nssh_client = "openssh"\n')
    r = cli(["-C", project, "config", "check"], env={**LOCAL_URL, "OVERBRAINER_SSH_CLIENT": "builtin"})
    assert r.returncode == 0, r.stderr
    warnings = [line.split(" WARN ", 1)[1] for line in r.stderr.splitlines() if " WARN " in line]
    ignored = "is ignored: overbrainer always uses its built-in SSH client (paramiko)"
    assert warnings == [f"OVERBRAINER_SSH_CLIENT {ignored}; unset it", f"targets.box.ssh_client {ignored}; remove it"]
    assert "ssh_client" not in r.stdout


def test_a_typo_in_the_providers_name_of_a_variable_says_which_provider_was_meant(cli, project):
    r = cli(["-C", project, "config", "check"], env={"OVERBRAINER_PROVIDERS__LMM__BASE_URL": "http://127.0.0.1:1/v1",
                                                     "OVERBRAINER_PROVIDERS__LMM__API_KEY": ENV_MARK})
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip().splitlines() == [
        "error: invalid configuration",
        "  unknown provider `lmm` (from OVERBRAINER_PROVIDERS__LMM__API_KEY): did you mean `llm`?"]


def test_counts_over_their_limits_exit_2_naming_the_key_at_once(cli, project):
    # The counts that once kept `run --plan` busy for minutes (and GBs): refused by every command.
    toml = project / "overbrainer.toml"
    toml.write_text(toml.read_text().replace("subtopics = 2\nquestions_per_subtopic = 3",
                                             "subtopics = 1000000000\nquestions_per_subtopic = 1000000000"))
    env = {**LOCAL_URL, "OVERBRAINER_PROVIDERS__LLM__API_KEY": ENV_MARK,
           "OVERBRAINER_PIPELINE__QUESTION_BATCH_SIZE": "1001"}
    for args in (["config", "check"], ["run", "--plan"]):
        r = cli(["-C", project, *args], env=env)
        assert r.returncode == 2 and r.stdout == "", args
        assert r.stderr.strip().splitlines() == [
            "error: invalid configuration",
            "  topics.ownership.subtopics: must be at most 100000",
            "  topics.ownership.questions_per_subtopic: must be at most 100000",
            "  pipeline.question_batch_size: must be at most 1000 (from OVERBRAINER_PIPELINE__QUESTION_BATCH_SIZE)",
        ], args
        assert ENV_MARK not in r.stderr
    # Each topic under its own limits, together over the planned total: the topics are named.
    toml.write_text(toml.read_text().replace("subtopics = 1000000000\nquestions_per_subtopic = 1000000000",
                                             "subtopics = 100000\nquestions_per_subtopic = 101"))
    r = cli(["-C", project, "config", "check"], env=LOCAL_URL)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines()[1].strip() == (
        "topics: the planned questions (subtopics x questions_per_subtopic, summed over the topics) must be at "
        "most 10000000; these topics plan 10100000: ownership (100000 x 101 = 10100000)")


def test_missing_project_exit_2(cli, tmp_path):
    r = cli(["-C", tmp_path, "config", "check"])
    assert r.returncode == 2 and "overbrainer.toml" in r.stderr
    assert listing(tmp_path) == ["home"]


def test_dotenv_is_loaded_shell_wins_and_syntax_errors_name_the_line(cli, project):
    (project / ".env").write_text("OVERBRAINER_PIPELINE__CONCURRENCY=3\nOVERBRAINER_PIPELINE__SEED=7\n")
    r = cli(["-C", project, "config", "check"], env={**LOCAL_URL, "OVERBRAINER_PIPELINE__SEED": "9"})
    assert r.returncode == 0, r.stderr
    assert "concurrency: 3," in r.stdout and "seed: 9," in r.stdout
    (project / ".env").write_text(f"A=1\n{DOTENV_MARK} not an assignment\n")
    r = cli(["-C", project, "config", "check"])
    assert r.returncode == 2
    assert r.stderr.strip() == "error: cannot parse .env (syntax error at line 2)"


def test_env_only_key_in_the_file(cli, project):
    toml = project / "overbrainer.toml"
    toml.write_text(toml.read_text().replace('protocol = "openai"', f'protocol = "openai"\napi_key = "{ENV_MARK}"', 1))
    r = cli(["-C", project, "config", "check"])
    assert r.returncode == 2
    assert "providers.llm.api_key: must be set through env, not in overbrainer.toml" in r.stderr
    assert ENV_MARK not in r.stderr + r.stdout


def test_resolve(cli, project, vault):
    vault.put("secret", "overbrainer/local", {"api_key": VAULT_MARK})
    env = {**vault.env(), "OVERBRAINER_PROVIDERS__LLM__API_KEY": "vault:secret/overbrainer/local#api_key",
           "OVERBRAINER_HF_TOKEN": ENV_MARK}
    r = cli(["-C", project, "config", "check", "--resolve"], env={**LOCAL_URL, **env})
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-2:] == ["providers.llm.api_key: resolved", "hf_token: resolved"]
    r = cli(["--json", "-C", project, "config", "check", "--resolve"], env={**LOCAL_URL, **env})
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["resolved"] == ["providers.llm.api_key", "hf_token"]


def test_resolve_failure_names_the_key(cli, project, vault):
    env = {**vault.env(), **LOCAL_URL, "OVERBRAINER_RUNPOD__API_KEY": "vault:secret/missing#key"}
    r = cli(["-C", project, "config", "check", "--resolve"], env=env)
    assert r.returncode == 77  # a key missing where it should be: a person must act
    assert "runpod.api_key = ***" in r.stdout
    assert r.stderr.strip().endswith(
        "error: cannot resolve runpod.api_key: vault:secret/missing#key was not found in vault (HTTP 404)")
    r = cli(["--json", "-C", project, "config", "check", "--resolve"], env=env)
    assert r.returncode == 77
    assert json.loads(r.stdout)["failed"]["key"] == "runpod.api_key"


def test_resolve_without_secrets(cli, project):
    r = cli(["-C", project, "config", "check", "--resolve"], env=LOCAL_URL)
    assert r.returncode == 0 and r.stdout.splitlines()[-1] == "no secret is set"


def test_no_secret_value_in_any_output(cli, project, vault):
    """Markers planted in the shell env, in .env and in a vault answer never reach stdout/stderr."""
    vault.put("secret", "ob", {"key": VAULT_MARK})
    (project / ".env").write_text(f"OVERBRAINER_RUNPOD__API_KEY={DOTENV_MARK}\n"
                                  f"OVERBRAINER_PROVIDERS__LLM__BASE_URL=https://user:{DOTENV_MARK}@h/v1?k={DOTENV_MARK}\n")
    env = {**vault.env(), "OVERBRAINER_LOG": "debug", "OVERBRAINER_HF_TOKEN": ENV_MARK,
           "OVERBRAINER_PROVIDERS__LLM__API_KEY": "vault:secret/ob#key"}
    runs = [
        (["config", "check"], env),
        (["config", "check", "--resolve"], env),
        (["--json", "config", "check", "--resolve"], env),
        # a failing resolve after the vault one was resolved
        (["config", "check", "--resolve"], {**env, "OVERBRAINER_HF_TOKEN": "vault:secret/none#x"}),
        # an invalid configuration beside the secrets
        (["config", "check"], {**env, "OVERBRAINER_PIPELINE__CONCURRENCY": ENV_MARK}),
        (["--json", "config", "check"], {**env, "OVERBRAINER_PIPELINE__SEED": ENV_MARK}),
        # secrets in the wrong place
        (["config", "check"], {**env, f"OVERBRAINER_{ENV_MARK.upper().replace('-', '_')}": ENV_MARK}),
    ]
    for args, e in runs:
        r = cli(["-C", project, *args], env=e)
        out = r.stdout + r.stderr
        for mark in (ENV_MARK, DOTENV_MARK, VAULT_MARK, vault.token):
            assert mark not in out, (args, mark, out)
    assert len(vault.requests) >= 3  # the vault secret really was resolved


def test_a_closed_stdout_ends_the_command_quietly(project, tmp_path):
    """The one broken-pipe handler (cli.main.quiet_stdout): a reader gone before the result is
    written (`overbrainer config check | true`) gives exit 1 and nothing on stderr."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        r = subprocess.run([sys.executable, "-m", "overbrainer", "-C", project, "config", "check"],
                           stdout=write_end, stderr=subprocess.PIPE, timeout=60,
                           env=clean_env(LOCAL_URL, tmp_path / "home"))
    finally:
        os.close(write_end)
    assert r.returncode == 1
    assert r.stderr == b""


def test_a_project_of_the_original_tool_with_metrics_set_opens_without_a_warning(cli, project):
    toml = project / "overbrainer.toml"
    toml.write_text(toml.read_text() + '\n[hub]\nafter_training = true\n\n[metrics]\nlisten = "127.0.0.1:9464"\n')
    r = cli(["-C", project, "config", "check"], env=LOCAL_URL)
    assert r.returncode == 0, r.stderr
    assert "WARN" not in r.stderr and "metrics.listen = 127.0.0.1:9464" in r.stdout
    assert "after_training" not in r.stderr  # [hub] after_training is built
    assert "  export " in cli(["--help"]).stdout  # a command now


def test_a_project_without_topics_is_a_configuration_error_before_any_stage(cli, project):
    toml = project / "overbrainer.toml"
    start = toml.read_text().index("[[topics]]")
    end = toml.read_text().index("# Providers speak")
    toml.write_text(toml.read_text()[:start] + toml.read_text()[end:])
    from overbrainer.config.ready import NO_TOPICS

    r = cli(["-C", project, "config", "check"], env=LOCAL_URL)
    assert r.returncode == 2 and r.stderr.strip().splitlines()[-1] == f"error: {NO_TOPICS}"
    assert NO_TOPICS.startswith("topics: no [[topics]] table")
    before = listing(project)
    r = cli(["-C", project, "run"], env=LOCAL_URL)  # refused before a stage could ask the (absent) server
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip().splitlines()[-1] == f"error: {NO_TOPICS}"
    assert [p for p in listing(project) if p.startswith("data/")] == [p for p in before if p.startswith("data/")]
