"""Request bodies, answer parsing and reasoning extraction of both protocols (pure functions)."""


import pytest

from overbrainer.config.model import Role
from overbrainer.llm import anthropic_protocol as anth
from overbrainer.llm import openai_protocol as oai
from overbrainer.llm.errors import LlmError
from overbrainer.llm.reasoning import from_details, split_think
from overbrainer.llm.types import ChatRequest
from overbrainer.support.usage import Usage


def role(**kw):
    base = dict(model="m", reasoning=False, max_tokens=100, temperature=None, reasoning_effort=None,
                thinking_budget=None)
    base.update(kw)
    return Role("p", **base)


# --- openai bodies ------------------------------------------------------------------------------

def test_openai_minimal_body():
    body = oai.chat_body(role(), ChatRequest("hi"), 100, False)
    assert body == {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 100}


def test_openai_full_body():
    body = oai.chat_body(role(reasoning=True, temperature=0.3, reasoning_effort="high"),
                         ChatRequest("hi", system="sys"), 50, True)
    assert body["messages"] == [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"}]
    assert body["temperature"] == 0.3
    assert body["reasoning"] == {"effort": "high"}
    assert body["response_format"] == oai.RESPONSE_FORMAT
    assert body["response_format"]["json_schema"]["schema"]["required"] == ["items"]
    assert "reasoning_effort" not in body


def test_openai_reasoning_defaults_to_medium_and_none_effort():
    body = oai.chat_body(role(reasoning=True), ChatRequest("q"), 1, False)
    assert body["reasoning"] == {"effort": "medium"}
    body = oai.chat_body(role(reasoning=True, reasoning_effort="none"), ChatRequest("q"), 1, False)
    assert body["reasoning_effort"] == "none" and "reasoning" not in body


# --- anthropic bodies ---------------------------------------------------------------------------

def test_anthropic_bodies():
    plain = anth.chat_body(role(temperature=1.0), ChatRequest("hi", system="s"), 10, True)
    assert plain == {"model": "m", "max_tokens": 10, "system": "s",
                     "messages": [{"role": "user", "content": "hi"}], "temperature": 1.0}
    adaptive = anth.chat_body(role(reasoning=True), ChatRequest("hi"), 10, False)
    assert adaptive["thinking"] == {"type": "adaptive"} and "output_config" not in adaptive
    effort = anth.chat_body(role(reasoning=True, reasoning_effort="low"), ChatRequest("hi"), 10, False)
    assert effort["output_config"] == {"effort": "low"}
    budget = anth.chat_body(role(reasoning=True, thinking_budget=2048, reasoning_effort="low"),
                            ChatRequest("hi"), 4096, False)
    assert budget["thinking"] == {"type": "enabled", "budget_tokens": 2048} and "output_config" not in budget
    assert anth.headers("k") == {"anthropic-version": "2023-06-01", "x-api-key": "k"}
    assert anth.headers(None) == {"anthropic-version": "2023-06-01"}
    assert oai.headers(None) == {} and oai.headers("k") == {"Authorization": "Bearer k"}


# --- openai parsing -----------------------------------------------------------------------------

TEXT, SUMMARY, ENCRYPTED = "reasoning.text", "reasoning.summary", "reasoning.encrypted"


def doc(message, finish="stop", usage=None):
    d = {"choices": [{"message": message, "finish_reason": finish}]}
    if usage is not None:
        d["usage"] = usage
    return d


@pytest.mark.parametrize("wire, expected", [("stop", "stop"), ("length", "length"),
                                            ("content_filter", "content_filter"), ("tool_calls", "other"),
                                            (None, "other")])
def test_openai_finish_map(wire, expected):
    assert oai.parse_chat(doc({"content": "x"}, wire)).finish_reason == expected


def test_openai_refusal_usage_and_null_content():
    usage = {"prompt_tokens": 3, "completion_tokens": 4}
    r = oai.parse_chat(doc({"content": None, "refusal": "no"}, usage=usage))
    assert (r.content, r.finish_reason, r.usage) == ("", "refusal", Usage(3, 4))
    assert oai.parse_chat(doc({"content": "x", "refusal": "  "})).finish_reason == "stop"
    assert oai.parse_chat(doc({"content": "x"})).usage == Usage(0, 0)


@pytest.mark.parametrize(
    "bad, why",
    [({}, "no choices"), ({"choices": []}, "no choices"), ([], "not a JSON object"),
     (doc({"content": 5}), "not a string")],
)
def test_openai_invalid(bad, why):
    with pytest.raises(LlmError, match=why) as e:
        oai.parse_chat(bad)
    assert not e.value.fatal and not e.value.retryable


@pytest.mark.parametrize(
    "message, expected",
    [
        ({"content": "a", "reasoning": "r"}, ("a", "r", "raw")),
        ({"content": "a", "reasoning": " ", "reasoning_content": "rc"}, ("a", "rc", "raw")),
        ({"content": "a", "reasoning": "r",
          "reasoning_details": [{"type": "reasoning.summary", "summary": "s"}]}, ("a", "r", "summary")),
        ({"content": "a", "reasoning_details": [{"type": TEXT, "text": "t1"}, {"type": TEXT, "text": "t2"}]},
         ("a", "t1\nt2", "raw")),
        ({"content": "a", "reasoning_details": [{"type": SUMMARY, "summary": "s"}]}, ("a", "s", "summary")),
        ({"content": "a", "reasoning_details": [{"type": ENCRYPTED, "data": "x"}]}, ("a", None, "redacted")),
        ({"content": "a", "reasoning_details": [{"type": TEXT, "text": ""}]}, ("a", None, "redacted")),
        ({"content": "a", "reasoning_details": [{"type": "weird", "text": "t"}]}, ("a", None, "none")),
        ({"content": "<think>\n deep \n</think>\n\n answer "}, ("answer", "deep", "raw")),
        ({"content": "no tag thought</think>answer"}, ("answer", "no tag thought", "raw")),
        ({"content": "<think></think>\nanswer"}, ("answer", None, "none")),
        ({"content": "plain"}, ("plain", None, "none")),
    ],
)
def test_openai_reasoning_extraction(message, expected):
    r = oai.parse_chat(doc(message))
    assert (r.content, r.reasoning, r.reasoning_kind) == expected


def test_details_and_think_helpers():
    assert from_details(None) == (None, None)
    both = [{"type": TEXT, "text": "t"}, {"type": SUMMARY, "summary": "s"}]
    assert from_details(both) == ("t", "raw")
    assert split_think("x") == ("x", None, "none")


def test_embeddings_parse_sorts_and_counts():
    d = {"data": [{"index": 1, "embedding": [2, 2]}, {"index": 0, "embedding": [1.5, 1]}]}
    assert oai.parse_embeddings(d, 2) == [[1.5, 1.0], [2.0, 2.0]]
    with pytest.raises(LlmError, match="invalid response: 2 embeddings for 3 inputs"):
        oai.parse_embeddings(d, 3)
    assert oai.embed_body("e", ["a"]) == {"model": "e", "input": ["a"], "encoding_format": "float"}


# --- anthropic parsing --------------------------------------------------------------------------

@pytest.mark.parametrize(
    "wire, expected",
    [("end_turn", "stop"), ("stop_sequence", "stop"), ("max_tokens", "length"), ("refusal", "refusal"),
     ("tool_use", "other"), (None, "other")],
)
def test_anthropic_finish_map(wire, expected):
    r = anth.parse_chat({"content": [{"type": "text", "text": "x"}], "stop_reason": wire})
    assert r.finish_reason == expected


@pytest.mark.parametrize(
    "blocks, expected",
    [
        ([{"type": "thinking", "thinking": "t1"}, {"type": "thinking", "thinking": "t2"},
          {"type": "text", "text": "a"}, {"type": "text", "text": "b"}], ("ab", "t1\nt2", "summary")),
        ([{"type": "thinking", "thinking": ""}, {"type": "text", "text": "a"}], ("a", None, "redacted")),
        ([{"type": "redacted_thinking", "data": "x"}, {"type": "text", "text": "a"}],
         ("a", None, "redacted")),
        ([{"type": "tool_use", "id": "x"}, {"type": "text", "text": "a"}], ("a", None, "none")),
    ],
)
def test_anthropic_extraction(blocks, expected):
    usage = {"input_tokens": 5, "output_tokens": 6}
    r = anth.parse_chat({"content": blocks, "stop_reason": "end_turn", "usage": usage})
    assert (r.content, r.reasoning, r.reasoning_kind) == expected
    assert r.usage == Usage(5, 6)


def test_anthropic_invalid():
    with pytest.raises(LlmError, match="invalid response"):
        anth.parse_chat({"type": "message"})
