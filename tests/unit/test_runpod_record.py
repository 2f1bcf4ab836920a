"""runs/<id>/pod.json: fields, attempts saved before the POST, the state machine, bad files."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from overbrainer.runpod.pod_record import (ADOPTED, AMBIGUOUS, CREATED, NOT_READY, SENT, UNAVAILABLE,
                                       IllegalTransition, InvalidPodRecord, PodRecord, PodState,
                                       PodEndpoint)

# The field names of the original tool's pod.json, version 1 (its projects must open unchanged).
FIELDS = {"version", "run_id", "state", "keep", "deadline", "deadline_unix", "attempts", "pod_id",
          "gpu_type", "gpu_count", "data_center_id", "cost_per_hour", "created_at", "created_unix",
          "ready_at", "ssh", "host_key", "deleted_at", "deleted_by", "estimated_spend", "stray_pods",
          "max_cost_usd", "network_volume_id", "max_volume_gb"}

ORIGINAL = {
    "version": 1, "run_id": "demo_20260101-120000", "state": "running", "keep": False,
    "deadline": "2026-01-01T14:00:05Z", "deadline_unix": 1767276005,
    "attempts": [
        {"name": "overbrainer-demo_20260101-120000-1", "gpu_type": "NVIDIA H100 80GB HBM3",
         "sent_at": "2026-01-01T12:00:02Z", "deadline_unix": 1767276002, "result": "unavailable",
         "detail": "no capacity for this GPU type"},
        {"name": "overbrainer-demo_20260101-120000-2", "gpu_type": "NVIDIA A40",
         "sent_at": "2026-01-01T12:00:05Z", "deadline_unix": 1767276005, "result": "created",
         "pod_id": "abc123xyz"},
    ],
    "pod_id": "abc123xyz", "gpu_type": "NVIDIA A40", "gpu_count": 1, "data_center_id": "EU-RO-1",
    "cost_per_hour": 0.44, "created_at": "2026-01-01T12:00:06Z", "created_unix": 1767268806,
    "ready_at": "2026-01-01T12:03:40Z", "ssh": {"host": "195.26.233.3", "port": 34446, "user": "root"},
    "host_key": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOiNmD+Zbw5wOkxAeUancFMF/Pv5Kc8FV+8wCXM4r+J9",
    "deleted_at": None, "deleted_by": None, "estimated_spend": None, "stray_pods": ["late9dup"],
    "max_cost_usd": 20.0, "network_volume_id": None, "max_volume_gb": None,
}


class Target:  # the RunpodTarget keys PodRecord.for_target reads
    gpu_count = 2
    max_cost_usd = 20.0
    network_volume_id = "vol1"
    max_volume_gb = 100


def new_record(tmp_path: Path, keep: bool = False) -> PodRecord:
    record = PodRecord.for_target("demo_1", Target(), keep=keep, host_key="ssh-ed25519 AAAA",
                                  path=tmp_path / "pod.json")
    record.save()
    return record


def on_disk(path: Path) -> dict:
    return json.loads(path.read_text())


def test_a_pod_json_of_the_original_tool_opens_and_rewrites_unchanged(tmp_path):
    path = tmp_path / "pod.json"
    path.write_text(json.dumps({**ORIGINAL, "lease": {"renewed_unix": 5}}, indent=2))
    record = PodRecord.load(path)
    assert record.state is PodState.RUNNING
    assert record.ssh == PodEndpoint("195.26.233.3", 34446, "root")
    assert [a.result for a in record.attempts] == [UNAVAILABLE, CREATED]
    record.save()
    assert on_disk(path) == {**ORIGINAL, "lease": {"renewed_unix": 5}}
    assert set(record.to_dict()) - {"lease"} == FIELDS


def test_a_new_record_has_every_field_and_copies_the_target(tmp_path):
    record = new_record(tmp_path)
    data = on_disk(tmp_path / "pod.json")
    assert set(data) == FIELDS
    assert (data["version"], data["state"], data["gpu_count"], data["max_cost_usd"],
            data["network_volume_id"], data["max_volume_gb"]) == (1, "creating", 2, 20.0, "vol1", 100)
    assert PodRecord.load(record.path) == record
    kept = PodRecord.for_target("demo_2", Target(), keep=True, host_key="k")
    assert kept.keep and kept.max_cost_usd is None  # no cost cap on a kept pod


def test_each_attempt_is_on_disk_with_result_sent_before_it_is_returned(tmp_path):
    record = new_record(tmp_path)
    first = record.begin_attempt("NVIDIA A40", 2, now=1000)
    assert on_disk(record.path)["attempts"] == [
        {"name": "overbrainer-demo_1-1", "gpu_type": "NVIDIA A40", "sent_at": "1970-01-01T00:16:40Z",
         "deadline_unix": 1000 + 7200, "result": SENT}]
    record.settle(first, UNAVAILABLE, detail="no capacity for this GPU type")
    second = record.begin_attempt("NVIDIA L40S", 2, now=1010)
    assert second.name == "overbrainer-demo_1-2"  # attempts count over the whole run
    assert [a["result"] for a in on_disk(record.path)["attempts"]] == [UNAVAILABLE, SENT]


def test_a_kept_run_attempt_has_no_deadline(tmp_path):
    record = new_record(tmp_path, keep=True)
    attempt = record.begin_attempt("NVIDIA A40", 2, now=1000)
    record.pod_created(attempt, "pod1", gpu_type=None, gpu_count=None, data_center_id=None, rate=0.5, now=1001)
    assert attempt.deadline_unix is None and record.deadline is None and record.deadline_unix is None


def test_an_attempt_that_cannot_be_saved_is_not_recorded(tmp_path):
    record = new_record(tmp_path)
    (tmp_path / "blocker").write_text("")
    record.path = tmp_path / "blocker" / "pod.json"  # its folder is a file: the save fails
    with pytest.raises(Exception, match="cannot write"):
        record.begin_attempt("NVIDIA A40", 1)
    assert record.attempts == []


def test_a_pod_goes_through_its_life_and_its_spend_is_estimated(tmp_path):
    record = new_record(tmp_path)
    attempt = record.begin_attempt("NVIDIA A40", 2, now=1000)
    record.pod_created(attempt, "pod1", gpu_type="NVIDIA A40", gpu_count=2, data_center_id="EU-RO-1",
                       rate=0.0, now=1002)
    assert (record.state, attempt.result, attempt.pod_id) == (PodState.PROVISIONING, CREATED, "pod1")
    assert (record.deadline_unix, record.deadline) == (8200, "1970-01-01T02:16:40Z")
    assert record.cost_per_hour is None and record.note_rate(0.88) and not record.note_rate(0.9)
    record.mark_ready(PodEndpoint("10.0.0.1", 2201), now=1100)
    record.transition("running")
    assert record.summary() == "pod running pod1 $0.88/h"
    assert record.spend_so_far(now=1002 + 1800) == 0.44
    record.transition(PodState.DELETING)
    record.mark_deleted("client", now=1002 + 3600)
    record.save()
    data = on_disk(record.path)
    assert (data["state"], data["deleted_by"], data["estimated_spend"]) == ("deleted", "client", 0.88)
    assert data["ssh"] == {"host": "10.0.0.1", "port": 2201, "user": "root"}
    assert record.summary() == "pod deleted about $0.88" and record.no_pod_left


def test_forbidden_transitions_name_the_file(tmp_path):
    record = new_record(tmp_path)
    with pytest.raises(IllegalTransition, match="needs a pod"):
        record.transition("provisioning")  # no pod recorded
    attempt = record.begin_attempt("A", 1, now=0)
    record.pod_created(attempt, "pod1", gpu_type=None, gpu_count=None, data_center_id=None, rate=1.0, now=0)
    with pytest.raises(IllegalTransition, match=rf"{tmp_path}.*from provisioning to running"):
        record.transition("running")
    record.transition("ready")
    record.transition("ready")  # staying put is allowed
    with pytest.raises(IllegalTransition, match="from ready to creating"):
        record.forget_pod()
    with pytest.raises(ValueError):
        record.transition("exploded")


def test_a_pod_that_never_became_ready_is_forgotten_for_the_next_type(tmp_path):
    record = new_record(tmp_path)
    attempt = record.begin_attempt("A", 1, now=0)
    record.pod_created(attempt, "pod1", gpu_type=None, gpu_count=None, data_center_id="X", rate=1.0, now=0)
    record.settle(attempt, NOT_READY, detail="not reachable over SSH after 900s")
    record.transition("deleting")
    record.mark_deleted("client", now=60)
    record.forget_pod()
    assert (record.state, record.pod_id, record.cost_per_hour, record.created_unix, record.deleted_by) == (
        PodState.CREATING, None, None, None, None)
    assert record.attempts[0].pod_id == "pod1" and record.attempts[0].result == NOT_READY
    assert record.summary() == "pod creating"


def test_attempt_results_follow_the_answers(tmp_path):
    record = new_record(tmp_path)
    attempt = record.begin_attempt("A", 1, now=0)
    record.settle(attempt, AMBIGUOUS, detail="Runpod answered 502")
    with pytest.raises(IllegalTransition, match="from ambiguous to created"):
        record.settle(attempt, CREATED)
    record.pod_created(attempt, "pod1", gpu_type=None, gpu_count=None, data_center_id=None, rate=None,
                       adopted=True, now=0)
    assert attempt.result == ADOPTED


def test_strays_keep_the_keys_until_they_are_confirmed_gone(tmp_path):
    record = new_record(tmp_path)
    assert record.no_pod_left
    record.add_strays(["dup1", "dup2", "dup1"])
    assert record.stray_pods == ["dup1", "dup2"] and not record.no_pod_left
    record.save()
    assert on_disk(record.path)["stray_pods"] == ["dup1", "dup2"]
    record.drop_stray("dup1")
    record.drop_stray("dup2")
    assert record.no_pod_left


def test_an_editor_rereads_what_another_command_saved(tmp_path):
    mine = new_record(tmp_path)
    other = PodRecord.load(mine.path)
    other.add_strays(["dup1"])
    other.save()
    assert mine.stray_pods == [] and mine.reload().stray_pods == ["dup1"]


def test_awaiting_retrieval_and_kept_read_in_runs_ls(tmp_path):
    path = tmp_path / "pod.json"
    path.write_text(json.dumps({**ORIGINAL, "state": "awaiting_retrieval"}))
    assert PodRecord.load(path).summary() == "pod awaiting retrieval abc123xyz +1 stray"
    path.write_text(json.dumps({**ORIGINAL, "state": "kept", "stray_pods": []}))
    assert PodRecord.load(path).summary() == "pod kept abc123xyz"


@pytest.mark.parametrize("change, message", [
    ({"version": 2}, r"has version 2, written by a newer overbrainer"),
    ({"version": None}, r"field version"),
    ({"state": "Running"}, r"field state: illegal state `Running`"),
    ({"state": "provisioning", "pod_id": None}, r"illegal state provisioning without a pod_id"),
    ({"ssh": {"host": "a b", "port": 22}}, r"field ssh\)"),
    ({"pod_id": "../x"}, r"field pod_id\)"),
    ({"attempts": [{"name": "n"}]}, r"field attempts\[0\]\.result\)"),
    ({"deleted_by": "someone"}, r"field deleted_by: unknown value `someone`"),
    ({"cost_per_hour": "0.4"}, r"field cost_per_hour\)"),
])
def test_a_bad_file_is_named_with_the_field_at_fault(tmp_path, change, message):
    path = tmp_path / "pod.json"
    path.write_text(json.dumps({**ORIGINAL, **change}))
    with pytest.raises(InvalidPodRecord, match=rf"^{path}.*{message}"):
        PodRecord.load(path)


def test_bad_json_gives_a_position_and_never_the_content(tmp_path):
    path = tmp_path / "pod.json"
    path.write_text('{\n  "run_id": "secret-ish"\n  "state": 1}')
    with pytest.raises(InvalidPodRecord) as e:
        PodRecord.load(path)
    assert str(e.value) == f"{path} is not a valid pod.json (line 3, column 3)"
    path.write_text("[1]")
    with pytest.raises(InvalidPodRecord, match="not a JSON object"):
        PodRecord.load(path)
    assert PodRecord.load_if_any(tmp_path / "none.json") is None


def test_the_file_mode_follows_the_umask(tmp_path):
    old = os.umask(0o027)
    try:
        record = new_record(tmp_path)
        record.begin_attempt("A", 1)
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(record.path).st_mode) == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["pod.json"]  # no temp file left


def test_a_pod_json_that_is_not_utf8_is_named_by_line_and_column_as_run_json_is(tmp_path):
    path = tmp_path / "pod.json"
    path.write_bytes(b'{\n  "run_id": "r\xff"}')
    with pytest.raises(InvalidPodRecord) as e:
        PodRecord.load(path)
    assert str(e.value) == f"{path} is not a valid pod.json (line 2, column 15)"
