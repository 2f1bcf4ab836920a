"""Review fixes: a run record's snapshot can only name output/checkpoint-<step> (it is joined to
local paths: `--resume-from` copies it, `attach` checks it), and `runs logs` strips C1 controls."""

from __future__ import annotations

import json

import pytest

from overbrainer.runs import record as rec


def _data(**snapshot):
    return {"id": "demo_20260101-000000", "target": "local", "created": "2026-01-01T00:00:00Z",
            "remote_dir": "/w/demo_20260101-000000", "job": {"dir": "/w/demo_20260101-000000", "pid": 42,
                                                               "container": None},
            "state": "stopped", "message": None, "snapshot": snapshot, "snapshots": True}


@pytest.mark.parametrize("checkpoint, step", [
    ("../../../home/me/.ssh", 3),
    ("/etc", 3),
    ("output/checkpoint-3/../../..", 3),
    ("output/checkpoint-4", 3),
])
def test_a_snapshot_naming_another_path_is_refused(checkpoint, step):
    raw = json.dumps(_data(checkpoint=checkpoint, step=step, reason="requested")).encode()
    with pytest.raises(rec.InvalidRecord) as e:
        rec.parse(raw, "runs/x/run.json")
    assert str(e.value) == "runs/x/run.json is not a valid run record (field snapshot)"
    assert checkpoint not in str(e.value)


def test_a_valid_snapshot_still_loads():
    raw = json.dumps(_data(checkpoint="output/checkpoint-3", step=3, reason="disk")).encode()
    loaded = rec.parse(raw, "runs/x/run.json")
    assert (loaded.snapshot.checkpoint, loaded.snapshot.step, loaded.snapshot.reason) == (
        "output/checkpoint-3", 3, "disk")


def test_runs_logs_strips_c1_control_characters():
    from overbrainer.cli.runs_cmd import clean_line

    # U+009B is the one-character CSI: `\x9b31m` colours text like `\x1b[31m` on 8-bit terminals.
    raw = "a\u009b31mred\u009b0m b\u0085c\u009d0;title\u009c d".encode("utf-8")
    assert clean_line(raw) == "ared bc d"
