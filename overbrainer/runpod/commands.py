"""The `pod` commands' flows: `pod ls` (the ledger's rows as a table, and the spend so far), `pod rm`,
the catalog listings `pod gpus`, `pod datacenters`, `pod volumes` (only the API key is needed) and
`pod ssh` (the ssh line of a run's pod); and `train cancel` of a run whose provisioning was cut
short (`cancel_stopped`).

`pod rm ID [--force]` deletes the pods of one run (or of one side job that ran on a pod of its
own: `export_…`, `compare_…`) and confirms each delete. It and `train cancel` hold the project
lock, so a run still `preparing` has no process working on it any more (a `train` killed during
provisioning): its pods are deleted and the run is failed. Without --force: a run not in this
project's runs/ is refused; a run `running` before its pod was recorded is left alone (any of its
pods may be training); a running run keeps its training pod (its other marker pods are deleted).
Otherwise the recorded pod (even a kept one), its strays and every other pod carrying the run
marker are deleted, continuing past failures; the run's keys and host-key secret are forgotten
once no pod is left. Forced on a run in progress, the run is failed.

The project's runs and side jobs (`owners`) come from the command line (jobs.homes.Homes).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

from overbrainer.errors import OverbrainerError
from overbrainer.front.session import Session
from overbrainer.runpod import catalog, cost
from overbrainer.runpod.api import RunpodClient
from overbrainer.runpod.gone import look_up_all
from overbrainer.runpod.keys import CONFIG, SSH_DIR, alias, ssh_line
from overbrainer.runpod.ledger import EMPTY, account_rows, known_run, unix_of
from overbrainer.runpod.owners import PREPARING, RUNNING, Owner, Owners
from overbrainer.runpod.pod_record import PodRecord
from overbrainer.runpod.remove import REQUESTED, NotDeleted, delete_confirmed, forget_run, remove
from overbrainer.runpod.units import CLUSTER, POD, unit_of
from overbrainer.runpod.waits import Timing
from overbrainer.support import fmt
from overbrainer.support.fmt import table
from overbrainer.support.lock import holder_alive

log = logging.getLogger(__name__)

FORCED = "pod deleted by `pod rm` before its results were retrieved"
STOPPED = "provisioning stopped before the job started (its process was killed); {by} left no pod of it"


class PodRmRefused(OverbrainerError):
    pass


def deleted_line(pod_id: str, seconds: float | None, spend: float | None) -> str:
    """`pod: P deleted[ after 2h03m][, about $1.06]`."""
    text = f"pod: {pod_id} deleted"
    if seconds is not None and seconds >= 0:
        text += " after " + fmt.duration(round(seconds))
    if spend is not None:
        text += f", {fmt.about_usd(spend)}"
    return text


@dataclass
class Deleted:
    """What deleting a run's pods did: one line per pod, its data, the pods not confirmed."""
    lines: list[str] = field(default_factory=list)
    data: list[dict] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    others: list[str] = field(default_factory=list)

    def add(self, pod_id: str, ok: bool, seconds: float | None = None, spend: float | None = None) -> None:
        if ok:
            self.lines.append(deleted_line(pod_id, seconds, spend))
            self.data.append({"pod_id": pod_id, "deleted": True, "spend": spend})
        else:
            self.lines.append(f"pod: {pod_id} could not be confirmed deleted")
            self.data.append({"pod_id": pod_id, "deleted": False})
            self.failed.append(pod_id)


def delete_run_pods(client, run_id: str, rec, timing, *, keep_training: bool, by: str) -> Deleted:
    """Delete the run's recorded pod or cluster (unless `keep_training`), its strays and its other
    pods and clusters (by marker or name), each confirmed; `rec` (the run's pod.json, or None)
    records what happened."""
    done = Deleted()
    keep = rec.unit_id if rec is not None and rec.live else None
    marked = [(p, POD) for p in POD.of_run(client, run_id) if p.id != keep]
    marked += [(c, CLUSTER) for c in CLUSTER.of_run(client, run_id) if c.id != keep]
    if keep is not None and not keep_training:
        try:
            remove(client, rec, rec.path, REQUESTED, by, timing)
            done.add(rec.unit_id, True, _age(rec), rec.estimated_spend)
        except NotDeleted:
            done.add(rec.unit_id, False)
    others = {p.id: (p, unit) for p, unit in marked}
    for stray in (rec.stray_pods if rec is not None else []):
        others.setdefault(stray, (None, unit_of(rec)))
    for pod_id, (pod, unit) in others.items():
        started = time.time()
        ok, _ = delete_confirmed(client, pod_id, timing, unit=unit)
        created = unix_of(pod.created_at) if pod is not None else None
        rate = getattr(pod, "cost_per_hour", None)
        done.add(pod_id, ok, started - created if created else None, cost.spend(rate, created, started))
        if rec is not None:
            rec.drop_stray(pod_id) if ok else rec.add_strays([pod_id])
    if rec is not None and others:
        rec.save(rec.path)
    done.others = list(others)
    return done


def rm_flow(session: Session, owners: Owners, *, run_id: str, force: bool) -> None:
    """`pod rm ID`: ID is a run, or a side job that ran on a pod of its own (`export_…`,
    `compare_…`: it lives only while its command runs, and this command holds the project, so
    its pod is deleted whatever its state; one in progress is failed). `owners`: the project's
    runs and side jobs."""
    owners.run(run_id)  # a valid ID, or OverbrainerError
    known = known_run(owners, run_id)
    if not known.present and not force:
        raise PodRmRefused(f"run {run_id} is not in this project's runs/: if no other checkout owns it, "
                           f"pass --force to delete its pods")
    if known.unreadable and not force:
        raise PodRmRefused(f"the records of run {run_id} cannot be read: pass --force to delete its pods")
    rec = known.record
    side = known.home is not None and known.home.side
    running = known.state == RUNNING and not side  # `preparing`: its process is gone (we hold the project)
    if running and (rec is None or rec.pod_id is None) and not force:
        raise PodRmRefused(f"run {run_id} is still starting: nothing deleted (any of its pods may become "
                           f"its training pod); stop it with `overbrainer train cancel {run_id}` first, "
                           f"or pass --force")
    with RunpodClient.from_config(session.config) as client:
        training_kept = running and not force and rec is not None and rec.live
        done = delete_run_pods(client, run_id, rec, Timing.default(), keep_training=training_kept, by="pod_rm")
        if training_kept:
            text = f"run {run_id} is still running: its training pod {rec.pod_id} was kept"
            if done.others:
                text += f", and its other pods {', '.join(done.others)} were deleted"
            session.report("\n".join(done.lines), {"run": run_id, "pods": done.data, "kept": rec.pod_id})
            raise PodRmRefused(text + f"; stop it with `overbrainer train cancel {run_id}` first, or pass --force")
        if known.home is not None and known.state == PREPARING:
            known.home.fail_run(STOPPED.format(by="`pod rm`"))
        elif known.home is not None and (force or side) and known.state == RUNNING and done.data:
            known.home.fail_run(FORCED)
        if not done.failed and (rec is None or rec.no_pod_left) and known.present and known.home is not None:
            forget_run(client, known.home.dir, run_id)
    lines = done.lines or [f"pod: no pod for {known.kind} {run_id}"]
    session.report("\n".join(lines), {"run": run_id, "pods": done.data})
    _raise_unconfirmed(run_id, done.failed)


def cancel_stopped(session: Session, record: Any, owner: Owner) -> str:
    """`train cancel` of a run still `preparing` that has a pod.json (the caller holds the project,
    so its process is gone): delete and confirm its pods, fail it; returns the line reported.
    `owner`: the run's place (runpod.owners)."""
    run_dir = owner.dir
    rec = PodRecord.load(PodRecord.path_in(run_dir))
    with RunpodClient.from_config(session.config) as client:
        done = delete_run_pods(client, record.id, rec, Timing.default(), keep_training=False, by="client")
        if not done.failed and rec.no_pod_left:
            forget_run(client, run_dir, record.id)
    message = STOPPED.format(by="`train cancel`")
    owner.fail_run(message)
    text = "\n".join(done.lines + [f"train: run {record.id} failed: {message}"])
    session.report(text, {"run_id": record.id, "cancelled": False, "state": "failed", "message": message,
                          "pods": done.data})
    _raise_unconfirmed(record.id, done.failed)
    return text


def _raise_unconfirmed(run_id: str, failed: list[str]) -> None:
    if failed:
        raise OverbrainerError(f"{len(failed)} pod{'s' if len(failed) > 1 else ''} of run {run_id} could not be "
                               f"confirmed deleted ({', '.join(failed)}): run `overbrainer pod rm {run_id}` again")


def _age(rec) -> float | None:
    """Seconds from the pod's create answer to its confirmed delete."""
    end = unix_of(rec.deleted_at)
    return end - rec.created_unix if end is not None and rec.created_unix is not None else None


# --- pod ls ----------------------------------------------------------------------------------------

def ls_flow(session: Session, owners: Owners) -> None:
    """`pod ls`: every overbrainer pod of the account and every recorded pod the list lacks (looked
    at by the gone rule), then the spend so far; never deletes a pod. `owners`: the project's
    runs and side jobs."""
    timing = Timing.default()
    stale = not holder_alive(session.project_dir)
    with RunpodClient.from_config(session.config) as client:
        rows = account_rows(client, owners,
                            look=lambda c, ids, unit: look_up_all(c, ids, timing, unit=unit), stale=stale)
    total = sum(r.spend for r in rows if r.spend is not None and r.status != "GONE")
    data = {"pods": [r.to_dict() for r in rows], "spend": round(total, 4)}
    if not rows:
        session.report(EMPTY, data)
        return
    lines = table([["RUN", "POD", "STATUS", "GPU", "$/H", "CREATED", "NOTE"]] + [r.cells() for r in rows])
    lines.append(f"spend so far: {fmt.about_usd(total)}")
    session.report("\n".join(lines), data)


# --- the catalog and pod ssh ----------------------------------------------------------------------

def _report(session, header: list[str], rows: list[list[str]], data: dict, empty: str) -> None:
    session.report("\n".join(table([header] + rows)) if rows else empty, data)


def gpus_flow(session: Session, *, count: int = 1, min_vram=None, max_price=None, in_stock: bool = False,
              data_center=None) -> None:
    with RunpodClient.from_config(session.config) as client:
        gpus = catalog.for_listing(client.gpu_types(count), min_vram_gb=min_vram, max_price=max_price,
                                   in_stock=in_stock, data_center=data_center)
    rows, data = [], []
    for g in gpus:
        stock = g.stock_at(data_center) if data_center else g.availability
        rate = g.price_per_hour * count if g.price_per_hour is not None else None
        rows.append([g.id, f"{g.memory_gb:g}" if g.memory_gb is not None else "-", fmt.usd_per_hour(rate),
                     str(g.max_count), stock])
        data.append({"id": g.id, "memory_gb": g.memory_gb, "price_per_hour": rate,
                     "max_count": g.max_count, "stock": stock})
    _report(session, ["ID", "VRAM GB", "$/H", "MAX COUNT", "STOCK"], rows, {"gpus": data},
            "pod: no GPU type matches")


def datacenters_flow(session: Session) -> None:
    with RunpodClient.from_config(session.config) as client:
        dcs = client.data_centers()
    rows = [[d.id, d.name or "-", d.region or "-", ", ".join(d.gpu_types_in_stock) or "-"] for d in dcs]
    data = [{"id": d.id, "name": d.name, "region": d.region, "gpu_types_in_stock": list(d.gpu_types_in_stock)}
            for d in dcs]
    _report(session, ["ID", "NAME", "REGION", "GPU TYPES IN STOCK"], rows, {"datacenters": data},
            "pod: no data center listed")


def volumes_flow(session: Session) -> None:
    with RunpodClient.from_config(session.config) as client:
        vols = client.volumes()
    rows = [[v.id, v.name or "-", str(v.size_gb) if v.size_gb is not None else "-", v.data_center or "-"]
            for v in vols]
    data = [{"id": v.id, "name": v.name, "size_gb": v.size_gb, "data_center": v.data_center} for v in vols]
    _report(session, ["ID", "NAME", "SIZE GB", "DATA CENTER"], rows, {"volumes": data},
            "pod: no network volume on this account")


def ssh_argv(owners: Owners, run_id: str) -> tuple[list[str], str]:
    """The argv and the printed line of `ssh -F runs/<id>/ssh/config overbrainer-<id>` (a side
    job's ssh/ is in its own directory)."""
    home = owners.find(run_id)
    folder = home.dir if home is not None else owners.run(run_id).dir
    shown = home.shown(owners.project_dir) if home is not None else f"runs/{run_id}"
    config = folder / SSH_DIR / CONFIG
    if not config.is_file():
        raise OverbrainerError(f"{shown}/{SSH_DIR}/{CONFIG} does not exist: {run_id} has no pod to log in to")
    side = home is not None and home.side
    return ["ssh", "-F", str(config), alias(run_id)], ssh_line(run_id, shown if side else None)
