"""Batch mode's pieces without a provider: splitting by the APIs' limits, the custom_id of an
item, the journal (atomic JSON per submission, open items, failures counted)."""

from __future__ import annotations

import json
import re

import pytest

from overbrainer.dataset.batch_journal import (
    COLLECTED,
    LOST,
    SUBMITTED,
    Journal,
    Submission,
    failures,
    in_flight,
    new_id,
)
from overbrainer.dataset.paths import ProjectPaths
from overbrainer.llm.batch_types import CUSTOM_ID, LIMITS, Limits, custom_id, result_lines, split, tag_of
from overbrainer.llm.errors import LlmError
from overbrainer.llm.dialects import batch_api


def test_split_by_count_and_bytes():
    assert split([10] * 5, Limits(2, 10_000)) == [(0, 2), (2, 4), (4, 5)]
    # 3 requests of 10 bytes + a newline each fit 33 bytes, not a fourth
    assert split([10] * 7, Limits(100, 33)) == [(0, 3), (3, 6), (6, 7)]
    assert split([50, 1, 1], Limits(100, 20)) == [(0, 1), (1, 3)]  # too big alone: its own range
    assert split([], Limits(1, 1)) == []
    env = Limits(100, 40, envelope=10)
    assert split([10, 10, 10], env) == [(0, 2), (2, 3)]


def test_the_references_limits():
    assert (LIMITS["openai"].requests, LIMITS["openai"].bytes) == (50_000, 200 * 1024 * 1024)
    assert (LIMITS["anthropic"].requests, LIMITS["anthropic"].bytes) == (100_000, 256 * 1024 * 1024)
    sizes = [1] * 120_001
    assert [b - a for a, b in split(sizes, LIMITS["openai"])] == [50_000, 50_000, 20_001]


def test_custom_id_keeps_a_question_id_and_maps_the_rest_stably():
    qid = "d410fa975affdd150daf206922cfd8cc"
    assert custom_id(qid) == qid  # a submission recorded before tags
    for odd in ("a b", "x" * 65, "é", ""):
        mapped = custom_id(odd)
        assert CUSTOM_ID.match(mapped) and mapped == custom_id(odd) and mapped != odd


def test_custom_ids_carry_their_submissions_tag():
    """Two submissions of the same question never share a custom_id (one's batch cannot pass for
    the other's), and every custom_id fits Anthropic's rule."""
    qid = "d410fa975affdd150daf206922cfd8cc"
    a, b = new_id(0), new_id(0)
    ta, tb = tag_of(a), tag_of(b)
    assert ta == tag_of(a) and ta != tb and re.fullmatch(r"b[0-9a-f]{9}", ta)
    assert custom_id(qid, ta) == f"{ta}-{qid}" != custom_id(qid, tb)
    for odd in ("a b", "x" * 64, "é"):
        mapped = custom_id(odd, ta)
        assert CUSTOM_ID.match(mapped) and mapped.startswith(ta + "-x") and mapped == custom_id(odd, ta)
    sub = _sub(1, [qid, "a b"], tag=ta, custom_ids={custom_id("a b", ta): "a b"})
    assert sub.item_of(custom_id(qid, ta)) == qid and sub.item_of(custom_id("a b", ta)) == "a b"
    assert sub.item_of(qid) is None and sub.item_of(custom_id(qid, tb)) is None  # not sent by it


def test_a_journal_file_from_before_tags_still_reads(tmp_path):
    journal = Journal(ProjectPaths(tmp_path).batches)
    journal.folder.mkdir(parents=True)
    old = {"id": "s20260101T000000-abcdef", "stage": "answers", "api": "anthropic", "provider": "p", "model": "m",
           "created_at": 1000.0, "items": ["q1", "q2"], "state": "submitting", "round": 0,
           "custom_ids": {"xabc": "q 2"}, "reserved_usd": None, "file_id": None, "batch_id": None, "status": None,
           "cancel_requested": False, "unresolved": [], "errors": {}, "cost": None}
    (journal.folder / f"{old['id']}.json").write_text(json.dumps(old))
    (sub,) = journal.all()
    assert sub.tag == "" and sub.item_of("q1") == "q1" and sub.item_of("xabc") == "q 2"


def test_result_lines_are_parsed_as_they_come():
    """The parser takes any iterator of lines and hands each one out before reading the next: a
    results file is never needed whole."""
    read = []

    def lines():
        for i in range(3):
            read.append(i)
            yield json.dumps({"custom_id": f"c{i}", "result": {}}).encode() + b"\n"
        raise AssertionError("read past what was asked")

    it = result_lines(lines())
    assert next(it)[0] == "c0" and read == [0]
    assert next(it)[0] == "c1" and read == [0, 1]
    for bad, why in ((b"{not json\n", "not JSON"), (b'{"result": {}}\n', "without custom_id"),
                     (b'["c0"]\n', "without custom_id")):
        with pytest.raises(LlmError, match=why):
            list(result_lines(iter([b"\n", bad])))


def test_which_providers_have_a_batch_api():
    assert batch_api("openai", "openai") == "openai"
    assert batch_api("anthropic", None) == "anthropic"
    for dialect in ("openrouter", "llamacpp", "ollama", "vllm", "generic"):
        assert batch_api("openai", dialect) is None


def _sub(i, items, **kw):
    return Submission(id=f"s2026-{i}", stage="answers", api="openai", provider="p", model="m",
                      created_at=1000.0 + i, items=items, **kw)


def test_journal_round_trip_and_order(tmp_path):
    journal = Journal(ProjectPaths(tmp_path).batches)
    assert journal.all() == []
    b = _sub(2, ["c"], custom_ids={"xabc": "c d"})
    a = _sub(1, ["a", "b"], reserved_usd=0.25)
    journal.write(b)
    journal.write(a)
    assert [s.id for s in journal.all()] == [a.id, b.id]
    a.batch_id, a.state = "batch_1", SUBMITTED
    journal.write(a)
    doc = json.loads((tmp_path / ".overbrainer" / "batches" / f"{a.id}.json").read_text())
    assert doc["state"] == "submitted" and doc["batch_id"] == "batch_1" and doc["reserved_usd"] == 0.25
    assert journal.get(b.id).item_of("xabc") == "c d" and journal.get(b.id).item_of("zz") == "zz"
    assert not list((tmp_path / ".overbrainer" / "batches").glob(".*"))  # no temp file left


def test_a_torn_file_is_skipped(tmp_path, caplog):
    journal = Journal(ProjectPaths(tmp_path).batches)
    journal.write(_sub(1, ["a"]))
    (journal.folder / "s2026-9.json").write_text("{not json")
    assert [s.id for s in journal.all()] == ["s2026-1"]
    assert "cannot read" in caplog.text


def test_open_items_and_failures():
    subs = [_sub(1, ["a", "b"], state=SUBMITTED), _sub(2, ["c"], state=COLLECTED, unresolved=["c"]),
            _sub(3, ["c", "d"], state=COLLECTED, unresolved=["c", "d"], cancel_requested=True),
            _sub(4, ["e"], state=LOST), _sub(5, ["c"], state=COLLECTED, unresolved=["c"])]
    assert in_flight(subs) == {"a", "b"}
    assert failures(subs) == {"c": 2}  # a cancel asked for is not a failure


def test_new_ids_are_distinct_and_dated():
    ids = {new_id(0) for _ in range(50)}
    assert len(ids) == 50 and all(i.startswith("s19700101T000000-") for i in ids)
