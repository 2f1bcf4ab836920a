"""`runs ls` columns line up whatever the target names; `runs show` and `runs logs` word a missing
run the same way; `split --topic` says what it wrote."""

from __future__ import annotations

import json


def _run(project, name, target, state, **fields):
    run = project.dir / "runs" / name
    run.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({
        "id": name, "target": target, "created": "2026-01-01T00:00:00Z", "remote_dir": str(run),
        "job": None, "state": state, "message": None, **fields}))


def test_runs_ls_columns_are_aligned(project, cli):
    _run(project, "train_demo_20260101-000000", "gpu-box-in-the-basement", "succeeded")
    _run(project, "train_demo_20260102-000000", "here", "cancelled")
    r = cli(["-C", project.dir, "runs", "ls"])
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 2
    assert lines[0].index("2026-01-01T") == lines[1].index("2026-01-01T")
    assert lines[0].index("gpu-box") == lines[1].index("here")


def test_runs_show_tells_a_failed_retrieval_as_before_from_an_old_record_and_a_new_one(project, cli):
    told = "the job exited with code 1 (see job.log) (artifacts not retrieved: download failed)"
    _run(project, "old_20260101-000000", "here", "failed", message=told)  # written before retrieval_error
    _run(project, "new_20260101-000000", "here", "failed", message="the job exited with code 1 (see job.log)",
         retrieval_error="download failed")
    for rid in ("old_20260101-000000", "new_20260101-000000"):
        r = cli(["-C", project.dir, "runs", "show", rid])
        assert r.returncode == 0 and f"message:   {told}\n" in r.stdout, r.stdout
        assert json.loads(cli(["--json", "-C", project.dir, "runs", "show", rid]).stdout)["message"] == told


def test_runs_show_and_logs_word_a_missing_run_alike(project, cli):
    show = cli(["-C", project.dir, "runs", "show", "nope_1"])
    logs = cli(["-C", project.dir, "runs", "logs", "nope_1"])
    assert show.returncode == logs.returncode == 1
    assert show.stderr == logs.stderr == "error: no run `nope_1` in runs/\n"


def test_split_topic_reports_what_it_wrote(project, fake_provider, cli):
    project.write(topics=2, subtopics=1, questions=3)
    assert cli(["-C", project.dir, "run"], env=project.env).returncode == 0
    r = cli(["-C", project.dir, "split", "--topic", "topic1"], env=project.env)
    assert r.returncode == 0, r.stderr
    train = len((project.data / "train.jsonl").read_text().splitlines())
    evals = len((project.data / "eval.jsonl").read_text().splitlines())
    assert train + evals == 6
    assert r.stdout.startswith("split: topic topic1: ")
    assert r.stdout.rstrip().endswith(f"; wrote {train} train examples and {evals} eval example"
                                      f"{'' if evals == 1 else 's'} of all topics to data/train.jsonl "
                                      "and data/eval.jsonl")
    data = json.loads(cli(["--json", "-C", project.dir, "split", "--topic", "topic1"], env=project.env).stdout)
    assert data["topic"] == "topic1" and data["written"] == {"train": train, "eval": evals}
