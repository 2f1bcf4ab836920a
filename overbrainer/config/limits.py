"""The upper limits of the configured counts, checked when the configuration is read (build.py,
so `config check` and every command): a count over its limit is a configuration error (exit 2)
naming the key and the limit.

They fit real distillations (datasets of 10k to a few million examples) with room to spare, and
they keep every per-project quantity bounded: at most MAX_PLANNED_QUESTIONS questions (so at
most that many subtopics and answers too, each subtopic holding at least one question), which
`run --plan` counts in an instant and the data files hold in a few GB. The README's
configuration reference and the commented overbrainer.toml that `init` writes list them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from overbrainer.config.model import Topic

MAX_TOPICS = 10_000  # [[topics]] tables
MAX_SUBTOPICS = 100_000  # [[topics]] subtopics, of one topic
MAX_QUESTIONS_PER_SUBTOPIC = 100_000  # [[topics]] questions_per_subtopic
MAX_PLANNED_QUESTIONS = 10_000_000  # subtopics x questions_per_subtopic, summed over the topics
MAX_QUESTION_BATCH = 1_000  # [pipeline] question_batch_size
MAX_CONCURRENCY = 1_024  # [pipeline] concurrency
MAX_RETRIES = 100  # [pipeline] max_retries
MAX_NGRAM = 64  # [pipeline] decontaminate_ngram

NAMED = 5  # the topics a planned-total problem names (the largest), then "and N more"


def planned(topic: Topic) -> int:
    """The questions a topic plans: its subtopics x questions_per_subtopic."""
    return topic.subtopics * topic.questions_per_subtopic


def planned_total_problem(topics: list[Topic]) -> str | None:
    """The problem when the topics plan more than MAX_PLANNED_QUESTIONS questions in all: it names
    the key (`topics`), the limit, the total and the topics that make it, the largest first."""
    total = sum(planned(t) for t in topics)
    if total <= MAX_PLANNED_QUESTIONS:
        return None
    largest = sorted(topics, key=planned, reverse=True)
    named = ", ".join(f"{t.name} ({t.subtopics} x {t.questions_per_subtopic} = {planned(t)})" for t in largest[:NAMED])
    more = f" and {len(topics) - NAMED} more" if len(topics) > NAMED else ""
    return (f"topics: the planned questions (subtopics x questions_per_subtopic, summed over the topics) "
            f"must be at most {MAX_PLANNED_QUESTIONS}; these topics plan {total}: {named}{more}")
