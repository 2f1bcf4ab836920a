"""Numbers for `overbrainer dataset stats`: per topic, what the data files hold; overall, the
tokens and cost spent so far (from the history)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from overbrainer.support.fmt import plural

from .history import Cost, read_history, totals
from ..answer_index import USABLE, index_answers
from ..jsonl import iter_records
from ..paths import ProjectPaths
from ..records import EXCLUSIONS, Question, Rejected, Subtopic
from ..quality.verdicts import GATE_REASONS, gate_drops, gated_numbers


@dataclass
class TopicStats:
    topic: str
    configured: bool = True
    subtopics: int = 0
    questions: int = 0
    answered: int = 0  # answers on disk (excluded ones included)
    usable: int = 0
    excluded: dict[str, int] = field(default_factory=dict)  # reason -> n, fixed order, n > 0 only
    rejected_subtopics: int = 0
    rejected_questions: int = 0
    gated: dict[str, int] = field(default_factory=dict)  # the gate's drops: reason -> n, n > 0 only

    @property
    def excluded_total(self) -> int:
        return sum(self.excluded.values())

    def line(self) -> str:
        text = (f"{self.topic}: {plural(self.subtopics, 'subtopic')}, {plural(self.questions, 'question')}, "
                f"{self.answered} answered "
                f"({self.usable} usable, {self.excluded_total} excluded")
        if self.excluded:
            text += ": " + ", ".join(f"{k} {v}" for k, v in self.excluded.items())
        text += ")"
        if self.gated:
            text += f"; gated {sum(self.gated.values())}: " + ", ".join(f"{k} {v}" for k, v in self.gated.items())
        if self.rejected_subtopics or self.rejected_questions:
            text += (f"; rejected {plural(self.rejected_subtopics, 'subtopic')}, "
                     f"{plural(self.rejected_questions, 'question')}")
        if not self.configured:
            text += " (not configured)"
        return text

    def to_dict(self) -> dict:
        return {"topic": self.topic, "configured": self.configured, "subtopics": self.subtopics,
                "questions": self.questions, "answered": self.answered, "usable": self.usable,
                "excluded": self.excluded_total, "excluded_by_reason": dict(self.excluded),
                "rejected_subtopics": self.rejected_subtopics, "rejected_questions": self.rejected_questions,
                "gated": sum(self.gated.values()), "gated_by_reason": {r: self.gated.get(r, 0) for r in GATE_REASONS}}


@dataclass
class DatasetStats:
    topics: list[TopicStats]
    input_tokens: int = 0
    output_tokens: int = 0
    cost: Cost = field(default_factory=Cost)

    def lines(self) -> list[str]:
        out = [t.line() for t in self.topics]
        out.append(f"spent: tokens {self.input_tokens} in, {self.output_tokens} out; {self.cost}")
        return out

    def to_dict(self) -> dict:
        return {"topics": [t.to_dict() for t in self.topics], "input_tokens": self.input_tokens,
                "output_tokens": self.output_tokens, "cost": self.cost.to_json(),
                "cost_complete": self.cost.complete}


def dataset_stats(project_dir, topics: Iterable | None = None, gate: dict | None = None) -> DatasetStats:
    """Counts per topic: the configured `topics` (names or objects with `.name`) in their order,
    then topics found only in the data files, by name. With `topics` None: every topic found.
    `gate`: the gate's current settings (check -> digest): its drops are counted per reason
    (`usable` counts the answers the gate kept or has not judged)."""
    paths = ProjectPaths(project_dir)
    names = [t if isinstance(t, str) else t.name for t in (topics or [])]
    per: dict[str, TopicStats] = {n: TopicStats(n) for n in names}

    def get(topic: str) -> TopicStats:
        if topic not in per:
            per[topic] = TopicStats(topic, configured=topics is None)
        return per[topic]

    for s in iter_records(paths.subtopics, Subtopic):
        get(s.topic).subtopics += 1
    for q in iter_records(paths.questions, Question):
        get(q.topic).questions += 1
    _count_answers(paths, get, gate)
    for r in iter_records(paths.rejected, Rejected):
        t = get(r.topic)
        if r.kind == "subtopic":
            t.rejected_subtopics += 1
        else:
            t.rejected_questions += 1
    extra = sorted(n for n in per if n not in names)
    result = DatasetStats([per[n] for n in names + extra])
    _, total = totals(read_history(project_dir))
    result.input_tokens, result.output_tokens, result.cost = total.input_tokens, total.output_tokens, total.cost
    return result


def _count_answers(paths: ProjectPaths, get, gate: dict | None) -> None:
    """Answered, usable and excluded per topic, of each question's latest answer (streamed:
    answer_index keeps per ID its topic and status, not the answer); gated per topic."""
    index = index_answers(paths.answers)
    gated = gated_numbers(paths.answers, index, gate_drops(paths.gate, gate)) if gate else {}
    for n, reason in gated.items():
        t = get(index.topic(n))
        t.usable -= 1
        name = GATE_REASONS[reason]
        t.gated[name] = t.gated.get(name, 0) + 1
    for t in {index.topic(n) for n in gated}:
        found = get(t)
        found.gated = {r: found.gated[r] for r in GATE_REASONS if r in found.gated}
    per_group = [[0] * (len(EXCLUSIONS) + 1) for _ in index.groups]  # by reason, then usable last
    for g, status in zip(index.group, index.status):
        per_group[g][status] += 1  # USABLE is -1: the last slot
    per_topic: dict[str, list[int]] = {}
    for (topic, _), counts in zip(index.groups, per_group):
        if any(counts):
            total = per_topic.setdefault(topic, [0] * len(counts))
            for k, n in enumerate(counts):
                total[k] += n
    for topic, counts in per_topic.items():
        t = get(topic)
        t.answered += sum(counts)
        t.usable += counts[USABLE]
        if any(counts[:USABLE]):
            t.excluded = {reason: n for reason, n in zip(EXCLUSIONS, counts) if n}
