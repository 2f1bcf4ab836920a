import json

import pytest

from overbrainer.jobs.status import Status
from overbrainer.runs.states import Outcome, apply_proof, outcome, parse_proof

RID = "p_20260922-143005"


@pytest.mark.parametrize("status,lines,state,message", [
    (Status("exited", 0), 3, "succeeded", None),
    (Status("exited", 0), 0, "failed",
     f"the job wrote no metrics: the overbrainer metrics plugin was not loaded (see runs/{RID}/job.log)"),
    (Status("exited", 2), 5, "failed", f"the job exited with code 2 (see runs/{RID}/job.log)"),
    (Status("cancelled"), 0, "cancelled", None),
    (Status("lost"), 4, "failed", f"the job stopped without an exit code (see runs/{RID}/job.log)"),
])
def test_outcome_table(status, lines, state, message):
    assert outcome(status, lines, RID) == Outcome(state, message)


def proof(step=7, checkpoint=None, reason="requested"):
    return json.dumps({"checkpoint": checkpoint or f"output/checkpoint-{step}", "step": step,
                       "time": 1.5, "reason": reason}).encode()


def test_valid_proof_stops_a_succeeded_or_cancelled_run():
    for state in ("succeeded", "cancelled"):
        out = apply_proof(Outcome(state), proof(reason="deadline"))
        assert out.state == "stopped" and out.message is None
        assert (out.snapshot.checkpoint, out.snapshot.step, out.snapshot.reason) == ("output/checkpoint-7", 7, "deadline")


def test_absent_proof_changes_nothing():
    assert apply_proof(Outcome("succeeded"), None) == Outcome("succeeded")
    assert apply_proof(Outcome("succeeded"), b"  \n") == Outcome("succeeded")
    failed = Outcome("failed", "the job exited with code 1")
    assert apply_proof(failed, proof()) == failed


@pytest.mark.parametrize("bad", [
    proof(checkpoint="../../etc"), proof(checkpoint="output/checkpoint-8"), b"{nope", b"[1]",
    json.dumps({"checkpoint": "output/checkpoint-x", "step": "x"}).encode(), b"x" * 70000,
])
def test_invalid_proof_fails_succeeded_but_keeps_cancelled(bad):
    out = apply_proof(Outcome("succeeded"), bad)
    assert out.state == "failed" and out.message.startswith("the job stopped with a snapshot, but snapshot.json ")
    assert "etc" not in out.message
    assert apply_proof(Outcome("cancelled"), bad) == Outcome("cancelled")


def test_unknown_reason_reads_requested():
    assert parse_proof(proof(reason="whatever").decode()).reason == "requested"


def test_status_describe():
    assert Status("exited", 3).describe() == "exited with code 3"
    assert Status("lost").describe() == "lost (stopped without an exit code)"
