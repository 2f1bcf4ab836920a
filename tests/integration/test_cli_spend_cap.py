"""The LLM spend cap (`[pipeline] max_cost_usd`, `--max-cost USD`): a request goes out only when the
spend recorded so far plus its upper bound fits; the stage then stops cleanly (summary, exit 1,
`spend cap reached: …`). With a cap and no known price the command refuses to start (exit 2)."""

from __future__ import annotations

import re

from tests.fixtures.provider import Answer

PRICES = {"qwen/qwen3-235b": (1.0, 2.0), "deepseek/deepseek-r1": (3.0, 6.0)}


def _questions(project, fake_provider, cli, **write):
    project.write(topics=2, subtopics=2, questions=3, parent={"max_tokens": 200})
    fake_provider.models = dict(PRICES)
    r = cli(["-C", project.dir, "questions"], env=project.env)
    assert r.returncode == 0, r.stderr
    fake_provider.clear()
    project.write(topics=2, subtopics=2, questions=3, parent={"max_tokens": 200}, **write)


def test_a_cap_of_a_few_answers_stops_the_stage_within_the_cap(project, fake_provider, cli):
    # Each answer costs 50 × $3/M + 190 × $6/M = $0.00129; its bound (prompt bytes and 200
    # output tokens) about twice that: a $0.006 cap leaves room for a few, not for 12.
    _questions(project, fake_provider, cli, pipeline={"max_cost_usd": 0.006, "concurrency": 4})
    fake_provider.responder = lambda req: Answer("An answer.", usage=(50, 190))
    r = cli(["-C", project.dir, "answers"], env=project.env)
    assert r.returncode == 1, r.stderr
    written = project.records("answers")
    assert 1 <= len(written) < 12
    assert len(fake_provider.chat_requests()) == len(fake_provider.served) == len(written)  # none lost
    hist = project.history()[-1]
    assert hist["status"] == "failed" and hist["done"] == len(written)
    assert 0 < hist["cost"] <= 0.006
    assert r.stdout.startswith(f"answers: stopped after {len(written)} of 12 questions: spend cap reached; "
                               f"{len(written)} answers written; 0 skipped, 0 failed;")
    said = re.search(r"error: spend cap reached: \$(\d+\.\d{4}) of max_cost_usd \$0\.0060; the next request "
                     r"could cost up to \$0\.00\d\d\n", r.stderr)
    assert said and float(said.group(1)) == round(hist["cost"], 4), r.stderr
    # The rerun (with the option, which wins over the file) asks only for the rest.
    fake_provider.clear()
    r = cli(["-C", project.dir, "answers", "--max-cost", "1"], env=project.env)
    assert r.returncode == 0, r.stderr
    assert len(fake_provider.chat_requests()) == 12 - len(written)


def _run_answering(project, fake_provider, cli, *, out_tokens: int, max_cost: str):
    """`run --max-cost` on the priced fake, each answer billing `out_tokens` output tokens: the
    result (exit 1 expected) and the spend history records."""
    fake_provider.models = dict(PRICES)
    fake_provider.responder = lambda req: Answer("An answer.", usage=(50, out_tokens)) if "JSON array" not in \
        req.body["messages"][-1]["content"] else None
    r = cli(["-C", project.dir, "run", "--max-cost", max_cost], env=project.env, timeout=30)
    assert r.returncode == 1, r.stderr
    return r, sum(h["cost"] for h in project.history())


def test_run_under_a_cap_counts_every_stage_of_the_command(project, fake_provider, cli):
    project.write(topics=2, subtopics=2, questions=3, parent={"max_tokens": 200}, generator={"max_tokens": 300})
    r, spent = _run_answering(project, fake_provider, cli, out_tokens=190, max_cost="0.01")
    assert spent <= 0.01 and "error: spend cap reached: $" in r.stderr
    assert "of max_cost_usd $0.0100" in r.stderr
    assert r.stdout.splitlines()[-1].startswith("answers: stopped after ")  # split did not run


def test_a_cap_without_a_known_price_refuses_to_start(project, fake_provider, cli):
    _questions(project, fake_provider, cli)
    fake_provider.models = {"qwen/qwen3-235b": (1.0, 2.0)}  # the parent has no listed price
    before = (project.data / "questions.jsonl").read_bytes()
    history = project.history()
    for args, env in ((["answers", "--max-cost", "5"], {}), (["answers", "--plan", "--max-cost", "5"], {}),
                      (["run"], {"OVERBRAINER_PIPELINE__MAX_COST_USD": "5"}), (["run", "--plan", "--max-cost", "5"], {})):
        r = cli(["-C", project.dir, *args], env={**project.env, **env})
        assert r.returncode == 2, r.stderr
        assert ("error: roles.parent has no price (deepseek/deepseek-r1 on provider fake: its model listing gives "
                "none), so the spend cap (max_cost_usd, --max-cost) cannot bound its requests; set roles.parent.price "
                "= { input = …, output = … } (USD per million tokens), or price = 0 for a self-hosted server") in r.stderr
    assert fake_provider.chat_requests() == []
    assert not (project.data / "answers.jsonl").exists()
    assert (project.data / "questions.jsonl").read_bytes() == before and project.history() == history


def test_a_bad_cap_is_a_usage_error(project, cli):
    r = cli(["-C", project.dir, "answers", "--max-cost", "0"], env=project.env)
    assert r.returncode == 2 and "Invalid value for '--max-cost': 0.0 is not in the range 0<x" in r.stderr
    project.write(pipeline={"max_cost_usd": -1})
    r = cli(["-C", project.dir, "answers"], env=project.env)
    assert r.returncode == 2 and "pipeline.max_cost_usd: must be greater than 0" in r.stderr, r.stderr


def test_spend_recorded_past_the_cap_is_an_error_naming_the_cap_and_the_amount(project, fake_provider, cli):
    # A provider that ignores max_tokens: each answer bills 200,000 output tokens ($1.20) where
    # its bound held 200. What was paid for is kept; split (the next stage of `run`) does not run.
    project.write(topics=1, subtopics=1, questions=6, parent={"max_tokens": 200}, pipeline={"concurrency": 2})
    r, spent = _run_answering(project, fake_provider, cli, out_tokens=200_000, max_cost="1")
    assert spent > 1
    assert r.stderr.strip().splitlines()[-1] == (
        f"error: spend past the cap: ${spent:.4f} recorded, over max_cost_usd $1.0000; responses cost more than "
        "their requests' upper bounds (does the provider ignore max_tokens?); what was paid for is kept")
    assert r.stdout.splitlines()[-1].startswith("answers: ") and "split:" not in r.stdout
    written = project.records("answers")
    assert 1 <= len(written) < 6 and len(written) == len(fake_provider.served) - 2  # 2: subtopics, questions
    assert not (project.data / "train.jsonl").exists()
