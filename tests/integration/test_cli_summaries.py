"""Summaries that add up: a rerun with nothing to do says so, `history` counts the latest split's
examples (not a sum over splits), a cost is `cost unknown` only for tokens paid at an unknown
price, a slow stage logs its progress at least once a minute, `runs ls` without runs says so. (A fatal error's item counted as failed: test_cli_stages_failures.py.)"""

from __future__ import annotations

import json
from tests.fixtures.timescale import scaled_env


def test_a_rerun_with_nothing_to_do_says_so(project, fake_provider, cli):
    project.write(topics=2, subtopics=2, questions=2)
    assert cli(["-C", project.dir, "run"], env=project.env).returncode == 0
    r = cli(["-C", project.dir, "run"], env=project.env)
    assert r.returncode == 0, r.stderr
    for line in ("subtopics: nothing to do, 2 already done", "questions: nothing to do, 4 already done",
                 "answers: nothing to do, 8 already done"):
        assert f" INFO {line}\n" in r.stderr, r.stderr
    assert "to process" not in r.stderr.replace("split: 8 to process", "")
    project.write(topics=3, subtopics=2, questions=2)
    r = cli(["-C", project.dir, "subtopics"], env=project.env)
    assert " INFO subtopics: 1 to process (2 already done)\n" in r.stderr
    r = cli(["-C", project.dir, "--json", "questions"], env=project.env)
    started = [json.loads(line) for line in r.stderr.splitlines() if '"stage_started"' in line]
    assert started == [{"event": "stage_started", "stage": "questions", "total": 2, "skipped": 4, "batch": False}]


def test_without_a_terminal_a_slow_stage_logs_its_progress_between_its_tenths(project, fake_provider, cli):
    """Each tenth alone can be far apart (10k answers at one a second: 17 minutes): a line also
    comes once the interval (a minute, scaled down here: tests/fixtures/timescale.py) has passed."""
    project.write(topics=1, subtopics=4, questions=6, pipeline={"concurrency": 1})
    assert cli(["-C", project.dir, "questions"], env=project.env).returncode == 0
    fake_provider.latency = 0.2  # an answer every 0.2 s; the interval is 60 s x 0.001
    r = cli(["-C", project.dir, "answers"], env={**project.env, **scaled_env(0.001)})
    assert r.returncode == 0, r.stderr
    shown = [int(line.rsplit(" ", 1)[1].split("/")[0]) for line in r.stderr.splitlines()
             if " INFO answers: " in line and line.endswith("/24")]
    tenths = [3, 5, 8, 10, 12, 15, 17, 20, 22, 24]
    assert set(tenths) < set(shown) and shown == sorted(shown), r.stderr


def test_history_counts_the_examples_of_the_latest_split(project, fake_provider, cli):
    project.write(topics=1, subtopics=2, questions=3)
    for _ in range(3):
        assert cli(["-C", project.dir, "run"], env=project.env).returncode == 0
    r = cli(["-C", project.dir, "history"], env=project.env)
    [split] = [line for line in r.stdout.splitlines() if line.startswith("split")]
    assert split.startswith("split      3 run(s), 6 examples in the latest, 0 failed;"), r.stdout
    r = cli(["-C", project.dir, "--json", "history"], env=project.env)
    assert json.loads(r.stdout)["stages"]["split"]["done"] == 6


def test_cost_unknown_only_for_tokens_paid_at_an_unknown_price_and_0_for_nothing_paid(project, fake_provider, cli):
    """What a cost says is true of what was paid: a run (split, a rerun with nothing to do) that
    used no token says $0 whatever the price, and `cost unknown` is for tokens paid at a price
    nobody knew; a total holding such tokens stays unknown."""
    project.write(topics=1, subtopics=1, questions=2)  # the fake lists no price
    r = cli(["-C", project.dir, "run"], env=project.env)
    assert r.returncode == 0 and r.stdout.splitlines()[2].endswith("; cost unknown"), r.stdout
    r = cli(["-C", project.dir, "run"], env=project.env)
    assert r.returncode == 0, r.stderr
    assert [line.rsplit("; ", 1)[1] for line in r.stdout.splitlines()[:3]] == ["cost $0"] * 3
    r = cli(["-C", project.dir, "--json", "answers"], env=project.env)
    assert json.loads(r.stdout)["cost"] == 0
    r = cli(["-C", project.dir, "history", "--all"], env=project.env)
    costs = [(line.split()[1], line.rsplit("; ", 1)[1]) for line in r.stdout.splitlines()]
    assert costs == [("subtopics", "cost unknown"), ("questions", "cost unknown"), ("answers", "cost unknown"),
                     ("split", "$0"), ("subtopics", "$0"), ("questions", "$0"), ("answers", "$0"), ("split", "$0"),
                     ("answers", "$0")], r.stdout
    r = cli(["-C", project.dir, "history"], env=project.env)
    costs = {line.split()[0]: line.rsplit("; ", 1)[1] for line in r.stdout.splitlines() if line.split()[0] != "kept"}
    assert costs == {"subtopics": "cost unknown", "questions": "cost unknown", "answers": "cost unknown",
                     "split": "$0", "total": "cost unknown"}, r.stdout


def test_runs_ls_without_runs_says_so_on_stderr(project, cli):
    r = cli(["-C", project.dir, "runs", "ls"], env=project.env)
    assert r.returncode == 0 and r.stdout == ""
    assert r.stderr == "no training run yet (`overbrainer train` starts one)\n"
    r = cli(["-C", project.dir, "--json", "runs", "ls"], env=project.env)
    assert json.loads(r.stdout) == {"runs": []}
