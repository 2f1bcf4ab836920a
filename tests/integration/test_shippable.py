"""One answer to "may this run's model leave this machine?" (runs/retrieve.shippable) for export,
push, compare and eval, read from run.json's `retrieval_error` and the files that are home, never
from the words of the run's message. Real run folders; each gate is the function its command
calls."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from overbrainer.compare import plan
from overbrainer.errors import OverbrainerError
from overbrainer.eval.flow import child_gguf
from overbrainer.export.gate import check_run as export_gate
from overbrainer.hub.files import check_run as push_gate
from overbrainer.jobs import run_record as records
from overbrainer.jobs.run_record import RunRecord

RUN = "demo_20261201-101010"
MARKER_TEXT = "the job printed: (artifacts not retrieved: is just what it said)"


def shipped_run(project: Path, run_id: str = RUN, *, created: str = "2026-12-01T10:10:10Z", **fields) -> Path:
    """A run trained and exported by hand: its adapter, job.log, axolotl.yaml, a GGUF and its export.json."""
    run_dir = project / "runs" / run_id
    (run_dir / "output" / "gguf").mkdir(parents=True)
    (run_dir / "output" / "adapter_config.json").write_text("{}")
    (run_dir / "output" / "adapter_model.safetensors").write_bytes(b"weights")
    (run_dir / "job.log").write_text("trained\n")
    (run_dir / "axolotl.yaml").write_text("base_model: HuggingFaceTB/SmolLM2-135M-Instruct\nsequence_len: 512\n")
    gguf = f"output/gguf/{run_id}-Q4_K_M.gguf"
    (run_dir / gguf).write_bytes(b"GGUF")
    (run_dir / "export.json").write_text(json.dumps({"quantize": "Q4_K_M", "llama_cpp": "b1", "file": gguf,
                                                     "sha256": "ab" * 32, "size": 4, "created": created}))
    records.RunPlace(project / "runs", run_id).save(RunRecord(
        id=run_id, target="local", created=created, remote_dir=str(run_dir), **{"state": "succeeded", **fields}))
    return run_dir


GATES = {
    "export": lambda project, rid: export_gate(records.RunPlace(project / "runs", rid)),
    "push": lambda project, rid: push_gate(records.RunPlace(project / "runs", rid)),
    "compare": lambda project, rid: plan.pick_run(project, rid),
    "eval": lambda project, rid: child_gguf(project, rid),
}
DONE = {"export": "exported", "push": "pushed", "compare": "compared", "eval": "evaluated"}


@pytest.mark.parametrize("command", GATES)
def test_a_message_holding_the_notes_words_does_not_stop_a_run_whose_files_are_home(tmp_path, command):
    shipped_run(tmp_path, message=MARKER_TEXT)
    assert records.RunPlace(tmp_path / "runs", RUN).load().retrieval_error is None
    GATES[command](tmp_path, RUN)  # no error: the message is only a message


@pytest.mark.parametrize("command", GATES)
def test_a_run_whose_results_are_not_all_home_is_refused_by_every_command(tmp_path, command):
    run_dir = shipped_run(tmp_path)
    (run_dir / "job.log").unlink()  # its last retrieval did not finish
    with pytest.raises(OverbrainerError) as e:
        GATES[command](tmp_path, RUN)
    assert str(e.value) == (f"the results of run {RUN} are not all here: retrieve them with "
                            f"`overbrainer train attach {RUN}` first")


@pytest.mark.parametrize("command", GATES)
def test_a_recorded_retrieval_error_refuses_the_run_whatever_its_message(tmp_path, command):
    shipped_run(tmp_path, state="stopped", message=None, retrieval_error="verify failed: output/x differs",
                snapshot=records.Snapshot("output/checkpoint-3", 3))
    (tmp_path / "runs" / RUN / "output" / "checkpoint-3").mkdir()
    with pytest.raises(OverbrainerError, match="are not all here"):
        GATES[command](tmp_path, RUN)


@pytest.mark.parametrize("command", GATES)
def test_a_failed_run_is_refused_by_every_command_in_its_words(tmp_path, command):
    shipped_run(tmp_path, state="failed", message="the job exited with code 1")
    with pytest.raises(OverbrainerError) as e:
        GATES[command](tmp_path, RUN)
    assert str(e.value) == f"run {RUN} is failed: only a succeeded or stopped run can be {DONE[command]}"


def test_an_old_run_json_with_the_note_is_refused_until_collected(tmp_path):
    """run.json as older versions wrote it: no `retrieval_error`, the note in the message."""
    run_dir = shipped_run(tmp_path)
    old = json.loads((run_dir / "run.json").read_text())
    del old["retrieval_error"]
    old.update(state="stopped", snapshot={"checkpoint": "output/checkpoint-3", "step": 3},
               message="stopped (artifacts not retrieved: download failed)")
    (run_dir / "output" / "checkpoint-3").mkdir()
    (run_dir / "run.json").write_text(json.dumps(old))
    for command in GATES:
        with pytest.raises(OverbrainerError, match="are not all here"):
            GATES[command](tmp_path, RUN)
    old["message"] = "stopped"
    (run_dir / "run.json").write_text(json.dumps(old))
    for command in GATES:
        GATES[command](tmp_path, RUN)


@pytest.mark.parametrize("command", ["compare", "eval"])
def test_without_run_the_newest_shippable_run_holding_a_gguf_is_picked(tmp_path, command, caplog):
    shipped_run(tmp_path, "demo_20261101-000000", created="2026-11-01T00:00:00Z")
    newer = shipped_run(tmp_path, "demo_20261102-000000", created="2026-11-02T00:00:00Z")
    assert GATES[command](tmp_path, None).run == "demo_20261102-000000"
    (newer / "job.log").unlink()
    assert GATES[command](tmp_path, None).run == "demo_20261101-000000"
    assert "skipping run demo_20261102-000000: the results of run demo_20261102-000000 are not all here" in caplog.text
    (tmp_path / "runs" / "demo_20261101-000000" / "job.log").unlink()
    with pytest.raises(OverbrainerError, match="run demo_20261102-000000 are not all here"):
        GATES[command](tmp_path, None)
