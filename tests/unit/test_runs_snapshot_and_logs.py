"""Review fixes: a run record's snapshot can only name output/checkpoint-<step> (it is joined to
local paths: `--resume-from` copies it, `attach` checks it), and `runs logs` strips C1 controls."""

from __future__ import annotations

import json

import pytest

from overbrainer.jobs import run_record as rec


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


class _Source:
    """A log in memory that counts what was read (the remote one reads through read_from)."""

    def __init__(self, data: bytes):
        self.data, self.read_bytes = data, 0

    def size(self):
        return len(self.data)

    def read(self, offset, limit):
        out = self.data[offset:offset + limit]
        self.read_bytes += len(out)
        return out


def test_a_tail_of_a_huge_log_reads_only_its_end():
    from overbrainer.runs.logs import CHUNK, LogReader

    src = _Source(b"".join(b"line %d\n" % i for i in range(2_000_000)) + b"cut")
    assert len(src.data) > 200 * CHUNK
    r = LogReader(src)
    assert list(r.lines(2, partial=True)) == [b"line 1999999", b"cut"]
    assert src.read_bytes <= CHUNK
    r = LogReader(src)
    assert list(r.lines(2)) == [b"line 1999998", b"line 1999999"]
    assert r.pending == b"cut" and r.offset == len(src.data)
    src.data += b" off\nnext\n"
    assert list(r.forward()) == [b"cut off", b"next"]
    assert list(LogReader(src).lines(0, partial=True)) == []


def test_a_log_without_a_tail_is_read_in_chunks_and_missing_reads_none():
    from overbrainer.runs.logs import CHUNK, LogReader

    src = _Source(b"a" * (3 * CHUNK) + b"\nb\nc")
    lines = LogReader(src).lines(None, partial=True)
    assert [len(x) for x in lines] == [3 * CHUNK, 1, 1]

    class Missing(_Source):
        def size(self):
            return None
    assert LogReader(Missing(b"")).lines(3) is None


def test_a_follow_reads_once_more_after_the_run_ended():
    """The job's last line may land after a read found nothing new, and the run end before the
    follow asks: what the log holds once the run ended is still printed."""
    from overbrainer.runs.logs import LogReader, follow

    class Job(_Source):
        ended = False

        def read(self, offset, limit):
            out = super().read(offset, limit)
            if not out and not self.ended:  # right after this empty read: the last line, then the end
                self.data += b"token present\n"
                self.ended = True
            return out

    class NoWait:
        def wait(self, seconds):
            return False

    src = Job(b"first\n")
    reader = LogReader(src)
    assert list(reader.lines(None)) == [b"first"]
    assert list(follow(reader, lambda: src.ended, NoWait(), "r1")) == [b"token present"]
