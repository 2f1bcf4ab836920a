"""`overbrainer tui` in-process, with Textual's harness, against projects made by the fake provider:
every view renders, and the Dataset view rejects through `dataset reject`'s code; a pipeline
started from the TUI writes what the command writes; `s` stops a stage as Ctrl-C does."""

from __future__ import annotations

import logging
import re
import time

from tests.fixtures.provider import Answer
from tests.fixtures.tui import TuiDriver, run_from_pipeline, start_from_pipeline, until

SECRET = "sk-tui-TOPSECRET-0042"


def _filled(project, **kw):
    """A project whose four stages ran (the command's flows, in-process)."""
    project.write(topics=2, subtopics=2, questions=2, api_key=SECRET, **kw)
    for stage in ("subtopics", "questions", "answers", "split"):
        _, _, error = project.stage(stage)
        assert error is None, error
    return project


def _cells(table) -> list[list[str]]:
    return [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]


def test_each_view_renders_a_project_of_the_fake_provider_and_x_rejects_through_dataset_reject(project):
    from textual.widgets import DataTable, RichLog, Static, Tree

    _filled(project)
    (project.dir / ".env").write_text("OVERBRAINER_PIPELINE__SEED=7\n")
    env = {**project.env, "OVERBRAINER_PIPELINE__SEED": "7", "OVERBRAINER_PIPELINE__CONCURRENCY": "3"}
    driver = TuiDriver(project.dir, env)
    driver.workspace.dotenv = type("Dotenv", (), {"keys": {"OVERBRAINER_PIPELINE__SEED"},
                                                  "changed": lambda self: False})()
    answers = {a["id"]: a for a in project.records("answers")}

    async def scenario(pilot, app):
        await until(pilot, lambda: app.query_one("#config", DataTable).row_count, "the configuration")
        rows = {r[0]: r[1:] for r in _cells(app.query_one("#config", DataTable))}
        assert rows["providers.fake.base_url"] == [project.url, "env OVERBRAINER_PROVIDERS__FAKE__BASE_URL"]
        assert rows["providers.fake.api_key"] == ["set", "env OVERBRAINER_PROVIDERS__FAKE__API_KEY"]
        assert rows["pipeline.concurrency"] == ["3", "env OVERBRAINER_PIPELINE__CONCURRENCY"]
        assert rows["pipeline.seed"] == ["7", ".env OVERBRAINER_PIPELINE__SEED"]
        assert rows["pipeline.max_retries"] == ["2", "file"]
        assert rows["pipeline.eval_ratio"] == ["0.1", "default"]
        assert rows["topics.topic0"] == ["2 subtopics x 2 questions", "file"]
        assert all(SECRET not in cell for row in _cells(app.query_one("#config", DataTable)) for cell in row)
        counts = str(app.query_one("#dataset-counts", Static).render())
        assert "topic0: 2 subtopics, 4 questions, 4 answered (4 usable, 0 excluded)" in counts
        spend = _cells(app.query_one("#spend", DataTable))
        assert [r[:3] for r in spend] == [["subtopics", "qwen/qwen3-235b", "1"], ["questions", "qwen/qwen3-235b", "1"],
                                          ["answers", "deepseek/deepseek-r1", "1"], ["split", "-", "1"],
                                          ["total", "", "4"]]

        await pilot.press("2")
        tree = app.query_one("#tree", Tree)
        await until(pilot, lambda: tree.root.children, "the tree")
        assert [str(n.label) for n in tree.root.children] == ["topic0 (2 subtopics, 4 questions)",
                                                               "topic1 (2 subtopics, 4 questions)"]
        await pilot.press("down", "enter", "down", "enter", "down")  # topic0, its first subtopic, a question
        await until(pilot, lambda: tree.cursor_node is not None and tree.cursor_node.data is not None
                    and hasattr(tree.cursor_node.data, "answer"), "a question under the cursor")
        question = tree.cursor_node.data
        assert str(tree.cursor_node.label).startswith("[a] ")
        detail = str(app.query_one("#item", Static).render())
        assert question.text in detail and answers[question.id]["messages"][-1]["content"] in detail

        app.state_question = question  # x rejects it: the same code as `dataset reject ID`
        await pilot.press("x")
        await until(pilot, lambda: type(app.screen).__name__ == "Confirm", "the confirmation")
        await pilot.press("y")
        await until(pilot, lambda: app.tasks.current is not None and not app.tasks.current.running, "the rejection")
        await until(pilot, lambda: tree.root.children
                    and str(tree.root.children[0].label) == "topic0 (2 subtopics, 3 questions)", "the tree without it")
        topic0 = tree.root.children[0]
        topic0.expand()
        await until(pilot, lambda: len(topic0.children) == 2 and topic0.children[0].data is not None, "its subtopics")
        topic0.children[0].expand()
        await until(pilot, lambda: topic0.children[0].children
                    and topic0.children[0].children[0].data is not None, "its questions")
        shown = {n.data.id for sub in topic0.children for n in sub.children}
        assert question.id not in shown and len(shown) == 1, shown

        await pilot.press("3")
        assert "nothing started yet" in str(app.query_one("#task", Static).render())
        await pilot.press("4")
        assert app.query_one("#runs", DataTable).row_count == 0
        assert "no run yet" in str(app.query_one("#run", Static).render())
        await pilot.press("5")
        log_widget = app.query_one("#log", RichLog)

        def shown():
            return [strip.text.rstrip() for strip in log_widget.lines]
        await until(pilot, lambda: any("tui: dataset reject" in line for line in shown()), "the task's log line")
        assert any(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ INFO tui: dataset reject \S+ started", line)
                   for line in shown()), shown()  # as stderr would show it
        assert "showing INFO and above" in str(app.query_one("#level", Static).render())
        logging.getLogger("overbrainer.test").warning("a warning for the Logs view")
        await pilot.press("l")  # INFO -> WARN: only warnings and errors stay
        await until(pilot, lambda: "showing WARN and above" in str(app.query_one("#level", Static).render())
                    and any("a warning for the Logs view" in line for line in shown()), "the filter")
        assert all(" WARN " in line or " ERROR " in line for line in shown() if line)
        await pilot.press("6")
        assert "no export, compare or push yet" in str(app.query_one("#results-text", Static).render())
        await pilot.press("q")

    with driver:
        driver.run(scenario)
    assert driver.app.return_code == 0 and len(driver.tasks.history) == 1
    qid = driver.app.state_question.id
    task = driver.tasks.current
    assert task.error is None and task.lines() == [
        f"rejected question {qid} of topic topic0: removed 0 subtopics, 1 question, 1 answer; "
        "run split to update train and eval"]
    assert [r["id"] for r in project.records("rejected")] == [qid]
    assert qid not in {q["id"] for q in project.records("questions")}
    assert qid not in {a["id"] for a in project.records("answers")}


def test_the_dataset_view_shows_a_page_at_a_time_and_enter_on_more_brings_the_next(project):
    """A topic of PAGE + 5 subtopics: the tree shows PAGE of them and a `… 5 more` node; Enter on
    it reads the next page in its place."""
    import json

    from textual.widgets import Tree

    from overbrainer.tui.dataset_model import PAGE

    project.write(topics=1, subtopics=PAGE + 5, questions=1)
    project.data.mkdir(parents=True, exist_ok=True)
    (project.data / "subtopics.jsonl").write_text("".join(
        json.dumps({"id": f"s{i:03}", "topic": "topic0", "name": f"Subtopic {i}"}) + "\n" for i in range(PAGE + 5)))
    driver = TuiDriver(project.dir, project.env)

    async def scenario(pilot, app):
        await pilot.press("2")
        tree = app.query_one("#tree", Tree)
        await until(pilot, lambda: tree.root.children, "the tree")
        topic = tree.root.children[0]
        assert str(topic.label) == f"topic0 ({PAGE + 5} subtopics, 0 questions)"
        await pilot.press("down", "enter")
        await until(pilot, lambda: len(topic.children) == PAGE + 1, "the first page")
        more = topic.children[-1]
        assert str(more.label) == "… 5 more (Enter shows the next 5)"
        tree.move_cursor(more)
        await pilot.press("enter")
        await until(pilot, lambda: len(topic.children) == PAGE + 5
                    and str(topic.children[-1].label) == "Subtopic 104 (0/0 answered)", "the next page")
        assert [str(n.label).split(" (")[0] for n in topic.children] == [f"Subtopic {i}" for i in range(PAGE + 5)]

    with driver:
        driver.run(scenario)


def _data_files(root) -> dict[str, list[str]]:
    files = {}
    for name in ("subtopics", "questions", "answers", "train", "eval"):
        files[name] = sorted((root / "data" / f"{name}.jsonl").read_text().splitlines())
    return files


def test_run_from_the_tui_writes_what_the_command_writes(tmp_path, project, cli):
    from tests.fixtures.project import Project

    project.write(topics=2, subtopics=2, questions=2)
    twin = Project(tmp_path / "twin", project.url).write(topics=2, subtopics=2, questions=2)
    r = cli(["-C", project.dir, "run"], env=project.env)
    assert r.returncode == 0, r.stderr
    driver = TuiDriver(twin.dir, twin.env)

    async def scenario(pilot, app):
        await run_from_pipeline(pilot, app)
        table = app.query_one("#stages")
        await until(pilot, lambda: table.row_count == 4 and str(table.get_row_at(3)[2]) == "8/8", "the counts shown")
        app.state_rows = [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]

    with driver:
        driver.run(scenario)
    task = driver.tasks.current
    assert task.error is None, task.error
    assert task.lines() == r.stdout.splitlines()  # the same summaries as the command
    assert _data_files(twin.dir) == _data_files(project.dir)
    assert [row[0] for row in driver.app.state_rows] == ["subtopics", "questions", "answers", "split"]
    assert driver.app.state_rows[2][1:4] == ["deepseek/deepseek-r1", "8/8", "8"]  # the parent, 8 handled, 8 done
    assert [h["stage"] for h in twin.history()] == ["subtopics", "questions", "answers", "split"]
    assert "answers: finished" in driver.log_text()  # the command line's progress lines, in Logs


def test_s_stops_a_stage_at_a_safe_point_and_it_resumes(project, fake_provider):
    project.write(topics=1, subtopics=1, questions=30, pipeline={"concurrency": 2})
    for stage in ("subtopics", "questions"):
        assert project.stage(stage)[2] is None
    fake_provider.responder = lambda req: Answer("slow answer", delay=0.15)
    driver = TuiDriver(project.dir, project.env)

    async def scenario(pilot, app):
        await start_from_pipeline(pilot, app, "down", "down")  # answers
        await until(pilot, lambda: app.live.stages.get("answers") and app.live.stages["answers"].done >= 2,
                    "two answers")
        await pilot.press("s")
        await until(pilot, lambda: not app.tasks.current.running, "the stage to stop")

    with driver:
        driver.run(scenario)
    task = driver.tasks.current
    assert task.interrupted and task.outcome() == (
        f"interrupted: answers stopped; rerun `overbrainer -C {project.dir} answers` "
        f"(or `overbrainer -C {project.dir} run`) to resume")
    kept = len(project.records("answers"))
    assert 2 <= kept < 30
    assert task.lines()[0].startswith(f"answers: stopped after {kept} of 30 questions: interrupted; {kept} answers written")
    assert project.history()[-1]["status"] == "interrupted"
    fake_provider.responder = None
    assert project.stage("answers")[2] is None and len(project.records("answers")) == 30


def test_s_again_abandons_the_requests_in_flight_as_a_second_ctrl_c_does(project, fake_provider):
    project.write(topics=1, subtopics=1, questions=4, pipeline={"concurrency": 2})
    for stage in ("subtopics", "questions"):
        assert project.stage(stage)[2] is None
    fake_provider.clear()
    fake_provider.latency = 60.0  # never back in this test's time
    driver = TuiDriver(project.dir, project.env)
    timing = {}

    async def scenario(pilot, app):
        await start_from_pipeline(pilot, app, "down", "down")  # answers
        await until(pilot, lambda: len(fake_provider.chat_requests()) >= 2, "two requests in flight")
        await pilot.press("s")  # the stage waits up to stop_grace_secs for them
        await until(pilot, lambda: "waiting up to 30 s for 2 request(s) in flight" in driver.log_text(),
                    "the grace's warning")
        task = app.tasks.current
        assert task.running and not task.abandon.is_set()
        await until(pilot, lambda: "waiting for its requests in flight (s again abandons them)"
                    in str(app.query_one("#status").render()), "the status line")
        timing["started"] = time.monotonic()
        await pilot.press("s")
        await until(pilot, lambda: not task.running, "the stage to stop", timeout=10)
        timing["took"] = time.monotonic() - timing["started"]

    with driver:
        driver.run(scenario)
    task = driver.tasks.current
    assert timing["took"] < 10  # not the 30 s grace, nor the 60 s answers
    assert task.interrupted and task.abandon.is_set()
    assert task.lines()[-1].endswith("; 2 requests in flight were abandoned; the provider may bill them")
    assert project.records("answers") == []
    assert project.history()[-1]["status"] == "interrupted"
