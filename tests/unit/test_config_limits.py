"""The upper limits of the configured counts (config/limits.py): each accepted at the limit,
refused one over with the key and the limit named, from the file and from the environment."""

from __future__ import annotations

import tomllib

import pytest

from overbrainer.config import limits
from overbrainer.config.read import parse_config
from overbrainer.errors import ConfigError

REST = """
[providers.local]
protocol = "openai"

[roles]
generator = { provider = "local", model = "m1" }
parent = { provider = "local", model = "m2" }
"""


def topic(name: str, subtopics: int = 1, per: int = 1) -> str:
    return f'[[topics]]\nname = "{name}"\nsubtopics = {subtopics}\nquestions_per_subtopic = {per}\n'


def text(topics: str = topic("a"), pipeline: str = "") -> str:
    return '[project]\nname = "demo"\n\n' + topics + REST + (f"\n[pipeline]\n{pipeline}\n" if pipeline else "")


def load(toml: str, env: dict | None = None):
    return parse_config(tomllib.loads(toml), env or {})


def problems(toml: str, env: dict | None = None) -> list[str]:
    with pytest.raises(ConfigError) as e:
        load(toml, env)
    assert e.value.exit_code == 2 and e.value.message == "invalid configuration"
    return e.value.problems


def test_the_documented_limits():
    assert (limits.MAX_TOPICS, limits.MAX_SUBTOPICS, limits.MAX_QUESTIONS_PER_SUBTOPIC) == (10_000, 100_000, 100_000)
    assert (limits.MAX_PLANNED_QUESTIONS, limits.MAX_QUESTION_BATCH) == (10_000_000, 1_000)
    assert (limits.MAX_CONCURRENCY, limits.MAX_RETRIES) == (1_024, 100)


@pytest.mark.parametrize("key, limit", [
    ("subtopics", limits.MAX_SUBTOPICS),
    ("questions_per_subtopic", limits.MAX_QUESTIONS_PER_SUBTOPIC),
])
def test_a_topic_count_at_its_limit_loads_and_one_over_is_refused(key, limit):
    counts = {"subtopics": 1, "per": 1}
    counts["subtopics" if key == "subtopics" else "per"] = limit
    c = load(text(topic("big", **counts)))
    assert getattr(c.topics[0], key) == limit
    counts["subtopics" if key == "subtopics" else "per"] = limit + 1
    assert problems(text(topic("big", **counts))) == [f"topics.big.{key}: must be at most {limit}"]


def test_a_topic_without_a_name_is_named_by_its_index():
    toml = text(topic("a") + "[[topics]]\nsubtopics = 100001\nquestions_per_subtopic = 1\n")
    p = problems(toml)
    assert "topics[1].subtopics: must be at most 100000" in p and "missing field `topics[1].name`" in p


@pytest.mark.parametrize("key, limit", [
    ("question_batch_size", limits.MAX_QUESTION_BATCH),
    ("concurrency", limits.MAX_CONCURRENCY),
    ("max_retries", limits.MAX_RETRIES),
])
def test_a_pipeline_count_at_its_limit_loads_and_one_over_is_refused(key, limit):
    assert getattr(load(text(pipeline=f"{key} = {limit}")).pipeline, key) == limit
    assert problems(text(pipeline=f"{key} = {limit + 1}")) == [f"pipeline.{key}: must be at most {limit}"]
    # From the environment too, naming the variable (never the value).
    var = f"OVERBRAINER_PIPELINE__{key.upper()}"
    assert problems(text(), {var: str(limit + 1)}) == [f"pipeline.{key}: must be at most {limit} (from {var})"]


def test_the_number_of_topics():
    at = "".join(topic(f"t{i}") for i in range(limits.MAX_TOPICS))
    assert len(load(text(at)).topics) == limits.MAX_TOPICS
    over = at + topic("one_more")
    assert problems(text(over)) == [f"topics: must be at most {limits.MAX_TOPICS} tables ([[topics]])"]


def test_the_planned_total_at_the_limit_loads_and_one_over_names_the_topics_that_make_it():
    # 100 topics of 1000 x 100 = 10,000,000 questions: exactly the limit.
    at = "".join(topic(f"t{i}", 1000, 100) for i in range(100))
    c = load(text(at))
    assert sum(t.subtopics * t.questions_per_subtopic for t in c.topics) == limits.MAX_PLANNED_QUESTIONS
    p = problems(text(at + topic("extra", 1, 1)))
    assert len(p) == 1 and p[0].startswith(
        "topics: the planned questions (subtopics x questions_per_subtopic, summed over the topics) "
        "must be at most 10000000; these topics plan 10000001: t0 (1000 x 100 = 100000), ")
    assert p[0].endswith(" and 96 more")  # the 5 largest named, then how many more
    # Two topics, each under its own limits, together over: both named, the largest first.
    p = problems(text(topic("small", 10, 10) + topic("large", 100_000, 100)))
    assert p == ["topics: the planned questions (subtopics x questions_per_subtopic, summed over the topics) "
                 "must be at most 10000000; these topics plan 10000100: large (100000 x 100 = 10000000), "
                 "small (10 x 10 = 100)"]


def test_huge_counts_are_refused_at_once():
    # The counts that once made `run --plan` run for minutes: refused when the file is read.
    p = problems(text(topic("a", 1_000_000_000, 1_000_000_000), "question_batch_size = 1000000000"))
    assert p == ["topics.a.subtopics: must be at most 100000", "topics.a.questions_per_subtopic: must be at most 100000",
                 "pipeline.question_batch_size: must be at most 1000"]
