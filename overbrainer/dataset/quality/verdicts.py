"""The quality gate's verdicts (data/gate.jsonl, docs/data-files.md#gatejsonl): one line per
verdict on one answer, appended as it is reached, never rewritten.

A verdict names the answer it judged by its ID and `answer`, a digest of the answer's text (a
new answer to the same question, `answers --retry-excluded`, is judged anew), its `check`
(`rules`: the free rule checks; `grader`: the LLM grader) and `settings`, a digest of what
decides it (the rules' configuration; the rubric, grader model and threshold). Of the verdicts
of one answer and check, the latest one whose settings are the current ones counts: an answer
is gated (left out of the split, kept in answers.jsonl) when one of those says `drop`.

Memory: readers keep per gated answer its ID, digest and reason (`gate_drops`), and the gate a
64-bit key per verdict (`judged`); never a verdict's text.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Mapping

import xxhash

from ..ids import packed
from ..jsonl import LineReader, iter_records
from ..records import Example, RecordError

CHECKS = ("rules", "grader")
VERDICTS = ("keep", "drop")
# Fixed order: the split summary and `dataset stats` list the gate's reasons in this order.
GATE_REASONS = ("language", "length", "format", "grader")
_KEYS = ("id", "answer", "check", "verdict", "reason", "detail", "score", "settings", "model",
         "input_tokens", "output_tokens", "cost")


@dataclass(slots=True)
class Verdict:
    """A line of gate.jsonl (fields in their on-disk order)."""

    id: str
    answer: str  # answer_digest of the answer judged
    check: str  # rules | grader
    verdict: str  # keep | drop
    reason: str | None  # one of GATE_REASONS for a drop, else None
    detail: str | None  # what the check saw, in words (a grader's reason), or None
    score: float | None  # the grader's score, None for the rules
    settings: str  # settings_digest of what decided it
    model: str | None = None  # the grader's model
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float | None = None  # USD of the grader's request (None: unknown or no request)

    @classmethod
    def from_dict(cls, d: Any) -> "Verdict":
        if not isinstance(d, dict):
            raise RecordError("not a JSON object")
        for key in d:
            if key not in _KEYS:
                raise RecordError(f"unknown field `{key}`")
        for key in _KEYS:
            if key not in d:
                raise RecordError(f"missing field `{key}`")
        for key in ("id", "answer", "settings"):
            if not isinstance(d[key], str):
                raise RecordError(f"`{key}` must be a string")
        for key, allowed in (("check", CHECKS), ("verdict", VERDICTS)):
            if d[key] not in allowed:
                raise RecordError(f"`{key}` must be one of {', '.join(allowed)}")
        if d["reason"] is not None and d["reason"] not in GATE_REASONS:
            raise RecordError(f"`reason` must be null or one of {', '.join(GATE_REASONS)}")
        if (d["verdict"] == "drop") != (d["reason"] is not None):
            raise RecordError("`reason` is set exactly when `verdict` is drop")
        for key in ("detail", "model"):
            if d[key] is not None and not isinstance(d[key], str):
                raise RecordError(f"`{key}` must be a string or null")
        for key in ("input_tokens", "output_tokens"):
            v = d[key]
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise RecordError(f"`{key}` must be a non-negative integer")
        for key in ("score", "cost"):
            v = d[key]
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
                raise RecordError(f"`{key}` must be a number or null")
        return cls(d["id"], d["answer"], d["check"], d["verdict"], d["reason"], d["detail"], d["score"],
                   d["settings"], d["model"], d["input_tokens"], d["output_tokens"], d["cost"])

    def to_dict(self) -> dict:
        return {"id": self.id, "answer": self.answer, "check": self.check, "verdict": self.verdict,
                "reason": self.reason, "detail": self.detail, "score": self.score, "settings": self.settings,
                "model": self.model, "input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "cost": self.cost}


def answer_text(ex: Example) -> str:
    """The text the gate judges: the content of the answer's last assistant message."""
    for m in reversed(ex.messages):
        if m.role == "assistant":
            return m.content
    return ""


def answer_digest(ex: Example) -> str:
    """xxh3-64 of the answer's text, 16 lowercase hex digits."""
    return xxhash.xxh3_64_hexdigest(answer_text(ex).encode("utf-8"))


def settings_digest(settings: Any) -> str:
    """xxh3-64 of a JSON-ready value (its canonical JSON), 16 lowercase hex digits."""
    text = json.dumps(settings, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return xxhash.xxh3_64_hexdigest(text.encode("utf-8"))


def judged_key(answer_id: str, digest: str, check: str, settings: str) -> int:
    """One 64-bit key for "this answer was judged by this check with these settings"."""
    return xxhash.xxh3_64_intdigest("\x1f".join((answer_id, digest, check, settings)).encode("utf-8"))


def judged(path: str | os.PathLike, settings: Mapping[str, str]) -> set[int]:
    """The judged_key of every verdict of gate.jsonl at `path` with current `settings`
    (check -> settings digest)."""
    out: set[int] = set()
    for v in iter_records(path, Verdict):
        if settings.get(v.check) == v.settings:
            out.add(judged_key(v.id, v.answer, v.check, v.settings))
    return out


def _latest_drops(path: str | os.PathLike, settings: Mapping[str, str]) -> dict[tuple, Verdict]:
    """Per (packed ID, check) whose latest current verdict is drop, that verdict."""
    latest: dict[tuple, Verdict] = {}
    for v in iter_records(path, Verdict):
        if settings.get(v.check) != v.settings:
            continue
        key = (packed(v.id), v.check)
        if v.verdict == "drop":
            latest[key] = v
        else:
            latest.pop(key, None)
    return latest


def _first_by_check(latest: dict[tuple, Verdict]) -> dict:
    """Per packed ID the drop verdict that counts: the rules' when both checks dropped it."""
    drops: dict = {}
    for check in CHECKS:
        for (key, c), v in latest.items():
            if c == check and key not in drops:
                drops[key] = v
    return drops


def gate_drops(path: str | os.PathLike, settings: Mapping[str, str]) -> dict:
    """Per gated answer (packed ID) its (answer digest, reason): the answers whose latest
    verdict of some current check says drop. Verdicts of checks no longer configured, or made
    with other settings, do not count."""
    return {key: (v.answer, v.reason) for key, v in _first_by_check(_latest_drops(path, settings)).items()}


def gated_answers(paths, settings: Mapping[str, str], index) -> list[tuple[str, str, Verdict]]:
    """(topic, subtopic, drop verdict) of each answer gated now, in answers.jsonl's order of
    questions (`index`: answer_index.AnswerIndex of paths.answers)."""
    if not settings:
        return []
    drops = _first_by_check(_latest_drops(paths.gate, settings))
    current = gated_numbers(paths.answers, index, {k: (v.answer, v.reason) for k, v in drops.items()})
    return [(*index.groups[index.group[n]], drops[index.keys[n]]) for n in sorted(current)]


def gated_numbers(answers_path: str | os.PathLike, index, drops: dict) -> dict[int, int]:
    """Of an answer_index.AnswerIndex, the usable answers `drops` gates: number -> index of its
    reason in GATE_REASONS. Each candidate's answer is read again at its offset to compare its
    digest (a new answer to the question is not the one that was dropped)."""
    out: dict[int, int] = {}
    if not drops:
        return out
    with LineReader(answers_path) as source:
        for key, (digest, reason) in drops.items():
            n = index.number.get(key)
            if n is None or index.reason(n) is not None:
                continue
            if answer_digest(source.record_at(index.offset[n], Example)) == digest:
                out[n] = GATE_REASONS.index(reason)
    return out
