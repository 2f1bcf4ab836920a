"""Following and retrieval in-process, with a real LocalExecutor whose workdir is not the
project's runs/ (so upload, download and verification really copy and hash files, as over SSH)."""

from __future__ import annotations

import datetime
import json
import shutil
import threading
from pathlib import Path

import pytest

from overbrainer.errors import OverbrainerError
from overbrainer.exec.base import JobSpec
from overbrainer.exec.local import LocalExecutor
from overbrainer.front.bus import EventBus
from overbrainer.front.events import JobStatus, Metric, RunWatched
from overbrainer.front.interrupt import Interrupt
from overbrainer.jobs.follow import follow, job_id
from overbrainer.runs.retrieve import collect, finish, is_retrieved
from overbrainer.jobs.start import claim_target, create_run, start_job
from overbrainer.jobs.status import Status
from tests.fixtures.timescale import scale

JOB_OK = """
printf '%s\\n' '{"event":"begin","time":1,"max_steps":2}' >> metrics.jsonl
printf '%s\\n' '{"event":"log","time":2,"step":1,"max_steps":2,"loss":1.5}' >> metrics.jsonl
printf '%s' '{"event":"log","time":3,"step":2,"max_steps":2,"loss":1.25}' >> metrics.jsonl
mkdir -p output/checkpoint-2 && echo state > output/checkpoint-2/trainer_state.json
echo adapter > output/adapter_model.safetensors
"""


@pytest.fixture(autouse=True)
def fast_polls(monkeypatch):
    scale(monkeypatch, 0.025)


class Corrupting(LocalExecutor):
    """A real executor whose downloads come out damaged `bad` times."""

    def __init__(self, workdir, bad=1):
        super().__init__(workdir)
        self.bad = bad

    def download(self, remote, local, entries, exclude=(), progress=None):
        super().download(remote, local, entries, exclude, progress)
        if self.bad:
            self.bad -= 1
            (Path(local) / "output" / "adapter_model.safetensors").write_bytes(b"torn")


def started(tmp_path, script=JOB_OK, executor=None):
    runs = tmp_path / "proj" / "runs"
    ex = executor or LocalExecutor(tmp_path / "remote")
    record, place = create_run(runs, "Demo", "remote")
    place = claim_target(ex, record, place)
    (place.dir / "axolotl.yaml").write_text("adapter: lora\n")
    spec = JobSpec(dir=record.remote_dir, script=script)
    start_job(ex, record, place, spec)
    return ex, record, place


def followed(ex, record):
    bus = EventBus()
    sub = bus.subscribe()
    result = follow(ex, record, bus, Interrupt.off())
    bus.close()
    return result, list(sub)


def test_follow_publishes_events_then_finish_retrieves_and_verifies(tmp_path):
    ex, record, place = started(tmp_path)
    assert (Path(record.remote_dir) / "axolotl.yaml").is_file()  # uploaded
    assert place.load().state == "running"
    result, events = followed(ex, record)
    assert isinstance(events[0], RunWatched)
    statuses = [e for e in events if isinstance(e, JobStatus)]
    assert statuses[-1].status == "exited" and statuses[-1].code == 0
    assert len([s for s in statuses if s.status == "running"]) <= 1
    # The unterminated last line is read once the job has ended.
    assert [e.step for e in events if isinstance(e, Metric)] == [1, 2]
    assert result.summary.lines == 3
    finish(ex, record, place, result.status, result.summary.lines)
    saved = place.load()
    assert saved.state == "succeeded"
    assert (place.dir / "output" / "adapter_model.safetensors").read_text() == "adapter\n"
    assert not (place.dir / "output" / "checkpoint-2").exists()
    assert is_retrieved(saved, place.dir)


def test_a_failed_verification_leaves_the_run_running_until_retried(tmp_path):
    ex, record, place = started(tmp_path, executor=Corrupting(tmp_path / "remote"))
    result, _ = followed(ex, record)
    with pytest.raises(OverbrainerError) as e:
        finish(ex, record, place, result.status, result.summary.lines)
    assert 'verify failed: "output/adapter_model.safetensors" differs from the target (SHA-256 mismatch)' in str(e.value)
    assert f"`overbrainer train attach {record.id}`" in str(e.value)
    assert place.load().state == "running"
    finish(ex, record, place, result.status, result.summary.lines)
    assert place.load().state == "succeeded"


def test_a_failed_run_keeps_its_retrieval_error_that_collect_clears(tmp_path):
    script = JOB_OK + "exit 5\n"
    ex, record, place = started(tmp_path, script=script, executor=Corrupting(tmp_path / "remote"))
    result, _ = followed(ex, record)
    finish(ex, record, place, result.status, result.summary.lines)
    saved = place.load()
    assert saved.state == "failed"
    assert saved.message == f"the job exited with code 5 (see runs/{record.id}/job.log)"
    assert saved.retrieval_error.startswith("verify failed:")
    on_disk = json.loads((place.dir / "run.json").read_text())
    assert on_disk["message"] == saved.message and on_disk["retrieval_error"] == saved.retrieval_error
    assert saved.message_shown.startswith(f"the job exited with code 5 (see runs/{record.id}/job.log) "
                                          "(artifacts not retrieved: verify failed:")
    assert not is_retrieved(saved, place.dir)
    collect(ex, saved, place)
    again = place.load()
    assert again.message == f"the job exited with code 5 (see runs/{record.id}/job.log)"
    assert again.retrieval_error is None and json.loads((place.dir / "run.json").read_text())["retrieval_error"] is None
    assert is_retrieved(again, place.dir)


def test_a_deleted_run_dir_reads_lost_with_a_manifest_note(tmp_path):
    ex, record, place = started(tmp_path, script="sleep 30")
    ex.cancel(job_id(record))
    shutil.rmtree(record.remote_dir)
    result, _ = followed(ex, record)
    assert result.status == Status("lost")
    finish(ex, record, place, result.status, result.summary.lines)
    saved = place.load()
    assert saved.state == "failed"
    assert saved.message == f"the job stopped without an exit code (see runs/{record.id}/job.log)"
    assert saved.retrieval_error == f"manifest failed: {record.remote_dir} does not exist"


def test_succeeded_without_output_fails(tmp_path):
    script = "printf '%s\\n' '{\"event\":\"begin\",\"time\":1,\"max_steps\":1}' >> metrics.jsonl"
    ex, record, place = started(tmp_path, script=script)
    result, _ = followed(ex, record)
    finish(ex, record, place, result.status, result.summary.lines)
    saved = place.load()
    assert (saved.state, saved.message) == ("failed", f"the job succeeded but left no output (see runs/{record.id}/job.log)")


def test_follow_gives_up_after_the_failure_budget(tmp_path):
    ex, record, place = started(tmp_path, script="sleep 30")

    class Broken(LocalExecutor):
        def status(self, job):
            raise OverbrainerError("job status failed: connection reset")

    broken = Broken(tmp_path / "remote")
    with pytest.raises(OverbrainerError) as e:
        follow(broken, record, EventBus(), Interrupt.off())
    assert str(e.value) == (f"cannot follow run {record.id}: job status failed: connection reset; "
                            f"follow it again with `overbrainer train attach {record.id}`")
    ex.cancel(job_id(record))


def test_follow_returns_none_when_interrupted(tmp_path):
    ex, record, place = started(tmp_path, script="sleep 30")
    stop = threading.Event()
    interrupt = Interrupt.on(stop)
    stop.set()
    assert follow(ex, record, EventBus(), interrupt) is None
    assert ex.status(job_id(record)).kind == "running"
    ex.cancel(job_id(record))


NOW = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)


def test_two_checkouts_sharing_a_workdir_get_distinct_runs(tmp_path):
    ex = LocalExecutor(tmp_path / "remote")
    a, a_place = create_run(tmp_path / "a" / "runs", "Demo", "remote", now=NOW)
    claim_target(ex, a, a_place)
    b, b_place = create_run(tmp_path / "b" / "runs", "Demo", "remote", now=NOW)
    assert b.id == a.id  # each checkout claims the same ID here; the target tells them apart
    assert claim_target(ex, b, b_place).run_id == b.id
    assert b.id == f"{a.id}_2" and (tmp_path / "b" / "runs" / b.id / "run.json").is_file()
    assert not (tmp_path / "b" / "runs" / a.id).exists()  # the taken ID left nothing behind
    assert json.loads((tmp_path / "a" / "runs" / a.id / "run.json").read_text())["state"] == "preparing"
    assert json.loads((tmp_path / "b" / "runs" / b.id / "run.json").read_text())["remote_dir"].endswith(b.id)
