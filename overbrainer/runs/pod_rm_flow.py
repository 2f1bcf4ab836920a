"""`overbrainer pod rm RUN_ID [--force]`: delete the pods of one run and confirm each delete.

Without --force: a run not in this project's runs/ is refused; a run still starting (preparing,
or running before its pod exists) is left alone; a running run keeps its training pod (its other
marker pods are deleted). Otherwise the recorded pod (even a kept one), its strays and every other
pod carrying the run marker are deleted, continuing past failures; the run's keys and host-key
secret are forgotten once no pod is left. Forced on a run in progress, the run is failed.
"""

from __future__ import annotations

import logging
import time

from overbrainer.errors import OverbrainerError
from overbrainer.runpod import cost
from overbrainer.runs import ids
from overbrainer.runs.pods_flow import FORCED, _client, unix_of, known_run
from overbrainer.runs.record import PREPARING, RUNNING

log = logging.getLogger(__name__)


class PodRmRefused(OverbrainerError):
    pass


def deleted_line(pod_id: str, seconds: float | None, spend: float | None) -> str:
    """`pod: P deleted[ after 2h 3m][, about $1.06]`."""
    text = f"pod: {pod_id} deleted"
    if seconds is not None and seconds >= 0:
        s = int(round(seconds))
        h, m, sec = s // 3600, s % 3600 // 60, s % 60
        text += " after " + (f"{h}h {m}m" if h else f"{m}m {sec}s" if m else f"{sec}s")
    if spend is not None:
        text += f", {cost.format_spend(spend)}"
    return text


def rm_flow(session, config, *, run_id: str, force: bool) -> None:
    from overbrainer.runpod.remove import NotDeleted, REQUESTED, delete_confirmed, forget_run, remove
    from overbrainer.runpod.timing import Timing
    from overbrainer.runs.pod_run import fail_run

    ids.validate(run_id)
    runs_dir = session.project_dir / "runs"
    known = known_run(runs_dir, run_id)
    if not known.present and not force:
        raise PodRmRefused(f"run {run_id} is not in this project's runs/: if no other checkout owns it, "
                           f"pass --force to delete its pods")
    if known.unreadable and not force:
        raise PodRmRefused(f"the records of run {run_id} cannot be read: pass --force to delete its pods")
    rec = known.record
    in_progress = known.state in (PREPARING, RUNNING)
    starting = known.state == PREPARING or (known.state == RUNNING and (rec is None or rec.pod_id is None))
    if in_progress and starting and not force:
        raise PodRmRefused(f"run {run_id} is still starting: nothing deleted (any of its pods may become "
                           f"its training pod); stop it with `overbrainer train cancel {run_id}` first, "
                           f"or pass --force")
    timing = Timing.default()
    lines, data, failed = [], [], []

    def confirm(pod_id: str, rate: float | None, created_unix: float | None) -> bool:
        started = time.time()
        ok, _ = delete_confirmed(client, pod_id, timing)
        if ok:
            seconds = started - created_unix if created_unix else None
            spend = cost.spend(rate, created_unix, started)
            lines.append(deleted_line(pod_id, seconds, spend))
            data.append({"pod_id": pod_id, "deleted": True, "spend": spend})
        else:
            lines.append(f"pod: {pod_id} could not be confirmed deleted")
            data.append({"pod_id": pod_id, "deleted": False})
            failed.append(pod_id)
        return ok

    with _client(config) as client:
        keep = rec.pod_id if rec is not None and rec.live else None
        marked = [p for p in client.list_pods() if p.run_marker == run_id and p.id != keep]
        training_kept = in_progress and not force and keep is not None
        if not training_kept and keep is not None:
            try:
                remove(client, rec, rec.path, REQUESTED, "pod_rm", timing)
                lines.append(deleted_line(rec.pod_id, _age(rec), rec.estimated_spend))
                data.append({"pod_id": rec.pod_id, "deleted": True, "spend": rec.estimated_spend})
            except NotDeleted:
                lines.append(f"pod: {rec.pod_id} could not be confirmed deleted")
                data.append({"pod_id": rec.pod_id, "deleted": False})
                failed.append(rec.pod_id)
        others = {p.id: p for p in marked}
        for stray in (rec.stray_pods if rec is not None else []):
            others.setdefault(stray, None)
        for pod_id, pod in others.items():
            rate = pod.cost_per_hour if pod is not None else None
            if confirm(pod_id, rate, unix_of(pod.created_at) if pod is not None else None) and rec is not None:
                rec.drop_stray(pod_id)
            elif rec is not None:
                rec.add_strays([pod_id])
        if rec is not None and others:
            rec.save(rec.path)
        if training_kept:
            text = f"run {run_id} is still running: its training pod {keep} was kept"
            if others:
                text += f", and its other pods {', '.join(others)} were deleted"
            session.report("\n".join(lines), {"run": run_id, "pods": data, "kept": keep})
            raise PodRmRefused(text + f"; stop it with `overbrainer train cancel {run_id}` first, or pass --force")
        if force and in_progress and (keep is not None or others):
            fail_run(runs_dir, run_id, FORCED)
        if not failed and (rec is None or rec.no_pod_left) and known.present:
            forget_run(client, ids.run_dir(runs_dir, run_id), run_id)
    if not lines:
        lines.append(f"pod: no pod for run {run_id}")
    session.report("\n".join(lines), {"run": run_id, "pods": data})
    if failed:
        raise OverbrainerError(f"{len(failed)} pod{'s' if len(failed) > 1 else ''} of run {run_id} could not be "
                               f"confirmed deleted ({', '.join(failed)}): run `overbrainer pod rm {run_id}` again")


def _age(rec) -> float | None:
    """Seconds from the pod's create answer to its confirmed delete."""
    end = unix_of(rec.deleted_at)
    return end - rec.created_unix if end is not None and rec.created_unix is not None else None
