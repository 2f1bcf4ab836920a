import json

import pytest

from overbrainer.errors import OverbrainerError
from overbrainer.jobs import run_record as rec
from overbrainer.exec.base import Container, JobId
from overbrainer.jobs.run_record import RunRecord, Snapshot

MARKER = "SECRET-MARKER-7f3a"


def make(runs, run_id="p_20260922-143005", **kw):
    (runs / run_id).mkdir(parents=True, exist_ok=True)
    r = RunRecord(id=run_id, target="local", created="2026-09-22T14:30:05Z",
                  remote_dir=str(runs / run_id), **kw)
    rec.RunPlace(runs, r.id).save(r)
    return r


def test_round_trip_with_every_field(tmp_path):
    r = make(tmp_path, state="stopped", job=JobId("/w/x", 4242, Container("podman", "overbrainer-x")),
             message=None, retrieval_error="verify failed", snapshot=Snapshot("output/checkpoint-7", 7, "deadline"),
             resumed_from="p_20260101-000000")
    loaded = rec.RunPlace(tmp_path, r.id).load()
    assert loaded == r
    text = (tmp_path / r.id / "run.json").read_text()
    assert text.endswith("}\n") and text.startswith("{\n  ")
    data = json.loads(text)
    assert list(data) == ["id", "target", "created", "remote_dir", "job", "state", "message", "retrieval_error",
                          "snapshot", "resumed_from", "snapshots"]
    assert data["job"] == {"dir": "/w/x", "pid": 4242, "container": {"engine": "podman", "name": "overbrainer-x"}}
    assert not [p for p in (tmp_path / r.id).iterdir() if p.name.endswith(".tmp")]


def test_optional_fields_are_omitted_and_unknown_ones_kept(tmp_path):
    r = make(tmp_path)
    data = json.loads((tmp_path / r.id / "run.json").read_text())
    assert "snapshot" not in data and "resumed_from" not in data
    assert data["job"] is None and data["snapshots"] is True
    data["future_field"] = {"a": 1}
    (tmp_path / r.id / "run.json").write_text(json.dumps(data))
    loaded = rec.RunPlace(tmp_path, r.id).load()
    rec.RunPlace(tmp_path, loaded.id).save(loaded)
    assert json.loads((tmp_path / r.id / "run.json").read_text())["future_field"] == {"a": 1}


def test_legacy_record_loads(tmp_path):
    run_id = "20240101-120000-ab12"
    (tmp_path / run_id).mkdir()
    (tmp_path / run_id / "run.json").write_text(json.dumps({
        "id": run_id, "target": "local", "created": "2024-01-01T12:00:00Z",
        "remote_dir": "/x", "job": {"dir": "/x", "pid": 99}, "state": "succeeded", "message": None}))
    r = rec.RunPlace(tmp_path, run_id).load()
    assert r.job.pid == 99 and r.job.container is None and r.state == "succeeded"


def test_a_place_holds_its_run_and_saves_only_its_record(tmp_path):
    place = rec.RunPlace(tmp_path, "p_20260922-143005")
    assert (place.dir, place.record_path) == (tmp_path / "p_20260922-143005", tmp_path / "p_20260922-143005" / "run.json")
    other = make(tmp_path, run_id="p_20260922-143006")
    with pytest.raises(ValueError, match="the record of run p_20260922-143006 is not saved as run p_20260922-143005"):
        place.save(other)
    assert not place.dir.exists()


def test_missing_record(tmp_path):
    with pytest.raises(OverbrainerError, match="no run `nope` in runs/"):
        rec.RunPlace(tmp_path, "nope").load()


def test_corrupt_record_reports_position_never_content(tmp_path):
    run_id = "p_20260922-143005"
    (tmp_path / run_id).mkdir()
    (tmp_path / run_id / "run.json").write_text('{\n  "id": "x",\n  "target": ' + MARKER + "\n}")
    with pytest.raises(OverbrainerError) as e:
        rec.RunPlace(tmp_path, run_id).load()
    msg = str(e.value)
    assert msg == f"{tmp_path / run_id / 'run.json'} is not a valid run record (line 3, column 13)"
    assert MARKER not in msg


def test_non_utf8_record_reports_position(tmp_path):
    run_id = "p_20260922-143005"
    (tmp_path / run_id).mkdir()
    (tmp_path / run_id / "run.json").write_bytes(b'{\n "a": "\xff"}')
    with pytest.raises(OverbrainerError, match=r"\(line 2, column 8\)"):
        rec.RunPlace(tmp_path, run_id).load()


@pytest.mark.parametrize("field,value,name", [
    ("job", {"dir": "/x", "pid": 1}, "job.pid"),
    ("job", {"dir": "/x", "pid": 0}, "job.pid"),
    ("job", {"dir": "/x", "pid": 5, "container": {"engine": MARKER, "name": "n"}}, "job.container"),
    ("state", MARKER, "state"),
    ("id", "../" + MARKER, "id"),
])
def test_invalid_fields_are_named_without_values(tmp_path, field, value, name):
    r = make(tmp_path)
    path = tmp_path / r.id / "run.json"
    data = json.loads(path.read_text())
    data[field] = value
    path.write_text(json.dumps(data))
    with pytest.raises(OverbrainerError) as e:
        rec.RunPlace(tmp_path, r.id).load()
    assert str(e.value) == f"{path} is not a valid run record (field {name})"
    assert MARKER not in str(e.value)


def test_list_runs_sorts_by_created_and_skips_unreadable(tmp_path, caplog):
    make(tmp_path, "b_20260101-000000")
    r2 = make(tmp_path, "a_20260922-143005")
    r2.created = "2025-01-01T00:00:00Z"
    rec.RunPlace(tmp_path, r2.id).save(r2)
    (tmp_path / "bad_1").mkdir()
    (tmp_path / "bad_1" / "run.json").write_text("{" + MARKER)
    (tmp_path / ".hf-cache").mkdir()
    runs = rec.list_runs(tmp_path)
    assert [r.id for r in runs] == ["a_20260922-143005", "b_20260101-000000"]
    assert "skipping runs/bad_1" in caplog.text and MARKER not in caplog.text
    assert rec.list_runs(tmp_path / "none") == []


def test_retrieval_is_a_field_and_the_message_is_only_the_message(tmp_path):
    r = make(tmp_path, state="failed", message="the job exited with code 1", retrieval_error="download failed")
    data = json.loads((tmp_path / r.id / "run.json").read_text())
    assert (data["message"], data["retrieval_error"]) == ("the job exited with code 1", "download failed")
    loaded = rec.RunPlace(tmp_path, r.id).load()
    assert loaded.message_shown == "the job exited with code 1 (artifacts not retrieved: download failed)"
    assert RunRecord("x", "t", "c", "/r", message=None, retrieval_error="x").message_shown == "artifacts not retrieved: x"
    assert RunRecord("x", "t", "c", "/r", message="m").message_shown == "m"
    # A message that happens to hold the note's words says nothing of retrieval any more.
    told = "the job exited with code 1 (artifacts not retrieved: a line the job printed)"
    r = make(tmp_path, "q_20260922-143005", state="failed", message=told)
    assert json.loads((tmp_path / r.id / "run.json").read_text())["retrieval_error"] is None
    loaded = rec.RunPlace(tmp_path, r.id).load()
    assert (loaded.message, loaded.retrieval_error, loaded.message_shown) == (told, None, told)


@pytest.mark.parametrize("message, kept, error", [
    ("the job exited with code 1 (artifacts not retrieved: download failed)", "the job exited with code 1",
     "download failed"),
    ("artifacts not retrieved: verify failed: (x) differs", None, "verify failed: (x) differs"),
    ("interrupted (artifacts not retrieved: a (nested) error)", "interrupted", "a (nested) error"),
    ("the job exited with code 1", "the job exited with code 1", None),
    (None, None, None),
])
def test_a_run_json_written_before_the_field_reads_its_note(tmp_path, message, kept, error):
    """run.json as older versions wrote it: no `retrieval_error`, the note at the end of `message`."""
    run_id = "old_20250101-000000"
    (tmp_path / run_id).mkdir()
    old = {"id": run_id, "target": "local", "created": "2025-01-01T00:00:00Z", "remote_dir": "/w/old",
           "job": None, "state": "failed", "message": message, "snapshots": True}
    (tmp_path / run_id / "run.json").write_text(json.dumps(old, indent=2) + "\n")
    loaded = rec.RunPlace(tmp_path, run_id).load()
    assert (loaded.message, loaded.retrieval_error) == (kept, error)
    assert loaded.message_shown == message  # shown as it was
    rec.RunPlace(tmp_path, loaded.id).save(loaded)  # rewritten in the new form, read the same
    data = json.loads((tmp_path / run_id / "run.json").read_text())
    assert (data["message"], data["retrieval_error"]) == (kept, error)
    assert rec.RunPlace(tmp_path, run_id).load() == loaded


def test_a_retrieval_error_that_is_not_text_is_refused(tmp_path):
    r = make(tmp_path)
    data = json.loads((tmp_path / r.id / "run.json").read_text())
    (tmp_path / r.id / "run.json").write_text(json.dumps({**data, "retrieval_error": 3}))
    with pytest.raises(OverbrainerError, match="field retrieval_error"):
        rec.RunPlace(tmp_path, r.id).load()
