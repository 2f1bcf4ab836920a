"""Configuration problems found before anything is sent exit 2 and say the fix: a role's provider
without a URL, a parent that hides the reasoning asked for, a vault: reference without
VAULT_ADDR, an unknown topic, a missing -C directory. `config check --probe` asks each provider
one cheap question. `split` that writes no train example exits 1 and says why."""

from __future__ import annotations

import json
import socket

from tests.fixtures.provider import Answer, Fault

URL_VAR = "OVERBRAINER_PROVIDERS__FAKE__BASE_URL"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_parent_that_hides_its_reasoning_is_refused_before_anything_is_sent(project, fake_provider, cli):
    project.write(reasoning=True, parent_model="openai/gpt-4o")
    for args in (["config", "check"], ["answers"], ["run"]):
        r = cli(["-C", project.dir, *args], env=project.env)
        assert r.returncode == 2, (args, r.stderr)
        last = r.stderr.strip().splitlines()[-1]
        assert last.startswith("error: roles.parent.reasoning = true, but the parent fake/openai/gpt-4o"), last
        assert "set roles.parent.reasoning = false to distil answers without reasoning" in last
        assert "DeepSeek-R1" in last and "gpt-oss" in last
    assert fake_provider.count == 0
    assert not project.data.exists() or not any(project.data.iterdir())


def test_split_that_writes_no_train_example_exits_1_and_says_why(project, fake_provider, cli):
    project.write(topics=1, subtopics=1, questions=2)
    r = cli(["-C", project.dir, "split"], env=project.env)
    assert r.returncode == 1, r.stderr
    assert r.stdout.startswith("split: 0 train")
    assert r.stderr.strip().endswith("error: split wrote 0 train examples: there is no answer yet: "
                                     "run `overbrainer answers` first")
    assert cli(["-C", project.dir, "questions"], env=project.env).returncode == 0
    fake_provider.responder = lambda req: Answer.truncated("cut")
    r = cli(["-C", project.dir, "answers"], env=project.env)
    assert r.returncode == 0, r.stderr
    r = cli(["-C", project.dir, "split"], env=project.env)
    assert r.returncode == 1
    assert "error: split wrote 0 train examples: every answer was excluded (truncated 2)" in r.stderr


def test_configuration_problems_found_at_run_time_exit_2(project, fake_provider, cli, tmp_path):
    project.write(topics=2, subtopics=1, questions=1)
    assert cli(["-C", project.dir, "questions"], env=project.env).returncode == 0
    fake_provider.clear()
    r = cli(["-C", project.dir, "answers"], env={})
    assert r.returncode == 2
    assert URL_VAR in r.stderr
    r = cli(["-C", project.dir, "answers"], env={**project.env, "OVERBRAINER_PROVIDERS__FAKE__API_KEY": "vault:kv/x#key"})
    assert r.returncode == 2
    assert "VAULT_ADDR is not set" in r.stderr
    r = cli(["-C", project.dir, "subtopics", "--topic", "nope"], env=project.env)
    assert r.returncode == 2
    assert r.stderr.strip() == "error: unknown topic `nope` (topics: topic0, topic1)"
    r = cli(["-C", project.dir, "split", "--topic", "nope"], env=project.env)
    assert r.returncode == 2 and "topics: topic0, topic1" in r.stderr
    r = cli(["-C", tmp_path / "missing", "history"])
    assert r.returncode == 2
    assert r.stderr.strip() == f"error: project directory {tmp_path / 'missing'} does not exist (-C DIR)"
    assert fake_provider.count == 0


def test_config_check_names_the_variable_of_an_unset_provider_url(project, cli):
    r = cli(["-C", project.dir, "config", "check"], env={})
    assert r.returncode == 2
    assert "providers.fake.base_url = (unset)" in r.stdout
    assert r.stderr.strip() == f"error: providers.fake.base_url is not set: set {URL_VAR} (in .env or the shell)"
    r = cli(["--json", "-C", project.dir, "config", "check"], env={})
    assert r.returncode == 2
    assert json.loads(r.stdout)["problems"] == [f"providers.fake.base_url is not set: set {URL_VAR} (in .env or the shell)"]


def test_config_check_probe_asks_each_provider_role_with_a_1_token_chat(project, fake_provider, cli):
    fake_provider.models = {"qwen/qwen3-235b": (0.1, 0.2), "deepseek/deepseek-r1": (0.5, 2.0)}
    r = cli(["-C", project.dir, "config", "check", "--probe"], env=project.env)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert (f"probe generator: fake ({project.url}) ok: model qwen/qwen3-235b listed; an authenticated 1-token "
            "chat with qwen/qwen3-235b answered") in lines
    assert (f"probe parent: fake ({project.url}) ok: model deepseek/deepseek-r1 listed; an authenticated 1-token "
            "chat with deepseek/deepseek-r1 answered") in lines
    assert "probe targets: none probed (no [training] section)" in lines
    assert [q.path for q in fake_provider.requests] == ["/models", "/chat/completions"] * 2
    assert [req.body["max_tokens"] for req in fake_provider.chat_requests()] == [1, 1]

    # A server without a model listing gets the chat only.
    fake_provider.clear()
    fake_provider.script_models(Fault.not_found(), Fault.not_found())
    r = cli(["--json", "-C", project.dir, "config", "check", "--probe"], env=project.env)
    assert r.returncode == 0, r.stderr
    probes = json.loads(r.stdout)["probe"]
    assert [(p["role"], p["ok"], p["detail"]) for p in probes] == [
        ("generator", True, "no model listing; an authenticated 1-token chat with qwen/qwen3-235b answered"),
        ("parent", True, "no model listing; an authenticated 1-token chat with deepseek/deepseek-r1 answered")]
    assert [req.body["max_tokens"] for req in fake_provider.chat_requests()] == [1, 1]


def test_config_check_probe_reports_a_provider_that_fails(project, fake_provider, cli):
    toml = project.dir / "overbrainer.toml"
    toml.write_text(toml.read_text().replace("[roles]", '[providers.dead]\nprotocol = "openai"\n\n[roles]')
                    .replace('parent = { provider = "fake"', 'parent = { provider = "dead"'))
    dead = f"http://127.0.0.1:{_closed_port()}/v1"
    env = {**project.env, "OVERBRAINER_PROVIDERS__DEAD__BASE_URL": dead}
    r = cli(["-C", project.dir, "config", "check", "--probe"], env=env)
    assert r.returncode == 1
    assert (f"probe parent: dead ({dead}) FAILED: request failed (connection refused): check "
            "OVERBRAINER_PROVIDERS__DEAD__BASE_URL") in r.stdout.splitlines()
    assert any(line.startswith("probe generator: fake") and " ok: " in line for line in r.stdout.splitlines())
    assert r.stderr.strip().endswith("error: probe failed for parent: see the lines above")
    r = cli(["--json", "-C", project.dir, "config", "check", "--probe"], env=env)
    assert r.returncode == 1
    assert [p["ok"] for p in json.loads(r.stdout)["probe"]] == [True, False]


def test_a_prompt_that_is_not_utf8_is_a_configuration_error_config_check_finds(project, fake_provider, cli):
    project.write(topics=1, subtopics=1, questions=1)
    (project.dir / "prompts").mkdir()
    (project.dir / "prompts" / "questions.txt").write_bytes(b"Ask {{ count }} questions\n\xe9t\xe9\n")
    problem = (f"invalid template questions.txt: {project.dir}/prompts/questions.txt is not UTF-8 text "
               "(line 2); save it as UTF-8")
    r = cli(["-C", project.dir, "config", "check"], env=project.env)
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().splitlines()[-1] == f"error: {problem}"
    r = cli(["-C", project.dir, "run"], env=project.env)
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().splitlines()[-1] == f"error: {problem}"
