"""The kept share (dataset/accounting/history.kept_share): of every output token paid for, those
of the answers now in train.jsonl and eval.jsonl, to the token, in `run`'s summary, `run --plan`,
`history` and history.jsonl's split lines."""

from __future__ import annotations

import json

from tests.fixtures.provider import Answer

PRICES = {"qwen/qwen3-235b": (1.0, 2.0), "deepseek/deepseek-r1": (3.0, 6.0)}


def _responder(req):
    """Lists: the default answer; questions: 300 output tokens, but every question that mentions
    `1` is cut short at 500 tokens (excluded, paid, never kept)."""
    prompt = req.body["messages"][-1]["content"]
    if "JSON array" in prompt:
        return None
    if "1" in prompt.splitlines()[0][-3:]:
        return Answer("Cut", finish="length", usage=(40, 500))
    return Answer("An answer.", usage=(40, 300))


def _kept_in_files(project) -> int:
    return sum(json.loads(line)["meta"]["output_tokens"]
               for name in ("train", "eval") for line in (project.data / f"{name}.jsonl").read_text().splitlines())


def test_run_plan_and_history_report_the_kept_share_to_the_token(project, fake_provider, cli):
    project.write(topics=2, subtopics=2, questions=3)
    fake_provider.models = dict(PRICES)
    fake_provider.responder = _responder
    r = cli(["-C", project.dir, "run"], env=project.env)
    assert r.returncode == 0, r.stderr
    history = project.history()
    answers = [h for h in history if h["stage"] == "answers"][0]
    excluded = answers["excluded"]
    assert 0 < excluded < 12
    assert answers["output_tokens"] == 300 * (12 - excluded) + 500 * excluded  # excluded ones are paid
    paid = sum(h["output_tokens"] for h in history)
    kept = _kept_in_files(project)
    assert kept == 300 * (12 - excluded) and history[-1]["split"]["kept_output_tokens"] == kept
    share = f"{kept} of {paid} paid output tokens ({kept / paid:.1%}) are in train/eval examples"
    assert r.stdout.splitlines()[-1] == f"kept: {share}"

    # The rerun (nothing to do: the split's saved counts) says the same; so do the plan and history.
    r = cli(["-C", project.dir, "--json", "run"], env=project.env)
    assert json.loads(r.stdout.splitlines()[-1]) == {"stage": "kept", "kept_output_tokens": kept,
                                                      "paid_output_tokens": paid,
                                                      "kept_share": round(kept / paid, 6)}
    plan = cli(["-C", project.dir, "run", "--plan"], env=project.env)
    assert f"split: no request; so far {share}" in plan.stdout.splitlines()
    shown = cli(["-C", project.dir, "history"], env=project.env)
    assert shown.stdout.splitlines()[-1] == f"kept       {share}"
    data = json.loads(cli(["-C", project.dir, "--json", "history"], env=project.env).stdout)
    assert data["kept"]["kept_output_tokens"] == kept and data["kept"]["paid_output_tokens"] == paid
