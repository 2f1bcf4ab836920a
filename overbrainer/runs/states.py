"""The outcome rules of a training job (docs/runs.md#states): job status + plugin lines → state and
message, then the snapshot proof (succeeded/cancelled → stopped when valid)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from overbrainer.jobs.run_record import CANCELLED, FAILED, REASONS, STOPPED, SUCCEEDED, Snapshot
from overbrainer.jobs.status import Status

PROOF_LIMIT = 64 * 1024


@dataclass
class Outcome:
    state: str
    message: str | None = None
    snapshot: Snapshot | None = None


def outcome(status: Status, plugin_lines: int, run_id: str) -> Outcome:
    """What a job that ended says about its run (before the snapshot proof and retrieval)."""
    log_hint = f"(see runs/{run_id}/job.log)"
    if status.kind == "cancelled":
        return Outcome(CANCELLED)
    if status.kind == "exited":
        if status.code == 0:
            if plugin_lines > 0:
                return Outcome(SUCCEEDED)
            return Outcome(FAILED, "the job wrote no metrics: the overbrainer metrics plugin was not "
                                   f"loaded {log_hint}")
        return Outcome(FAILED, f"the job exited with code {status.code} {log_hint}")
    return Outcome(FAILED, f"the job stopped without an exit code {log_hint}")


def parse_proof(text: str) -> Snapshot:
    """A valid `snapshot.json` proof, or ValueError saying (without content) what is wrong."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"is not valid JSON (line {e.lineno}, column {e.colno})") from None
    if not isinstance(data, dict):
        raise ValueError("is not a JSON object")
    step = data.get("step")
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        raise ValueError("has no valid step")
    checkpoint = data.get("checkpoint")
    if checkpoint != Snapshot.path_for(step):
        raise ValueError(f"does not name {Snapshot.path_for(step)}")
    reason = data.get("reason")
    if reason not in REASONS:
        reason = "requested"
    return Snapshot(checkpoint, step, reason)


def apply_proof(result: Outcome, proof: bytes | None) -> Outcome:
    """Succeeded/cancelled + a valid proof → stopped; an invalid proof fails a succeeded run."""
    if result.state not in (SUCCEEDED, CANCELLED) or not proof or not proof.strip():
        return result
    if len(proof) > PROOF_LIMIT:
        problem = f"is larger than {PROOF_LIMIT // 1024} KiB"
    else:
        try:
            return Outcome(STOPPED, None, parse_proof(proof.decode("utf-8")))
        except UnicodeDecodeError:
            problem = "is not UTF-8"
        except ValueError as e:
            problem = str(e)
    if result.state == CANCELLED:
        return result
    return Outcome(FAILED, f"the job stopped with a snapshot, but snapshot.json {problem}")
