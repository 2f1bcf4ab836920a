import json
import logging
import threading

import pytest

from overbrainer.dataset.jsonl import Appender, StagedRewrite, dumps, read_records, rewrite
from overbrainer.dataset.records import Example, Message, Meta, Question, Rejected, Subtopic
from overbrainer.errors import OverbrainerError

EXAMPLE_LINE = (
    '{"id":"q1","topic":"ownership","subtopic":"Borrowing","messages":['
    '{"role":"system","content":"sys"},{"role":"user","content":"Why?"},'
    '{"role":"assistant","content":"Because.","reasoning_content":"Let me think."}],'
    '"meta":{"model":"deepseek/deepseek-r1","input_tokens":41,"output_tokens":812,'
    '"finish_reason":"stop","reasoning_kind":"raw","excluded":null}}'
)


def sub(i=0):
    return Subtopic(f"id{i}", "t", f"name {i}")


def test_example_round_trips_byte_for_byte(tmp_path):
    path = tmp_path / "answers.jsonl"
    path.write_text(EXAMPLE_LINE + "\n")
    [ex] = read_records(path, Example)
    assert ex.messages[1].reasoning_content is None
    assert ex.messages[2].reasoning_content == "Let me think."
    assert ex.meta.excluded is None and ex.usable
    rewrite(path, [ex])
    assert path.read_text() == EXAMPLE_LINE + "\n"


def test_compact_lines_keep_non_ascii_and_field_order():
    q = Question("i", "t", "s", "Sub", "Ça coûte combien ?")
    assert dumps(q) == '{"id":"i","topic":"t","subtopic_id":"s","subtopic":"Sub","text":"Ça coûte combien ?"}'
    assert dumps(Rejected.subtopic(Subtopic("i", "t", "n"))) == '{"kind":"subtopic","id":"i","topic":"t","name":"n"}'
    assert dumps(Rejected.question(q)) == (
        '{"kind":"question","id":"i","topic":"t","subtopic_id":"s","text":"Ça coûte combien ?"}')


@pytest.mark.parametrize("line, reason", [
    ('{"id":"a","topic":"t","name":"n","extra":1}', "unknown field `extra`"),
    ('{"id":"a","topic":"t"}', "missing field `name`"),
    ('{"id":1,"topic":"t","name":"n"}', "`id` must be a string"),
    ('[1]', "not a JSON object"),
    ('{"id":"a",', "not JSON"),
])
def test_a_bad_line_names_file_and_line(tmp_path, line, reason):
    path = tmp_path / "data" / "subtopics.jsonl"
    path.parent.mkdir()
    path.write_text(dumps(sub()) + "\n\n" + line + "\n" + dumps(sub(1)) + "\n")
    with pytest.raises(OverbrainerError) as err:
        read_records(path, Subtopic)
    assert str(err.value) == f"{path}:3: invalid record: {reason}"


@pytest.mark.parametrize("mutate, reason", [
    (lambda d: d["meta"].update(excluded="bogus"), "`meta.excluded` must be one of"),
    (lambda d: d["meta"].update(input_tokens=-1), "`meta.input_tokens` must be a non-negative integer"),
    (lambda d: d["meta"].update(output_tokens=True), "`meta.output_tokens` must be a non-negative integer"),
    (lambda d: d["messages"][0].update(role="tool"), "`messages.role` must be one of"),
    (lambda d: d["messages"][0].update(name="x"), "unknown field `messages.name`"),
    (lambda d: d["meta"].update(seed=1), "unknown field `meta.seed`"),
])
def test_example_schema_is_strict(tmp_path, mutate, reason):
    d = json.loads(EXAMPLE_LINE)
    mutate(d)
    path = tmp_path / "answers.jsonl"
    path.write_text(json.dumps(d) + "\n")
    with pytest.raises(OverbrainerError, match=":1: invalid record: " + reason.replace("`", ".")):
        read_records(path, Example)


def test_exclusions_and_optional_fields_read():
    d = json.loads(EXAMPLE_LINE)
    for reason in ("truncated", "empty", "refused", "no_raw_reasoning"):
        d["meta"]["excluded"] = reason
        assert Example.from_dict(d).excluded == reason
    del d["meta"]["excluded"]
    assert Example.from_dict(d).excluded is None


def test_missing_file_is_empty(tmp_path):
    assert read_records(tmp_path / "nope.jsonl", Subtopic) == []


def test_torn_last_line_is_ignored_with_a_warning(tmp_path, caplog):
    path = tmp_path / "s.jsonl"
    path.write_bytes((dumps(sub()) + "\n" + '{"id":"x","to').encode())
    with caplog.at_level(logging.WARNING):
        assert read_records(path, Subtopic) == [sub()]
    assert "ignoring an incomplete last line" in caplog.text
    path.write_bytes((dumps(sub()) + "\n").encode() + b'{"id":"\xc3')  # cut inside a UTF-8 char
    assert read_records(path, Subtopic) == [sub()]


def test_last_line_without_newline_is_kept_when_complete(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text(dumps(sub()) + "\n" + dumps(sub(1)))
    assert read_records(path, Subtopic) == [sub(), sub(1)]


def test_appender_repairs_a_torn_tail(tmp_path):
    path = tmp_path / "d" / "s.jsonl"
    path.parent.mkdir()
    path.write_text(dumps(sub()) + "\n" + '{"id":"x","top')
    with Appender(path) as app:
        app.append(sub(1))
    assert path.read_text() == dumps(sub()) + "\n" + dumps(sub(1)) + "\n"


def test_appender_terminates_a_complete_tail(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text(dumps(sub()))
    with Appender(path) as app:
        app.append(sub(1))
    assert read_records(path, Subtopic) == [sub(), sub(1)]


def test_appender_creates_folder_and_file_and_flushes_each_line(tmp_path):
    path = tmp_path / "new" / "data" / "s.jsonl"
    app = Appender(path)
    app.append(sub())
    assert path.read_text() == dumps(sub()) + "\n"  # visible before close
    app.close()
    with pytest.raises(OverbrainerError, match="closed"):
        app.append(sub(1))


def test_appender_is_thread_safe(tmp_path):
    path = tmp_path / "s.jsonl"
    big = "x" * 20000
    with Appender(path) as app:
        def work(k):
            for i in range(50):
                app.append(Subtopic(f"{k}-{i}", "t", big))
        threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    records = read_records(path, Subtopic)
    assert len(records) == 400 and {r.id for r in records} == {f"{k}-{i}" for k in range(8) for i in range(50)}


def test_rewrite_is_atomic_and_leaves_no_temp(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text("old\n")
    rewrite(path, [sub(), sub(1)])
    assert read_records(path, Subtopic) == [sub(), sub(1)]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.jsonl"]


def test_staged_rewrite_renames_together_or_not_at_all(tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text("A\n")
    b.write_text("B\n")
    staged = StagedRewrite()
    staged.stage(a, [sub()])
    staged.stage(b, [sub(1)])
    assert (tmp_path / ".a.jsonl.staged.tmp").exists()
    assert a.read_text() == "A\n"
    staged.commit()
    assert read_records(a, Subtopic) == [sub()] and read_records(b, Subtopic) == [sub(1)]
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    failing = StagedRewrite()
    failing.stage(a, [sub(2)])
    with pytest.raises(OverbrainerError, match="cannot write"):
        failing.stage(blocker / "x.jsonl", [sub()])  # its folder is a file
    assert read_records(a, Subtopic) == [sub()]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.jsonl", "b.jsonl", "blocker"]


def test_rejected_kinds_are_strict():
    assert Rejected.from_dict({"kind": "subtopic", "id": "i", "topic": "t", "name": "n"}).name == "n"
    with pytest.raises(ValueError, match="unknown field `text`"):
        Rejected.from_dict({"kind": "subtopic", "id": "i", "topic": "t", "name": "n", "text": "x"})
    with pytest.raises(ValueError, match="`kind` must be one of"):
        Rejected.from_dict({"kind": "answer", "id": "i", "topic": "t"})


def test_reading_many_lines_keeps_every_record(tmp_path):
    # Speed is measured by scripts/, never by a timed test: this only checks the bulk path.
    path = tmp_path / "answers.jsonl"
    path.write_text((EXAMPLE_LINE + "\n") * 20_000)
    records = read_records(path, Example)
    assert len(records) == 20_000
    assert records[0] == records[-1] == Example.from_dict(json.loads(EXAMPLE_LINE))


def test_message_and_meta_build_lines():
    ex = Example("i", "t", "s", [Message("user", "q"), Message("assistant", "a", "r")],
                 Meta("m", 1, 2, "length", "summary", "truncated"))
    assert json.loads(dumps(ex))["meta"]["excluded"] == "truncated"
    assert Example.from_dict(json.loads(dumps(ex))) == ex
