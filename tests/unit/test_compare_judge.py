"""The reasoning strip, the judge's verdict parsing, order and verdict-file key."""

from __future__ import annotations

import xxhash

from overbrainer.compare.judge import child_first, combine, for_child, parse_verdict, verdicts_key
from overbrainer.compare.plan import question_of
from overbrainer.compare.answers import strip_reasoning


def test_strip_reasoning():
    assert strip_reasoning("<think>hmm</think>Answer") == "Answer"
    assert strip_reasoning("Use  <think>x</think> the map") == "Use the map"  # the doubled space collapsed
    assert strip_reasoning("A <think>x</think> B <think>y</think> C") == "A B C"
    assert strip_reasoning("Answer <think>never closed") == "Answer"
    assert strip_reasoning("opened by the template</think>\n\nAnswer") == "Answer"
    assert strip_reasoning("Code:\n<think>x</think>\n    indented()\n") == "Code:\n\n    indented()"
    assert strip_reasoning(None) == "" and strip_reasoning("  plain  ") == "plain"


def test_parse_verdict():
    assert parse_verdict('Sure: {"verdict": " a ", "reason": " A is right. "} done') == ("A", "A is right.")
    assert parse_verdict('{"verdict": "TIE"}') == ("tie", None)
    assert parse_verdict('<think>{"verdict": "A"}</think>{"verdict": "B", "reason": ""}') == ("B", None)
    for bad in ("A is better", '{"verdict": "C"}', '{"verdict": 1}', "{not json}", "", None, "[1]"):
        assert parse_verdict(bad) is None, bad


def test_mapping_and_both_orders():
    assert for_child("A", True) == "win" and for_child("B", False) == "win"
    assert for_child("B", True) == "loss" and for_child("A", False) == "loss"
    assert for_child("tie", True) == "tie"
    win = {"id": "q", "verdict": "win", "child_first": True, "reason": "r1"}
    loss = {"id": "q", "verdict": "loss", "child_first": False, "reason": "r2"}
    unparsed = {"id": "q", "verdict": "unparsed", "child_first": False}
    assert combine(win, dict(win, child_first=False)) == (win, False)
    line, flipped = combine(win, loss)
    assert flipped is True and line["verdict"] == "tie" and "r1 / r2" in line["reason"]
    assert combine(win, unparsed) == (win, None)
    assert combine(None, None) == (None, None)


def test_order_and_key_hash_exactly_what_is_documented():
    ids = [f"q{i:03d}" for i in range(200)]
    firsts = [child_first(i, 42) for i in ids]
    assert firsts == [xxhash.xxh3_64_intdigest(i.encode(), 42) & 1 == 1 for i in ids]
    assert 70 < sum(firsts) < 130  # about half each way
    assert firsts != [child_first(i, 43) for i in ids]  # the seed matters
    hashed = xxhash.xxh3_64_intdigest(b"fake\x1fm\x1fT")  # provider, model, template source; 0x1f between
    assert verdicts_key("fake", "m", "T") == format(hashed, "016x")
    assert len(verdicts_key("fake", "m", "T")) == 16 and verdicts_key("fake", "m", "T2") != verdicts_key("fake", "m", "T")


def test_usable_eval_records():
    record = {"id": "q1", "topic": "t", "messages": [
        {"role": "system", "content": "S"}, {"role": "user", "content": "Q?"},
        {"role": "assistant", "content": "<think>r</think>first"}, {"role": "user", "content": "more"},
        {"role": "assistant", "content": "last <think>r"}], "meta": {"input_tokens": 5, "output_tokens": 7}}
    q = question_of(record)
    assert q["messages"] == [{"role": "system", "content": "S"}, {"role": "user", "content": "Q?"}]
    assert q["parent"] == "last" and (q["parent_input_tokens"], q["parent_output_tokens"]) == (5, 7)
    assert question_of({"id": "q", "messages": [{"role": "user", "content": "Q?"}]}) is None
    assert question_of({"id": "q", "messages": [{"role": "system", "content": "S"},
                                                {"role": "assistant", "content": "A"}]}) is None
