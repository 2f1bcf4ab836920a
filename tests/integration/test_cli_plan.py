"""`--plan`: per stage the requests still to make, the expected tokens and cost, an upper bound; for
training the pod's rent; a total. Nothing but the providers' model listings (and Runpod's GPU
catalog) is read, and no generation request is sent: the fakes say so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fixtures.provider import Answer

PRICES = {"qwen/qwen3-235b": (1.0, 2.0), "deepseek/deepseek-r1": (3.0, 6.0)}
RTX4090 = "NVIDIA GeForce RTX 4090"


def _json(r) -> list[dict]:
    assert r.returncode == 0, r.stderr
    return [json.loads(line) for line in r.stdout.splitlines()]


def _nothing_sent(fake) -> None:
    assert fake.chat_requests() == [] and fake.embedding_requests() == []
    assert {(r.method, r.path) for r in fake.requests} <= {("GET", "/models")}


def test_run_plan_sends_no_generation_request(project, fake_provider, cli):
    project.write(topics=2, subtopics=2, questions=3, pipeline={"question_batch_size": 2},
                  parent={"max_tokens": 4000})
    fake_provider.models = dict(PRICES)
    r = cli(["-C", project.dir, "run", "--plan"], env=project.env)
    assert r.returncode == 0, r.stderr
    _nothing_sent(fake_provider)
    lines = r.stdout.splitlines()
    assert [line.split(":")[0] for line in lines] == ["subtopics", "questions", "answers", "split", "total"]
    assert lines[0].startswith("subtopics: 2 requests to generator qwen/qwen3-235b; expected tokens ")
    assert "(from the prompts' sizes)" in lines[0] and "at most $" in lines[0]
    # 2 topics × 2 subtopics, 3 questions in batches of 2: 8 batches, 12 answers, not generated yet.
    assert lines[1].startswith("questions: about 8 requests to generator qwen/qwen3-235b (estimated from the "
                               "configured counts")
    assert lines[2].startswith("answers: about 12 requests to parent deepseek/deepseek-r1 (estimated")
    assert "out (from the prompts' sizes and a typical 1000 tokens an answer: no answer yet)" in lines[2]
    assert lines[4].startswith("total: about 22 requests; expected $")
    assert not project.data.exists() and project.history() == []  # nothing written either

    objs = _json(cli(["-C", project.dir, "--json", "run", "--plan"], env=project.env))
    assert [o["stage"] for o in objs] == ["subtopics", "questions", "answers", "split", "total"]
    for o in objs:
        assert {"stage", "requests", "cost_usd", "cost_max_usd"} <= set(o)
    stages, total = objs[:3], objs[-1]
    assert [o["requests"] for o in stages] == [2, 8, 12] and total["requests"] == 22
    # Answers at a typical size (no history): 12 × min(1000, max_tokens) tokens at $6/M and the
    # prompts at $3/M; the bound at max_tokens.
    assert stages[2]["output_tokens"] == 12 * 1000 and stages[2]["basis"] == "typical"
    assert stages[2]["cost_usd"] == pytest.approx(12 * 1000 * 6e-6 + stages[2]["input_tokens"] * 3e-6)
    assert stages[2]["cost_max_usd"] > 12 * 4000 * 6e-6 > 3 * stages[2]["cost_usd"]
    assert all(o["cost_max_usd"] >= o["cost_usd"] > 0 for o in stages)
    assert total["cost_usd"] == pytest.approx(sum(o["cost_usd"] for o in stages))
    assert total["cost_max_usd"] == pytest.approx(sum(o["cost_max_usd"] for o in stages))
    _nothing_sent(fake_provider)


def test_a_plan_learns_from_the_project_s_history(project, fake_provider, cli):
    project.write(topics=2, subtopics=2, questions=3)
    fake_provider.models = dict(PRICES)
    fake_provider.responder = lambda req: (None if "JSON array" in req.body["messages"][-1]["content"]
                                           else Answer("An answer.", usage=(40, 300)))
    assert cli(["-C", project.dir, "run"], env=project.env).returncode == 0
    project.write(topics=3, subtopics=2, questions=3)  # one topic more
    fake_provider.clear()
    objs = _json(cli(["-C", project.dir, "--json", "run", "--plan"], env=project.env))
    _nothing_sent(fake_provider)
    answers = objs[2]
    assert answers["requests"] == 6 and answers["estimated"] and answers["basis"] == "history"
    assert (answers["input_tokens"], answers["output_tokens"]) == (6 * 40, 6 * 300)  # per answer on disk
    assert answers["cost_usd"] == pytest.approx(6 * (40 * 3e-6 + 300 * 6e-6))
    assert objs[0]["requests"] == 1 and objs[0]["basis"] == "history"


def test_unknown_prices_say_so(project, fake_provider, cli):
    project.write(topics=1, subtopics=2, questions=2)
    fake_provider.models = {"qwen/qwen3-235b": (1.0, 2.0)}
    r = cli(["-C", project.dir, "run", "--plan"], env=project.env)
    assert r.returncode == 0, r.stderr
    answers = r.stdout.splitlines()[2]
    assert answers.endswith("; cost unknown (no price for deepseek/deepseek-r1 on provider fake: its model listing "
                            "gives none; set roles.parent.price = { input = …, output = … } (USD per million tokens), "
                            "or price = 0 for a self-hosted server)")
    assert r.stdout.splitlines()[-1].startswith("total: about 7 requests; expected $")
    assert "+ what is unknown above" in r.stdout.splitlines()[-1]
    total = _json(cli(["-C", project.dir, "--json", "run", "--plan"], env=project.env))[-1]
    assert total["complete"] is False
    _nothing_sent(fake_provider)


def test_stage_plans_count_what_the_stage_would_ask(project, fake_provider, cli):
    project.write(topics=2, subtopics=2, questions=3)
    fake_provider.models = dict(PRICES)
    assert cli(["-C", project.dir, "subtopics"], env=project.env).returncode == 0
    fake_provider.clear()
    objs = _json(cli(["-C", project.dir, "--json", "questions", "--plan"], env=project.env))
    assert [(o["stage"], o["requests"]) for o in objs] == [("subtopics", 0), ("questions", 4), ("total", 4)]
    objs = _json(cli(["-C", project.dir, "--json", "answers", "--plan", "--topic", "topic0"], env=project.env))
    assert [(o["stage"], o["requests"], o["estimated"]) for o in objs] == [("answers", 0, False),
                                                                         ("total", 0, False)]
    objs = _json(cli(["-C", project.dir, "--json", "subtopics", "--plan", "--force"], env=project.env))
    assert objs[0]["requests"] == 2
    _nothing_sent(fake_provider)


def test_the_plan_of_a_run_that_trains_on_a_local_target_says_no_rent(project, fake_provider, cli):
    project.write(topics=1, subtopics=1, questions=1, training=True)
    fake_provider.models = dict(PRICES)
    r = cli(["-C", project.dir, "run", "--plan"], env=project.env)
    assert r.returncode == 0, r.stderr
    train = r.stdout.splitlines()[-2]
    assert train == "train: target here (local); the dataset is not split yet; no rent (your own machine)"


def test_the_plan_of_a_run_that_trains_on_runpod_bounds_the_pod(project, fake_provider, fake_runpod, cli):
    project.write(topics=1, subtopics=1, questions=1)
    toml = project.dir / "overbrainer.toml"
    toml.write_text(toml.read_text() + "\n".join([
        "[training]", 'target = "gpu"', 'base_model = "Qwen/Qwen3-0.6B"', 'adapter = "lora"', "",
        "[targets.gpu]", 'kind = "runpod"', f'gpu_types = ["{RTX4090}"]', "max_hours = 6", ""]))
    env = {**project.env, "OVERBRAINER_RUNPOD__BASE_URL": fake_runpod.url,
           "OVERBRAINER_RUNPOD__API_KEY": fake_runpod.account_key}
    fake_provider.models = dict(PRICES)
    objs = _json(cli(["-C", project.dir, "--json", "run", "--plan"], env=env))
    train, total = objs[-2], objs[-1]
    price = fake_runpod.gpus[RTX4090].secure_price
    assert train["stage"] == "train" and train["kind"] == "runpod" and train["requests"] == 0
    assert train["rate_per_hour"] == pytest.approx(price)
    assert train["cost_max_usd"] == pytest.approx(round(price * 6, 4)) and train["cost_usd"] is None
    assert total["cost_max_usd"] == pytest.approx(sum(o["cost_max_usd"] for o in objs[:3]) + train["cost_max_usd"])
    assert [c.path for c in fake_runpod.calls] == ["/catalog/gpus"]  # read, never rented
    r = cli(["-C", project.dir, "run", "--plan"], env=env)
    assert f"{RTX4090} × 1 at ${price:.2f}/h; no expected cost; at most ${price * 6:.2f}" in r.stdout
    _nothing_sent(fake_provider)


def test_the_plan_of_a_cluster_bounds_every_pod_of_it(project, fake_provider, fake_runpod, cli):
    project.write(topics=1, subtopics=1, questions=1)
    toml = project.dir / "overbrainer.toml"
    toml.write_text(toml.read_text() + "\n".join([
        "[training]", 'target = "gpu"', 'base_model = "Qwen/Qwen3-0.6B"', 'adapter = "lora"', "",
        "[targets.gpu]", 'kind = "runpod"', f'gpu_types = ["{RTX4090}"]', "max_hours = 6", "nodes = 4",
        "gpu_count = 2", ""]))
    env = {**project.env, "OVERBRAINER_RUNPOD__BASE_URL": fake_runpod.url,
           "OVERBRAINER_RUNPOD__API_KEY": fake_runpod.account_key}
    fake_provider.models = dict(PRICES)
    train = _json(cli(["-C", project.dir, "--json", "run", "--plan"], env=env))[-2]
    price = fake_runpod.gpus[RTX4090].secure_price
    assert train["rate_per_hour"] == pytest.approx(price * 2 * 4)  # 4 pods of 2 GPUs
    assert train["cost_max_usd"] == pytest.approx(round(price * 2 * 4 * 6, 4))
    [read] = [c for c in fake_runpod.calls if c.path == "/catalog/gpus"]
    assert read.query["product"] == "CLUSTER" and [c.method for c in fake_runpod.calls] == ["GET"]
    r = cli(["-C", project.dir, "run", "--plan"], env=env)
    assert f"{RTX4090} × 2 × 4 pods at ${price * 8:.2f}/h; no expected cost; at most ${price * 48:.2f}" in r.stdout


def test_the_second_runs_plan_expects_its_cost_within_a_quarter(project, fake_provider, cli):
    """A project run once on realistic replies, its counts raised: the plan's expected cost (from
    this project's history) is within 25% of what the second run records."""
    from tests.fixtures.provider_text import realistic

    project.write(topics=2, subtopics=2, questions=3)
    fake_provider.models = dict(PRICES)
    fake_provider.responder = realistic
    assert cli(["-C", project.dir, "run"], env=project.env).returncode == 0
    first = len(project.history())
    project.write(topics=3, subtopics=2, questions=5)
    objs = _json(cli(["-C", project.dir, "--json", "run", "--plan"], env=project.env))
    assert all(o["basis"] == "history" for o in objs[:3]), objs
    r = cli(["-C", project.dir, "run"], env=project.env)
    assert r.returncode == 0, r.stderr
    spent = sum(h["cost"] or 0 for h in project.history()[first:])
    expected = objs[-1]["cost_usd"]
    assert abs(expected - spent) <= 0.25 * spent, (expected, spent)
    assert objs[-1]["cost_max_usd"] >= spent


def test_the_plan_says_how_long_the_online_stages_take_at_the_known_rate_limits(project, fake_provider, cli):
    from tests.fixtures.provider import RateLimits

    project.write(topics=1, subtopics=2, questions=3)
    fake_provider.models = dict(PRICES)
    objs = _json(cli(["-C", project.dir, "--json", "run", "--plan"], env=project.env))
    assert all(o.get("minutes") is None for o in objs)  # no limit known yet: no duration
    # A run learns the limits the provider publishes on its answers; the next plan uses them.
    fake_provider.rate_limits = RateLimits(requests=6_000, tokens=10_000_000)
    assert cli(["-C", project.dir, "run"], env=project.env).returncode == 0
    recorded = json.loads((project.dir / ".overbrainer" / "rate_limits.json").read_text())
    assert recorded["providers"]["fake"]["deepseek/deepseek-r1"] == {"requests": 6000, "tokens": 10_000_000}
    project.write(topics=3, subtopics=2, questions=300)
    fake_provider.clear()
    r = cli(["-C", project.dir, "run", "--plan"], env=project.env)
    assert r.returncode == 0, r.stderr
    _nothing_sent(fake_provider)
    answers = next(line for line in r.stdout.splitlines() if line.startswith("answers:"))
    assert "at the rate limits known (6,000 requests, 10,000,000 tokens a minute)" in answers
    # A configured limit lowers the published one: 60 requests a minute bind.
    project.env["OVERBRAINER_PROVIDERS__FAKE__MAX_REQUESTS_PER_MINUTE"] = "60"
    objs = _json(cli(["-C", project.dir, "--json", "run", "--plan"], env=project.env))
    by_stage = {o["stage"]: o for o in objs}
    answers = by_stage["answers"]
    assert answers["rate_limits"] == {"requests": 60, "tokens": 10_000_000}
    assert answers["minutes"] == pytest.approx(answers["requests"] / (60 * 0.97), abs=0.01)
    timed = [o["minutes"] for o in objs if o.get("minutes") is not None and o["stage"] != "total"]
    assert by_stage["total"]["minutes"] == pytest.approx(sum(timed), abs=0.02)
    assert by_stage["total"]["minutes_complete"] is True


def test_a_served_providers_pods_count_once_in_the_total_whatever_stages_use_them(project, fake_provider,
                                                                                   fake_runpod, cli):
    """The generator and the parent on one served provider: its pods are one set a command brings
    up once and keeps across its stages, so each stage on it says their bound and the total counts
    it (and their boot) once; under a cap the plan prices the pods as the command does (no price
    asked of a served role)."""
    from overbrainer.runpod.pod_record import PodRecord, PodState
    from overbrainer.runpod.serve_record import SERVE_JSON, ServeRecord
    from tests.fixtures.serve import serve_env, serve_toml

    model = "bartowski/SmolLM2-135M-Instruct-GGUF:Q4_K_M"
    role = {"provider": "rented", "model": model, "max_tokens": 256}
    project.write(topics=2, subtopics=2, questions=2, generator=role, parent=role)
    with (project.dir / "overbrainer.toml").open("a") as f:
        f.write("\n" + serve_toml(Path(model), replicas=2, max_hours=3))
    env = {**project.env, **serve_env(fake_runpod)}
    # an earlier serve measured the throughput: 2 M output tokens for $1 of pod time, a 6-minute boot
    serve = ServeRecord(id="s1", provider="rented", model=model, engine="llamacpp", image="img", target="gpu",
                        replicas=2, gpu_count=1, settings="", nonce="n", created="2026-12-01T00:00:00Z",
                        state="down", replica_keys=["s1-r1", "s1-r2"], boot_secs=360.0, output_tokens=2_000_000,
                        serving_usd=1.0)
    serve_dir = project.dir / ".overbrainer" / "serves" / serve.id
    for key in serve.replica_keys:
        PodRecord(key, PodState.DELETED, pod_id=f"p{key}", cost_per_hour=0.69).save(PodRecord.path_in(serve_dir / key))
    serve.save(serve_dir / SERVE_JSON)
    price = fake_runpod.gpus[RTX4090].secure_price
    bound, boot = 2 * 3 * price, 360 / 3600 * 0.69 * 2  # 2 replicas × max_hours × the dearest pod
    objs = _json(cli(["-C", project.dir, "--json", "run", "--plan", "--max-cost", "50"], env=env))
    stages, total = [o for o in objs if o.get("provider") == "rented"], objs[-1]
    assert [o["stage"] for o in stages] == ["subtopics", "questions", "answers"], objs
    for o in stages:
        assert o["cost_max_usd"] == pytest.approx(bound)
        assert o["cost_usd"] == pytest.approx(boot + 0.5 * o["output_tokens"] / 1e6)
    assert total["complete"] and total["cost_max_usd"] == pytest.approx(bound)  # once, not once a stage
    assert total["cost_usd"] == pytest.approx(sum(o["cost_usd"] for o in stages) - 2 * boot)
    assert all(o["served_by"] == "rented" for o in stages)
    r = cli(["-C", project.dir, "run", "--plan", "--max-cost", "50"], env=env)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert all(f"at most ${bound:.4f} (the pods of provider rented, counted once in the total" in line
               for line in lines if line.split(":")[0] in ("subtopics", "questions", "answers")), r.stdout
    assert f"; at most ${bound:.4f}; max_cost_usd $50.0000 stops" in lines[-1], r.stdout
    assert {(c.method, c.path) for c in fake_runpod.calls} == {("GET", "/catalog/gpus")}  # read, never rented
    _nothing_sent(fake_provider)
