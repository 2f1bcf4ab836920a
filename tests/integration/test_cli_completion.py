"""Shell completion through click (`_OVERBRAINER_COMPLETE`), with run IDs, topics and targets read
from the project named by -C."""

from __future__ import annotations

import json


def complete(cli, words: str, shell: str = "zsh"):
    """What the shell would be offered for the last word of `words`."""
    parts = words.split(" ")
    r = cli([], env={"_OVERBRAINER_COMPLETE": f"{shell}_complete", "COMP_WORDS": words,
                     "COMP_CWORD": str(len(parts) - 1)})
    assert r.returncode == 0 and r.stderr == "", r.stderr
    return r.stdout


def make_project(tmp_path, cli):
    project = tmp_path / "p"
    assert cli(["init", project]).returncode == 0
    for rid, created, state in [("p_20260102-000000", "2026-01-02T00:00:00Z", "running"),
                                ("p_20260101-000000", "2026-01-01T00:00:00Z", "succeeded")]:
        (project / "runs" / rid).mkdir(parents=True)
        (project / "runs" / rid / "run.json").write_text(json.dumps(
            {"id": rid, "target": "local", "created": created, "remote_dir": "/x", "job": None,
             "state": state, "message": None}))
    (project / "runs" / ".hf-cache").mkdir()
    (project / "runs" / "broken").mkdir()
    return project


def test_commands_complete(tmp_path, cli):
    out = complete(cli, "overbrainer tr", shell="bash")
    assert out.split() == ["plain,train"]


def test_run_ids_complete_oldest_first_with_state_and_target(tmp_path, cli):
    project = make_project(tmp_path, cli)
    out = complete(cli, f"overbrainer -C {project} train attach ")
    lines = out.splitlines()
    # zsh: type, value, help, for each candidate
    assert lines == ["plain", "p_20260101-000000", "succeeded, local",
                     "plain", "p_20260102-000000", "running, local"]
    assert "p_20260102-000000" in complete(cli, f"overbrainer -C {project} train --resume-from p_2026010")


def test_topics_and_targets_complete(tmp_path, cli):
    project = make_project(tmp_path, cli)
    assert complete(cli, f"overbrainer -C {project} answers --topic ", shell="bash").split() == ["plain,ownership"]
    assert complete(cli, f"overbrainer -C {project} train --target ", shell="bash").split() == ["plain,local"]


def test_an_unreadable_project_offers_nothing(tmp_path, cli):
    assert complete(cli, f"overbrainer -C {tmp_path / 'none'} train attach ", shell="bash").split() == []


def test_runs_commands_complete_run_ids(tmp_path, cli):
    project = make_project(tmp_path, cli)
    out = complete(cli, f"overbrainer -C {project} runs logs p_20260101", shell="bash")
    assert out.split() == ["plain,p_20260101-000000"]
