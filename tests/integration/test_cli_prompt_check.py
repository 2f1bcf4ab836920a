"""`config check` renders every prompt override with the variables its stage provides: a name the
stage does not provide (in any branch) or a syntax error is exit 2, naming the file and the line;
`run` refuses the same before its first stage, and sends nothing."""

from __future__ import annotations

import pytest

from overbrainer.config.init import init_project

QUESTIONS = """Write {{ count }} questions about {{ topic }}.
{% if accepted %}Not these:
{% for q in accepted %}- {{ q }} ({{ subtopc }})
{% endfor %}{% endif %}
"""


@pytest.mark.parametrize("name, text, problem", [
    ("questions", QUESTIONS,
     "cannot render template questions.txt (prompts/questions.txt, line 3): `subtopc` is undefined: the questions "
     "stage provides topic, description, subtopic, count, accepted"),
    ("subtopics", "List {{ count }} subtopics of {{ topic }}\nlike {{ existing[0] \n",
     "invalid template subtopics.txt (prompts/subtopics.txt, line 2): unexpected end of template"),
    ("grader", "Grade {{ answer }}\non {{ question | nosuchfilter }}\n",
     "invalid template grader.txt (prompts/grader.txt, line 2): No filter named 'nosuchfilter'."),
    ("answer_system", "Expert in {{ topic }}\n{{ description.upper() }}\n",
     "cannot render template answer_system.txt (prompts/answer_system.txt, line 2): 'None' has no attribute 'upper'"),
])
def test_a_broken_prompt_fails_config_check_and_run_with_exit_2(project, fake_provider, cli, name, text, problem):
    project.write(topics=1, subtopics=1, questions=1)
    (project.dir / "prompts").mkdir()
    (project.dir / "prompts" / f"{name}.txt").write_text(text)
    r = cli(["-C", project.dir, "config", "check"], env=project.env)
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().splitlines()[-1].startswith(f"error: {problem}"), r.stderr
    r = cli(["-C", project.dir, "run"], env=project.env)
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().splitlines()[-1].startswith(f"error: {problem}"), r.stderr
    assert fake_provider.requests == [] and not project.data.exists()


def test_the_prompts_init_writes_and_an_own_prompt_that_works_pass(project, fake_provider, cli, tmp_path):
    init_project(tmp_path / "demo")
    env = {"OVERBRAINER_PROVIDERS__LLM__BASE_URL": fake_provider.url}
    r = cli(["-C", tmp_path / "demo", "config", "check"], env=env)
    assert r.returncode == 0, r.stderr
    project.write(topics=1, subtopics=1, questions=1)
    (project.dir / "prompts").mkdir()
    (project.dir / "prompts" / "questions.txt").write_text(
        "{% set n = count %}{{ n }} questions on {{ subtopic }} ({{ topic }}{% if description %}: {{ description }}"
        "{% endif %}){% for q in accepted %}\n- {{ q }}{% endfor %}\n")
    r = cli(["-C", project.dir, "config", "check"], env=project.env)
    assert r.returncode == 0, r.stderr
