"""The records of the data files (field by field: docs/data-files.md#json-lines-format), strict reading.

`from_dict` rejects unknown and missing fields, wrong types and unknown enum strings with a
`RecordError` (jsonl.py turns it into `data/x.jsonl:N: invalid record: <reason>`). `to_dict`
gives the fields in the on-disk order, so `json.dumps(..., separators=(",", ":"))` writes the
same bytes as the original tool.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# The vocabulary of an answer's meta: the records' own words, which every LLM protocol maps its
# answers onto (llm/types.py takes them from here).
# reasoning_kind: what the provider let us see of the model's thinking.
RAW = "raw"
SUMMARY = "summary"
REDACTED = "redacted"
NONE = "none"
REASONING_KINDS = (RAW, SUMMARY, REDACTED, NONE)
# finish_reason: why the answer ended.
STOP = "stop"
LENGTH = "length"
CONTENT_FILTER = "content_filter"
REFUSAL = "refusal"
OTHER = "other"
FINISH_REASONS = (STOP, LENGTH, CONTENT_FILTER, REFUSAL, OTHER)

ROLES = ("system", "user", "assistant")
# Fixed order: the split summary and `dataset stats` list reasons in this order.
EXCLUSIONS = ("truncated", "empty", "refused", "no_raw_reasoning")
REJECTED_KINDS = ("subtopic", "question")


# Fast-path checks (the common, valid case); the slow path names what is wrong.
_ROLE_SET = frozenset(ROLES)
_FINISH_SET = frozenset(FINISH_REASONS)
_KIND_SET = frozenset(REASONING_KINDS)
_EXCL_SET = frozenset(EXCLUSIONS)
_MESSAGE_KEYS = frozenset({"role", "content"})
_MESSAGE_KEYS_R = frozenset({"role", "content", "reasoning_content"})
_META_KEYS_NO_EXCLUDED = frozenset({"model", "input_tokens", "output_tokens", "finish_reason", "reasoning_kind"})
_META_KEYS = _META_KEYS_NO_EXCLUDED | {"excluded"}
_EXAMPLE_KEYS = frozenset({"id", "topic", "subtopic", "messages", "meta"})


def _has_only(d: dict, required: frozenset, allowed: frozenset) -> bool:
    """All of `required`, nothing outside `allowed` (by counting: dict keys are unique)."""
    n = len(d)
    if n < len(required) or n > len(allowed):
        return False
    hits = 0
    for key in d:
        if key not in allowed:
            return False
        hits += key in required
    return hits == len(required)


class RecordError(ValueError):
    """A JSON object that is not a valid record. The message holds field names, never values."""


def _check_keys(d: Any, required: tuple[str, ...], optional: tuple[str, ...] = (), where: str = "") -> None:
    if not isinstance(d, dict):
        raise RecordError(f"`{where[:-1]}` is not a JSON object" if where else "not a JSON object")
    for key in d:
        if key not in required and key not in optional:
            raise RecordError(f"unknown field `{where}{key}`")
    for key in required:
        if key not in d:
            raise RecordError(f"missing field `{where}{key}`")


def _str(d: dict, key: str, where: str = "") -> str:
    value = d[key]
    if not isinstance(value, str):
        raise RecordError(f"`{where}{key}` must be a string")
    return value


def _count(d: dict, key: str, where: str = "") -> int:
    value = d[key]
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise RecordError(f"`{where}{key}` must be a non-negative integer")
    return value


def _enum(d: dict, key: str, allowed: tuple[str, ...], where: str = "", nullable: bool = False):
    value = d.get(key)
    if value is None and nullable:
        return None
    if value not in allowed or not isinstance(value, str):
        raise RecordError(f"`{where}{key}` must be one of {', '.join(allowed)}")
    return value


@dataclass(slots=True)
class Subtopic:
    id: str
    topic: str
    name: str

    @classmethod
    def from_dict(cls, d: Any) -> "Subtopic":
        _check_keys(d, ("id", "topic", "name"))
        return cls(_str(d, "id"), _str(d, "topic"), _str(d, "name"))

    def to_dict(self) -> dict:
        return {"id": self.id, "topic": self.topic, "name": self.name}


@dataclass(slots=True)
class Question:
    id: str
    topic: str
    subtopic_id: str
    subtopic: str
    text: str

    @classmethod
    def from_dict(cls, d: Any) -> "Question":
        _check_keys(d, ("id", "topic", "subtopic_id", "subtopic", "text"))
        return cls(_str(d, "id"), _str(d, "topic"), _str(d, "subtopic_id"), _str(d, "subtopic"), _str(d, "text"))

    def to_dict(self) -> dict:
        return {"id": self.id, "topic": self.topic, "subtopic_id": self.subtopic_id,
                "subtopic": self.subtopic, "text": self.text}


@dataclass(slots=True)
class Message:
    role: str
    content: str
    reasoning_content: str | None = None

    @classmethod
    def from_dict(cls, d: Any, where: str = "messages.") -> "Message":
        if type(d) is dict and _has_only(d, _MESSAGE_KEYS, _MESSAGE_KEYS_R):
            role, content, reasoning = d["role"], d["content"], d.get("reasoning_content")
            if role in _ROLE_SET and type(content) is str and (reasoning is None or type(reasoning) is str):
                return cls(role, content, reasoning)
        _check_keys(d, ("role", "content"), ("reasoning_content",), where)
        reasoning = d.get("reasoning_content")
        if reasoning is not None and not isinstance(reasoning, str):
            raise RecordError(f"`{where}reasoning_content` must be a string")
        return cls(_enum(d, "role", ROLES, where), _str(d, "content", where), reasoning)

    def to_dict(self) -> dict:
        out = {"role": self.role, "content": self.content}
        if self.reasoning_content is not None:
            out["reasoning_content"] = self.reasoning_content
        return out


@dataclass(slots=True)
class Meta:
    model: str
    input_tokens: int
    output_tokens: int
    finish_reason: str
    reasoning_kind: str
    excluded: str | None = None

    @classmethod
    def from_dict(cls, d: Any, where: str = "meta.") -> "Meta":
        if type(d) is dict and _has_only(d, _META_KEYS_NO_EXCLUDED, _META_KEYS):
            model, i, o = d["model"], d["input_tokens"], d["output_tokens"]
            finish, kind, excluded = d["finish_reason"], d["reasoning_kind"], d.get("excluded")
            if (type(model) is str and type(i) is int and i >= 0 and type(o) is int and o >= 0
                    and finish in _FINISH_SET and kind in _KIND_SET and (excluded is None or excluded in _EXCL_SET)):
                return cls(model, i, o, finish, kind, excluded)
        _check_keys(d, ("model", "input_tokens", "output_tokens", "finish_reason", "reasoning_kind"),
                    ("excluded",), where)
        return cls(
            _str(d, "model", where),
            _count(d, "input_tokens", where),
            _count(d, "output_tokens", where),
            _enum(d, "finish_reason", FINISH_REASONS, where),
            _enum(d, "reasoning_kind", REASONING_KINDS, where),
            _enum(d, "excluded", EXCLUSIONS, where, nullable=True),
        )

    def to_dict(self) -> dict:
        return {"model": self.model, "input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "finish_reason": self.finish_reason, "reasoning_kind": self.reasoning_kind,
                "excluded": self.excluded}


@dataclass(slots=True)
class Example:
    """A line of answers.jsonl, train.jsonl and eval.jsonl (Axolotl chat_template format)."""

    id: str
    topic: str
    subtopic: str
    messages: list[Message] = field(default_factory=list)
    meta: Meta | None = None

    @classmethod
    def from_dict(cls, d: Any) -> "Example":
        if type(d) is dict and _has_only(d, _EXAMPLE_KEYS, _EXAMPLE_KEYS):
            i, topic, subtopic, messages = d["id"], d["topic"], d["subtopic"], d["messages"]
            if type(i) is str and type(topic) is str and type(subtopic) is str and type(messages) is list:
                return cls(i, topic, subtopic, [Message.from_dict(m) for m in messages], Meta.from_dict(d["meta"]))
        _check_keys(d, ("id", "topic", "subtopic", "messages", "meta"))
        messages = d["messages"]
        if not isinstance(messages, list):
            raise RecordError("`messages` must be an array")
        return cls(
            _str(d, "id"), _str(d, "topic"), _str(d, "subtopic"),
            [Message.from_dict(m) for m in messages],
            Meta.from_dict(d["meta"]),
        )

    def to_dict(self) -> dict:
        return {"id": self.id, "topic": self.topic, "subtopic": self.subtopic,
                "messages": [m.to_dict() for m in self.messages], "meta": self.meta.to_dict()}

    @property
    def excluded(self) -> str | None:
        return self.meta.excluded

    @property
    def usable(self) -> bool:
        return self.meta.excluded is None


def latest(examples) -> list[Example]:
    """The answer of each question: the last record with its ID (`answers --retry-excluded`
    appends a new answer that supersedes the excluded one), in the order of those records.
    Every reader of answers.jsonl takes the answers through this."""
    last: dict[str, Example] = {}
    for ex in examples:
        last.pop(ex.id, None)
        last[ex.id] = ex
    return list(last.values())


@dataclass(slots=True)
class Rejected:
    """A line of rejected.jsonl: `kind` subtopic (with `name`) or question (with `subtopic_id`, `text`)."""

    kind: str
    id: str
    topic: str
    name: str | None = None
    subtopic_id: str | None = None
    text: str | None = None

    @classmethod
    def subtopic(cls, s: Subtopic) -> "Rejected":
        return cls("subtopic", s.id, s.topic, name=s.name)

    @classmethod
    def question(cls, q: Question) -> "Rejected":
        return cls("question", q.id, q.topic, subtopic_id=q.subtopic_id, text=q.text)

    @classmethod
    def from_dict(cls, d: Any) -> "Rejected":
        if not isinstance(d, dict):
            raise RecordError("not a JSON object")
        kind = _enum(d, "kind", REJECTED_KINDS)
        if kind == "subtopic":
            _check_keys(d, ("kind", "id", "topic", "name"))
            return cls(kind, _str(d, "id"), _str(d, "topic"), name=_str(d, "name"))
        _check_keys(d, ("kind", "id", "topic", "subtopic_id", "text"))
        return cls(kind, _str(d, "id"), _str(d, "topic"), subtopic_id=_str(d, "subtopic_id"), text=_str(d, "text"))

    def to_dict(self) -> dict:
        if self.kind == "subtopic":
            return {"kind": "subtopic", "id": self.id, "topic": self.topic, "name": self.name}
        return {"kind": "question", "id": self.id, "topic": self.topic, "subtopic_id": self.subtopic_id,
                "text": self.text}
