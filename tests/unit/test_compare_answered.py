"""A compare where the child answered no question fails; one where it could not answer some says
how many (in compare.md's headline and on stderr)."""

from __future__ import annotations

import logging

import pytest

from overbrainer.compare import report, stats
from overbrainer.compare.flow import check_answered
from overbrainer.errors import OverbrainerError

RUN, CID = "demo_20261201-101010", "compare_20261203-120000"
SETUP = {"run": RUN, "compare": CID, "seed": 42,
         "questions": [{"id": f"q{i}", "messages": [{"role": "user", "content": f"Q{i}?"}], "parent": "P"}
                       for i in range(3)]}
BAD = "HTTP 400 from llama-server: unordered_map::at"


def answer(qid: str) -> dict:
    return {"id": qid, "answer": "A", "finish": "stop", "input_tokens": 3, "output_tokens": 5, "seconds": 1.0,
            "first_token_seconds": 0.1, "tokens_per_second": 5.5}


def test_no_question_answered_fails_with_the_first_error_and_the_server_log():
    answers = {f"q{i}": {"id": f"q{i}", "error": BAD if i else "first: " + BAD} for i in range(3)}
    with pytest.raises(OverbrainerError) as e:
        check_answered(SETUP, answers)
    assert str(e.value) == (f"compare {CID} failed: the child answered no question of 3 (the first error: "
                            f"first: {BAD}); its server log is runs/{RUN}/compares/{CID}/server.log")
    with pytest.raises(OverbrainerError, match="the first error: no answer"):
        check_answered(SETUP, {})  # an empty file answered nothing either


def test_some_answered_warns_how_many_could_not_and_the_headline_says_it(caplog):
    answers = {"q0": answer("q0"), "q1": {"id": "q1", "error": BAD}, "q2": answer("q2")}
    with caplog.at_level(logging.WARNING):
        check_answered(SETUP, answers)
    assert "the child could not answer 1 of 3 questions" in caplog.text
    verdicts = [{"id": "q0", "verdict": "win"}, {"id": "q1", "verdict": "error"}, {"id": "q2", "verdict": "tie"}]
    summary = stats.summarize([v["verdict"] for v in verdicts], [answers["q0"], answers["q2"]])
    costs = stats.costs([(None, None)] * 3, summary["mean_seconds"], price_in=None, price_out=None,
                        child_per_hour=None)
    doc = report.build(SETUP, answers, verdicts, summary, costs, judge="j", judge_is_parent=True,
                       verdicts_file="v.jsonl", hardware=None, created="2026-12-03T12:00:00Z")
    lines = report.markdown(doc).splitlines()
    assert lines[:3] == [f"# Compare of run {RUN}", "",
                         "**The child could not answer 1 of 3 questions** (counted as losses; see server.log)."]


def test_every_question_answered_is_silent_and_the_headline_plain(caplog):
    answers = {f"q{i}": answer(f"q{i}") for i in range(3)}
    with caplog.at_level(logging.WARNING):
        check_answered(SETUP, answers)
    assert caplog.text == ""

