"""What the keys that steer running work mean for the task running now, in words: its status
line, what interrupting it (Ctrl-C, quitting) does, and why `d` or `a` does not apply.

A task is *following* a run once the run's watch started (a `RunWatched` event) and until the
watch ends; it is *provisioning* while a pod is made for a new run on a Runpod target (`PodStatus`
events) and nothing follows the run yet.
"""

from __future__ import annotations

from typing import Any

from overbrainer.tui.live import Live
from overbrainer.tui.tasks import DATASET, PIPELINE


def following(task: Any, live: Live) -> bool:
    seen = live.runs.get(task.run_id) if task.run_id else None
    return seen is not None and seen.watched


def provisioning(task: Any, live: Live) -> bool:
    if not task.pod or following(task, live):
        return False
    seen = live.runs.get(task.run_id) if task.run_id else None
    return seen is not None and seen.provisioning


def status(task: Any, live: Live) -> str:
    """The status line while `task` runs."""
    if following(task, live):
        seen = live.runs[task.run_id]
        summary = seen.summary
        where = summary.describe() if summary.lines else "waiting for its first metrics"
        return f"following run {task.run_id}: {where} (d detaches: the job goes on)"
    if provisioning(task, live):
        pod = live.runs[task.run_id].pod
        return f"making a pod for run {task.run_id}: {pod.phase.replace('_', ' ')} (a abandons: the pod is deleted)"
    if task.kind == PIPELINE and task.detach.is_set():
        if task.abandon.is_set():
            return f"{task.label}: stopping, its requests in flight abandoned"
        return f"{task.label}: stopping, waiting for its requests in flight (s again abandons them)"
    stage = live.stages.get(live.current_stage or "") if task.kind == PIPELINE else None
    if stage is not None and not stage.finished:
        return (f"{task.label}: {stage.stage} {stage.handled}/{stage.total}, {stage.retries} retries, "
                f"{stage.cost_text()} (s in Pipeline stops it)")
    return f"{task.label}: running"


def consequence(task: Any, live: Live) -> str:
    """What interrupting `task` now does (Ctrl-C, or quitting the TUI)."""
    if following(task, live):
        text = (f"run {task.run_id} keeps running on its target; `overbrainer train attach {task.run_id}` "
                "(or Enter on it in Training) follows it again")
        if task.pod:
            text += "; its pod bills until the run is collected, or its watchdog deletes it at max_hours"
        return text
    if provisioning(task, live):
        return f"the pod being made for run {task.run_id} is deleted and the run fails before any training"
    if task.kind == PIPELINE:
        if task.detach.is_set():
            return ("the requests still in flight are abandoned (the provider may bill them); what came back "
                    "is kept")
        return ("the stage stops at a safe point: what it has is kept, its requests in flight get [pipeline] "
                "stop_grace_secs to come back (interrupt again to abandon them), and running it again (or "
                "`overbrainer run`) resumes it")
    if task.kind == DATASET:
        return "the rejection finishes first"
    return ("what it does now finishes first (a job's start, a retrieval, a cancel), then it stops; a run whose "
            "job started keeps running and `overbrainer train attach` collects it")


def cannot_detach(task: Any, live: Live) -> str | None:
    """Why `d` does nothing now, or None when it detaches the followed run."""
    if following(task, live):
        return None
    if provisioning(task, live):
        return f"run {task.run_id} is still being provisioned: a abandons it"
    return f"no run is followed now: d detaches a followed training run (Ctrl-C interrupts {task.label})"


def cannot_abandon(task: Any, live: Live) -> str | None:
    """Why `a` does nothing now, or None when it abandons the provisioning."""
    if not task.pod:
        return f"a abandons a Runpod provisioning: {task.label} makes no pod"
    if following(task, live):
        return f"the pod of run {task.run_id} is made and its job runs: d detaches, c cancels the run"
    return None
