"""jobs.side_job: a job that belongs to a run, on the run's local target and on an SSH target (the
real sshd), in-process through an Embedded front end whose detach Event is Ctrl-C."""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

import pytest

from overbrainer.errors import ConfigError, Interrupted, PersonMustAct, UsageError
from overbrainer.exec.runtime import Step
from overbrainer.front.bus import EventBus
from overbrainer.front.events import JobStatus, RunWatched
from overbrainer.front.session import Session
from overbrainer.jobs import run_record as rec
from overbrainer.jobs.side_job import SideJob, SideJobFailed, run_side_job
from tests.fixtures.timescale import scale

RUN = "demo_20260101-000000"


@pytest.fixture(autouse=True)
def fast_polls(monkeypatch):
    scale(monkeypatch, 0.025)


class Project:
    def __init__(self, tmp_path: Path, target: str, remote: Path | None = None):
        self.dir = tmp_path / "proj"
        self.runs = self.dir / "runs"
        self.run_dir = self.runs / RUN
        self.run_dir.mkdir(parents=True)
        lines = ["[project]", 'name = "Demo"', "",
                 "[providers.fake]", 'protocol = "openai"', "",
                 "[roles]", 'generator = { provider = "fake", model = "m" }',
                 'parent = { provider = "fake", model = "m" }', "",
                 "[targets.local]", 'kind = "local"', 'runtime = "native"', f'venv = "{sys.prefix}"', "",
                 "[targets.remote]", 'kind = "ssh"', 'runtime = "native"', f'venv = "{sys.prefix}"',
                 f'workdir = "{remote or tmp_path / "remote"}"', "",
                 "[targets.pod]", 'kind = "runpod"', "max_hours = 1", 'gpu_types = "auto"', ""]
        (self.dir / "overbrainer.toml").write_text("\n".join(lines))
        remote_dir = (self.runs.resolve() / RUN) if target == "local" else (remote / RUN)
        self.remote_run = Path(remote_dir)
        self.remote_run.mkdir(parents=True, exist_ok=True)
        self.record = rec.RunRecord(id=RUN, target=target, created="2026-01-01T00:00:00Z",
                                    remote_dir=str(remote_dir), state="succeeded")
        rec.RunPlace(self.runs, RUN).save(self.record)
        self.ctrl_c = threading.Event()
        self.bus = EventBus()
        self.sub = self.bus.subscribe()
        self.reports: list = []

    def run(self, job: SideJob, **kw):
        from overbrainer.config.load import load_config
        from overbrainer.front.frontend import Embedded

        session = Session(self.dir, Embedded(self.bus, self.ctrl_c, threading.Event(), self.reports.append))
        config = load_config(self.dir, environ={"OVERBRAINER_TARGETS__REMOTE__HOST": "unused"})
        return run_side_job(session.with_config(config), self.record, job,
                            **kw)


@pytest.fixture(params=["local", "ssh"])
def project(request, tmp_path, monkeypatch):
    if request.param == "local":
        return Project(tmp_path, "local")
    sshd = request.getfixturevalue("sshd")
    from overbrainer.exec.ssh import SshExecutor
    from overbrainer.jobs import lease

    remote = tmp_path / "remote"
    monkeypatch.setattr(lease, "open_executor",
                        lambda *a, **k: SshExecutor(sshd.endpoint(), workdir=str(remote)))
    return Project(tmp_path, "remote", remote)


def sh(stage: str, script: str) -> Step:
    return Step(stage, ("sh", "-c", script), from_path=True)


def test_a_job_runs_in_its_directory_and_its_files_come_back_verified(project):
    job = SideJob("export", files={"work.sh": "echo made > out.txt; mkdir -p sub; echo deep > sub/f\n"},
                  steps=[sh("make", "sh work.sh"), sh("check", 'echo "cache=$OVERBRAINER_CACHE $X"')],
                  env={"X": "ten"}, fetch=["out.txt", "sub"], label="export of run demo")
    result = project.run(job)
    assert result.state == "succeeded" and result.job_id.startswith("export_")
    assert result.job_dir == project.run_dir / "exports" / result.job_id
    assert (result.job_dir / "out.txt").read_text() == "made\n"
    assert (result.job_dir / "sub" / "f").read_text() == "deep\n"
    remote_job = project.remote_run / "exports" / result.job_id
    assert (remote_job / "out.txt").read_text() == "made\n"  # it ran in its own directory there
    saved = rec.RunPlace(project.run_dir / "exports", result.job_id).load()
    assert saved.state == "succeeded" and saved.remote_dir == str(remote_job) and saved.job is not None
    log = (result.job_dir / "job.log").read_text()
    assert f"cache={Path(saved.remote_dir).parents[2]}/.cache ten" in log
    stages = [json.loads(x)["name"] for x in (result.job_dir / "metrics.jsonl").read_text().splitlines()]
    assert stages == ["make", "check"]
    project.bus.close()
    events = list(project.sub)
    # its lines say `export:`, from the upload (watched at the start) to the follow's end
    assert {e.job for e in events if isinstance(e, RunWatched)} == {"export"}
    assert [e.status for e in events if isinstance(e, JobStatus)][-1] == "exited"
    # A second job of the same second takes the next suffix.
    again = project.run(SideJob("export", files={}, steps=[sh("x", "true")]))
    assert again.job_id != result.job_id


def test_a_failing_job_is_recorded_failed_with_the_last_line_of_its_log(project):
    job = SideJob("compare", files={}, steps=[sh("serve", "echo starting; echo 'no model here' >&2; exit 3")],
                  fetch=["server.log"], label="compare X of run demo")
    with pytest.raises(SideJobFailed) as e:
        project.run(job)
    assert str(e.value) == "compare X of run demo failed: no model here"
    result = e.value.result
    assert result.state == "failed" and result.job_dir.parent == project.run_dir / "compares"
    assert rec.RunPlace(result.job_dir.parent, result.job_id).load().state == "failed"
    assert "starting" in (result.job_dir / "job.log").read_text()


def test_ctrl_c_cancels_the_job_on_the_target(project):
    job = SideJob("export", files={}, steps=[sh("wait", "echo begun > begun; sleep 60; echo never > never")],
                  fetch=["begun"], label="export X of run demo")

    def press_when_started():
        exports = project.run_dir / "exports"
        while not any(exports.glob("*/run.json")) or not any(
                rec.RunPlace(exports, p.parent.name).load().job for p in exports.glob("*/run.json")):
            if project.ctrl_c.wait(0.05):
                return
        remote = project.remote_run / "exports"
        while not any(remote.glob("*/begun")):
            project.ctrl_c.wait(0.05)
        project.ctrl_c.set()

    presser = threading.Thread(target=press_when_started, daemon=True)
    presser.start()
    with pytest.raises(Interrupted) as e:
        project.run(job)
    presser.join(5)
    assert str(e.value) == "interrupted: export X of run demo cancelled"
    [job_dir] = (project.run_dir / "exports").iterdir()
    saved = rec.RunPlace(job_dir.parent, job_dir.name).load()
    assert saved.state == "cancelled"
    assert (job_dir / "begun").read_text() == "begun\n"  # fetched after the cancel
    remote_job = Path(saved.remote_dir)
    assert (remote_job / "cancelled").exists() and not (remote_job / "never").exists()


def test_targets_that_cannot_run_a_side_job(tmp_path):
    p = Project(tmp_path, "local")
    p.record.target = "gone"
    with pytest.raises(ConfigError, match=r"^target `gone` of run demo_20260101-000000 is no longer in "
                                          r"overbrainer.toml \(targets: `local`, `remote`, `pod`\)$"):
        p.run(SideJob("export", files={}, steps=[sh("x", "true")]))
    p.record.target = "pod"  # a new pod for the job: it needs the API key before anything is claimed
    with pytest.raises(PersonMustAct, match="^no Runpod API key: set OVERBRAINER_RUNPOD__API_KEY$"):
        p.run(SideJob("export", files={}, steps=[sh("x", "true")]))
    assert not (p.run_dir / "exports").exists()
    p.record.target = "local"
    with pytest.raises(UsageError, match="^--keep-pod only applies to a runpod target$"):
        p.run(SideJob("export", files={}, steps=[sh("x", "true")]), keep=True)
    with pytest.raises(ConfigError, match=r"^unknown target `elsewhere`: add \[targets.elsewhere\]"):
        p.run(SideJob("export", files={}, steps=[sh("x", "true")]), target="elsewhere")
    assert not (p.run_dir / "exports").exists()
