"""The gate's rule checks, its JSON Schema check (jsonschema), its language check, its [gate] configuration,
its verdict records and the grader's reply parsing."""

from __future__ import annotations

import json
import sys
import tomllib

import pytest

from overbrainer.config.load import parse_config
from overbrainer.config.model import Gate
from overbrainer.dataset.quality.gate_rules import Rules, parse_answer
from overbrainer.dataset.quality.json_schema import Schema, schema_problems
from overbrainer.dataset.quality.language import language_problem
from overbrainer.dataset.quality.verdicts import Verdict, answer_digest, gate_drops
from overbrainer.dataset.records import Example, Message, Meta, RecordError
from overbrainer.errors import ConfigError
from overbrainer.pipeline.early_stop import EarlyStop
from overbrainer.pipeline.gate import parse_grade
from tests.unit.test_config_load import BASE

EN = ("The borrow checker rejects the program because the reference outlives the value it points to, "
      "and this is exactly what the compiler is there to prevent when you write code with lifetimes.")
DE = ("Der Borrow-Checker lehnt das Programm ab, weil die Referenz länger lebt als der Wert, auf den sie "
      "zeigt, und genau das soll der Compiler verhindern, wenn man Code mit Lebensdauern schreibt.")
FR = ("Le vérificateur d'emprunts rejette le programme parce que la référence vit plus longtemps que la "
      "valeur qu'elle désigne, et c'est ce que le compilateur doit empêcher dans le code.")
RU = ("Проверка заимствований отвергает программу, потому что ссылка живёт дольше значения, на которое "
      "она указывает, и именно это компилятор должен предотвращать.")


def _example(text: str, output_tokens: int = 100) -> Example:
    return Example("a" * 32, "t", "s", [Message("user", "q?"), Message("assistant", text)],
                   Meta("m", 10, output_tokens, "stop", "none"))


@pytest.mark.parametrize("text,language,ok", [
    (EN, "en", True), (DE, "en", False), (DE, "de", True), (FR, "fr", True), (FR, "en", False),
    (RU, "ru", True), (EN, "ru", False), (RU, "en", False), ("Too short to tell.", "de", True),
])
def test_the_language_check(text, language, ok):
    assert (language_problem(text, language) is None) is ok


def test_japanese_needs_kana_and_chinese_does_not():
    zh = "借用检查器拒绝该程序，因为引用的生命周期比它指向的值更长，这正是编译器要防止的情况，编写带生命周期的代码时尤其如此。"
    ja = "借用チェッカーはこのプログラムを拒否します。参照が指す値よりも長く生きるからで、まさにコンパイラが防ぐべきことです。"
    assert language_problem(zh, "zh") is None and language_problem(ja, "ja") is None
    assert language_problem(zh, "ja") == "no kana: not ja"


def test_the_rules_in_their_order():
    rules = Rules(Gate(min_chars=20, max_tokens=500, language="en", format_regex=r"\.$"))
    assert rules.active and not Rules(Gate()).active
    assert rules.check(_example(EN)) is None
    assert rules.check(_example("Short.")) == ("length", "6 characters, fewer than 20")
    assert rules.check(_example(EN, output_tokens=900)) == ("length", "900 output tokens, more than 500")
    assert rules.check(_example(DE))[0] == "language"
    assert rules.check(_example(EN[:-1] + "!")) == ("format", "does not match format_regex")


def test_the_json_schema_check():
    schema = {"type": "object", "required": ["answer", "steps"], "additionalProperties": False,
              "properties": {"answer": {"type": "string", "minLength": 2},
                             "steps": {"type": "array", "items": {"type": "integer", "minimum": 1}, "maxItems": 3}}}
    assert schema_problems(schema) == []
    violation = Schema(schema).violation
    assert violation({"answer": "yes", "steps": [1, 2]}) is None
    assert violation({"answer": "yes"}) == "$: missing property `steps`"
    assert violation({"answer": "y", "steps": []}) == "$.answer: fewer than 2 characters"
    assert violation({"answer": "yes", "steps": [1, 0]}) == "$.steps[1]: below the minimum 1"
    assert violation({"answer": "yes", "steps": [1, 2, 3, 4]}) == "$.steps: more than 3 items"
    assert violation({"answer": "yes", "steps": [], "x": 1}) == "$: property `x` is not allowed"
    assert violation([]) == "$: not of type object"
    assert violation(["x" * 5000]) == "$: not of type object"  # never the answer itself
    assert parse_answer('```json\n{"a": 1}\n```') == {"a": 1}
    rules = Rules(Gate(json_schema=schema))
    assert rules.check(_example("not json")) == ("format", "not JSON")
    assert rules.check(_example('{"answer": "ok", "steps": [1]}')) is None
    assert rules.check(_example('{"answer": "ok", "steps": [0]}')) == ("format", "json_schema: $.steps[0]: below the minimum 1")


def test_the_whole_of_json_schema_is_checked():
    """Keywords beyond the subset the gate checked by itself before jsonschema: each one counts."""
    schema = {"$defs": {"step": {"type": "string", "pattern": "^[a-z]+$"}},
              "type": "object", "required": ["kind"],
              "properties": {"kind": {"enum": ["a", "b"]}, "steps": {"type": "array", "items": {"$ref": "#/$defs/step"},
                                                                     "uniqueItems": True},
                             "n": {"type": "integer", "multipleOf": 3, "exclusiveMaximum": 10},
                             "when": {"type": "string", "format": "date"}},
              "oneOf": [{"required": ["steps"]}, {"required": ["n"]}]}
    assert schema_problems(schema) == []
    violation = Schema(schema).violation
    assert violation({"kind": "a", "steps": ["x", "y"]}) is None
    assert violation({"kind": "a", "steps": ["x", "Y"]}) == "$.steps[1]: does not match the pattern"
    assert violation({"kind": "a", "steps": ["x", "x"]}) == "$.steps: ['x', 'x'] has non-unique elements"
    assert violation({"kind": "a", "n": 7}) == "$.n: 7 is not a multiple of 3"
    assert violation({"kind": "a", "n": 12}) == "$.n: not below 10"
    assert violation({"kind": "a", "n": 3, "when": "2026-13-45"}) == "$.when: '2026-13-45' is not a 'date'"
    assert violation({"kind": "a", "steps": [], "n": 3}).startswith("$: ")  # both: oneOf fails
    assert violation({"kind": "c", "n": 3}) == "$.kind: not one of the enum's values"


@pytest.mark.parametrize("schema, problems", [
    ({"type": "object", "oneOf": []}, ["oneOf: [] should be non-empty"]),
    ({"properties": {"a": {"type": "text"}}}, ["properties.a.type: 'text' is not valid under any of the given schemas"]),
    ({"pattern": "(("}, ["pattern: '((' is not a 'regex'"]),
    ({"type": "object", "requried": ["a"]}, ["unknown keyword 'requried'"]),
    ({"properties": {"a": {"type": "string", "minLenght": 2}, "b": {"x": 1, "y": 2}}},
     ["properties.a: unknown keyword 'minLenght'", "properties.b: unknown keyword 'x', 'y'"]),
    ({"$schema": "http://json-schema.org/draft-07/schema#", "type": "strin"},
     ["type: 'strin' is not valid under any of the given schemas"]),
    ([], ["expected a table"]),
])
def test_a_schema_is_checked_against_its_draft_and_for_unknown_keywords(schema, problems):
    assert schema_problems(schema) == problems


def test_a_schema_without_jsonschema_installed_asks_for_the_gate_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "jsonschema", None)  # as if it were not installed
    with pytest.raises(ConfigError) as e:
        parse_config(tomllib.loads(BASE + '\n[gate]\njson_schema = { type = "object" }\n'), {})
    assert e.value.exit_code == 2
    assert e.value.problems == ["gate.json_schema: needs jsonschema: pip install 'overbrainer[gate]'"]
    with pytest.raises(ConfigError, match=r"^\[gate\] json_schema needs jsonschema: pip install 'overbrainer\[gate\]'$"):
        Rules(Gate(json_schema={"type": "object"}))
    assert parse_config(tomllib.loads(BASE), {}).gate == Gate()  # no schema: no jsonschema needed


GATE = """
[gate]
language = "en"
min_chars = 10
max_chars = 5000
format_regex = "^##"
json_schema = { type = "object", required = ["answer"] }
grader_threshold = 6.5
stop_after = 20
stop_share = 0.4
"""


def test_the_gate_section_and_its_environment_overrides():
    c = parse_config(tomllib.loads(BASE + GATE), {"OVERBRAINER_GATE__LANGUAGE": "de",
                                                  "OVERBRAINER_GATE__STOP_AFTER": "0"})
    g = c.gate
    assert (g.language, g.min_chars, g.max_chars, g.format_regex, g.grader_threshold, g.stop_after, g.stop_share) == (
        "de", 10, 5000, "^##", 6.5, 0, 0.4)
    assert g.json_schema == {"type": "object", "required": ["answer"]}
    assert parse_config(tomllib.loads(BASE), {}).gate == Gate() and Gate().stop_after == 50
    c = parse_config(tomllib.loads(BASE.replace(
        'parent = {', 'grader = { provider = "local", model = "g" }\nparent = {')), {})
    assert c.roles.grader.model == "g" and c.roles.all()[-1][0] == "grader"


@pytest.mark.parametrize("line,problem", [
    ('language = "xx"', "gate.language: expected one of en, de"),
    ('format_regex = "(("', "gate.format_regex: not a valid regular expression"),
    ('json_schema = { type = "object", anyOf = [] }', "gate.json_schema: anyOf: [] should be non-empty"),
    ('json_schema = { type = "object", requried = [] }', "gate.json_schema: unknown keyword 'requried'"),
    ("min_chars = 10\nmax_chars = 5", "gate.min_chars: must not be greater than max_chars"),
    ("stop_share = 1", "gate.stop_share: must be in [0, 1)"),
    ("grader_threshold = 11", "gate.grader_threshold: must be in [0, 10]"),
    ("min_words = 3", "unknown field `gate.min_words`"),
])
def test_a_bad_gate_is_a_configuration_error_naming_the_key(line, problem):
    with pytest.raises(ConfigError) as e:
        parse_config(tomllib.loads(BASE + "\n[gate]\n" + line + "\n"), {})
    assert any(p.startswith(problem) for p in e.value.problems), e.value.problems


def test_verdict_records_are_strict_and_the_latest_current_one_counts(tmp_path):
    v = Verdict("a" * 32, "d1", "rules", "drop", "language", "looks like de", None, "s1")
    line = json.dumps(v.to_dict(), separators=(",", ":"))
    assert list(json.loads(line)) == ["id", "answer", "check", "verdict", "reason", "detail", "score", "settings",
                                      "model", "input_tokens", "output_tokens", "cost"]
    assert Verdict.from_dict(json.loads(line)) == v
    for bad in ({**v.to_dict(), "reason": None}, {**v.to_dict(), "check": "x"}, {**v.to_dict(), "extra": 1}):
        with pytest.raises(RecordError):
            Verdict.from_dict(bad)
    path = tmp_path / "gate.jsonl"
    keep = Verdict("b" * 32, "d2", "grader", "keep", None, None, 8, "g1")
    drop = Verdict("b" * 32, "d2", "grader", "drop", "grader", "score 2", 2, "g0")  # older settings
    path.write_text("\n".join(json.dumps(x.to_dict()) for x in (v, keep, drop)) + "\n")
    assert len(gate_drops(path, {"rules": "s1", "grader": "g1"})) == 1
    assert gate_drops(path, {"grader": "g0"}) == {int("b" * 32, 16): ("d2", "grader")}
    assert gate_drops(path, {}) == {}
    assert answer_digest(_example("x")) != answer_digest(_example("y"))


@pytest.mark.parametrize("reply,score", [
    ('{"score": 8, "reason": "fine"}', 8.0), ('Sure. {"score": 4.5, "reason": "meh"} ok', 4.5),
    ('{"score": "7"} trailing {', 7.0), ("no score at all", None), ('{"score": 12}', None),
])
def test_the_grader_reply(reply, score):
    assert parse_grade(reply)[0] == score


def test_the_early_stop_decides_once_the_share_of_the_first_n_is_passed():
    watch = EarlyStop("answers", Gate(stop_after=4, stop_share=0.5))
    assert [watch.note(r) for r in ("empty", None, "language")] == [None, None, None]
    stop = watch.note("empty")
    assert stop is not None and stop.reason == "3 of the first 4 answers rejected"
    assert watch.note("empty") is None  # once
    off = EarlyStop("gate", Gate(stop_after=0))
    assert all(off.note("empty") is None for _ in range(100))
