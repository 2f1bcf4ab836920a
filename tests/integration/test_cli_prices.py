"""Prices for every provider (docs/llm-requests.md#prices), through the CLI: OpenAI's and
Anthropic's listings carry no prices (the fake lists ids only, as they do), so their prices come
from the genai-prices database; a self-hosted server has none until the configuration gives one
(`price = 0`: free); `run --plan --max-cost` refuses exactly what `run --max-cost` refuses."""

from __future__ import annotations

import json

import pytest
from genai_prices import Usage, __version__, calc_price

from tests.fixtures.provider import Answer

OPENAI_MODEL = "gpt-4o-mini"
ANTHROPIC_MODEL = "claude-haiku-4-5"
DB = f"genai-prices {__version__}"


def _database_cost(model: str, provider_id: str, tokens_in: int, tokens_out: int, batch: bool = False) -> float:
    """What genai-prices itself says the tokens cost (the reference the tool must agree with)."""
    context = {"processing": "batch"} if batch else None
    return float(calc_price(Usage(input_tokens=tokens_in, output_tokens=tokens_out), model,
                            provider_id=provider_id, price_context=context).total_price)


def _answers(req):
    return None if "JSON array" in req.prompt else Answer("An answer.", usage=(60, 400))


def _provider(project, fake_provider, protocol: str, **write):
    """A project on OpenAI (dialect openai) or Anthropic, the fake speaking that service, listing the
    model with prices it never shows (OpenAI's and Anthropic's listings have none)."""
    model = OPENAI_MODEL if protocol == "openai" else ANTHROPIC_MODEL
    fake_provider.dialect = "openai" if protocol == "openai" else "generic"
    fake_provider.models = {model: (100.0, 100.0)}  # what a kinder fake would list: never read
    fake_provider.responder = _answers
    project.write(topics=1, subtopics=2, questions=2, protocol=protocol, generator_model=model,
                  parent_model=model, dialect="openai" if protocol == "openai" else None, **write)
    return model


@pytest.mark.parametrize("protocol,provider_id", [("openai", "openai"), ("anthropic", "anthropic")])
def test_a_run_on_a_listing_without_prices_records_the_database_cost(project, fake_provider, cli, protocol,
                                                                     provider_id):
    model = _provider(project, fake_provider, protocol)
    plan = cli(["-C", project.dir, "run", "--plan"], env=project.env)
    assert plan.returncode == 0, plan.stderr
    assert "cost unknown" not in plan.stdout
    assert all(line.endswith(f"; price from {DB}") for line in plan.stdout.splitlines()[:3]), plan.stdout
    check = cli(["-C", project.dir, "config", "check"], env=project.env)
    assert check.returncode == 0, check.stderr
    assert "roles.parent.price = $" in check.stdout and "out per million tokens" in check.stdout
    assert f", from {DB}\n" in check.stdout

    r = cli(["-C", project.dir, "run"], env=project.env)
    assert r.returncode == 0, r.stderr
    assert "cost unknown" not in r.stdout
    assert not [req for req in fake_provider.requests if req.path == "/models"]  # no listing asked
    history = [h for h in project.history() if h["stage"] in ("subtopics", "questions", "answers")]
    assert len(history) == 3
    for h in history:
        assert h["cost"] == pytest.approx(_database_cost(model, provider_id, h["input_tokens"],
                                                         h["output_tokens"])), h
    assert all(h["cost"] > 0 for h in history)


def test_the_database_price_honours_max_cost(project, fake_provider, cli):
    model = _provider(project, fake_provider, "openai", parent={"max_tokens": 2000})
    assert cli(["-C", project.dir, "questions"], env=project.env).returncode == 0
    # An answer costs 60 tokens in and 1500 out; its bound, its prompt bytes and 256 tokens at the
    # input price and 2000 tokens out, a little more: a cap of 2.5 bounds pays for 2 or 3 of the 4.
    fake_provider.responder = lambda req: Answer("An answer.", usage=(60, 1500))
    bound = _database_cost(model, "openai", 600, 2000)
    cap = 2.5 * bound
    assert 4 * _database_cost(model, "openai", 60, 1500) > cap
    r = cli(["-C", project.dir, "answers", "--max-cost", f"{cap:.8f}"], env=project.env)
    assert r.returncode == 1, r.stderr
    assert "error: spend cap reached: $" in r.stderr
    answers = project.history()[-1]
    assert answers["stage"] == "answers" and 0 < answers["done"] < 4
    assert 0 < answers["cost"] <= cap


def test_batch_mode_counts_the_database_batch_price(project, fake_provider, cli):
    model = _provider(project, fake_provider, "openai")
    assert cli(["-C", project.dir, "questions"], env=project.env).returncode == 0
    r = cli(["-C", project.dir, "--json", "answers", "--plan"], env={**project.env,
                                                                    "OVERBRAINER_PIPELINE__MODE": "batch"})
    assert r.returncode == 0, r.stderr
    answers = json.loads(r.stdout.splitlines()[0])
    assert answers["price_source"] == DB and answers["mode"] == "batch"
    online, batch = (_database_cost(model, "openai", 1_000_000, 1_000_000, batch=b) for b in (False, True))
    assert batch < online
    assert answers["batch_cost_usd"] == pytest.approx(answers["online_cost_usd"] * batch / online, rel=1e-3)


def _self_hosted(project, fake_provider):
    fake_provider.dialect = "llamacpp"
    fake_provider.models = {"qwen/qwen3-235b": (1.0, 2.0), "deepseek/deepseek-r1": (3.0, 6.0)}  # never listed
    fake_provider.responder = _answers
    project.write(topics=1, subtopics=2, questions=2, dialect="llamacpp")


def test_a_self_hosted_server_gets_the_same_exit_code_from_the_plan_and_the_run(project, fake_provider, cli):
    _self_hosted(project, fake_provider)
    refusal = ("error: roles.generator has no price (qwen/qwen3-235b on provider fake: a self-hosted server lists "
               "none), so the spend cap (max_cost_usd, --max-cost) cannot bound its requests; set "
               "roles.generator.price = { input = …, output = … } (USD per million tokens), or price = 0 for a "
               "self-hosted server")
    for args in (["run", "--plan", "--max-cost", "0.5"], ["run", "--max-cost", "0.5"]):
        r = cli(["-C", project.dir, *args], env=project.env)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert r.stderr.strip().splitlines()[-1] == refusal, r.stderr
    assert fake_provider.chat_requests() == [] and not project.data.exists()

    free = {**project.env, "OVERBRAINER_PROVIDERS__FAKE__PRICE": "0"}
    plan = cli(["-C", project.dir, "run", "--plan", "--max-cost", "0.5"], env=free)
    assert plan.returncode == 0, plan.stderr
    assert "; price from providers.fake.price" in plan.stdout and "expected $0.0000; at most $0.0000" in plan.stdout
    r = cli(["-C", project.dir, "run", "--max-cost", "0.5"], env=free)
    assert r.returncode == 0, r.stderr
    assert [h["cost"] for h in project.history() if h["stage"] != "split"] == [0.0, 0.0, 0.0]


def test_a_role_s_price_wins_over_its_provider_s_and_says_where_it_comes_from(project, fake_provider, cli):
    _self_hosted(project, fake_provider)
    project.write(topics=1, subtopics=2, questions=2, dialect="llamacpp",
                  parent={"price": {"input": 3.0, "output": 6.0, "batch_input": 1.0, "batch_output": 2.0}})
    env = {**project.env, "OVERBRAINER_PROVIDERS__FAKE__PRICE": "0"}
    r = cli(["-C", project.dir, "config", "check"], env=env)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert "roles.generator.price = free, from providers.fake.price" in lines
    assert ("roles.parent.price = $3.00 in, $6.00 out per million tokens (batch $1.00 in, $2.00 out), from "
            "roles.parent.price") in lines
    assert cli(["-C", project.dir, "run"], env=env).returncode == 0
    answers = next(h for h in project.history() if h["stage"] == "answers")
    assert answers["cost"] == pytest.approx((answers["input_tokens"] * 3.0 + answers["output_tokens"] * 6.0) / 1e6)
    assert next(h for h in project.history() if h["stage"] == "questions")["cost"] == 0.0


def test_config_check_says_a_price_is_unknown_and_a_cap_makes_it_a_problem(project, fake_provider, cli):
    _self_hosted(project, fake_provider)
    r = cli(["-C", project.dir, "config", "check"], env=project.env)
    assert r.returncode == 0, r.stderr
    assert ("roles.parent.price = unknown: a self-hosted server lists none; set roles.parent.price = { input = …, "
            "output = … } (USD per million tokens), or price = 0 for a self-hosted server") in r.stdout.splitlines()
    r = cli(["-C", project.dir, "config", "check"], env={**project.env, "OVERBRAINER_PIPELINE__MAX_COST_USD": "1"})
    assert r.returncode == 2
    assert "  roles.parent has no price (deepseek/deepseek-r1 on provider fake: a self-hosted server" in r.stderr


@pytest.mark.parametrize("value, problem", [
    ("price = 1", "roles.parent.price: expected 0 (free: a self-hosted server) or a table { input = …, output = … } "
                  "(USD per million tokens, 0 or more)"),
    ("price = { input = 1 }", "missing field `roles.parent.price.output`"),
    ("price = { input = -1, output = 2 }", "roles.parent.price.input: must be a number of USD per million tokens, 0 or "
                                           "more"),
    ("price = { input = 1, output = 2, batch_input = 0.5 }", "roles.parent.price.batch_output: batch_input and "
                                                             "batch_output go together: set both"),
    ("price = { input = 1, output = 2, cache_input = 0.5 }", "unknown field `roles.parent.price.cache_input`: did "
                                                             "you mean `cached_input`?"),
])
def test_a_bad_price_is_a_configuration_error_naming_the_key(project, fake_provider, cli, value, problem):
    project.write(topics=1)
    toml = project.dir / "overbrainer.toml"
    toml.write_text(toml.read_text().replace('reasoning = false }', f'reasoning = false, {value} }}'))
    r = cli(["-C", project.dir, "config", "check"], env=project.env)
    assert r.returncode == 2
    assert f"  {problem}\n" in r.stderr or r.stderr.strip().endswith(f"error: {problem}"), r.stderr


def test_a_price_from_the_environment(project, fake_provider, cli):
    _self_hosted(project, fake_provider)
    env = {**project.env, "OVERBRAINER_ROLES__PARENT__PRICE__INPUT": "2", "OVERBRAINER_ROLES__PARENT__PRICE__OUTPUT": "8",
           "OVERBRAINER_ROLES__GENERATOR__PRICE": "0"}
    r = cli(["-C", project.dir, "config", "check"], env=env)
    assert r.returncode == 0, r.stderr
    assert ("roles.parent.price = $2.00 in, $8.00 out per million tokens (batch $1.00 in, $4.00 out), from "
            "roles.parent.price") in r.stdout.splitlines()
    r = cli(["-C", project.dir, "config", "check"], env={**env, "OVERBRAINER_ROLES__GENERATOR__PRICE": "free"})
    assert r.returncode == 2 and "roles.generator.price: expected 0 (free: a self-hosted server) or a table" in r.stderr
    assert "(from OVERBRAINER_ROLES__GENERATOR__PRICE)" in r.stderr


def test_run_plan_has_a_line_for_the_gate_s_grader(project, fake_provider, cli):
    project.write(topics=1, subtopics=2, questions=2)
    fake_provider.models = {"qwen/qwen3-235b": (1.0, 2.0), "deepseek/deepseek-r1": (3.0, 6.0), "grader-1": (0.5, 1.0)}
    toml = project.dir / "overbrainer.toml"
    toml.write_text(toml.read_text().replace("[pipeline]", 'grader = { provider = "fake", model = "grader-1" }\n\n'
                                                          "[pipeline]"))
    objs = [json.loads(line) for line in cli(["-C", project.dir, "--json", "run", "--plan"],
                                              env=project.env).stdout.splitlines()]
    assert [o["stage"] for o in objs] == ["subtopics", "questions", "answers", "gate", "split", "total"]
    gate = objs[3]
    assert gate["role"] == "grader" and gate["model"] == "grader-1" and gate["requests"] == 4 and gate["estimated"]
    assert gate["price_source"] == "the provider's listing" and gate["basis"] == "typical"
    assert gate["cost_usd"] == pytest.approx((gate["input_tokens"] * 0.5 + gate["output_tokens"] * 1.0) / 1e6)
    assert objs[-1]["requests"] == sum(o["requests"] for o in objs[:4])

    fake_provider.responder = lambda req: (Answer('{"score": 9, "reason": "fine"}') if "You grade one answer" in
                                           req.prompt else _answers(req))
    assert cli(["-C", project.dir, "run"], env=project.env).returncode == 0
    objs = [json.loads(line) for line in cli(["-C", project.dir, "--json", "run", "--plan"],
                                              env=project.env).stdout.splitlines()]
    assert [o["stage"] for o in objs] == ["subtopics", "questions", "answers", "gate", "split", "total"]
    assert objs[3]["requests"] == 0  # every answer graded with these settings

    toml.write_text(toml.read_text().replace('model = "grader-1"', 'model = "grader-2"'))
    gate = json.loads(cli(["-C", project.dir, "--json", "run", "--plan"], env=project.env).stdout.splitlines()[3])
    assert gate["requests"] == 4 and not gate["estimated"] and not gate["price_known"]  # a new grader grades again
    r = cli(["-C", project.dir, "run", "--plan", "--max-cost", "1"], env=project.env)
    assert r.returncode == 2 and "error: roles.grader has no price (grader-2 on provider fake: its model listing " \
                                 "gives none)" in r.stderr
    r = cli(["-C", project.dir, "run", "--max-cost", "1"], env=project.env)
    assert r.returncode == 2 and "error: roles.grader has no price (grader-2" in r.stderr
