"""The TUI at the smallest size it accepts and what it says: the footer keeps `q Quit` at 100
columns, log lines wrap, the stage table counts only the items worked on, the start dialog says
how many paid requests and what they may cost (the plan's figures). (The resume hint of a stage
the TUI stopped keeps `-C DIR`: test_tui_app.test_s_stops_a_stage_at_a_safe_point_and_it_resumes.)"""

from __future__ import annotations

import logging
import re

from tests.fixtures.tui import TuiDriver, until

NARROW = (100, 30)


def test_the_footer_shows_q_quit_at_100_columns(project):
    from textual.widgets._footer import FooterKey

    driver = TuiDriver(project.dir, project.env)
    seen = {}

    async def scenario(pilot, app):
        for view in "123456":
            await pilot.press(view)
            await pilot.pause()
            keys = {k.key: k for k in app.screen.query(FooterKey)}
            assert "q" in keys, (view, sorted(keys))
            seen[view] = app.screen.region.contains_region(keys["q"].region)
        await pilot.press("q")

    with driver:
        driver.run(scenario, size=NARROW)
    assert seen == dict.fromkeys("123456", True)


def test_long_log_lines_wrap_in_the_logs_view(project):
    from textual.widgets import RichLog

    driver = TuiDriver(project.dir, project.env)
    words = " ".join(f"word{i}" for i in range(60)) + " THE-END"

    async def scenario(pilot, app):
        logging.getLogger("overbrainer.test").warning("a long line: %s", words)
        await pilot.press("5")
        log_widget = app.query_one("#log", RichLog)
        await until(pilot, lambda: any("THE-END" in strip.text for strip in log_widget.lines), "the line's end")
        strips = [strip.text.rstrip() for strip in log_widget.lines]
        assert all(len(text) <= NARROW[0] for text in strips)
        shown = " ".join(text.strip() for text in strips)
        assert words in shown  # every word, none cut
        await pilot.press("q")

    with driver:
        driver.run(scenario, size=NARROW)


def test_the_start_dialog_counts_paid_requests_and_a_stage_with_all_skipped_shows_0_of_0(project, fake_provider):
    project.write(topics=2, subtopics=2, questions=2)
    fake_provider.models = {"qwen/qwen3-235b": (1.0, 2.0), "deepseek/deepseek-r1": (3.0, 6.0)}
    driver = TuiDriver(project.dir, project.env)
    texts = []

    async def start_subtopics(pilot, app):
        await pilot.press("3", "home", "enter")  # subtopics
        await until(pilot, lambda: type(app.screen).__name__ == "Confirm", "the confirmation")
        texts.append(str(app.screen.query_one("#question").render()))
        await pilot.press("y")
        await until(pilot, lambda: app.tasks.current is not None and not app.tasks.current.running, "the stage")

    async def scenario(pilot, app):
        await start_subtopics(pilot, app)
        await start_subtopics(pilot, app)  # every topic has its subtopics: nothing to do
        table = app.query_one("#stages")
        await until(pilot, lambda: table.row_count == 1 and len(app.tasks.history) == 2
                    and str(table.get_row_at(0)[2]) == "0/0", "the counts shown")
        app.state_row = [str(c) for c in table.get_row_at(0)]

    with driver:
        driver.run(scenario)
    assert re.fullmatch(r"Start subtopics\?\n\nIt sends 2 paid requests to the generator fake/qwen/qwen3-235b: "
                        r"expected \$0\.\d{4}, at most \$0\.\d{4} \(`overbrainer subtopics --plan`\); "
                        r"`history` and the Project view keep what was spent\.", texts[0]), texts[0]
    assert "It sends 0 paid requests" in texts[1]
    assert driver.app.state_row[2:5] == ["0/0", "0", "2"]  # handled, done, skipped
