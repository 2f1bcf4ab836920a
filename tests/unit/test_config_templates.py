"""Prompt templates: built-in defaults, prompts/ overrides, strict undefined, no escaping."""

from __future__ import annotations

import pytest

from overbrainer.config.templates import NAMES, VARIABLES, builtin_source, load_templates, problems
from overbrainer.errors import ConfigError, OverbrainerError


def test_builtin_defaults_render(tmp_path):
    t = load_templates(tmp_path)
    s = t.render("subtopics", topic="Rust <ownership>", description=None, count=7, existing=[])
    assert 'topic "Rust <ownership>"' in s and "7 strings" in s and "Topic description" not in s
    assert "already exist" not in s
    s = t.render("subtopics.txt", topic="x", description="about & more", count=2, existing=["Lifetimes", "Traits"])
    assert "Topic description: about & more" in s
    assert "These subtopics already exist. Do not repeat them" in s and "\n- Lifetimes\n- Traits\n" in s
    q = t.render("questions", topic="t", description="", subtopic="Borrowing", count=3, accepted=["What is a borrow?"])
    assert "Do not repeat or rephrase them:\n- What is a borrow?\n" in q and "3 new questions" in q
    assert "already exist" not in t.render("questions", topic="t", description=None, subtopic="s", count=3, accepted=[])
    a = t.render("answer_system", topic="Rust", description=None)
    assert a.startswith("You are an expert in Rust.") and not a.endswith("\n")
    j = t.render("judge", question="Q?", answer_a="AAA", answer_b="BBB")
    assert "Answer A:\nAAA" in j and '"verdict"' in j
    assert t.origin("judge") == "built-in" and t.source("judge") == builtin_source("judge")


def test_an_own_subtopics_prompt_without_existing_still_renders(tmp_path):
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "subtopics.txt").write_text("{{ count }} subtopics of {{ topic }}\n")
    t = load_templates(tmp_path, ["subtopics"])
    assert t.render("subtopics", topic="x", description=None, count=3, existing=["a"]) == "3 subtopics of x"


def test_override_wins(tmp_path):
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "answer_system.txt").write_text("Custom for {{ topic }}\n")
    t = load_templates(tmp_path, ["answer_system", "judge"])
    assert t.render("answer_system", topic="Go") == "Custom for Go"
    assert t.origin("answer_system") == "prompts/answer_system.txt"
    with pytest.raises(OverbrainerError, match="template subtopics.txt was not loaded"):
        t.render("subtopics", topic="x", description=None, count=1)


def test_undefined_variable_is_an_error(tmp_path):
    t = load_templates(tmp_path, ["subtopics"])
    with pytest.raises(ConfigError, match=r"^cannot render template subtopics.txt \(built-in, line 4\): 'count' is "
                                          "undefined"):
        t.render("subtopics", topic="x", description=None)


def test_broken_override_fails_at_load(tmp_path):
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "questions.txt").write_text("line one\n{% if %}\n")
    with pytest.raises(ConfigError, match=r"^invalid template questions.txt \(prompts/questions.txt, line 2\)"):
        load_templates(tmp_path)


def test_every_default_exists():
    for name in NAMES:
        assert builtin_source(name).strip()
    with pytest.raises(OverbrainerError, match="unknown template nope.txt"):
        builtin_source("nope")


def test_every_built_in_template_reads_only_what_its_stage_provides(tmp_path):
    (tmp_path / "prompts").mkdir()
    assert set(VARIABLES) == set(NAMES)
    for name in NAMES:  # each built-in, as an override that differs by a line: it passes the check
        (tmp_path / "prompts" / f"{name}.txt").write_text(builtin_source(name) + "\n")
    assert problems(tmp_path) == []


def test_the_check_finds_a_name_in_a_branch_the_samples_skip_and_says_its_line(tmp_path):
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "judge.txt").write_text("{{ question }}\n{% if false %}\n{{ answer_c }}{% endif %}\n")
    (tmp_path / "prompts" / "grader.txt").write_text("{% for x in answer %}{{ x.nope.deeper }}{% endfor %}\n")
    assert problems(tmp_path) == [
        "cannot render template judge.txt (prompts/judge.txt, line 3): `answer_c` is undefined: compare's judge "
        "provides question, answer_a, answer_b",
        "cannot render template grader.txt (prompts/grader.txt, line 1): 'str object' has no attribute 'nope'"]


def test_an_override_equal_to_the_built_in_one_is_not_compiled(tmp_path):
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "questions.txt").write_text(builtin_source("questions"))
    assert problems(tmp_path) == []
